"""The shared GitHub budget: many threads paced to GitHub's secondary limits against the GitHub double, one
pause for everyone on a rate-limited answer, bounded waits, and one budget per GitHub and credential."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from actions_runners_simulator.github_double import GitHubDouble
from pulumi_actions_runners.github import budget as github_budget
from pulumi_actions_runners.github.budget import (
    WINDOW_ENV,
    GitHubBudget,
    RateLimitWaitTooLong,
    content_creating_seconds,
    endpoint_of,
    shared_budget,
)
from pulumi_actions_runners.github.client import GitHubClient, GitHubRateLimited, RemoveOutcome
from pulumi_actions_runners.github.url import parse_github_url

CREDENTIAL = "ghp_budget_test"
SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."


@pytest.fixture
def start_double() -> Iterator[Callable[..., GitHubDouble]]:
    doubles: list[GitHubDouble] = []

    def start(**limits: float) -> GitHubDouble:
        doubles.append(GitHubDouble(credentials=(CREDENTIAL,), **limits).start())
        return doubles[-1]

    yield start
    for double in doubles:
        double.stop()


def client(github: GitHubDouble, budget: GitHubBudget, **kwargs) -> GitHubClient:
    return GitHubClient(parse_github_url(f"{github.url}/octo-org/ci"), CREDENTIAL, budget=budget, **kwargs)


def in_threads(count: int, work: Callable[[int], object]) -> tuple[float, list[object]]:
    """Run ``work(index)`` in ``count`` threads started together; (seconds taken, results or exceptions)."""
    results: list[object] = [None] * count
    start = threading.Barrier(count + 1)

    def run(index: int) -> None:
        start.wait()
        try:
            results[index] = work(index)
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    start.wait()
    started = time.monotonic()
    for thread in threads:
        thread.join()
    return time.monotonic() - started, results


def pause_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "pausing every request" in r.getMessage()]


class FakeClock:
    def __init__(self) -> None:
        self.elapsed, self.sleeps = 0.0, []

    def monotonic(self) -> float:
        return self.elapsed

    def now(self) -> float:
        return 1_800_000_000.0 + self.elapsed

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.elapsed += seconds

    def budget(self, **limits) -> GitHubBudget:
        return GitHubBudget(now=self.now, monotonic=self.monotonic, sleep=self.sleep, **limits)


# -- pacing to the secondary limits, against the double ----------------------------------------------------


def test_endpoints_are_route_templates_so_all_removals_share_one_budget() -> None:
    assert endpoint_of("delete", "/repos/octo/app/actions/runners/17") == (
        "DELETE /repos/{owner}/{repo}/actions/runners/{runner_id}"
    )
    assert endpoint_of("DELETE", "/repos/other/lib/actions/runners/3") == endpoint_of(
        "DELETE", "/repos/o/r/actions/runners/9"
    )
    assert endpoint_of("GET", "/orgs/octo/actions/runners?per_page=100&page=2") == "GET /orgs/{org}/actions/runners"
    assert endpoint_of("POST", "/enterprises/e/actions/runners/generate-jitconfig") == (
        "POST /enterprises/{enterprise}/actions/runners/generate-jitconfig"
    )


@pytest.mark.alone  # it measures time
def test_forty_threads_of_removals_stay_within_the_points_of_their_endpoint(start_double, caplog) -> None:
    caplog.set_level(logging.INFO, logger="pulumi_actions_runners")
    # 50 points per half second: ten RemoveRunner calls (5 points each) per window, so 40 take four windows.
    github = start_double(points_per_minute=50, window_seconds=0.5)
    budget = GitHubBudget(points_per_window=50, window_seconds=0.5)

    def remove(index: int) -> RemoveOutcome:
        with client(github, budget) as gh:
            return gh.remove_runner(1000 + index)

    elapsed, outcomes = in_threads(40, remove)

    assert outcomes == [RemoveOutcome.NOT_FOUND] * 40
    assert github.secondary_limit_hits() == 0
    assert len(github.calls("DELETE")) == 40, "nothing refused, nothing sent twice"
    assert 1.5 <= elapsed < 2.5, "three windows of waiting, and not much more"
    pacing = [r.getMessage() for r in caplog.records if "pacing" in r.getMessage()]
    assert len(pacing) == 1, "logged once, not once per thread"
    assert "points of DELETE /repos/{owner}/{repo}/actions/runners/{runner_id} (50 per 0.5 s)" in pacing[0]


@pytest.mark.alone  # it measures time
def test_content_creating_requests_are_paced_across_endpoints(start_double) -> None:
    github = start_double(content_creating_per_minute=4, window_seconds=0.5)
    budget = GitHubBudget(content_creating_per_window=4, window_seconds=0.5)

    def create(index: int) -> object:
        with client(github, budget) as gh:
            return gh.create_registration_token() if index % 2 else gh.generate_jitconfig(f"jit-{index}", ["ci"])

    elapsed, results = in_threads(12, create)

    assert not [r for r in results if isinstance(r, Exception)]
    assert github.secondary_limit_hits() == 0
    assert 1.0 <= elapsed < 1.8, "four requests per window: three windows"


def test_content_creating_requests_are_paced_to_the_hourly_limit_too() -> None:
    clock = FakeClock()
    # Four a window and six an hour (an hour is 60 windows: 60 s here).
    budget = clock.budget(content_creating_per_window=4, content_creating_per_hour=6, window_seconds=1.0)
    sent_at = []
    for index in range(8):
        with budget.request("POST", f"/repos/o/r{index}/actions/runners/generate-jitconfig"):
            sent_at.append(clock.elapsed)
    margin = budget.margin_seconds
    assert sent_at[:4] == [0.0] * 4
    assert sent_at[4:6] == [pytest.approx(1.0 + margin)] * 2, "the minute's four are spent: the next window"
    assert sent_at[6:] == [pytest.approx(60.0 + margin)] * 2, "the hour's six are spent: an hour after the first"
    assert budget.hour_seconds == 60.0
    with budget.request("DELETE", "/repos/o/r/actions/runners/1"), budget.request("GET", "/repos/o/r/actions/runners"):
        assert clock.elapsed == sent_at[-1], "neither a removal nor a read creates content"


def test_a_pacing_wait_for_the_hourly_limit_may_last_the_hour_and_is_named(caplog) -> None:
    """The 501st just-in-time config of a large pool waits for the hour's first ones to age out, longer than the
    caller's max_wait, which bounds waits for refusals; the hour bounds this one."""
    clock = FakeClock()
    budget = clock.budget(content_creating_per_hour=2, window_seconds=1.0)
    for _ in range(2):
        with budget.request("POST", "/orgs/o/actions/runners/registration-token"):
            pass
    with caplog.at_level("INFO"), budget.request("POST", "/orgs/o/actions/runners/registration-token", max_wait=30):
        pass
    assert sum(clock.sleeps) == pytest.approx(60.0 + budget.margin_seconds)
    assert "content-creating requests (2 an hour)" in caplog.text


