"""Self-hosted GitHub Actions runners on Kubernetes as Pulumi resources.

The resources and functions are imported when first named (PEP 562), so that what runs without Pulumi (a
RunnerScaleSet's listener, in its cluster) never imports the Pulumi SDK or a provider with the package.
"""

from importlib import import_module
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .functions import GetRunnerReleaseResult as GetRunnerReleaseResult
    from .functions import get_runner_release as get_runner_release
    from .functions import get_runner_release_output as get_runner_release_output
    from .resources import RegistrationToken as RegistrationToken
    from .resources import Runner as Runner
    from .resources import RunnerPool as RunnerPool
    from .resources import RunnerPoolNotConverged as RunnerPoolNotConverged
    from .resources import RunnerScaleSet as RunnerScaleSet

__version__ = version("pulumi-actions-runners")
_WHERE = {
    "GetRunnerReleaseResult": ".functions",
    "get_runner_release": ".functions",
    "get_runner_release_output": ".functions",
    "RegistrationToken": ".resources",
    "Runner": ".resources",
    "RunnerPool": ".resources",
    "RunnerPoolNotConverged": ".resources",
    "RunnerScaleSet": ".resources",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name], __name__), name)
