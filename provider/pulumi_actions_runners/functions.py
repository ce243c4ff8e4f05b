"""The functions programs call, as a provider's ``getAmi`` is called: the plugin serves the same look-up as
``actions-runners:index:getRunnerRelease`` (plugin/server.py).

``get_runner_release`` reads actions/runner's release list from the GitHub a program names, with its credential,
in the program's process (a dynamic provider has no functions of its own): the newest release, its image, and
when GitHub stops sending jobs to a version. Runners that name no image need not call it, their Check makes the
same look-up; a program calls it to pin an image to the newest release on its own terms, or to export a deadline.
"""

from __future__ import annotations

from pulumi import Input, Output

from .inputs.runner_version import NewestRelease, ReleaseQuery, newest_release
from .redaction import scrub

GetRunnerReleaseResult = NewestRelease  # the answer, named as Pulumi's SDKs name a function's result


def get_runner_release(
    github_url: str,
    github_token: str | None = None,
    github_app_id: str | int | None = None,
    github_app_installation_id: int | None = None,
    github_app_private_key: str | None = None,
    runner_version: str | None = None,
) -> GetRunnerReleaseResult:
    """actions/runner's newest release as ``github_url``'s GitHub lists it (a token, an App, else GITHUB_TOKEN or
    the App in the environment, by the resources' rules). Raises ValueError naming an input that breaks its rule,
    and RuntimeError saying why when GitHub cannot answer (no credential in either)."""
    args = {
        "github_url": github_url,
        "github_token": github_token,
        "github_app_id": github_app_id,
        "github_app_installation_id": github_app_installation_id,
        "github_app_private_key": github_app_private_key,
        "runner_version": runner_version,
    }
    try:
        return newest_release(ReleaseQuery.of(args))
    except ValueError as error:
        raise ValueError(f"get_runner_release: {scrub(str(error))}") from None
    except RuntimeError as error:
        raise RuntimeError(scrub(str(error))) from None


def get_runner_release_output(
    github_url: Input[str],
    github_token: Input[str] | None = None,
    github_app_id: Input[str | int] | None = None,
    github_app_installation_id: Input[int] | None = None,
    github_app_private_key: Input[str] | None = None,
    runner_version: Input[str] | None = None,
) -> Output[GetRunnerReleaseResult]:
    """``get_runner_release`` with inputs that may be outputs (a secret token from config): the answer is not
    secret, a release being public."""
    answer = Output.all(
        github_url, github_token, github_app_id, github_app_installation_id, github_app_private_key, runner_version
    ).apply(lambda args: get_runner_release(*args))
    return Output.unsecret(answer)
