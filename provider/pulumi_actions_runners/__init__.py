"""Self-hosted GitHub Actions runners on Kubernetes as Pulumi resources."""

from importlib.metadata import version

from .resources import RegistrationToken, Runner, RunnerPool, RunnerPoolNotConverged

__version__ = version("pulumi-actions-runners")
__all__ = ["RegistrationToken", "Runner", "RunnerPool", "RunnerPoolNotConverged"]