@pytest.mark.alone  # it measures time
def test_the_hourly_limit_keeps_a_client_within_the_double_s_scaled_hour(start_double) -> None:
    # The double's hour is 60 of its minutes, as the simulator scales both: 1.2 s, three content-creating calls.
    github = start_double(
        content_creating_per_minute=80, content_creating_per_hour=3, window_seconds=0.02, rate_limit_window_seconds=1.2
    )
    budget = GitHubBudget(content_creating_per_hour=3, window_seconds=0.02)

    def create(index: int) -> object:
        with client(github, budget) as gh:
            return gh.create_registration_token()

    elapsed, results = in_threads(5, create)

    assert not [r for r in results if isinstance(r, Exception)]
    assert github.rate_limit_refusals() == 0, "paced, never refused"
    assert 1.2 <= elapsed < 2.0, "the fourth and fifth waited for the hour"


@pytest.mark.parametrize(
    ("count", "minutes"),
    [(0, 0), (1, 0), (80, 0), (81, 1), (160, 1), (161, 2), (500, 6), (501, 60), (580, 60), (581, 61), (1001, 120)],
)
def test_content_creating_seconds_is_the_soonest_both_limits_allow(count: int, minutes: int) -> None:
    assert content_creating_seconds(count, window_seconds=60.0) == 60.0 * minutes
    assert content_creating_seconds(count, window_seconds=2.0) == 2.0 * minutes


