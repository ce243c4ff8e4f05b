"""The shared runner directory against the GitHub double: many waiters, few list calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from actions_runners_simulator.github_double import GitHubDouble
from pulumi_actions_runners.github import registrations
from pulumi_actions_runners.github.budget import GitHubBudget
from pulumi_actions_runners.github.client import GitHubClient
from pulumi_actions_runners.github.registrations import RunnerDirectory
from pulumi_actions_runners.github.url import parse_github_url
from pulumi_actions_runners.inputs.connections import SharedRunners

CREDENTIAL = "ghp_registrations"
FRESH = 1.5  # seconds: how old a listing the waiters of the tail tests accept


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

        def runners_page(self, page: int) -> tuple[int, list[dict]]:
            if self.blocked:
                answer.wait(5)
            return 0, []

        def find_runner(self, name: str) -> dict | None:
            return None

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


# -- what a round costs: lookups by name, the whole listing, or its last pages ------------------------------


def register(double: GitHubDouble, url: str, names: list[str]) -> list[int]:
    with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
        token = github.create_registration_token().token
    return [
        double.register_runner(github_url=url, token=token, name=name, labels=[], ephemeral=True, listener=Listener())
        for name in names
    ]


def other_team(count: int) -> tuple[GitHubDouble, str]:
    """A scope where ``count`` runners of another team are registered already."""
    double = GitHubDouble(credentials=(CREDENTIAL,)).start()
    url = f"{double.url}/octo-org/ci"
    register(double, url, [f"other-{index}" for index in range(count)])
    return double, url


def together(count: int, ask: Callable[[int], dict | None]) -> list[dict | None]:
    """``ask(index)`` in ``count`` threads that start at once."""
    start = threading.Barrier(count)

    def run(index: int) -> dict | None:
        start.wait()
        return ask(index)

    with ThreadPoolExecutor(max_workers=count) as threads:
        return list(threads.map(run, range(count)))


def listings(double: GitHubDouble, since: int) -> tuple[list[dict], list[int]]:
    """(lookups by name, pages of the whole scope) among the calls after the first ``since``."""
    calls = double.calls("GET", r"/actions/runners$")[since:]
    return [c for c in calls if "name" in c["query"]], [int(c["query"]["page"]) for c in calls if "page" in c["query"]]


def test_four_waiters_among_two_thousand_other_runners_ask_by_name_not_through_every_page() -> None:
    double, url = other_team(2000)
    try:
        register(double, url, [f"r-{i}" for i in range(4)])
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            directory = RunnerDirectory()
            for round_ in range(3):
                before = len(double.calls("GET"))
                found = together(4, lambda i: directory.find(github, f"r-{i}", max_age=0.5))
                assert [runner["name"] for runner in found] == [f"r-{i}" for i in range(4)]
                by_name, pages = listings(double, before)
                # The first round may look at page 1 once to learn the scope's size (21 pages): never all of them.
                assert len(pages) <= (1 if round_ == 0 else 0), pages
                assert len(by_name) + len(pages) <= 5
    finally:
        double.stop()


def test_waiters_that_name_a_floor_are_answered_from_the_last_pages_whatever_the_scope_holds() -> None:
    double, url = other_team(2000)
    try:
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            directory = RunnerDirectory()
            assert directory.mark(github) is None, "a lone caller: nothing known, nothing asked"
            assert double.calls("GET") == []
            mark = directory.mark(github)  # a second one soon after: a burst, worth one look at the last page
            assert mark == max(runner["id"] for runner in double.runners())
            assert listings(double, 0)[1] == [1, 20]
            before = len(double.calls("GET"))

            register(double, url, [f"new-{i}" for i in range(200)])
            # The look at the last page grows older than the waiters accept; theirs is generous, so that 200
            # threads on a loaded 2-core machine all arrive while one walk is fresh enough for them.
            time.sleep(FRESH + 0.1)
            found = together(200, lambda i: directory.find(github, f"new-{i}", max_age=FRESH, newer_than=mark))
            assert [runner["name"] for runner in found] == [f"new-{i}" for i in range(200)]
            by_name, pages = listings(double, before)
            tail = [page for page in pages if page != 1]
            assert min(tail) >= 20, "only the last pages: those that hold ids above the mark"
            assert pages.count(1) <= 1, "page 1 once at most, to check that the listing is in id order"
            assert len(tail) <= 4 and len(by_name) <= 2, (pages, len(by_name))
    finally:
        double.stop()


def test_a_waiter_for_an_older_registration_is_not_answered_from_a_tail_that_misses_it() -> None:
    double, url = other_team(0)
    try:
        (old,) = register(double, url, ["old"])
        register(double, url, [f"other-{index}" for index in range(300)])
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            directory = RunnerDirectory()
            directory.mark(github)
            mark = directory.mark(github)
            register(double, url, [f"new-{i}" for i in range(8)])
            before = len(double.calls("GET"))
            time.sleep(FRESH + 0.1)  # the look at the last page is older than the waiters accept

            def ask(index: int) -> dict | None:
                if index == 8:  # a busy runner made long ago, watched by its id
                    return directory.find(github, "old", max_age=FRESH, newer_than=old - 1)
                return directory.find(github, f"new-{index}", max_age=FRESH, newer_than=mark)

            found = together(9, ask)
            assert found[8] is not None and found[8]["id"] == old
            assert [runner["name"] for runner in found[:8]] == [f"new-{i}" for i in range(8)]
            by_name, pages = listings(double, before)
            assert 2 not in pages, "the old runner was asked for by name, not through pages 1 and 2"
            assert pages.count(1) <= 1, "page 1 once at most, to check that the listing is in id order"
            assert "old" in [call["query"]["name"] for call in by_name]
            again = directory.find(github, "old", max_age=5.0, newer_than=old - 1)  # the fresh tail is no answer
            assert again is not None and again["id"] == old
    finally:
        double.stop()


class ShrinkingScope:
    """A scope of 450 runners whose 150 oldest are removed while a walk is between its pages."""

    def __init__(self) -> None:
        self.ids = list(range(1, 451))
        self.pages: list[int] = []
        self._lock = threading.Lock()

    def runners_page(self, page: int) -> tuple[int, list[dict]]:
        with self._lock:
            self.pages.append(page)
            if page == 4 and len(self.ids) == 450:
                del self.ids[:150]  # pages 4 and 5 now hold nobody: everyone moved down
            chunk = self.ids[(page - 1) * 100 : page * 100]
            return len(self.ids), [{"id": i, "name": f"r-{i}", "status": "online", "busy": True} for i in chunk]

    def find_runner(self, name: str) -> dict | None:
        with self._lock:
            number = int(name.removeprefix("r-"))
            return {"id": number, "name": name, "status": "online", "busy": True} if number in self.ids else None


def test_a_tail_walked_backwards_misses_no_runner_above_its_floor_while_others_are_removed() -> None:
    scope = ShrinkingScope()
    directory = RunnerDirectory()
    directory.mark(scope)
    assert directory.mark(scope) == 450 and scope.pages == [1, 5]
    names = [f"r-{number}" for number in range(305, 451, 15)]  # 10 runners above 300

    found = together(len(names), lambda i: directory.find(scope, names[i], max_age=5.0, newer_than=300))

    assert [runner["name"] for runner in found] == names
    assert scope.pages[2:5] == [5, 4, 3], "went on past the page the removals emptied"


def test_a_burst_of_marks_shares_one_look_even_at_an_empty_scope_and_a_failed_look_is_no_failure() -> None:
    double, url = other_team(0)
    try:
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            directory = RunnerDirectory()
            marks = together(50, lambda _: directory.mark(github))
            assert set(marks) <= {None, 0} and marks.count(0) >= 48, marks
            assert listings(double, 0)[1] == [1], "one page, for all of them"

        class Failing:
            def runners_page(self, page: int) -> tuple[int, list[dict]]:
                raise ConnectionError("GitHub is unreachable")

            def find_runner(self, name: str) -> dict | None:
                raise AssertionError

        failing = RunnerDirectory()
        assert failing.mark(Failing()) is None
        assert failing.mark(Failing()) is None, "a burst, whose look failed: the waiter asks for every registration"
    finally:
        double.stop()


class RemovalsDuringTheWalk:
    """250 runners; "taken" (id 150, another team's) holds a name a new pool wants. Once the first page has been
    read, the 100 oldest runners are removed, so every later one moves a page down."""

    def __init__(self) -> None:
        self.ids = list(range(1, 251))
        self.pages: list[int] = []

    def _runner(self, runner_id: int) -> dict:
        return {"id": runner_id, "name": "taken" if runner_id == 150 else f"r-{runner_id}", "status": "online"}

    def runners_page(self, page: int) -> tuple[int, list[dict]]:
        chunk = self.ids[(page - 1) * 100 : page * 100]
        self.pages.append(page)
        if len(self.pages) == 1:
            del self.ids[:100]
        return len(self.ids) if len(self.pages) > 1 else 250, [self._runner(i) for i in chunk]

    def find_runner(self, name: str) -> dict | None:
        return next((self._runner(i) for i in self.ids if self._runner(i)["name"] == name), None)


def test_a_name_is_declared_free_only_by_a_walk_that_cannot_skip_it_while_others_are_removed() -> None:
    """A forward walk reads page 1, then finds on page 2 what was on page 3: "taken" slipped onto page 1. The
    names of a new pool are checked from the last page back, where a removal only moves runners onto pages still
    to be read."""
    scope = RemovalsDuringTheWalk()
    names = ["taken", *(f"pool-{i}" for i in range(5))]

    found = RunnerDirectory().registrations_of(scope, names)

    assert [r["name"] for r in found] == ["taken"]
    assert scope.pages[-1] == 1 and scope.pages[1:] != [2, 3], scope.pages


@pytest.mark.parametrize("order", ["name", "newest_first"])
def test_a_listing_out_of_id_order_is_noticed_and_no_answer_relies_on_it(order: str) -> None:
    """GitHub documents no order for its listing. Waiters that name a floor (new runners, above a mark) are answered
    from the last pages only while those hold the highest ids; in any other order every waiter is still found,
    from whole listings or by name, and names are checked by name."""
    double = GitHubDouble(credentials=(CREDENTIAL,), listing_order=order).start()  # type: ignore[arg-type]
    try:
        url = f"{double.url}/octo-org/ci"
        register(double, url, [f"other-{index:03}" for index in range(300)])
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            directory = RunnerDirectory()
            directory.mark(github)
            mark = directory.mark(github)
            assert mark == 300
            register(double, url, [f"new-{i}" for i in range(8)])
            time.sleep(FRESH + 0.1)

            found = together(8, lambda i: directory.find(github, f"new-{i}", max_age=FRESH, newer_than=mark))

            assert [runner["name"] for runner in found] == [f"new-{i}" for i in range(8)]
            before = len(double.calls("GET"))
            registered = directory.registrations_of(github, ["other-150", "new-3", "free-0", "free-1"])
            assert sorted(r["name"] for r in registered) == ["new-3", "other-150"]
            by_name, pages = listings(double, before)
            assert (len(by_name), pages) == (4, []), "out of order, no walk may declare a name free"
    finally:
        double.stop()


def test_in_id_order_names_are_checked_from_one_walk_of_the_listing() -> None:
    double, url = other_team(250)
    try:
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            names = [f"pool-{i}" for i in range(5)] + ["other-7"]
            registered = RunnerDirectory().registrations_of(github, names)
            assert [r["name"] for r in registered] == ["other-7"]
            by_name, pages = listings(double, 0)
            assert (by_name, pages) == ([], [1, 3, 2, 1]), "page 1 for the size, then from the last page back"
    finally:
        double.stop()


def test_a_rotations_removals_move_the_tail_to_the_last_page_there_is_and_marks_set_its_depth() -> None:
    """A pool of 50 among 2,000 others is rotated: its 50 RemoveRunner calls empty page 21, and the waiters of
    the new runners ask with the mark handed out after them. Each walk reads the last page there is (known from
    the removals, not the emptied page) and goes no deeper than the marks handed out lately
    (bench/rotation.py: 8 pages for such a rotation, where 5 suffice)."""
    double, url = other_team(2000)
    try:
        old = register(double, url, [f"pool-{i}" for i in range(50)])
        with GitHubClient(parse_github_url(url), CREDENTIAL, budget=GitHubBudget()) as github:
            directory = RunnerDirectory()
            shared = SharedRunners(github, directory)
            # The pool's runners came online: its waiters' walks read every page once (in id order).
            found = together(50, lambda i: directory.find(github, f"pool-{i}", max_age=FRESH))
            assert all(found) and sorted(set(listings(double, 0)[1])) == list(range(1, 22))
            for runner_id in old:
                assert shared.remove_runner(runner_id).value == "removed"
            marks = together(20, lambda _: directory.mark(github))
            assert set(marks) == {max(old)}, "the highest id seen, handed out free"
            before = len(double.calls("GET"))
            time.sleep(FRESH + 0.1)  # the pool's listing is older than its new runners' waiters accept

            early = together(20, lambda i: directory.find(github, f"pool-{i}", max_age=FRESH, newer_than=max(old)))
            assert early == [None] * 20
            assert listings(double, before) == ([], [20]), "the last page there is now, and no deeper"
    finally:
        double.stop()
