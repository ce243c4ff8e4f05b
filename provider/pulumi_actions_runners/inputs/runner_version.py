"""Which actions/runner version a Runner's or RunnerPool's runners run, settled by Check: the one its ``image``
names (or ``runner_version`` says it contains), or, with no image, the newest release, which is tracked.

The newest release is a look-up (`runner_releases`): GitHub's release list, read once per provider process from
the GitHub the resource talks to, with its credential. The engine starts the provider once per preview or
update, so a preview sees a new release without a refresh, and Diff, which compares the settled versions,
calls nothing. When GitHub cannot be asked, the version the state records stays (a replacement, which the engine
checks anew without its old inputs, takes the newest this process has seen recorded; a first create takes the
provider's own KNOWN_RELEASE), and the preview says so once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..github.app import InstallationTokens
from ..github.auth import APP_INPUTS, auth_failures
from ..github.client import GitHubClient, GitHubError
from ..github.credentials import GITHUB_TOKEN_INPUT, InvalidCredential
from ..github.releases import KNOWN_RELEASE, RunnerReleases, image_of, parse_version, version_of_image
from ..unknowns import is_unknown
from . import validation
from .connections import Endpoint

log = logging.getLogger(__name__)

LOOKUP_TIMEOUT_SECONDS = 10.0  # one GitHub call in Check: a preview waits on it, so it is short and tried twice
LOOKUP_RATE_LIMIT_WAIT_SECONDS = 10.0
SCHEDULE_LENGTH = 12  # releases recorded with a resource's inputs: a year of them, at about one a month


@dataclass(frozen=True)
class Learned:
    """GitHub's release list for one API and credential, or why it could not be read."""

    releases: RunnerReleases | None
    failure: str | None = None


_learned: dict[tuple[str, str], Learned] = {}
_asking: dict[tuple[str, str], threading.Lock] = {}  # one look-up at a time per API and credential
_recorded: dict[str, tuple[int, ...]] = {}  # per API: the newest version a Check of this process saw recorded
_said: set[str] = set()
_lock = threading.Lock()  # guards the dicts above, never held across a call


def runner_releases(endpoint: Endpoint) -> Learned:
    """actions/runner's releases as the resource's GitHub lists them: asked once per process, API and credential
    (a credential that cannot be used is said, not asked with, nor remembered)."""
    try:
        credential = endpoint.credential()
    except InvalidCredential as error:
        return Learned(None, str(error))
    identity = credential if isinstance(credential, str) else credential.budget_key
    key = (endpoint.target.api_url, hashlib.sha256(identity.encode()).hexdigest())
    with _lock:
        asking = _asking.setdefault(key, threading.Lock())
    with asking:  # a hundred resources checked at once make one call
        with _lock:
            if key in _learned:
                return _learned[key]
        learned = _ask(endpoint, credential)
        with _lock:
            _learned[key] = learned
        return learned


def _ask(endpoint: Endpoint, credential: str | InstallationTokens) -> Learned:
    try:
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


QUERY_RULES = {"github_url": validation.github_url, "runner_version": validation.runner_version}


@dataclass(frozen=True)
class ReleaseQuery:
    """What the getRunnerRelease function is asked, converted once at its front door: the GitHub to ask, with
    which credential, and (optionally) the version whose deadline is wanted."""

    endpoint: Endpoint
    runner_version: str | None = None

    @classmethod
    def of(cls, args: dict[str, Any]) -> ReleaseQuery:
        """``args`` named as the resources' inputs; ValueError names each input that breaks its rule."""
        if failures := validation.failures(args, QUERY_RULES) + auth_failures(args):
            raise InvalidQuery(failures)
        return cls(Endpoint.of(args), args.get("runner_version"))


class InvalidQuery(ValueError):
    def __init__(self, failures: list[tuple[str, str]]) -> None:
        self.failures = failures
        super().__init__("; ".join(f"{prop}: {reason}" for prop, reason in failures))


