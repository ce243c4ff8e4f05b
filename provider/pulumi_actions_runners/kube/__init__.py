"""Kubernetes: the client, the runner's pod, Secret and Job as manifests, and what a pod says of its runner."""
