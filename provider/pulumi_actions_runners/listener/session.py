"""The listener's hold on its scale set: the set itself (made again under its name if GitHub deleted it), and
the one session GitHub allows a set, opened, refreshed, reopened, and deleted on the way out.

A set has one session at a time: a second is refused (409 ``RunnerScaleSetSessionConflictException``) while
another listener holds it, or while the session of one that died (SIGKILL, a node lost) has not expired yet
(ARC #4285, #3209). ARC's old listener meant to retry that ten times, 30 s apart (the reference's §5); this one
retries from 1 s doubling to 30 s, for at most `CONFLICT_WAIT_SECONDS`, saying each time what it waits for, then
exits for the Deployment to start it again (with the kubelet's back-off).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..clock import Clock
from ..github.scale_sets import (
    ActionsServiceClient,
    ScaleSet,
    ScaleSetNotFound,
    Session,
    SessionConflict,
    SessionGone,
)
from ..kube.scale_set_manifests import ScaleSetConfig

log = logging.getLogger(__name__)

CONFLICT_WAIT_SECONDS = 300.0  # ARC's old listener: 10 tries, 30 s apart
FIRST_RETRY_SECONDS, LAST_RETRY_SECONDS = 1.0, 30.0
MAKE_AGAIN_ATTEMPTS = 3  # a set made again and gone again at once this often is not GitHub's cleanup


class SessionNotOpened(Exception):
    """The set's session stayed another's for longer than the listener waits."""


class ScaleSetHold:
    """The set's id and session as they stand; `set_moved` is told the id of a set made again."""

    def __init__(
        self,
        github: ActionsServiceClient,
        owner: str,
        clock: Clock,
        stop: threading.Event,
        set_moved: Callable[[int], None],
    ) -> None:
        self._github = github
        self._owner = owner
        self._clock = clock
        self._stop = stop
        self._set_moved = set_moved
        self._lock = threading.Lock()
        self.scale_set_id = 0
        self.session: Session | None = None

    def open(self, config: ScaleSetConfig) -> Session:
        """A session of the set (made again if GitHub deleted it), waiting out another's for a bounded time."""
        with self._lock:
            self.scale_set_id = self.scale_set_id or config.scale_set_id
            started = self._clock.monotonic()
            delay, attempt, made_again = FIRST_RETRY_SECONDS, 1, 0
            while True:
                if self._stop.is_set():
                    raise SessionNotOpened("stopped before the session was opened")
                try:
                    self.session = self._github.create_session(self.scale_set_id, self._owner)
                except ScaleSetNotFound:
                    made_again += 1
                    if made_again > MAKE_AGAIN_ATTEMPTS:
                        raise SessionNotOpened(
                            f"scale set {config.scale_set_name} was gone again each of the {MAKE_AGAIN_ATTEMPTS} "
                            "times it was made again"
                        ) from None
                    self._make_again(config)
                    continue
                except SessionConflict as conflict:
                    waited = self._clock.monotonic() - started
                    if waited + delay > CONFLICT_WAIT_SECONDS:
                        raise SessionNotOpened(
                            f"scale set {config.scale_set_name} still had another session after {waited:.0f} s "
                            f"({conflict}): another listener holds it; exiting"
                        ) from None
                    log.warning(
                        "scale set %s has an active session already (another listener's, or a stopped one's not yet "
                        "expired): attempt %d, trying again in %.0f s (%.0f s of at most %.0f s waited)",
                        config.scale_set_name,
                        attempt,
                        delay,
                        waited,
                        CONFLICT_WAIT_SECONDS,
                    )
                else:
                    if self._stop.is_set():  # stopped meanwhile: it would outlive this listener
                        self.close()
                        raise SessionNotOpened("stopped while the session was being opened")
                    log.info("scale set %s (id %d): session opened", config.scale_set_name, self.scale_set_id)
                    return self.session
                if self._stop.wait(delay):
                    raise SessionNotOpened("stopped while waiting for the session")
                delay, attempt = min(LAST_RETRY_SECONDS, delay * 2), attempt + 1

    def refresh(self, config: ScaleSetConfig) -> Session:
        """A new message-queue token; a session GitHub no longer knows is opened anew."""
        session = self.session
        if session is not None:
            try:
                self.session = self._github.refresh_session(self.scale_set_id, session.id)
                log.info("scale set %s: message queue token renewed", config.scale_set_name)
                return self.session
            except (SessionGone, ScaleSetNotFound):
                log.warning("scale set %s: GitHub no longer knows the session; opening another", config.scale_set_name)
        return self.open(config)

    def close(self) -> None:
        """The session deleted, so that the next listener need not wait for it to expire."""
        session = self.session
        if session is not None and self.scale_set_id:
            self._github.delete_session(self.scale_set_id, session.id)
            self.session = None
            log.info("scale set id %d: session deleted", self.scale_set_id)

    def _make_again(self, config: ScaleSetConfig) -> None:
        """The set, gone on GitHub's side, made again under its name (or found, if made meanwhile)."""
        found: ScaleSet | None = self._github.scale_set_by_name(config.scale_set_name, config.runner_group_id)
        if found is None:
            found = self._github.create_scale_set(config.scale_set_name, config.runner_group_id, config.labels)
        log.warning(
            "scale set %s (id %d) is gone on GitHub's side; made again as id %d",
            config.scale_set_name,
            self.scale_set_id,
            found.id,
        )
        self.scale_set_id = found.id
        self._set_moved(found.id)