def test_content_creating_seconds_takes_the_minute_the_budget_takes(monkeypatch) -> None:
    monkeypatch.setenv(WINDOW_ENV, "2")
    assert content_creating_seconds(501) == 120.0
    monkeypatch.delenv(WINDOW_ENV)
    assert content_creating_seconds(501) == 3600.0


@pytest.mark.alone  # it measures time
def test_requests_in_flight_are_capped(start_double) -> None:
    github = start_double(max_concurrent_requests=3)
    github.delay_next(0.2, count=12)
    budget = GitHubBudget(max_in_flight=3)

    def read(index: int) -> object:
        with client(github, budget) as gh:
            return gh.get_runner(index + 1)

    elapsed, results = in_threads(12, read)

    assert results == [None] * 12
    assert github.secondary_limit_hits() == 0
    assert 0.8 <= elapsed < 1.4, "three at a time, each held 0.2 s"


# -- one pause for everyone -------------------------------------------------------------------------------


def arrivals_during(github: GitHubDouble, start: float, end: float) -> list[dict]:
    return [call for call in github.calls() if start < call["at"] < end]


@pytest.mark.alone  # it measures time
def test_a_refusal_with_retry_after_pauses_every_caller_once(start_double, caplog) -> None:
    caplog.set_level(logging.INFO, logger="pulumi_actions_runners")
    github = start_double()
    budget = GitHubBudget()
    github.fail_next(403, retry_after=1, method="GET")

    def read(index: int) -> None:
        with client(github, budget) as gh:
            for attempt in range(5):
                gh.get_runner(100 * index + attempt)

    elapsed, results = in_threads(16, read)

    assert results == [None] * 16, "the refused read was sent again and answered"
    statuses = [call["status"] for call in github.calls()]
    assert statuses.count(403) == 1 and statuses.count(404) == 80
    refused_at = next(call["at"] for call in github.calls() if call["status"] == 403)
    assert arrivals_during(github, refused_at + 0.1, refused_at + 0.95) == [], "every thread paused"
    assert len(arrivals_during(github, refused_at + 0.95, math.inf)) >= 16, "and went on after the pause"
    assert elapsed >= 1.0
    assert len(pause_logs(caplog)) == 1, pause_logs(caplog)
    assert "retry-after" in pause_logs(caplog)[0] and "GET /repos/{owner}/{repo}" in pause_logs(caplog)[0]


def test_an_exhausted_primary_budget_pauses_every_caller_until_its_reset(start_double, caplog) -> None:
    caplog.set_level(logging.INFO, logger="pulumi_actions_runners")
    github = start_double()
    budget = GitHubBudget()
    github.fail_next(403, rate_limit_reset_in=1, method="GET")

    def read(index: int) -> None:
        with client(github, budget) as gh:
            for attempt in range(3):
                gh.get_runner(100 * index + attempt)

    _, results = in_threads(8, read)

    assert results == [None] * 8
    refused_at = next(call["at"] for call in github.calls() if call["status"] == 403)
    assert arrivals_during(github, refused_at + 0.1, refused_at + 0.95) == []
    assert len(arrivals_during(github, refused_at + 0.95, math.inf)) >= 8, "every thread paused"
    assert len(pause_logs(caplog)) == 1 and "primary limit exhausted" in pause_logs(caplog)[0]
    assert budget.primary_remaining is not None and budget.primary_remaining > 0, "learned again after the reset"


