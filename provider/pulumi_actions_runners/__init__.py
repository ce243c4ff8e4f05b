"""Self-hosted GitHub Actions runners on Kubernetes as Pulumi resources."""

from .resources import RegistrationToken, Runner, RunnerPool, RunnerPoolNotConverged

__all__ = ["RegistrationToken", "Runner", "RunnerPool", "RunnerPoolNotConverged"]
