"""The registration token a runner starts with: the one the program gave while it is fresh enough, else a fresh
one from GitHub.

A registration token lives an hour. A replacement held up by a busy job (up to ``unregister_timeout_seconds``),
or a late wave of a rollout, can start after the given token expired, and its pod would then fail to register.
The provider holds a GitHub credential, so it asks GitHub for a new token instead (one per scope and process,
shared by every runner started while it stays fresh enough). The state keeps the hash of the *given* token,
which is what preview compares, so the next preview stays quiet; only the Secret of a runner started late holds
the fresh one. A token whose expiry the program did not pass along (``registration_token_expires_at``, which a
`RegistrationToken` passes by itself) cannot be judged, so it is never used: a fresh one is.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ..clock import Clock
from .client import RegistrationGrant

log = logging.getLogger(__name__)

# config.sh must run before the token expires: within register_timeout_seconds of the start, plus this margin
# for the pod's scheduling. At most half a token's hour is asked of a token, so that a fresh one always does.
START_MARGIN_SECONDS = 60.0
MAX_VALIDITY_NEEDED_SECONDS = 1800.0


class TokenMinter(Protocol):
    def create_registration_token(self) -> RegistrationGrant: ...


def expiry_seconds(expires_at: str) -> float:
    """GitHub's RFC 3339 ``expires_at`` as seconds since the epoch; ValueError if it is not one."""
    parsed = datetime.fromisoformat(expires_at)
    if parsed.tzinfo is None:
        raise ValueError(f"{expires_at!r} has no time zone")
    return parsed.timestamp()


def validity_needed(register_timeout_seconds: float) -> float:
    return min(register_timeout_seconds + START_MARGIN_SECONDS, MAX_VALIDITY_NEEDED_SECONDS)


class FreshTokens:
    """The last token this process got from GitHub for one scope and credential, shared by every start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires = float("-inf")

    def valid_for(self, seconds: float, minter: TokenMinter, clock: Clock, why: str) -> str:
        with self._lock:  # one request for hundreds of starts that need one at once
            if self._token is None or self._expires - clock.time() < seconds:
                grant = minter.create_registration_token()
                self._token, self._expires = grant.token, expiry_seconds(grant.expires_at)
                log.info(
                    "runners start with a fresh registration token from GitHub (it expires at %s): the given one "
                    "cannot be relied on to outlast a registration (%s; %.0f s needed)",
                    grant.expires_at,
                    why,
                    seconds,
                )
            return self._token


@dataclass(frozen=True)
class StartTokens:
    """What `start_runner` asks for a token; ``given_expires`` is None when the program did not say."""

    given: str
    given_expires: float | None
    fresh: FreshTokens
    minter: TokenMinter
    clock: Clock
    needed_seconds: float

    def for_start(self) -> str:
        left = None if self.given_expires is None else self.given_expires - self.clock.time()
        if left is not None and left >= self.needed_seconds:
            return self.given
        why = "its expiry is unknown" if left is None else f"it expires in {max(left, 0):.0f} s"
        return self.fresh.valid_for(self.needed_seconds, self.minter, self.clock, why)
