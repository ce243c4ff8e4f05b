"""The shared runner directory against the GitHub double: many waiters, few list calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from actions_runners_simulator.github_double import GitHubDouble
from pulumi_actions_runners import registrations
from pulumi_actions_runners.connections import SharedRunners
from pulumi_actions_runners.github_budget import GitHubBudget
from pulumi_actions_runners.github_client import GitHubClient
from pulumi_actions_runners.github_url import parse_github_url
from pulumi_actions_runners.registrations import RunnerDirectory

CREDENTIAL = "ghp_registrations"


class Listener:
    def job_started(self) -> None: ...
    def job_finished(self) -> None: ...
    def removed(self) -> None: ...


def registered_double(count: int) -> tuple[GitHubDouble, str]:
    double = GitHubDouble(credentials=(CREDENTIAL,)).start()
    url = f"{double.url}/octo-org/ci"
    with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
        token = github.create_registration_token().token
    for index in range(count):
        double.register_runner(
            github_url=url, token=token, name=f"r-{index}", labels=[], ephemeral=True, listener=Listener()
        )
    return double, url


def test_concurrent_lookups_share_listings_and_a_lone_one_asks_by_name() -> None:
    double, url = registered_double(250)
    try:
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            directory = RunnerDirectory()
            start = threading.Barrier(100)

            def find(index: int) -> dict | None:
                start.wait()
                return directory.find(github, f"r-{index}", max_age=1.0)

            with ThreadPoolExecutor(max_workers=100) as threads:
                found = list(threads.map(find, range(100)))
            assert [runner["name"] for runner in found] == [f"r-{i}" for i in range(100)]
            lists = double.calls("GET", r"/actions/runners$")
            pages = [c for c in lists if "name" not in c["query"]]
            assert len(pages) == 3, "one listing of 250 runners, in pages of 100, for (nearly) all 100 callers"
            assert len(lists) - len(pages) <= 1, "only a caller that came first and alone asks by name"

            lone = RunnerDirectory()
            assert lone.find(github, "r-7", max_age=0.0)["name"] == "r-7"
            assert double.calls("GET")[-1]["query"]["name"] == "r-7"
    finally:
        double.stop()


def test_of_two_registrations_of_one_name_the_online_one_is_found() -> None:
    double, url = registered_double(1)
    try:
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            jit = github.generate_jitconfig("r-0-next", ["self-hosted"])  # offline until its runner connects
            first = RunnerDirectory()
            first.find(github, "someone-else", max_age=0.0)  # two names asked for: listings from now on
            assert first.find(github, "r-0", max_age=0.0)["status"] == "online"
            assert first.find(github, "r-0-next", max_age=0.0)["id"] == jit.runner_id
    finally:
        double.stop()


def test_a_lookup_that_may_let_a_pod_go_asks_by_name_even_while_others_share_listings() -> None:
    double, url = registered_double(3)
    try:
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            runners = SharedRunners(github, RunnerDirectory())
            runners.find_runner("r-1", max_age=5.0)
            runners.find_runner("r-2", max_age=5.0)  # two names asked for: shared listings from now on

            assert runners.find_runner("r-0")["name"] == "r-0"
            assert double.calls("GET")[-1]["query"]["name"] == "r-0"
            assert runners.find_runner("gone") is None
            assert double.calls("GET")[-1]["query"]["name"] == "gone"
    finally:
        double.stop()


def test_a_wait_for_another_callers_listing_is_bounded_and_says_what_it_waited_for(monkeypatch) -> None:
    monkeypatch.setattr(registrations, "LISTING_WAIT_SECONDS", 0.3)
    monkeypatch.setattr(registrations, "LISTING_PATIENCE_SECONDS", 0.05)
    answer = threading.Event()

    class SlowGitHub:
        """A listing whose pages take as long as the test wants."""

        def __init__(self, blocked: bool) -> None:
            self.blocked = blocked

        def list_runners(self, name: str | None = None) -> Iterator[dict]:
            if self.blocked:
                answer.wait(5)
            return iter([])

        def find_runner(self, name: str) -> dict | None:
            return next(self.list_runners(name), None)

    directory = RunnerDirectory()
    directory.find(SlowGitHub(blocked=False), "warm-up", max_age=0.0)  # alone: by name, at once
    lister = threading.Thread(target=directory.find, args=(SlowGitHub(blocked=True), "first"), kwargs={"max_age": 0})
    lister.start()  # a second name asked for: it lists the scope, and hangs
    time.sleep(0.05)
    try:
        with pytest.raises(registrations.ListingTimedOut, match="looking up second"):
            directory.find(SlowGitHub(blocked=False), "second", max_age=0.0)
    finally:
        answer.set()
        lister.join()
