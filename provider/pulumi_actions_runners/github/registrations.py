"""Who is registered with GitHub, looked up for many waiters at the cost of whatever is cheapest per round.

Runners coming online, and busy runners becoming idle, are waited for by looking them up again and again. A
lookup by name costs one call per waiter; a listing of the scope costs one call per 100 runners of the scope,
however many waiters it answers (ARC's per-runner lookups are what made it advise at most 100 runners per API
budget; a listing that pages through 2,000 runners of other teams for 4 of ours is no better). So each round
the directory weighs the recent askers against the known size of the scope and either lets each ask by name
or walks pages that answer them all.

GitHub's listing appears to page runners in id order, and ids only grow: a runner registered after some id was
seen is then on the last pages. GitHub documents no order, so the directory checks it on every page it reads (ids
ascending within a page and from page to page; now and then a tail reads page 1 too, which must hold lower ids)
and, once a listing of the scope has shown another order, reads whole listings or asks by name from then on;
waiters confirm a "not listed" by name before they act on it. A caller that can say which registrations matter
to it (``newer_than``: an id below all of them, such as a `mark` taken before its pod was made, or the id of the
registration it watches, minus one) is answered from a *tail*: the pages from the last one back to the first page
that reaches that id, at a cost that does not grow with the other runners of the scope. A caller that says
nothing needs every registration of its name: a lookup by name, or the whole listing.

A tail walked from the last page backwards misses no runner above its floor that existed throughout the walk:
a removal moves runners to lower positions only, into pages still to come, and a runner registered meanwhile
has an id above every one seen. (A listing walked forwards may skip a runner that moves onto a page already
read; that is why a lookup whose "none" may let a pod go asks by name, never from shared pages.)

A name may be declared free only by a lookup that cannot skip it: by name, or `registrations_of`'s whole
listing walked from its last page back to its first with its id order checked (a removal moves runners onto pages
still to come; a runner moved onto a page already read needs a registration inserted before it, and that one,
with an id above every other, then shows out of order on a page read later).
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Protocol

from .client import PAGE_SIZE, preferred

RECENT_ASKERS_SECONDS = 5.0
# Callers that first asked this recently count as waiting even once answered: in a burst of new waiters (a
# fleet's pods coming up) as many more are about to ask.
ARRIVALS_SECONDS = 1.0
# Another caller's listing is waited for at most as long as one of its pages may wait out a rate limit.
LISTING_WAIT_SECONDS = 960.0
LISTING_PATIENCE_SECONDS = 30.0  # how often a long wait for it says so
MAX_RESTARTS = 3  # a tail that finds the scope's last page moved starts again from the new one, this often at most
# A tail's pages may look in id order by chance (names registered in the order they sort): this often a tail also
# reads page 1, which in id order holds only ids below the tail's.
ORDER_CHECK_SECONDS = 30.0
EVERY = -1  # a floor below every id: all registrations of the name matter
_PROBE = math.inf  # the floor of a walk that only needs the last page (the highest id)

log = logging.getLogger(__name__)


class ListingTimedOut(Exception):
    pass


class OutOfOrder(Exception):
    """A listing's pages are not in id order: a walk that relied on the order cannot say what it missed."""


class RunnerLister(Protocol):
    def runners_page(self, page: int) -> tuple[int, list[dict[str, Any]]]: ...
    def find_runner(self, name: str) -> dict[str, Any] | None: ...


@dataclass
class _Asker:
    asked_at: float
    floor: float  # registrations of the name with ids at or below it do not matter to the asker
    arrived: float  # when it first asked (this time round)
    done: bool = False  # last answered online and idle: it is not expected to ask again


@dataclass
class _Walk:
    """A walk over the scope's pages that answers every caller whose floor it reaches."""

    started: float  # monotonic time its first page was asked for (or about to be)
    floor: float  # how deep it must go: lowered by callers that join it
    coverage: float = _PROBE  # every registration with a higher id was seen (when done)
    by_name: dict[str, dict[str, Any]] = field(default_factory=dict)
    done: bool = False
    aborted: bool = False  # stopped once it proved dearer than the lookups by name it would save


