"""The GitHub double's actions/runner releases and the version policy GitHub enforces with them
(actions_runners_simulator.runner_releases): served as GitHub serves them, extended while running, and enforced
on simulated runners: no registration below 2.329.0, no jobs 30 days after a newer release."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from actions_runners_simulator.github_double import GitHubDouble, RegistrationRefused
from actions_runners_simulator.runner import RunnerTimings, SimulatedRunners
from actions_runners_simulator.runner_releases import RunnerReleases, parse_release, parse_version
from tests.fakes import FakePodProcess
from tests.test_github_double import call, config_url, registration_token, wait_for
from tests.test_simulator_settings import Serve, environment, run

DAY = timedelta(days=1)


def test_the_newest_release_and_the_list_are_public_and_follow_what_is_published(github: GitHubDouble) -> None:
    latest = call(github, "GET", "/repos/actions/runner/releases/latest", credential="")
    assert latest.status_code == 200, latest.text
    release = latest.json()
    assert (release["tag_name"], release["draft"], release["prerelease"]) == ("v2.336.0", False, False)
    published = datetime.fromisoformat(release["published_at"].replace("Z", "+00:00"))
    assert 6.9 < (datetime.now(UTC) - published) / DAY < 7.1  # the default: a week before the double started

    github.releases.publish("2.337.0")
    assert call(github, "GET", "/repos/actions/runner/releases/latest").json()["tag_name"] == "v2.337.0"
    first = call(github, "GET", "/repos/actions/runner/releases", credential="", params={"per_page": 1})
    assert [r["tag_name"] for r in first.json()] == ["v2.337.0"]  # a bare array, newest first, paginated
    assert 'rel="next"' in first.headers["Link"]
    both = call(github, "GET", "/repos/actions/runner/releases").json()
    assert [r["tag_name"] for r in both] == ["v2.337.0", "v2.336.0"]


def test_an_anonymous_client_gets_sixty_requests_an_hour_then_github_s_refusal(github: GitHubDouble) -> None:
    answers = [call(github, "GET", "/repos/actions/runner/releases/latest", credential="") for _ in range(61)]
    assert [a.status_code for a in answers[:60]] == [200] * 60
    refused = answers[60]
    assert refused.status_code == 403 and refused.json()["message"].startswith("API rate limit exceeded for ")
    assert refused.headers["x-ratelimit-limit"] == "60" and refused.headers["x-ratelimit-remaining"] == "0"
    # The runners stay behind a credential: no anonymous access there.
    assert call(github, "GET", "/repos/octo/ci/actions/runners", credential="").status_code == 401
    assert call(github, "GET", "/repos/actions/runner/releases/latest").status_code == 200  # with the credential


def test_no_registration_below_the_minimum_version(github: GitHubDouble) -> None:
    url = config_url(github, "repos/octo/ci")

    def register(name: str, version: str | None) -> int:
        token = registration_token(github, "repos/octo/ci")
        return github.register_runner(
            github_url=url, token=token, name=name, labels=[], ephemeral=True, version=version
        )

    with pytest.raises(RegistrationRefused, match=r"v2\.328\.0 is deprecated .* v2\.329\.0 or later is required"):
        register("old", "2.328.0")
    assert register("oldest-allowed", "2.329.0") and register("private-build", None)
    assert [r["name"] for r in github.runners()] == ["oldest-allowed", "private-build"]


def test_no_job_goes_to_a_runner_whose_version_github_refuses_even_before_its_run_sh_exits(
    github: GitHubDouble,
) -> None:
    url = config_url(github, "repos/octo/ci")
    for name, version in (("behind", "2.330.0"), ("current", "2.336.0")):
        token = registration_token(github, "repos/octo/ci")
        github.register_runner(github_url=url, token=token, name=name, labels=[], ephemeral=True, version=version)
    github.releases.publish("2.331.0", datetime.now(UTC) - 31 * DAY)  # 2.330.0's 30 days are over
    with pytest.raises(LookupError, match="GitHub sends jobs to"):
        github.start_job("behind", 1.0)
    github.start_job("current", 1.0)
    assert [r["busy"] for r in github.runners()] == [False, True]


def test_jobs_stop_thirty_days_after_a_newer_release_on_the_double_s_clock() -> None:
    now = datetime.now(UTC)
    releases = RunnerReleases([("2.335.0", "2026-06-01T00:00:00Z")])
    assert releases.deadline(parse_version("2.335.0")) is None and not releases.refuses_jobs(parse_version("2.335.0"))
    releases.publish("2.336.0", now - 29 * DAY)
    assert releases.deadline(parse_version("2.335.0")) == (now - 29 * DAY) + 30 * DAY
    assert not releases.refuses_jobs(parse_version("2.335.0"))
    assert releases.refuses_jobs(parse_version("2.335.0"), now + 2 * DAY)
    releases.publish("2.335.5", now - 31 * DAY)  # a patch of the older line, published before: its own deadline
    assert releases.refuses_jobs(parse_version("2.335.0")) and not releases.refuses_jobs(parse_version("2.335.5"))
    assert releases.latest().version == (2, 336, 0)  # the newest by publication
    assert parse_release("v2.337.0@2026-11-20") == ("2.337.0", "2026-11-20T00:00:00Z")
    for malformed in ("2.337@2026-11-20", "2.337.0", "2.337.0@20-11-2026"):
        with pytest.raises(ValueError):
            parse_release(malformed)


def test_a_simulated_runner_below_the_minimum_fails_config_sh_and_one_made_old_exits_7(github: GitHubDouble) -> None:
    runners = SimulatedRunners(github, timings=RunnerTimings().faster(200))
    url = config_url(github, "repos/octo/ci")

    def pod(name: str, version: str) -> FakePodProcess:
        env = {
            "ACTIONS_RUNNER_INPUT_NAME": name,
            "ACTIONS_RUNNER_INPUT_URL": url,
            "ACTIONS_RUNNER_INPUT_TOKEN": registration_token(github, "repos/octo/ci"),
            "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE": "1",
        }
        process = FakePodProcess(name, env, image=f"ghcr.io/actions/actions-runner:{version}")
        runners.start(process)
        return process

    too_old = pod("too-old", "2.328.0")
    assert wait_for(lambda: too_old.exit_codes == [1])
    assert "v2.329.0 or later is required" in too_old.last_log_lines[0]

    current, newest = pod("current", "2.330.0"), pod("newest", "2.336.0")
    assert wait_for(lambda: {r["status"] for r in github.runners()} == {"online"} and len(github.runners()) == 2)
    github.releases.publish("2.331.0", datetime.now(UTC) - 31 * DAY)  # its 30 days are over: 2.330.0 is refused
    assert wait_for(lambda: current.exit_codes == [7])
    assert current.last_log_lines == [
        "An error occurred: Runner version v2.330.0 is deprecated and cannot receive messages."
    ]
    assert newest.exit_codes == [] and runners.jobs_killed == []


def test_serve_takes_releases_and_release_publishes_one_on_the_running_simulator(tmp_path: Path) -> None:
    """`serve --runner-release` sets the list GitHub starts with; `release` adds one and says the deadline."""
    env = environment(tmp_path, XDG_RUNTIME_DIR=str(tmp_path))
    serve = Serve(env, tmp_path, "--runner-release", "2.335.0@2026-10-01", "--runner-release", "2.336.0@2026-11-20")
    try:
        releases = f"{serve.info['github_api_url']}/repos/actions/runner/releases"
        latest = requests.get(f"{releases}/latest", timeout=5).json()
        assert (latest["tag_name"], latest["published_at"]) == ("v2.336.0", "2026-11-20T00:00:00Z")
        published = run(env, "release", "2.337.0", "--published", "2026-12-01")
        assert published.stdout.strip() == (
            "actions/runner 2.337.0 is published (2026-12-01T00:00:00Z): GitHub sends no jobs to older runners "
            "after 2026-12-31T00:00:00Z"
        ), published.stderr
        assert [r["tag_name"] for r in requests.get(releases, timeout=5).json()] == ["v2.337.0", "v2.336.0", "v2.335.0"]
        refused = run(env, "release", "2.337")
        assert refused.returncode == 1 and "not a runner version" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        serve.stop()
