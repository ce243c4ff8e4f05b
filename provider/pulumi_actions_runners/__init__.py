"""Self-hosted GitHub Actions runners on Kubernetes as Pulumi resources."""

from .resources import RegistrationToken, Runner

__all__ = ["RegistrationToken", "Runner"]
