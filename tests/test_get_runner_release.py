"""The function programs call for the newest actions/runner release (pulumi_actions_runners.functions): the same
look-up the resources' Check makes, over HTTP to the GitHub double; what it says of a version's deadline, and
that bad arguments and an unreachable GitHub come back as messages naming what went wrong, no credential in them.
The plugin's getRunnerRelease is tested through the engine in test_plugin_yaml.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pulumi
import pytest

from actions_runners_simulator.github_double import GitHubDouble
from pulumi_actions_runners import GetRunnerReleaseResult, get_runner_release, get_runner_release_output
from tests.test_github_double import CREDENTIAL, config_url

DAY = timedelta(days=1)


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_newest_release_its_image_and_a_version_s_last_day_of_jobs(github: GitHubDouble) -> None:
    published = datetime.now(UTC) - 40 * DAY  # 2.336.0 was left behind 40 days ago: no jobs for 10 days
    github.releases.publish("2.337.0", published)
    newest_published = datetime.now(UTC) - DAY
    github.releases.publish("2.338.0", newest_published)
    url = config_url(github, "repos/octo/ci")

    found = get_runner_release(url, github_token=CREDENTIAL, runner_version="2.336.0")
    assert found == GetRunnerReleaseResult(
        version="2.338.0",
        published_at=_rfc3339(newest_published),
        image="ghcr.io/actions/actions-runner:2.338.0",
        runner_version="2.336.0",
        deadline=_rfc3339(published + 30 * DAY),
        receiving_jobs=False,
    )
    newest = get_runner_release(url, github_token=CREDENTIAL, runner_version="2.338.0")
    assert (newest.deadline, newest.receiving_jobs) == (None, True)  # the newest has no deadline yet
    # One call for the three answers: the list is read once per process and credential, as Check reads it.
    assert len(github.calls("GET", "/repos/actions/runner/releases")) == 1


def test_bad_arguments_are_named_with_what_is_allowed_and_github_out_of_reach_is_said() -> None:
    with pytest.raises(ValueError, match=r"^get_runner_release: github_url: .*https://HOST/OWNER/REPO"):
        get_runner_release("ftp://example.com", github_token=CREDENTIAL)
    with pytest.raises(ValueError, match=r"runner_version: 2\.300\.0 is not allowed: .* from 2\.329\.0 on"):
        get_runner_release("https://github.com/octo/ci", github_token=CREDENTIAL, runner_version="2.300.0")
    with pytest.raises(ValueError, match=r"github_token: .*not both"):
        get_runner_release("https://github.com/octo/ci", github_token=CREDENTIAL, github_app_id="1")
    # A refused loopback port: answered at once, nothing sent beyond this machine.
    with pytest.raises(RuntimeError, match=r"could not be read from http://127\.0\.0\.1:9/api/v3: ") as refused:
        get_runner_release("http://127.0.0.1:9/octo/ci", github_token="ghp_not_to_be_shown")
    assert "ghp_not_to_be_shown" not in str(refused.value)


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        return args.name, args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list | None]:
        return {}, None


def test_the_output_form_takes_a_secret_token_and_answers_in_the_clear(github: GitHubDouble) -> None:
    """Under the SDK's own mock monitor: a token from config is an Output and secret; the release is public."""
    pulumi.runtime.set_mocks(_Mocks(), preview=False)
    found = get_runner_release_output(
        config_url(github, "repos/octo/ci"), github_token=pulumi.Output.secret(CREDENTIAL)
    )

    @pulumi.runtime.test
    def check() -> pulumi.Output:
        def seen(pair: list) -> None:
            release, secret = pair
            assert release.version == "2.336.0" and release.image == "ghcr.io/actions/actions-runner:2.336.0"
            assert secret is False

        return pulumi.Output.all(found, pulumi.Output.from_input(found.is_secret())).apply(seen)

    check()
