"""One shared pace for every GitHub call the provider process makes with one credential.

GitHub limits a credential, not a client: 100 requests in flight, 900 points per minute per endpoint (a
write costs 5, a GET 1), 80 content-creating requests (POST, PATCH, PUT) per minute and 500 per hour, and the
hourly primary budget. The provider runs hundreds of workers at once, so each `GitHubClient` asking for
itself would trip these limits and then wait them out in N separate loops. A `GitHubBudget` instead paces
the calls of every client that shares it (see `shared_budget`) so that they stay within the documented limits:

* at most ``max_in_flight`` requests in flight (default 50, half of GitHub's 100, leaving room for other
  tools that use the same credential);
* per endpoint (method and route template, e.g. ``DELETE /repos/{owner}/{repo}/actions/runners/{runner_id}``)
  at most ``points_per_window`` points, and at most ``content_creating_per_window`` POST/PATCH/PUT
  requests, in any sliding window of ``window_seconds``; and at most ``content_creating_per_hour`` of those
  in any sliding hour (``HOUR_WINDOWS`` windows, so that a shrunk minute shrinks the hour alike);
* when an answer says the primary budget is spent (``x-ratelimit-remaining: 0``), nobody calls until
  ``x-ratelimit-reset``;
* when GitHub refuses a request for a rate limit anyway (403/429 with ``retry-after``, or with the primary
  budget spent, or a secondary-limit message: a minute, doubling while it persists), every caller pauses
  together, once, and the refused request is retried.

Callers queue in order per endpoint. Every wait is bounded by the caller's ``max_wait``
(`RateLimitWaitTooLong` says what it waited for) and each pause or pacing episode is logged once, not
once per thread.

The window is GitHub's minute. ``ACTIONS_RUNNERS_GITHUB_RATE_WINDOW_SECONDS`` overrides it for the
simulator and benchmarks, whose GitHub double shrinks the minute (``GitHubDouble(window_seconds=...)``):
set both to the same value, or the budget paces to a longer window than the double enforces (slow, but
never refused).

A request counts in a window from the moment its answer arrives, not from when it was sent: GitHub stamps
a request on arrival, which lies between the two, so a window computed from answers never frees before
GitHub's does, however long requests take. A small margin (``margin_seconds``, 1 % of the window by
default) is added on top for servers whose own clock or bookkeeping is coarser than ours.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

log = logging.getLogger(__name__)

WINDOW_ENV = "ACTIONS_RUNNERS_GITHUB_RATE_WINDOW_SECONDS"
GITHUB_WINDOW_SECONDS = 60.0
MAX_IN_FLIGHT = 50  # GitHub allows 100 concurrent requests per credential; half leaves room for other tools
POINTS_PER_WINDOW = 900  # per endpoint
CONTENT_CREATING_PER_WINDOW = 80
CONTENT_CREATING_PER_HOUR = 500  # GitHub's secondary limits: 80 a minute and 500 an hour
HOUR_WINDOWS = 60  # an hour is 60 windows (minutes)
WRITE_POINTS = 5  # a GET costs 1
MARGIN_FRACTION = 0.01  # of the window, added before a spent slot counts as free again

_WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
CONTENT_CREATING_METHODS = frozenset({"POST", "PATCH", "PUT"})
_FREE_PATHS = frozenset({"/rate_limit"})  # GitHub does not count GET /rate_limit against any limit
_SCOPE_PREFIX = re.compile(r"^/(?:(repos)/[^/]+/[^/]+|(orgs)/[^/]+|(enterprises)/[^/]+)(?=/|$)")
_SCOPE_TEMPLATE = {"repos": "/repos/{owner}/{repo}", "orgs": "/orgs/{org}", "enterprises": "/enterprises/{enterprise}"}


class RateLimitWaitTooLong(Exception):
    """A request would have to wait longer than its caller allows; ``reason`` says for what."""

    def __init__(self, reason: str, needed: float | None, waited: float) -> None:
        more = "an unknown time" if needed is None else f"{needed:.0f} s"
        super().__init__(f"{reason}: waiting {more} more is not allowed (already waited {waited:.0f} s)")
        self.reason = reason
        self.needed = needed  # None: no end in sight (a request in flight or ahead in the queue must finish)
        self.waited = waited


def endpoint_of(method: str, path: str) -> str:
    """The endpoint whose points a request spends, as GitHub counts them: the method and the route template,
    so that all RemoveRunner calls share one budget whatever the repository and runner."""
    path = path.split("?", 1)[0].rstrip("/") or "/"
    match = _SCOPE_PREFIX.match(path)
    if match is not None:
        kind = next(group for group in match.groups() if group)
        path = _SCOPE_TEMPLATE[kind] + path[match.end() :]
    segments = path.split("/")
    for index, segment in enumerate(segments):
        if segment.isdigit():
            segments[index] = "{runner_id}" if index and segments[index - 1] == "runners" else "{id}"
    return f"{method.upper()} {'/'.join(segments)}"


class _Charge:
    """What one request spent in one window: counted from its answer (``done_at``), unknown while in flight."""

    __slots__ = ("cost", "done_at")

    def __init__(self, cost: int) -> None:
        self.cost = cost
        self.done_at: float | None = None


class _Window:
    """A sliding-window budget of ``limit`` per ``length`` seconds. The budget's lock is held."""

    def __init__(self, limit: int, length: float, margin: float) -> None:
        self.limit, self.length, self.margin = limit, length, margin
        self.charges: deque[_Charge] = deque()  # in the order sent
        self.used = 0

    def wait(self, cost: int, now: float) -> float | None:
        """Seconds until ``cost`` more fits: 0 if it does now, None if a request in flight must answer first."""
        hold = self.length + self.margin
        while self.charges and self.charges[0].done_at is not None and self.charges[0].done_at + hold <= now:
            self.used -= self.charges.popleft().cost
        excess = self.used + min(cost, self.limit) - self.limit  # a cost above the limit fits an empty window
        if excess <= 0:
            return 0.0
        free_at = now
        for charge in self.charges:
            if charge.done_at is None:
                return None
            free_at = max(free_at, charge.done_at + hold)
            excess -= charge.cost
            if excess <= 0:
                break
        return free_at - now

    def charge(self, cost: int) -> _Charge:
        self.charges.append(charge := _Charge(cost))
        self.used += cost
        return charge