def test_a_spent_primary_budget_stops_callers_before_github_refuses(start_double) -> None:
    github = start_double(rate_limit_per_hour=3)
    budget = GitHubBudget()
    with client(github, budget, max_rate_limit_wait=5) as gh:
        for runner_id in (1, 2, 3):
            assert gh.get_runner(runner_id) is None
        assert budget.primary_remaining == 0
        with pytest.raises(GitHubRateLimited, match=r"was not sent: rate limited \(paused: primary limit spent"):
            gh.get_runner(4)
    assert [call["status"] for call in github.calls()] == [404, 404, 404], "the fourth call never left"


def test_refusals_of_requests_sent_before_a_pause_neither_log_again_nor_double_the_backoff(caplog) -> None:
    clock = FakeClock()
    budget = clock.budget()
    with caplog.at_level(logging.WARNING, logger="pulumi_actions_runners"):
        permits = []
        for index in range(10):  # ten requests in flight at once, all refused
            with budget.request("DELETE", f"/orgs/o/actions/runners/{index}") as permit:
                permits.append(permit)
        waits = [budget.observe(403, {}, SECONDARY, permit=permit) for permit in permits]
        assert waits[0] == (60.0, "secondary limit without retry-after")
        assert {wait for wait, _ in waits[1:]} == {0.0}, "the stale refusals wait within the pause already begun"
        assert len(pause_logs(caplog)) == 1
        assert budget.observe(204, {}, permit=permits[0]) is None  # an answer of before the pause

        with budget.request("DELETE", "/orgs/o/actions/runners/1") as retry:
            pass
        assert clock.sleeps == [60.0], "the retry waited out the one pause"
        assert budget.observe(403, {}, SECONDARY, permit=retry) == (120.0, "secondary limit without retry-after")
        with budget.request("DELETE", "/orgs/o/actions/runners/1") as again:
            pass
        assert budget.observe(204, {}, permit=again) is None
        with budget.request("DELETE", "/orgs/o/actions/runners/2") as after:
            pass
        assert budget.observe(403, {}, SECONDARY, permit=after) == (60.0, "secondary limit without retry-after")
    assert len(pause_logs(caplog)) == 3


def test_a_secondary_limit_without_retry_after_waits_githubs_minute_as_the_budget_keeps_it() -> None:
    """Found by the soak: with GitHub's minute scaled down (the simulator's time_scale), the wait stayed 60 s."""
    budget = FakeClock().budget(window_seconds=3.0)
    with budget.request("DELETE", "/orgs/o/actions/runners/1") as permit:
        pass
    assert budget.observe(429, {}, permit=permit) == (3.0, "secondary limit without retry-after")


def test_a_later_retry_after_lengthens_the_pause_without_logging_again(caplog) -> None:
    clock = FakeClock()
    budget = clock.budget()
    with caplog.at_level(logging.WARNING, logger="pulumi_actions_runners"):
        with budget.request("GET", "/orgs/o/actions/runners") as first, budget.request("GET", "/x") as second:
            pass
        budget.observe(429, {"Retry-After": "5"}, permit=first)
        budget.observe(429, {"Retry-After": "8"}, permit=second)
        with budget.request("GET", "/orgs/o/actions/runners"):
            pass
    assert clock.sleeps == [8.0]
    assert len(pause_logs(caplog)) == 1


# -- bounded waits ------------------------------------------------------------------------------------------


def test_a_pacing_wait_beyond_the_bound_fails_naming_the_limit(start_double) -> None:
    github = start_double()
    budget = GitHubBudget(points_per_window=10, window_seconds=30)
    with client(github, budget, max_rate_limit_wait=1) as gh:
        gh.remove_runner(1)
        gh.remove_runner(2)
        started = time.monotonic()
        with pytest.raises(
            GitHubRateLimited,
            match=r"DELETE .* was not sent: rate limited \(points of DELETE /repos/\{owner\}/\{repo\}/actions/"
            r"runners/\{runner_id\} \(10 per 30 s\)\); waiting 30 s more would pass the 1 s",
        ):
            gh.remove_runner(3)
    assert time.monotonic() - started < 0.5, "it knew at once that the wait was too long"
    assert len(github.calls()) == 2


