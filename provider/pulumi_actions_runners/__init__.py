"""Self-hosted GitHub Actions runners on Kubernetes as Pulumi resources."""

from importlib.metadata import version

from .functions import GetRunnerReleaseResult, get_runner_release, get_runner_release_output
from .resources import RegistrationToken, Runner, RunnerPool, RunnerPoolNotConverged, RunnerScaleSet

__version__ = version("pulumi-actions-runners")
__all__ = [
    "GetRunnerReleaseResult",
    "RegistrationToken",
    "Runner",
    "RunnerPool",
    "RunnerPoolNotConverged",
    "RunnerScaleSet",
    "get_runner_release",
    "get_runner_release_output",
]
