"""The actions/runner releases the GitHub double serves, and the version policy GitHub enforces with them.

Facts (../shared/reference/runner-versions.md, GitHub community discussion #194762):

- ``GET /repos/actions/runner/releases/latest`` answers the newest release that is neither a draft nor a
  prerelease, ``tag_name`` ``v2.3xx.y``, ``published_at`` in RFC 3339; ``GET /repos/actions/runner/releases``
  lists them newest first, paginated (REST reference, "Releases"). Both are public: no credential needed, and
  without one the anonymous budget of 60 requests an hour applies.
- A runner below 2.329.0 cannot register (config.sh fails). GitHub has not published its refusal's words; the
  double says what the rule is, in the form of the listener's deprecation message.
- After that, each release must be installed within 30 days of its publication: a runner whose version is
  behind a release published more than 30 days ago registers (actions/runner#4542: GitHub lets an outdated runner
  register, in a loop if it restarts), then gets no job: its listener's message poll is refused ("Runner version
  v2.330.0 is deprecated and cannot receive messages.", actions/runner#4305), and run.sh exits.

The clock is the double's (wall time): a test publishes a release dated 31 days ago to make the versions before
it deprecated now, or one dated today to give them a deadline 30 days out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

MINIMUM_VERSION = (2, 329, 0)
JOBS_AFTER_NEWER_RELEASE = timedelta(days=30)
# What the double knows at start unless told otherwise: the image the provider's 0.2.0 defaults to, published a
# week before the double started, so that every version it lets register gets jobs for 23 more days.
DEFAULT_RELEASE = "2.336.0"
DEFAULT_RELEASE_AGE = timedelta(days=7)

Version = tuple[int, ...]


def parse_version(text: str) -> Version:
    """``2.337.0`` or ``v2.337.0``; ValueError for anything else."""
    parts = text.removeprefix("v").split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise ValueError(f"{text!r} is not a runner version (MAJOR.MINOR.PATCH, as 2.337.0)")
    return tuple(int(part) for part in parts)


def named(version: Version) -> str:
    return ".".join(map(str, version))


def parse_release(text: str) -> tuple[str, str]:
    """``serve --runner-release VERSION@YYYY-MM-DD``: (version, published_at); ValueError if malformed."""
    version, at, day = text.partition("@")
    parse_version(version)
    if not at:
        raise ValueError(f"{text!r}: give VERSION@YYYY-MM-DD, as 2.337.0@2026-11-20")
    return version.removeprefix("v"), parse_day(day)


def parse_day(text: str) -> str:
    """``YYYY-MM-DD``: its midnight UTC, in RFC 3339; ValueError if malformed."""
    return _rfc3339(datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC))


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Release:
    id: int
    version: Version
    published_at: datetime

    def as_json(self, api_url: str) -> dict[str, Any]:
        """The fields of GitHub's release object that a client of the runner's releases reads."""
        tag = f"v{named(self.version)}"
        at = _rfc3339(self.published_at)
        return {
            "id": self.id,
            "url": f"{api_url}/repos/actions/runner/releases/{self.id}",
            "html_url": f"https://github.com/actions/runner/releases/tag/{tag}",
            "tag_name": tag,
            "name": tag,
            "draft": False,
            "prerelease": False,
            "created_at": at,
            "published_at": at,
        }

    def as_control_json(self) -> dict[str, Any]:
        """What the control endpoint answers a publication with: the release, and the older versions' deadline."""
        return {
            "version": named(self.version),
            "published_at": _rfc3339(self.published_at),
            "older_runners_get_no_jobs_after": _rfc3339(self.published_at + JOBS_AFTER_NEWER_RELEASE),
        }


class RunnerReleases:
    """The release list, extended while the double runs; who listens hears of each new release."""

    def __init__(self, releases: Iterable[tuple[str, str]] | None = None) -> None:
        """``releases``: (version, published_at) pairs; None for DEFAULT_RELEASE."""
        self._lock = threading.Lock()
        self._releases: list[Release] = []
        self._listeners: list[Callable[[Release], None]] = []
        if releases is None:
            self.publish(DEFAULT_RELEASE, datetime.now(UTC) - DEFAULT_RELEASE_AGE)
        for version, published_at in releases or ():
            self.publish(version, published_at)

    def publish(self, version: str, published_at: str | datetime | None = None) -> Release:
        """A release (``published_at`` an RFC 3339 time, a datetime, or None for now); its listeners are told."""
        if published_at is None:
            when = datetime.now(UTC)
        elif isinstance(published_at, datetime):
            when = published_at
        else:
            when = datetime.fromisoformat(published_at.replace("Z", "+00:00"))
        with self._lock:
            release = Release(len(self._releases) + 1, parse_version(version), when.astimezone(UTC))
            self._releases.append(release)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(release)
        return release

    def on_publish(self, listener: Callable[[Release], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def newest_first(self) -> list[Release]:
        with self._lock:
            return sorted(self._releases, key=lambda r: (r.published_at, r.version), reverse=True)

    def latest(self) -> Release | None:
        releases = self.newest_first()
        return releases[0] if releases else None

    def deadline(self, version: Version) -> datetime | None:
        """When GitHub stops (or stopped) sending jobs to ``version``: 30 days after the first newer release."""
        newer = [r.published_at for r in self.newest_first() if r.version > version]
        return min(newer) + JOBS_AFTER_NEWER_RELEASE if newer else None

    def refuses_jobs(self, version: Version, now: datetime | None = None) -> bool:
        deadline = self.deadline(version)
        return deadline is not None and (now or datetime.now(UTC)) >= deadline

    @staticmethod
    def registration_refusal(version: Version) -> str | None:
        """config.sh's failure for a version GitHub does not let register, else None."""
        if version >= MINIMUM_VERSION:
            return None
        return (
            f"Runner version v{named(version)} is deprecated and cannot be configured: "
            f"v{named(MINIMUM_VERSION)} or later is required."
        )
