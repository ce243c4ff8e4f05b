"""actions/runner's releases, and the day GitHub stops sending jobs to a runner version.

GitHub's policy (../shared/reference/runner-versions.md, GitHub community discussion #194762): a runner below
2.329.0 cannot register, and each new release must be installed within 30 days of its publication to keep
receiving jobs. So a version's deadline is the publication of the first release after it, plus 30 days; both
that and the newest release are in GitHub's release list (newest first), which one call reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

IMAGE_REPOSITORY = "ghcr.io/actions/actions-runner"  # tagged with the bare version (2.336.0), as GitHub publishes it
MINIMUM_VERSION = "2.329.0"
JOBS_AFTER_NEWER_RELEASE = timedelta(days=30)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
_TAGGED = re.compile(r":v?(\d+\.\d+\.\d+)$")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``2.337.0`` (or ``v2.337.0``) as numbers; None for anything else."""
    match = _VERSION.match(text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def version_of_image(image: str) -> str | None:
    """The runner version an image's tag names (``ghcr.io/actions/actions-runner:2.336.0``), if it names one: a
    private build's tag (``my-runner:latest``, a digest) names none."""
    match = _TAGGED.search(image)
    return match[1] if match else None


def image_of(version: str) -> str:
    return f"{IMAGE_REPOSITORY}:{version}"


@dataclass(frozen=True)
class RunnerRelease:
    version: str  # 2.337.0
    published_at: str  # RFC 3339

    @property
    def published(self) -> datetime:
        return datetime.fromisoformat(self.published_at.replace("Z", "+00:00")).astimezone(UTC)


# The newest release this provider was made knowing (0.2.0's default image): a first create uses it when GitHub
# cannot be asked.
KNOWN_RELEASE = RunnerRelease("2.336.0", "2026-07-21T15:04:05Z")
KNOWN_IMAGE = image_of(KNOWN_RELEASE.version)


@dataclass(frozen=True)
class RunnerReleases:
    """GitHub's list, newest first (drafts and prereleases left out: GitHub's "latest" skips them too)."""

    listed: tuple[RunnerRelease, ...]

    @classmethod
    def of(cls, answer: list[dict[str, Any]]) -> RunnerReleases:
        releases = [
            RunnerRelease(release["tag_name"].removeprefix("v"), release["published_at"])
            for release in answer
            if not release.get("draft") and not release.get("prerelease") and parse_version(release["tag_name"])
        ]
        return cls(tuple(sorted(releases, key=lambda r: r.published, reverse=True)))

    @property
    def newest(self) -> RunnerRelease | None:
        """The highest version: a late patch of an older line, published after it, is not what runners move to."""
        return max(self.listed, key=lambda r: parse_version(r.version) or (), default=None)

    def deadline(self, version: str) -> datetime | None:
        """When GitHub stops (or stopped) sending jobs to ``version``: 30 days after the first release after it;
        None while it is the newest, or for a version that names no release."""
        return deadline_of(version, self.listed)


def deadline_of(version: str, listed: tuple[RunnerRelease, ...]) -> datetime | None:
    """``version``'s last day of jobs by the releases ``listed``: 30 days after the first one newer than it."""
    mine = parse_version(version)
    newer = [r.published for r in listed if mine is not None and (parse_version(r.version) or ()) > mine]
    return min(newer) + JOBS_AFTER_NEWER_RELEASE if newer else None
