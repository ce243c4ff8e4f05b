"""The procedures: a runner started, taken down (the replace procedure), relabelled; a pool reconciled. Plain code
over the GitHub and Kubernetes layers, with an injectable clock."""
