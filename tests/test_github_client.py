"""The GitHub client against the GitHub double over HTTP: headers, pagination, retries and rate limits."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from actions_runners_simulator.github_double import GitHubDouble
from pulumi_actions_runners.github.budget import GitHubBudget, retry_after_seconds
from pulumi_actions_runners.github.client import (
    GitHubClient,
    GitHubError,
    GitHubRateLimited,
    JitConfig,
    RemoveOutcome,
    RunnerNameTaken,
)
from pulumi_actions_runners.github.url import parse_github_url

CREDENTIAL = "ghp_test"


class _Listener:
    def job_started(self) -> None: ...
    def job_finished(self) -> None: ...
    def removed(self) -> None: ...


@pytest.fixture
def github() -> Iterator[GitHubDouble]:
    double = GitHubDouble(credentials=(CREDENTIAL,)).start()
    yield double
    double.stop()


class FakeClock:
    """Time that passes only when the budget sleeps, so that rate-limit waits are recorded, not slept."""

    def __init__(self) -> None:
        self.elapsed, self.epoch, self.sleeps = 0.0, time.time(), []

    def monotonic(self) -> float:
        return self.elapsed

    def now(self) -> float:
        return self.epoch + self.elapsed

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.elapsed += seconds

    def budget(self) -> GitHubBudget:
        return GitHubBudget(now=self.now, monotonic=self.monotonic, sleep=self.sleep)


def client(github: GitHubDouble, **kwargs) -> GitHubClient:
    return GitHubClient(parse_github_url(f"{github.url}/octo-org/ci"), kwargs.pop("credential", CREDENTIAL), **kwargs)


def waits_of_one_call(github: GitHubDouble) -> list[float]:
    """The rate-limit waits one registration-token call asks for, recorded instead of slept."""
    clock = FakeClock()
    with client(github, budget=clock.budget()) as gh:
        gh.create_registration_token()
    return clock.sleeps


def register(github: GitHubDouble, token: str, name: str) -> int:
    return github.register_runner(
        github_url=f"{github.url}/octo-org/ci", token=token, name=name, labels=[], ephemeral=False, listener=_Listener()
    )


def test_requests_carry_the_headers_github_documents(github) -> None:
    with client(github) as gh:
        gh.create_registration_token()
    headers = {k.lower(): v for k, v in github.calls()[0]["headers"].items()}
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["x-github-api-version"] == "2022-11-28"
    assert headers["authorization"] == f"Bearer {CREDENTIAL}"
    assert headers["user-agent"].startswith("pulumi-actions-runners")


def test_listing_follows_link_headers_across_pages(github) -> None:
    with client(github) as gh:
        token = gh.create_registration_token().token
        for index in range(250):
            register(github, token, f"runner-{index:03d}")
        names = [r["name"] for r in gh.list_runners()]
        found = gh.find_runner("runner-117")

    assert names == [f"runner-{index:03d}" for index in range(250)]
    pages = github.calls("GET", r"/actions/runners$")
    assert len(pages) == 3 + 1, "three pages of 100, then one call filtered by name"
    assert pages[-1]["query"]["name"] == "runner-117"
    assert found is not None and found["name"] == "runner-117"


def test_remove_runner_tells_removed_busy_and_gone_apart(github) -> None:
    with client(github) as gh:
        token = gh.create_registration_token().token
        idle, busy = register(github, token, "idle"), register(github, token, "busy")
        github.start_job("busy", 30)

        assert gh.remove_runner(idle) is RemoveOutcome.REMOVED
        assert gh.remove_runner(idle) is RemoveOutcome.NOT_FOUND
        assert gh.remove_runner(busy) is RemoveOutcome.BUSY
        assert gh.get_runner(busy)["busy"] is True
        assert gh.get_runner(idle) is None


def test_generate_jitconfig_registers_a_just_in_time_runner(github) -> None:
    with client(github) as gh:
        config = gh.generate_jitconfig("jit-1", ["linux", "gpu"], work_folder="_w")

    assert isinstance(config, JitConfig) and config.encoded_jit_config
    [runner] = github.runners()
    assert runner["id"] == config.runner_id and runner["name"] == "jit-1"
    assert runner["ephemeral"] is True and runner["status"] == "offline"
    assert {label["name"] for label in runner["labels"] if label["type"] == "custom"} == {"linux", "gpu"}
    [call] = github.calls("POST")
    assert call["path"] == "/repos/octo-org/ci/actions/runners/generate-jitconfig" and call["status"] == 201


def test_generate_jitconfig_for_a_taken_name_raises_runner_name_taken(github) -> None:
    with client(github) as gh:
        gh.generate_jitconfig("jit-1", ["linux"])
        with pytest.raises(RunnerNameTaken, match=r"409: Already exists - A runner with the name jit-1 already"):
            gh.generate_jitconfig("jit-1", ["linux"])
        with pytest.raises(GitHubError, match="404") as other_error:
            gh.generate_jitconfig("jit-2", ["linux"], runner_group_id=2)  # the double knows group 1 only
    assert not isinstance(other_error.value, RunnerNameTaken)


def test_reprs_and_logs_never_show_the_credential_or_the_jit_config(github, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    github.fail_next(403, retry_after=1, method="POST")
    with client(github, budget=FakeClock().budget()) as gh:
        config = gh.generate_jitconfig("jit-1", ["linux"])
        grant = gh.create_registration_token()
        shown = " ".join([repr(gh), repr(gh._budget), repr(config), repr(grant), caplog.text])
    assert "pausing every request" in caplog.text, "the rate limit was logged"
    assert str(config.runner_id) in repr(config)
    for secret in (CREDENTIAL, config.encoded_jit_config, grant.token):
        assert secret not in shown


def test_server_errors_are_retried_with_backoff(github) -> None:
    github.fail_next(503, count=2)
    with client(github) as gh:
        grant = gh.create_registration_token()
    assert grant.token
    assert [c["status"] for c in github.calls()] == [503, 503, 201]


def test_server_errors_that_persist_end_in_an_error_naming_the_call(github) -> None:
    github.fail_next(500, count=10)
    with client(github, retries=2) as gh, pytest.raises(GitHubError, match=r"POST .*registration-token answered 500"):
        gh.create_registration_token()
    assert len(github.calls()) == 3


def test_a_read_timeout_is_retried(github) -> None:
    github.delay_next(1.0)
    with client(github, timeout=0.3) as gh:
        assert gh.create_registration_token().token
    assert len(github.calls()) == 2


def test_retry_after_is_honoured_for_403_and_429(github) -> None:
    github.fail_next(429, retry_after=7)
    github.fail_next(403, retry_after=3)
    sleeps = waits_of_one_call(github)
    assert sleeps == [7.0, 3.0]


def test_an_exhausted_primary_budget_waits_until_its_reset(github) -> None:
    github.fail_next(403, rate_limit_reset_in=20)
    sleeps = waits_of_one_call(github)
    assert len(sleeps) == 1 and 19 <= sleeps[0] <= 22


def test_a_secondary_limit_without_retry_after_waits_a_minute_then_longer(github) -> None:
    github.fail_next(403, count=2)
    sleeps = waits_of_one_call(github)
    assert sleeps == [60.0, 120.0]


def test_a_rate_limit_longer_than_the_wait_budget_fails_and_says_so(github) -> None:
    github.fail_next(429, retry_after=600)
    clock = FakeClock()
    with (
        client(github, budget=clock.budget(), max_rate_limit_wait=60) as gh,
        pytest.raises(GitHubRateLimited, match=r"answered 429: .*retry-after.*600 s more would pass the 60 s"),
    ):
        gh.create_registration_token()
    assert clock.sleeps == []
    assert len(github.calls()) == 1


def test_a_content_creating_call_may_wait_out_githubs_hour_where_other_calls_may_not(github) -> None:
    """The 501st just-in-time config of a large pool waits for the hour's first ones to age out (bounded by the
    hour), instead of failing after max_rate_limit_wait; a GET is still held to that bound."""
    clock = FakeClock()
    budget = GitHubBudget(
        content_creating_per_hour=1, window_seconds=10, now=clock.now, monotonic=clock.monotonic, sleep=clock.sleep
    )
    with client(github, budget=budget, max_rate_limit_wait=60) as gh:
        gh.create_registration_token()
        gh.create_registration_token()  # the hour (60 windows of 10 s) allows one: this one waits ~600 s

    assert sum(clock.sleeps) >= 600 - 1
    assert [c["status"] for c in github.calls("POST")] == [201, 201]


@pytest.mark.alone  # it measures time
def test_bad_credentials_fail_at_once(github) -> None:
    started = time.monotonic()
    with client(github, credential="ghp_wrong") as gh, pytest.raises(GitHubError, match="401: Bad credentials"):
        gh.create_registration_token()
    assert time.monotonic() - started < 2
    assert len(github.calls()) == 1


def test_retry_after_may_be_an_http_date() -> None:
    assert retry_after_seconds("120", now=0) == 120
    assert retry_after_seconds("Wed, 02 Dec 2026 18:00:30 GMT", now=1796234400.0) == 30
