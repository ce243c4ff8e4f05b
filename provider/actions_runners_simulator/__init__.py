"""A local stand-in for GitHub and Kubernetes, so the provider can be tried without a cluster or an org.

Loopback HTTP doubles of GitHub's self-hosted runner API and of the Kubernetes core/v1 API, plus a simulated
runner that boots from a pod's environment and registers with the GitHub double.
"""