class RunnerDirectory:
    """The runners of one scope as GitHub listed them last; concurrent callers share one walk at a time."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._walk: _Walk | None = None  # under way
        self._last: _Walk | None = None  # the last one done
        self._askers: dict[str, _Asker] = {}
        self._total: int | None = None  # total_count of the scope, as last answered
        self._highest: int | None = None  # the highest runner id seen: every later registration's is higher
        self._marks: deque[tuple[float, int]] = deque()  # (monotonic time, a mark handed out then)
        self._ids: list[int] = []  # ids seen above ``_ids_floor`` (to estimate where a floor lies in the pages)
        self._ids_floor: float = _PROBE
        self._last_mark = -math.inf
        self._in_id_order = True  # until a page of the scope shows otherwise
        self._order_checked_at = -math.inf  # when a tail last read page 1 too

    # -- asking ------------------------------------------------------------------------------------------

    def find(
        self, github: RunnerLister, name: str, *, max_age: float, newer_than: int | None = None
    ) -> dict[str, Any] | None:
        """The registration named ``name`` (an online one first) as GitHub listed it at most ``max_age`` seconds
        ago. ``newer_than``: registrations with this id or lower do not matter to the caller (None: all do), so
        that the answer may come from a tail of the listing."""
        floor = EVERY if newer_than is None else max(newer_than, EVERY)
        lead: _Walk | None = None
        with self._changed:
            now = time.monotonic()
            earlier = self._askers.get(name)
            self._askers[name] = _Asker(now, floor, earlier.arrived if earlier else now)
            self._askers = {n: a for n, a in self._askers.items() if now - a.asked_at < RECENT_ASKERS_SECONDS}
            while True:
                last = self._last
                if last is not None and now - last.started <= max_age and last.coverage <= floor:
                    return self._answer(name, last)
                walk = self._walk
                if walk is not None and now - walk.started <= max_age and self._join(walk, floor, now):
                    self._wait_for_walk(walk, name, now)
                    if walk.aborted:
                        break  # it proved dearer than lookups by name: this caller asks by name
                    continue
                plan = self._plan(floor, now)
                if plan is None:
                    break
                if walk is not None:  # a walk of no use to this caller is under way: the next one may be
                    self._wait_for_walk(walk, name, now)
                    continue
                lead = self._walk = _Walk(started=now, floor=plan)
                break
        if lead is not None:
            self._run(github, lead)
            with self._changed:
                if not lead.aborted and lead.coverage <= floor:
                    return self._answer(name, lead)
        return self._by_name(github, name)

    def mark(self, github: RunnerLister) -> int | None:
        """An id lower than that of every runner registered after this call returns, for ``find(newer_than=...)``;
        None if none is known and a lone caller is better off asking by name. Free once any page was seen; a
        burst of callers shares one look at the scope's last page for it. A failed look is no failure: None."""
        with self._changed:
            now = time.monotonic()
            burst = now - self._last_mark < RECENT_ASKERS_SECONDS or bool(self._active(now))
            self._last_mark = now
            if self._walk is not None and self._highest is None and burst:
                self._wait_for_walk(self._walk, "a mark", now)  # any page it read will do
            if self._highest is not None or not burst or self._walk is not None:
                return self._handed_out(now)
            lead = self._walk = _Walk(started=now, floor=_PROBE)
        try:
            self._run(github, lead)
        except Exception as error:  # the waiter then asks for every registration of its name
            log.info("could not look at the last page of the runners for a mark: %s", error)
        with self._changed:
            return self._handed_out(time.monotonic())

    def _handed_out(self, now: float) -> int | None:
        """The mark to return, remembered: its caller will ask with it soon. The lock is held."""
        if self._highest is not None:
            self._marks.append((now, self._highest))
        return self._highest

    def registrations_of(self, github: RunnerLister, names: list[str]) -> list[dict[str, Any]]:
        """Every registration of these names, from lookups that cannot skip one (its "none" lets a name be
        taken): the whole listing read from its last page back to its first while the scope lists in id order
        and that costs fewer calls than a lookup by name for each; else by name."""
        wanted = set(names)
        if len(wanted) > 1 and self._in_id_order:
            try:
                listed = self._whole_listing_backward(github, max_pages=len(wanted) - 1)
            except OutOfOrder:
                listed = None
            if listed is not None:
                return [r for r in listed if r["name"] in wanted]
        return [registration for name in names if (registration := github.find_runner(name)) is not None]

    def _whole_listing_backward(self, github: RunnerLister, max_pages: int) -> list[dict[str, Any]] | None:
        """Every page from the last to the first (None once that would take more than ``max_pages`` calls, or
        the scope keeps moving past a page). OutOfOrder if the pages are not in id order. Kept apart from what the
        shared walks learn of the scope: fed with it, they planned deeper tails (bench/rotation.py, a pool of 50
        among 2,000: 8 listing pages for its rotation instead of 3)."""
        calls = 0
        with self._changed:
            total = self._total
        if total is None:  # where the last page is, page 1 says (and page 1 is read again last)
            total, first = github.runners_page(1)
            calls += 1
            if total <= PAGE_SIZE:
                return first
        last = max(1, math.ceil(total / PAGE_SIZE))
        for _ in range(MAX_RESTARTS + 1):
            if calls + last > max_pages:
                return None
            runners: dict[int, dict[str, Any]] = {}
            page = last
            while page >= 1:
                last, found = self._fetch(github, page, learn=False)
                calls += 1
                if not runners and page != last:
                    break  # the scope grew or shrank past a page since it was counted: from its new last page
                self._check_below(found, runners, page)
                runners |= {int(r["id"]): r for r in found}
                page -= 1
            if page == 0:
                return list(runners.values())
        return None

    def _check_below(self, found: list[dict[str, Any]], later: dict[int, dict[str, Any]], page: int) -> None:
        """A page read after the pages behind it: runners not seen already must have lower ids than all of those
        (a removal meanwhile may bring some of theirs onto it). OutOfOrder, said once, if not."""
        new = [int(r["id"]) for r in found if int(r["id"]) not in later]
        if later and new and max(new) > min(later):
            self._out_of_order(f"page {page} lists id {max(new)} before id {min(later)} on a later page")

    def _out_of_order(self, evidence: str) -> None:
        """From now on no answer relies on the order. Raises OutOfOrder."""
        with self._changed:
            if self._in_id_order:
                self._in_id_order = False
                log.info(
                    "GitHub lists this scope's runners out of id order (%s): runners are looked up by name or in "
                    "whole listings from now on",
                    evidence,
                )
            if self._last is not None and self._last.coverage > EVERY:
                self._last = None  # a tail read relied on the order
        raise OutOfOrder(evidence)

    # -- choosing ----------------------------------------------------------------------------------------

    def _active(self, now: float) -> list[_Asker]:
        """Callers that asked recently and are still waiting. The lock is held."""
        return [a for a in self._askers.values() if not a.done and now - a.asked_at < RECENT_ASKERS_SECONDS]

    def _expected(self, now: float, floor: float = EVERY) -> int:
        """How many callers a walk to ``floor`` now is likely to answer: those waiting, and as many as arrived
        lately, since a burst of waiters arrives a few at a time. The lock is held."""
        return sum(
            1
            for a in self._askers.values()
            if now - a.asked_at < RECENT_ASKERS_SECONDS
            and (not a.done or now - a.arrived < ARRIVALS_SECONDS)
            and a.floor >= floor
        )

    def _plan(self, floor: float, now: float) -> float | None:
        """The floor of the walk that costs fewer calls than a lookup by name for each recent asker, with
        lookups by name for the waiting askers it does not reach; None if this caller is best off asking by
        name. The lock is held."""
        active = self._active(now)
        best, cost = None, float(self._expected(now))
        for candidate in sorted({a.floor for a in active}, reverse=True):
            calls = self._pages_to(candidate) + sum(1 for a in active if a.floor < candidate)
            if calls <= cost:  # on a tie, a walk: whoever asks next may share it
                best, cost = candidate, calls
        if best is None or best > floor:
            return None
        # As deep as the marks handed out lately, if that costs no more pages: their callers ask next.
        recent = self._recent_floor(now)
        return recent if recent < best and self._pages_to(recent) <= self._pages_to(best) else best

    def _join(self, walk: _Walk, floor: float, now: float) -> bool:
        """Whether the walk under way answers this caller, lowered to its floor if that costs less than the
        lookups by name of the askers it then answers too. The lock is held."""
        if walk.floor <= floor:
            return True
        extra = self._pages_to(floor) - self._pages_to(walk.floor)
        answered = sum(1 for a in self._active(now) if floor <= a.floor < walk.floor)
        if extra < answered:
            walk.floor = floor
            return True
        return False

    def _pages_to(self, floor: float) -> float:
        """Estimated pages from the last one back to the first that reaches ``floor`` (all of them for EVERY;
        below the ids the walks so far saw, as densely as those lie). The lock is held."""
        if floor == _PROBE:
            return 1.0
        if self._total is None:
            return 1.5  # unknown: one page, or more; the first page says, and the walk is then weighed again
        pages = max(1, math.ceil(self._total / PAGE_SIZE))
        if floor <= EVERY or not self._in_id_order:  # out of id order, a tail proves nothing: every page
            return float(pages)
        if not self._ids:  # no tail seen yet: one page or more; a tail weighs itself page by page
            return min(float(pages), 1.5)
        above = float(len(self._ids) - bisect.bisect_right(self._ids, floor))  # registrations above the floor
        if floor < self._ids_floor:  # and below what was seen, as densely as the ids seen lie
            above += len(self._ids) / max(1, self._ids[-1] - self._ids_floor) * (self._ids_floor - floor)
        on_last = self._total - PAGE_SIZE * (pages - 1)
        return float(min(pages, 1 + max(0, math.ceil((above + 1 - on_last) / PAGE_SIZE))))

    # -- walking -----------------------------------------------------------------------------------------

    def _run(self, github: RunnerLister, walk: _Walk) -> None:
        """Walk the pages for ``walk`` (this caller leads it, without the lock), then publish it."""
        with self._changed:  # a floor on page 1 needs every page: read forwards, as GitHub's pagination goes
            total = self._total
            forward = total is not None and self._pages_to(walk.floor) >= math.ceil(total / PAGE_SIZE)
        try:
            if forward:
                self._forward(github, walk, 1)
            else:
                self._backward(github, walk)
        except OutOfOrder:
            walk.aborted = True  # its callers ask by name; later walks read whole listings
        except BaseException:
            with self._changed:
                walk.aborted = walk.done = True
                self._walk = None
                self._changed.notify_all()
            raise
        with self._changed:  # published before the waiters wake, so that none walks again for want of it
            walk.done = True
            self._walk = None
            if not walk.aborted:
                self._last = walk
            self._changed.notify_all()

    def _fetch(
        self, github: RunnerLister, page: int, *, in_order: bool = True, learn: bool = True
    ) -> tuple[int, list[dict[str, Any]]]:
        """(the scope's last page, runners) of one page; with ``learn``, what it says about the scope is kept.
        With ``in_order`` (a walk that relies on the order), OutOfOrder if its ids do not ascend."""
        total, runners = github.runners_page(page)
        if learn:
            self._seen_page(total, runners)
        ids = [int(r["id"]) for r in runners]
        if in_order and any(a >= b for a, b in pairwise(ids)):
            self._out_of_order(f"page {page} lists id {max(ids)} before id {min(ids)}")
        return max(1, math.ceil(total / PAGE_SIZE)), runners

    def removed(self) -> None:
        """A registration of the scope was removed (RemoveRunner said so): the scope holds one fewer, so that a
        tail starts at the last page there is now, not at one a rotation's removals have emptied."""
        with self._changed:
            if self._total:
                self._total -= 1

    def _seen_page(self, total: int, runners: list[dict[str, Any]]) -> None:
        with self._changed:
            self._total = total
            if total == 0:
                self._saw(0)  # an empty scope: every registration to come has a higher id
            if runners:
                self._saw(max(int(r["id"]) for r in runners))

    def _forward(self, github: RunnerLister, walk: _Walk, page: int, seen: Iterable[dict] = ()) -> None:
        """Every page, from ``page`` on (as GitHub's own pagination goes). A whole listing in id order checks
        the order as well as a tail's look at page 1 would."""
        started = time.monotonic()
        runners = list(seen)
        while True:
            last, found = self._fetch(github, page, in_order=False)
            runners += found
            if page >= last or not found:
                break
            page += 1
        ids = [int(r["id"]) for r in runners]
        if page > 1 and all(a < b for a, b in pairwise(ids)):
            with self._changed:
                self._order_checked_at = max(self._order_checked_at, started)
        self._publish(walk, runners, EVERY)

    def _backward(self, github: RunnerLister, walk: _Walk) -> None:
        """From the last page back until a page reaches the walk's floor (which callers may lower meanwhile)."""
        if self._total is None:  # where the last page is, page 1 says
            last, first = self._fetch(github, 1)
            if last == 1:
                self._publish(walk, first, EVERY)
                return
            if walk.floor == EVERY or max(int(r["id"]) for r in first) > walk.floor:  # the floor is on page 1
                with self._changed:
                    if not self._worth_going_on(walk, last - 1):
                        return
                self._forward(github, walk, 2, first)
                return
            page = last  # where a tail's floor lies, its last pages tell: weighed from there on
        else:
            page = max(1, math.ceil(self._total / PAGE_SIZE))
        runners: list[dict[str, Any]] = []
        restarts = 0
        while True:
            last, found = self._fetch(github, page)
            if not runners and page != last and restarts < MAX_RESTARTS:
                page, restarts = last, restarts + 1  # the scope grew or shrank past a page since it was counted
                continue
            self._check_below(found, {int(r["id"]): r for r in runners}, page)
            runners += found
            lowest = min((int(r["id"]) for r in found), default=None)
            with self._changed:
                if page <= 1:
                    coverage: float = EVERY
                    break
                if lowest is not None and lowest - 1 <= walk.floor:
                    coverage = lowest - 1  # every registration from the lowest on was seen
                    break
                if not self._worth_going_on(walk, self._pages_left(walk, runners, page)):
                    return
            page -= 1
        checking = walk.floor != _PROBE and coverage > EVERY  # a probe wants the highest id, whatever the order
        if checking and time.monotonic() - self._order_checked_at >= ORDER_CHECK_SECONDS:
            self._order_checked_at = time.monotonic()
            self._check_below(self._fetch(github, 1)[1], {int(r["id"]): r for r in runners}, 1)
        self._publish(walk, runners, coverage)

    @staticmethod
    def _pages_left(walk: _Walk, runners: list[dict[str, Any]], page: int) -> float:
        """Pages below ``page`` to the walk's floor, guessed from how densely the ids seen so far lie."""
        ids = [int(r["id"]) for r in runners]
        if walk.floor <= EVERY or not ids:
            return float(page - 1)
        lowest, highest = min(ids), max(ids)
        density = len(ids) / (highest - lowest + 1)
        return float(min(page - 1, math.ceil(density * (lowest - walk.floor - 1) / PAGE_SIZE)))

    def _worth_going_on(self, walk: _Walk, pages: float) -> bool:
        """Stop a walk whose ``pages`` still to come, as far as the pages so far tell, cost more than the lookups
        by name of the callers it answers (they then ask by name). The lock is held."""
        if walk.floor != _PROBE and pages > self._expected(time.monotonic(), walk.floor):
            walk.aborted = True
            return False
        return True

    def _publish(self, walk: _Walk, runners: list[dict[str, Any]], coverage: float) -> None:
        with self._changed:
            walk.coverage = coverage
            walk.by_name = by_preferred_name(runners)
            ids = sorted({int(r["id"]) for r in runners if int(r["id"]) > coverage})
            if coverage <= self._ids_floor:
                self._ids, self._ids_floor = ids, coverage
            else:  # what lies between the old floor and this one is as it was
                self._ids = self._ids[: bisect.bisect_right(self._ids, coverage)] + ids

    def _saw(self, runner_id: int) -> None:
        """The lock is held."""
        if self._highest is None or runner_id > self._highest:
            self._highest = runner_id

    def _recent_floor(self, now: float) -> float:
        """The lowest mark handed out lately: the callers given it (a fleet's pods coming up) ask next, if they
        have not yet. None lately: no floor (_PROBE). The lock is held."""
        while self._marks and self._marks[0][0] <= now - RECENT_ASKERS_SECONDS:
            self._marks.popleft()
        return min((mark for _, mark in self._marks), default=_PROBE)

    def _answer(self, name: str, walk: _Walk) -> dict[str, Any] | None:
        """The lock is held."""
        runner = walk.by_name.get(name)
        if runner is not None and runner.get("status") == "online" and not runner.get("busy") and name in self._askers:
            self._askers[name].done = True
        return runner

    def _by_name(self, github: RunnerLister, name: str) -> dict[str, Any] | None:
        runner = github.find_runner(name)
        with self._changed:
            if runner is not None:
                self._saw(int(runner["id"]))
                if runner.get("status") == "online" and not runner.get("busy") and name in self._askers:
                    self._askers[name].done = True
        return runner

    def _wait_for_walk(self, walk: _Walk, name: str, since: float) -> None:
        """Until the walk under way is done, bounded and said now and then; the caller holds the lock."""
        while not walk.done:
            if self._changed.wait(LISTING_PATIENCE_SECONDS):
                continue
            waited = time.monotonic() - since
            if waited >= LISTING_WAIT_SECONDS:
                raise ListingTimedOut(f"no listing of runners came within {waited:.0f} s while looking up {name}")
            log.info("looking up %s: still waiting for a listing of the runners (%.0f s so far)", name, waited)


def by_preferred_name(runners: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for runner in runners:
        found[runner["name"]] = preferred([found.get(runner["name"]), runner], runner["name"])
    return found