@dataclass(frozen=True)
class NewestRelease:
    """The function's answer: the newest release, its image, and the asked version's last day of jobs."""

    version: str
    published_at: str
    image: str
    runner_version: str | None  # the version asked about, if any
    deadline: str | None  # when GitHub stops (or stopped) sending it jobs; None while it is the newest
    receiving_jobs: bool | None  # whether GitHub still sends it jobs today


class ReleasesUnavailable(RuntimeError):
    """GitHub's release list could not be read: a look-up the program asked for fails, saying why."""


def newest_release(query: ReleaseQuery) -> NewestRelease:
    """The look-up the resources' Check makes for their runners, asked by a program: the same call, memo and
    limits. Unlike Check, which keeps the recorded version, it fails when GitHub cannot answer."""
    learned = runner_releases(query.endpoint)
    releases = learned.releases
    newest = releases.newest if releases is not None else None
    if releases is None or newest is None:
        why = learned.failure or "it lists no release"
        raise ReleasesUnavailable(
            f"actions/runner's releases could not be read from {query.endpoint.target.api_url}: {why}"
        )
    deadline = releases.deadline(query.runner_version) if query.runner_version else None
    return NewestRelease(
        version=newest.version,
        published_at=newest.published_at,
        image=image_of(newest.version),
        runner_version=query.runner_version,
        deadline=_rfc3339(deadline) if deadline is not None else None,
        receiving_jobs=None if query.runner_version is None else deadline is None or deadline > datetime.now(UTC),
    )


def say_once(key: str, message: str, *args: object, warning: bool = False) -> None:
    """A line for the preview's output, once per process, however many resources it concerns."""
    with _lock:
        if key in _said:
            return
        _said.add(key)
    (log.warning if warning else log.info)(message, *args)


def _remember(api_url: str, version: str | None) -> str | None:
    """The newest version recorded in a state this process has checked for this API, ``version`` included."""
    parsed = parse_version(version) if version else None
    with _lock:
        if parsed is not None and parsed > _recorded.get(api_url, ()):
            _recorded[api_url] = parsed
        seen = _recorded.get(api_url)
    return ".".join(map(str, seen)) if seen else None


def settle(olds: dict[str, Any], inputs: dict[str, Any]) -> None:
    """Record in ``inputs`` the version the runners will run (``runner_version``) and what GitHub says of it
    (``runner_release``: the newest release, its day, and each version's last day of jobs). Inputs already
    checked; with no image the version is the newest release's, else the image's (or the one given). Nothing
    is settled while an input it needs is unknown (a preview before a credential or URL is made)."""
    image, given = inputs.get("image"), inputs.get("runner_version")
    needed = (image, given, inputs.get("github_url"), inputs.get(GITHUB_TOKEN_INPUT), *map(inputs.get, APP_INPUTS))
    if any(map(is_unknown, needed)):
        return
    endpoint = Endpoint.of(inputs)
    recorded = olds.get("runner_version") or version_of_image(olds.get("image") or "")
    fallback = _remember(endpoint.target.api_url, recorded) if image is None and given is None else recorded
    learned = runner_releases(endpoint)
    releases = learned.releases
    if learned.failure is not None:
        say_once(
            f"failed:{endpoint.target.api_url}",
            "actions/runner's releases could not be read from %s (%s): %s",
            endpoint.target.api_url,
            learned.failure,
            f"the runners that track the newest release keep {recorded or fallback}"
            if recorded or fallback
            else f"new runners that track the newest release get {KNOWN_RELEASE.version}, the provider's own",
            warning=True,
        )
    if image is None and given is None:
        newest = releases.newest if releases is not None else None
        version = newest.version if newest is not None else recorded or fallback or KNOWN_RELEASE.version
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
        say_once(  # the version only: an image may be a secret input, and is nobody's business in a log
            f"pinned:{version}",
            "a pinned image runs actions/runner %s, behind the newest release: %s",
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


def _deadline_words(deadline: datetime) -> str:
    tense = "stopped" if deadline <= datetime.now(UTC) else "stops"
    return f"GitHub {tense} sending it jobs after {_day(deadline)}"


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _day(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d")