def test_waiting_for_a_slot_in_flight_is_bounded_too(start_double) -> None:
    github = start_double()
    github.delay_next(1.0)
    budget = GitHubBudget(max_in_flight=1)
    holder = threading.Thread(target=lambda: client(github, budget).get_runner(1))
    holder.start()
    while not github.calls():
        time.sleep(0.01)
    started = time.monotonic()
    with client(github, budget, max_rate_limit_wait=0.3) as gh, pytest.raises(GitHubRateLimited, match="in flight"):
        gh.get_runner(2)
    assert 0.3 <= time.monotonic() - started < 0.8
    holder.join()


def hold(budget: GitHubBudget, path: str, seconds: float) -> None:
    with budget.request("GET", path):
        time.sleep(seconds)


def test_callers_queued_behind_others_of_their_endpoint_are_bounded_too() -> None:
    budget = GitHubBudget(max_in_flight=1)
    with budget.request("GET", "/orgs/o/actions/runners"):
        waiting = threading.Thread(target=hold, args=(budget, "/orgs/o/actions/runners", 0.0))
        waiting.start()
        while not budget._queues:
            time.sleep(0.01)
        time.sleep(0.05)
        with (
            pytest.raises(RateLimitWaitTooLong, match=r"queued behind 1 earlier GET /orgs/\{org\}/actions/runners"),
            budget.request("GET", "/orgs/o/actions/runners", max_wait=0.2),
        ):
            pass
    waiting.join()


def test_transport_retries_are_charged_as_the_requests_they_are(start_double) -> None:
    github = start_double()
    github.fail_next(503, count=2)
    clock = FakeClock()
    budget = clock.budget(content_creating_per_window=3, window_seconds=30)
    with client(github, budget) as gh:
        gh.create_registration_token()  # three requests: two 503s retried by urllib3, then the 201
        assert clock.sleeps == []
        gh.create_registration_token()  # the window's three are spent: it waits the window out
    assert sum(clock.sleeps) == pytest.approx(30 + budget.margin_seconds, abs=0.5)
    assert len(github.calls()) == 4


# -- configuration and sharing -----------------------------------------------------------------------------


def test_the_window_is_github_s_minute_unless_the_environment_shrinks_it(monkeypatch) -> None:
    monkeypatch.delenv(WINDOW_ENV, raising=False)
    assert GitHubBudget().window_seconds == 60.0
    monkeypatch.setenv(WINDOW_ENV, "2.5")
    assert GitHubBudget().window_seconds == 2.5
    assert GitHubBudget().margin_seconds == pytest.approx(0.025)
    assert GitHubBudget(window_seconds=7).window_seconds == 7
    monkeypatch.setenv(WINDOW_ENV, "soon")
    with pytest.raises(ValueError, match=WINDOW_ENV):
        GitHubBudget()


def test_one_budget_per_github_and_credential_which_it_does_not_keep() -> None:
    credential = "ghp_secret_for_sharing_test"
    budget = shared_budget("https://ghe.example/api/v3", credential)
    assert shared_budget("https://ghe.example/api/v3/", credential) is budget
    assert shared_budget("https://ghe.example/api/v3", "ghp_other") is not budget
    assert shared_budget("https://api.github.com", credential) is not budget
    assert credential not in repr(github_budget._registry)
    assert credential not in repr(vars(budget))

    target = parse_github_url("https://ghe.example/octo/app")
    with (
        GitHubClient(target, credential) as one,
        GitHubClient(parse_github_url("https://ghe.example/o2"), credential) as two,
    ):
        assert one._budget is budget and two._budget is budget
