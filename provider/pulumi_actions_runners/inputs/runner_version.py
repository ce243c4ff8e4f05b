"""Which actions/runner version a Runner's or RunnerPool's runners run, settled by Check: the one its ``image``
names (or ``runner_version`` says it contains), or, with no image, the newest release, which is tracked.

The newest release is a look-up (`runner_releases`, the provider function getRunnerRelease): GitHub's release
list, read once per process from the GitHub the resource talks to. The engine starts the provider once per
preview or update, so a preview sees a new release without a refresh, and Diff, which compares the settled
versions, calls nothing. When GitHub cannot be asked, the version the state records stays (a first create takes
the provider's own KNOWN_RELEASE), and the preview says so once.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..github.client import GitHubClient, GitHubError
from ..github.credentials import InvalidCredential
from ..github.releases import (
    KNOWN_RELEASE,
    RunnerReleases,
    image_of,
    version_of_image,
)
from ..unknowns import is_unknown
from .connections import Endpoint

log = logging.getLogger(__name__)

LOOKUP_TIMEOUT_SECONDS = 10.0  # one GitHub call in Check: a preview waits on it, so it is short and tried twice
LOOKUP_RATE_LIMIT_WAIT_SECONDS = 10.0
SCHEDULE_LENGTH = 12  # releases recorded with a resource's inputs: a year of them, at about one a month


@dataclass(frozen=True)
class Learned:
    """GitHub's release list for one API, or why it could not be read."""

    releases: RunnerReleases | None
    failure: str | None = None


_learned: dict[str, Learned] = {}
_said: set[str] = set()
_lock = threading.Lock()


def runner_releases(endpoint: Endpoint) -> Learned:
    """actions/runner's releases as the resource's GitHub lists them: asked once per process and API."""
    api_url = endpoint.target.api_url
    with _lock:  # one call per process even when the engine checks a hundred resources at once
        if api_url not in _learned:
            _learned[api_url] = _ask(endpoint)
        return _learned[api_url]


def _ask(endpoint: Endpoint) -> Learned:
    try:
        credential = endpoint.credential()
        with GitHubClient(
            endpoint.target,
            credential,
            timeout=LOOKUP_TIMEOUT_SECONDS,
            retries=1,
            max_rate_limit_wait=LOOKUP_RATE_LIMIT_WAIT_SECONDS,
        ) as github:
            return Learned(RunnerReleases.of(github.runner_releases()))
    except (GitHubError, InvalidCredential, OSError) as error:
        return Learned(None, str(error))
    except Exception as error:  # requests' own errors, a malformed answer: the state's version stays
        return Learned(None, f"{type(error).__name__}: {error}")


def say_once(key: str, message: str, *args: object, warning: bool = False) -> None:
    """A line for the preview's output, once per process, however many resources it concerns."""
    with _lock:
        if key in _said:
            return
        _said.add(key)
    (log.warning if warning else log.info)(message, *args)


def settle(olds: dict[str, Any], inputs: dict[str, Any]) -> None:
    """Record in ``inputs`` the version the runners will run (``runner_version``) and what GitHub says of it
    (``runner_release``: the newest release, its day, and each version's last day of jobs). Inputs already
    checked; with no image the version is the newest release's, else the image's (or the one given)."""
    image, given = inputs.get("image"), inputs.get("runner_version")
    if is_unknown(image) or is_unknown(given) or is_unknown(inputs.get("github_url")):
        return
    recorded = olds.get("runner_version") or version_of_image(olds.get("image") or "")
    learned = runner_releases(Endpoint.of(inputs))
    releases = learned.releases
    if learned.failure is not None:
        say_once(
            f"failed:{Endpoint.of(inputs).target.api_url}",
            "actions/runner's releases could not be read from %s (%s): %s",
            Endpoint.of(inputs).target.api_url,
            learned.failure,
            f"the runners that track the newest release keep {recorded}"
            if recorded
            else f"new runners that track the newest release get {KNOWN_RELEASE.version}, the provider's own",
            warning=True,
        )
    if image is None and given is None:
        newest = releases.newest if releases is not None else None
        version = newest.version if newest is not None else recorded or KNOWN_RELEASE.version
        inputs["runner_version"] = version
        inputs["runner_release"] = _facts(releases, version, recorded, tracking=True)
        if newest is not None and recorded and recorded != version:
            deadline = releases.deadline(recorded) if releases is not None else None
            say_once(
                f"newer:{recorded}:{version}",
                "actions/runner %s was released on %s; %s %s: the runners that track the newest release are "
                "recreated with it",
                version,
                _day(newest.published),
                recorded,
                _receiving_until(deadline),
            )
        return
    version = given or version_of_image(image or "")
    inputs["runner_version"] = version
    inputs["runner_release"] = _facts(releases, version, recorded, tracking=False)
    if version is not None and releases is not None and (deadline := releases.deadline(version)) is not None:
        say_once(
            f"pinned:{image}:{version}",
            "the image %s runs actions/runner %s, behind the newest release: %s",
            image or image_of(version),
            version,
            _deadline_words(deadline),
            warning=True,
        )


def _facts(releases: RunnerReleases | None, version: str | None, recorded: str | None, *, tracking: bool) -> dict:
    """What the report needs to say why, and by when: JSON-ready."""
    newest = releases.newest if releases is not None else None
    deadlines = {}
    for each in {v for v in (version, recorded) if v}:
        deadline = releases.deadline(each) if releases is not None else None
        if deadline is not None:
            deadlines[each] = _rfc3339(deadline)
    return {
        "tracking": tracking,
        "newest": newest.version if newest else None,
        "newest_published_at": newest.published_at if newest else None,
        "learned": releases is not None,
        "deadlines": deadlines,
        # The newest releases, for the deadline of a version Check was not shown: the engine checks a replacement
        # anew without its old inputs, and the report finds the replaced version's day here.
        "releases": [[r.version, r.published_at] for r in (releases.listed if releases else ())[:SCHEDULE_LENGTH]],
    }


def effective_image(props: dict[str, Any]) -> Any:
    """The image the runners' pods run: the one given, else the tracked release's (None until settled)."""
    image = props.get("image")
    if image is not None:
        return image
    version = props.get("runner_version")
    if version is None or is_unknown(version):
        return version
    return image_of(version)


def _receiving_until(deadline: datetime | None) -> str:
    if deadline is None:
        return "is behind it"
    return f"{'stopped' if deadline <= datetime.now(UTC) else 'stops'} receiving jobs after {_day(deadline)}"


def _deadline_words(deadline: datetime | None) -> str:
    if deadline is None:
        return "is the newest release GitHub lists"
    tense = "stopped" if deadline <= datetime.now(UTC) else "stops"
    return f"GitHub {tense} sending it jobs after {_day(deadline)}"


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _day(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d")
