"""Who is registered with GitHub, as one shared and recent listing.

Runners coming online are waited for by listing them. Hundreds of waiters in one provider process share each
listing (pages of 100), so a fleet costs a few list calls between them, not one per runner and poll: ARC's
per-runner lookups are what made it advise at most 100 runners per API budget.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from .github_client import preferred

RECENT_ASKERS_SECONDS = 5.0
# Another caller's listing is waited for at most as long as one of its pages may wait out a rate limit.
LISTING_WAIT_SECONDS = 960.0
LISTING_PATIENCE_SECONDS = 30.0  # how often a long wait for it says so

log = logging.getLogger(__name__)


class ListingTimedOut(Exception):
    pass


class RunnerLister(Protocol):
    def list_runners(self, name: str | None = None) -> Iterator[dict[str, Any]]: ...
    def find_runner(self, name: str) -> dict[str, Any] | None: ...


class RunnerDirectory:
    """The runners of one scope as GitHub listed them last; concurrent callers share one listing at a time."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._listing = False
        self._listed_at = float("-inf")  # monotonic time the last full listing started
        self._by_name: dict[str, dict[str, Any]] = {}
        self._askers: dict[str, float] = {}  # name -> when it was last asked for

    def find(self, github: RunnerLister, name: str, *, max_age: float) -> dict[str, Any] | None:
        """The registration named ``name`` (an online one first) in a listing at most ``max_age`` seconds old.

        A lone caller lists by name (one call, whatever the size of the scope); several list the scope once."""
        with self._changed:
            now = time.monotonic()
            self._askers[name] = now
            self._askers = {n: t for n, t in self._askers.items() if now - t < RECENT_ASKERS_SECONDS}
            alone = len(self._askers) == 1 and not self._listing
            if not alone:
                while self._listing and now - self._listed_at > max_age:
                    self._wait_for_listing(name, now)
                if now - self._listed_at <= max_age:
                    return self._by_name.get(name)
                self._listing = True
        if alone:
            return github.find_runner(name)
        return self._list_all(github, name)

    def _wait_for_listing(self, name: str, since: float) -> None:
        """Another caller's listing is under way; the caller holds the lock."""
        if self._changed.wait(LISTING_PATIENCE_SECONDS):
            return
        waited = time.monotonic() - since
        if waited >= LISTING_WAIT_SECONDS:
            raise ListingTimedOut(f"no listing of runners came within {waited:.0f} s while looking up {name}")
        log.info("looking up %s: still waiting for a listing of the runners (%.0f s so far)", name, waited)

    def _list_all(self, github: RunnerLister, name: str) -> dict[str, Any] | None:
        started = time.monotonic()
        try:
            by_name = by_preferred_name(github.list_runners())
        except BaseException:
            with self._changed:
                self._listing = False
                self._changed.notify_all()
            raise
        with self._changed:  # published before the waiters wake, so that none lists again for want of it
            self._by_name, self._listed_at, self._listing = by_name, started, False
            self._changed.notify_all()
            return self._by_name.get(name)


def by_preferred_name(runners: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for runner in runners:
        found[runner["name"]] = preferred([found.get(runner["name"]), runner], runner["name"])
    return found


_directories: dict[tuple[str, str, str], RunnerDirectory] = {}
_directories_lock = threading.Lock()


def shared_directory(api_url: str, runners_path: str, credential: str) -> RunnerDirectory:
    """One directory per scope and credential in this process (what one credential may list, it lists once)."""
    key = (api_url, runners_path, hashlib.sha256(credential.encode()).hexdigest())
    with _directories_lock:
        return _directories.setdefault(key, RunnerDirectory())