@dataclass
class Permit:
    """One request let through by `GitHubBudget.request`; its charges count from its answer."""

    method: str
    path: str
    endpoint: str
    sent_at: float  # the budget's monotonic clock
    waited: float  # seconds this request waited for the budget
    extra_attempts: int = 0  # requests the transport repeated under this permit (urllib3 retries)
    _charges: list[tuple[_Window, _Charge]] = field(default_factory=list, repr=False)


@dataclass
class _Pause:
    until: float  # monotonic
    reason: str
    started: float


class GitHubBudget:
    """The rate budget of one credential at one GitHub, shared by every thread and client that uses it."""

    def __init__(
        self,
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        points_per_window: int = POINTS_PER_WINDOW,
        content_creating_per_window: int = CONTENT_CREATING_PER_WINDOW,
        content_creating_per_hour: int = CONTENT_CREATING_PER_HOUR,
        window_seconds: float | None = None,
        margin_seconds: float | None = None,
        name: str = "GitHub",
        now: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        """``window_seconds`` defaults to `WINDOW_ENV` if set, else GitHub's 60 s. ``now`` (epoch seconds, for
        ``x-ratelimit-reset`` and HTTP-date ``retry-after``), ``monotonic`` and ``sleep`` are for tests: with a
        ``sleep`` given, waits call it with the lock released (so it may advance a fake clock) instead of
        waiting on the condition."""
        self.window_seconds = _window_from_environment() if window_seconds is None else float(window_seconds)
        if not self.window_seconds > 0:
            raise ValueError(f"window_seconds must be positive, not {self.window_seconds}")
        self.margin_seconds = self.window_seconds * MARGIN_FRACTION if margin_seconds is None else margin_seconds
        self.max_in_flight = max_in_flight
        self.points_per_window = points_per_window
        self.name = name
        self._now, self._monotonic, self._sleep = now, monotonic, sleep
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # heads of the endpoint queues wait on it
        self._in_flight = 0
        self._points: dict[str, _Window] = {}
        self._content_creating = _Window(content_creating_per_window, self.window_seconds, self.margin_seconds)
        self.hour_seconds = self.window_seconds * HOUR_WINDOWS
        self._content_creating_hourly = _Window(content_creating_per_hour, self.hour_seconds, self.margin_seconds)
        self._queues: dict[str, deque[threading.Condition]] = {}  # per endpoint, callers in arrival order
        self._pause: _Pause | None = None
        self._backoff_attempt = 0  # consecutive secondary limits without retry-after
        self._pacing: set[str] = set()  # what callers are being paced for now (logged when it starts)
        self.primary_remaining: int | None = None  # the last x-ratelimit-remaining / -reset learned
        self.primary_reset: float | None = None

    def __repr__(self) -> str:
        return (
            f"GitHubBudget({self.name!r}, in flight {self._in_flight}/{self.max_in_flight}, "
            f"window {self.window_seconds:g} s, primary remaining {self.primary_remaining})"
        )

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    # -- before a request ---------------------------------------------------------------------------------

    @contextmanager
    def request(self, method: str, path: str, *, max_wait: float = math.inf) -> Iterator[Permit]:
        """Block until the request fits every budget (waiting at most ``max_wait`` seconds, else
        `RateLimitWaitTooLong`), count it in flight for the ``with`` block, and charge it from when the block
        ends (the answer). ``path`` is relative to the API base; a query string is ignored."""
        permit = self._acquire(method.upper(), path, max_wait)
        try:
            yield permit
        finally:
            self._release(permit)

    def _acquire(self, method: str, path: str, max_wait: float) -> Permit:
        endpoint = endpoint_of(method, path)
        free = path.split("?", 1)[0] in _FREE_PATHS
        cost = WRITE_POINTS if method in _WRITE_METHODS else 1
        with self._lock:
            started = self._monotonic()
            # Each caller waits on its own condition until it heads its endpoint's queue, then on the shared
            # one: hundreds of queued callers are not all woken whenever a request ends.
            ticket = threading.Condition(self._lock)
            queue = self._queues.setdefault(endpoint, deque())
            queue.append(ticket)
            paced = False
            try:
                while True:
                    now = self._monotonic()
                    wait, reason, key = self._blocked(queue, ticket, endpoint, method, cost, free, now)
                    if wait == 0:
                        break
                    waited = now - started
                    allowed = self._bound(method, max_wait, now) - waited
                    if (wait is not None and wait > allowed) or allowed <= 0:
                        raise RateLimitWaitTooLong(reason, wait, waited)
                    paced = True
                    if key is not None and key not in self._pacing:
                        self._pacing.add(key)
                        log.info("%s: pacing requests (%s); callers wait their turn", self.name, reason)
                    head = queue[0] is ticket
                    self._wait(self._cond if head else ticket, allowed if wait is None else wait)
                now = self._monotonic()
                self._in_flight += 1
                permit = Permit(method, path, endpoint, sent_at=now, waited=now - started)
                if not free:
                    points = self._points.get(endpoint)
                    if points is None:
                        points = self._points[endpoint] = self._window(self.points_per_window)
                    permit._charges.append((points, points.charge(cost)))
                    if method in CONTENT_CREATING_METHODS:
                        for window in (self._content_creating, self._content_creating_hourly):
                            permit._charges.append((window, window.charge(1)))
                if not paced:  # it waited for nothing: whoever waited for what it spends is through
                    self._pacing -= {f"points {endpoint}", "content-creating", "in flight"}
                return permit
            finally:
                was_head = queue[0] is ticket
                queue.remove(ticket)
                if not queue:
                    del self._queues[endpoint]
                elif was_head:
                    queue[0].notify()

    def _bound(self, method: str, max_wait: float, now: float) -> float:
        """How long a caller may wait: ``max_wait``; but GitHub's 500 content-creating requests an hour make the
        501st just-in-time config of a large pool wait for the hour, which its pacing then may (a pause for a
        refusal stays within ``max_wait``)."""
        paused = self._pause is not None and now < self._pause.until
        if method in CONTENT_CREATING_METHODS and not paused:
            return max(max_wait, self.hour_seconds + self.window_seconds)
        return max_wait

    def _window(self, limit: int) -> _Window:
        return _Window(limit, self.window_seconds, self.margin_seconds)

    def _blocked(
        self,
        queue: deque[threading.Condition],
        ticket: threading.Condition,
        endpoint: str,
        method: str,
        cost: int,
        free: bool,
        now: float,
    ) -> tuple[float | None, str, str | None]:
        """What holds the request back: (seconds, or None for "until someone finishes"; what; pacing key)."""
        pause = self._pause
        if pause is not None and now < pause.until:
            return pause.until - now, f"paused: {pause.reason}", None
        if free:
            return 0.0, "", None
        if queue[0] is not ticket:
            ahead = queue.index(ticket)
            return None, f"queued behind {ahead} earlier {endpoint} request(s)", None
        if self._in_flight >= self.max_in_flight:
            return None, f"requests in flight (at most {self.max_in_flight})", "in flight"
        window = f"per {self.window_seconds:g} s"
        points = self._points.get(endpoint)
        if points is not None:
            wait = points.wait(cost, now)
            if wait != 0:
                return wait, f"points of {endpoint} ({self.points_per_window} {window})", f"points {endpoint}"
        if method in CONTENT_CREATING_METHODS:
            for limit, per in ((self._content_creating, window), (self._content_creating_hourly, "an hour")):
                wait = limit.wait(1, now)
                if wait != 0:
                    return wait, f"content-creating requests ({limit.limit} {per})", "content-creating"
        return 0.0, "", None

    def _wait(self, condition: threading.Condition, timeout: float) -> None:
        if self._sleep is None:
            condition.wait(timeout if math.isfinite(timeout) else None)
            return
        self._lock.release()
        try:
            self._sleep(timeout)
        finally:
            self._lock.acquire()

    def _release(self, permit: Permit) -> None:
        with self._cond:
            now = self._monotonic()
            self._in_flight -= 1
            for window, charge in permit._charges:
                charge.done_at = now
                for _ in range(permit.extra_attempts):  # the transport sent it again: GitHub counted each
                    window.charge(charge.cost).done_at = now
            self._cond.notify_all()

    # -- after an answer --------------------------------------------------------------------------------

    def observe(
        self,
        status: int,
        headers: Mapping[str, str],
        message: str = "",
        *,
        permit: Permit | None = None,
    ) -> tuple[float, str] | None:
        """Learn from an answer: the primary budget it reports, and whether it is a rate limit. For a rate
        limit, pause every caller until GitHub allows calls again and return (seconds, what): the caller
        should send the request again. None if the answer is not a rate limit.

        Answers to requests sent before the current pause began belong to that pause: they may lengthen it
        (a later ``retry-after``) but neither log again nor double the minute-long backoff."""
        lowered = {key.lower(): value for key, value in headers.items()}
        with self._cond:
            now, wall = self._monotonic(), self._now()
            if status != 401:  # a 401 reports the unauthenticated budget of the address, not the credential's
                self._learn_primary(lowered)
            limit = self._rate_limit(status, lowered, message, wall)
            stale = permit is not None and self._pause is not None and permit.sent_at <= self._pause.started
            if limit is None:
                if not stale:  # a request sent after the last pause went through: the backoff starts over
                    self._backoff_attempt = 0
                if self.primary_remaining == 0 and self.primary_reset is not None and self.primary_reset > wall:
                    self._pause_for(self.primary_reset - wall + 1.0, "primary limit spent (remaining 0)", now, None)
                return None
            delay, reason = limit
            if reason == _BACKOFF and not stale:
                # GitHub: without retry-after, wait at least a minute (the budget's window), then back off.
                delay = self.window_seconds * 2**self._backoff_attempt
                self._backoff_attempt += 1
            elif reason == _BACKOFF:
                delay = 0.0  # already waited for in the pause this request belongs to
            self._pause_for(delay, reason, now, permit, answered=status, stale=stale)
            return delay, reason

    def _learn_primary(self, headers: dict[str, str]) -> None:
        if headers.get("x-ratelimit-resource", "core") != "core":
            return
        try:
            remaining = int(headers["x-ratelimit-remaining"])
            reset = float(headers["x-ratelimit-reset"])
        except (KeyError, ValueError):
            return
        if self.primary_reset is None or reset > self.primary_reset:
            self.primary_remaining, self.primary_reset = remaining, reset
        elif reset == self.primary_reset and self.primary_remaining is not None:
            self.primary_remaining = min(self.primary_remaining, remaining)  # answers overtake each other

    def _rate_limit(self, status: int, headers: dict[str, str], message: str, wall: float) -> tuple[float, str] | None:
        """How long GitHub asks us to wait, the way it documents it, or None if this is no rate limit."""
        if status not in (403, 429):
            return None
        if "retry-after" in headers:
            return retry_after_seconds(headers["retry-after"], wall), "retry-after"
        if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
            return max(0.0, float(headers["x-ratelimit-reset"]) - wall) + 1.0, "primary limit exhausted"
        if status == 429 or "secondary rate limit" in message:
            return self.window_seconds, _BACKOFF
        return None

    def _pause_for(
        self,
        delay: float,
        reason: str,
        now: float,
        permit: Permit | None,
        *,
        answered: int | None = None,
        stale: bool = False,
    ) -> None:
        """Pause every caller until ``now + delay``; logged when a pause begins, not when one is lengthened
        (by an answer to a request sent before it began, or for the same reason)."""
        until = now + delay
        active = self._pause if self._pause is not None and now < self._pause.until else None
        if active is not None:
            if until <= active.until:
                return
            if stale or active.reason == reason:
                active.until = until
                return
        elif delay <= 0:
            return
        self._pause = _Pause(until, reason, started=now)
        what = f" after {permit.endpoint}" if permit is not None else ""
        got = f" answered {answered}" if answered is not None else ""
        log.warning(
            "%s rate limit (%s)%s%s: pausing every request with this credential for %.1f s",
            self.name,
            reason,
            what,
            got,
            until - now,
        )


_BACKOFF = "secondary limit without retry-after"


def content_creating_seconds(count: int, window_seconds: float | None = None) -> float:
    """The shortest time in which GitHub's limits let ``count`` content-creating requests (such as
    generate-jitconfig) through, from the first to the last: 80 in any minute and 500 in any hour. A pool
    whose just-in-time configs take longer than an hour can say so before it starts. ``window_seconds`` is the
    minute, by default as the budget takes it (`WINDOW_ENV`, else 60 s); the hour is 60 of them."""
    window = _window_from_environment() if window_seconds is None else float(window_seconds)
    limits = ((CONTENT_CREATING_PER_WINDOW, window), (CONTENT_CREATING_PER_HOUR, window * HOUR_WINDOWS))
    sent: list[float] = []  # the earliest each request can go: once the one ``limit`` before it has left the window
    for index in range(count):
        at = sent[-1] if sent else 0.0
        for limit, length in limits:
            if index >= limit:
                at = max(at, sent[index - limit] + length)
        sent.append(at)
    return sent[-1] if sent else 0.0


def endpoint_writes_seconds(count: int, window_seconds: float = GITHUB_WINDOW_SECONDS) -> float:
    """The shortest time in which GitHub's points limit lets ``count`` writes to one endpoint (such as
    RemoveRunner, 5 points each) through, from the first to the last: 900 points in any minute."""
    per_window = POINTS_PER_WINDOW // WRITE_POINTS
    return (max(count, 1) - 1) // per_window * window_seconds


def retry_after_seconds(value: str, now: float) -> float:
    """``retry-after`` is seconds, or an HTTP date (RFC 9110)."""
    try:
        return max(0.0, float(value))
    except ValueError:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)


def _window_from_environment() -> float:
    raw = os.environ.get(WINDOW_ENV)
    if raw is None or not raw.strip():
        return GITHUB_WINDOW_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{WINDOW_ENV} must be a positive number of seconds, not {raw!r}")
    return value


_registry: dict[tuple[str, str], GitHubBudget] = {}
_registry_lock = threading.Lock()


def shared_budget(api_url: str, credential: str) -> GitHubBudget:
    """The one budget of this process for ``credential`` at the GitHub API ``api_url``, made on first use.
    Keyed by a hash of the credential: the registry never holds the credential itself."""
    key = (api_url.rstrip("/"), hashlib.sha256(credential.encode()).hexdigest())
    with _registry_lock:
        budget = _registry.get(key)
        if budget is None:
            budget = _registry[key] = GitHubBudget(name=f"GitHub {key[0]}")
        return budget
