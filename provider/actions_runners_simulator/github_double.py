"""A loopback double of GitHub's REST API for self-hosted runners, so the provider can run without an org.

It serves the runner endpoints under ``/api/v3`` (the GitHub Enterprise Server form the product derives from
a ``config.sh --url``), keeps registrations as GitHub does (online/offline, busy, ephemeral, replaced by
name) and lets tests inject what a real client must survive: 5xx answers, primary and secondary rate limits,
slow answers, connections reset before an answer, and answers lost after the request took effect.
Simulated runners live in the same process and register through `GitHubDouble.register_runner` (or, given a
just-in-time config from ``generate-jitconfig``, connect through `GitHubDouble.connect_jit_runner`), because
real runners talk to the Actions service, not REST.
It enforces GitHub's primary and secondary rate limits per credential, with the limits configurable.
"""

from __future__ import annotations

import enum
import functools
import heapq
import json
import logging
import math
import re
import secrets
import socket
import string
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

from . import jit_config
from .actions_service import SERVICE_PREFIX, ActionsService
from .github_apps import GitHubApps
from .job_queue import FAILED_IN_QUEUE, QUEUE_LIMIT_SECONDS, Job, JobBook, run_json, scopes_for, takes
from .runner_releases import RunnerReleases, parse_version
from .runner_service import POOL_PATH, RunnerConnections

API_PREFIX = "/api/v3"

_log = logging.getLogger(__name__)

_TOKEN_ALPHABET = string.ascii_uppercase + string.digits
_READ_ONLY_LABELS = ("self-hosted", "Linux", "X64")
# GitHub documents no order for its runner listings (the REST reference's "List self-hosted runners for a
# repository/organization" names only name, per_page and page). It appears to list by id ("id", the default);
# the others are there so that the suite proves the provider does not depend on that.
ListingOrder = Literal["id", "name", "newest_first"]
LISTING_ORDERS: tuple[ListingOrder, ...] = ("id", "name", "newest_first")
_DOCS = "https://docs.github.com/rest"
_RUNNER_DOCS = f"{_DOCS}/actions/self-hosted-runners"
_RATE_DOCS = f"{_DOCS}/overview/rate-limits-for-the-rest-api"
_SCOPE_ARTICLE = {"repos": "a-repository", "orgs": "an-organization", "enterprises": "an-enterprise"}
_RUNNERS_ROUTE = re.compile(
    r"/(?P<scope>repos/[^/]+/[^/]+|orgs/[^/]+|enterprises/[^/]+)/actions/runners"
    r"(?:/(?P<item>registration-token|remove-token|generate-jitconfig|\d+)(?P<labels>/labels)?)?"
)
_GROUPS_ROUTE = re.compile(r"/(?P<scope>orgs/[^/]+|enterprises/[^/]+)/actions/runner-groups")
# The queue as the REST API shows it: a repository's workflow runs, and a run's jobs (job_queue.py).
_RUNS_ROUTE = re.compile(r"/(?P<scope>repos/[^/]+/[^/]+)/actions/runs(?:/(?P<run_id>\d+)/jobs)?")
# Public, as on github.com: answered without a credential, from the anonymous budget.
_RELEASES_ROUTE = re.compile(r"/repos/actions/runner/releases(?P<latest>/latest)?")
_RELEASE_DOCS = f"{_DOCS}/releases/releases"
_SCOPE_TEMPLATE = {"repos": "repos/{owner}/{repo}", "orgs": "orgs/{org}", "enterprises": "enterprises/{enterprise}"}
_ANONYMOUS_LIMIT_PER_HOUR = 60
# GitHub's answer to an anonymous client past its 60 requests an hour (a 403), for the loopback address.
_ANONYMOUS_LIMIT_MESSAGE = (
    "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate "
    "limit. Check out the documentation for more details.)"
)
_DEFAULT_RUNNER_GROUP_ID = 1  # every scope's "Default" group; organizations and enterprises may add their own
_MAX_JIT_LABELS = 100
_WRITE_POINTS = 5  # a GET costs 1 point of the per-endpoint secondary budget
_WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
_CONTENT_CREATING_METHODS = frozenset({"POST", "PATCH", "PUT"})
_SECONDARY_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {request_id}."
)

JsonObject = dict[str, Any]


class RunnerListener(Protocol):
    """How the double tells a (simulated) runner process what happens to its registration."""

    def job_started(self) -> None: ...

    def job_finished(self) -> None: ...

    def removed(self) -> None:
        """The registration is gone: RemoveRunner, replaced by name, or an ephemeral runner after its job."""


class SessionOutcome(enum.Enum):
    """What the Actions service answers a listener's CreateSession."""

    OPENED = "opened"
    CONFLICT = "conflict"  # 409 "A session for this runner already exists." (a live or a stale one)
    GONE = "gone"  # the registration was deleted: "The runner no longer exists on the server."


# How long GitHub keeps what a runner that died without a word left behind; both are the service's, not in
# actions/runner's source. A session not ended by its listener stays until it expires, and the registration is
# listed online meanwhile (ARC#4148: a runner OOM-killed and restarted meets 409 for minutes); a job whose runner
# died holds its lock until GitHub abandons it, about ten minutes, RemoveRunner answering 422 until then (the
# runner renews the lock every 60 s: JobDispatcher.cs:886).
SESSION_EXPIRY_SECONDS = 300.0
JOB_ABANDON_SECONDS = 600.0
# A runner process elsewhere polls for messages (each poll up to 50 s) and renews its job's lock every 60 s: not
# heard of for twice that, it is dead (the double's reading; GitHub's own threshold is not published).
REMOTE_SILENCE_SECONDS = 120.0


class _Unattached:
    """The listener of a registration with no runner process here: a just-in-time one not connected yet, or a
    runner registered from elsewhere."""

    def job_started(self) -> None: ...

    def job_finished(self) -> None: ...

    def removed(self) -> None: ...


REGISTRATION_NOT_FOUND = "Response status code does not indicate success: 404 (Not Found)."


class RegistrationRefused(Exception):
    """What makes config.sh fail (a token unknown, expired or for another scope, or a --url served elsewhere),
    or run.sh --jitconfig (a config malformed, used already, of a registration gone, or of another server)."""


def _notify(callbacks: Iterable[Callable[[], None]]) -> None:
    """Call listeners outside the lock, so they may call back into the double; one failing spares the rest."""
    for callback in callbacks:
        try:
            callback()
        except Exception:
            _log.exception("runner listener callback %r failed", callback)


def _new_token(lifetime: float) -> JsonObject:
    """A token shaped like GitHub's (29 capitals and digits), with an RFC 3339 expiry in milliseconds."""
    token = "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(29))
    expires_at = datetime.now(UTC) + timedelta(seconds=lifetime)
    return {"token": token, "expires_at": expires_at.isoformat(timespec="milliseconds")}


# --- Runner registry: what GitHub knows about self-hosted runners ------------------------------------------


@dataclass
class _Runner:
    id: int
    name: str
    scope: str
    ephemeral: bool
    labels: list[JsonObject]
    listener: RunnerListener
    status: str = "online"
    busy: bool = False
    session: Literal["live", "stale"] | None = "live"  # stale: its process died without ending it
    stale_until: float = 0.0  # a stale session expires then (monotonic), and the runner is listed offline
    lock_until: float = 0.0  # a dead runner's job: GitHub abandons it then; busy (RemoveRunner 422) till
    jit_secret: str | None = None  # what its just-in-time config carries; None for a config.sh registration
    jit_used: bool = False  # a just-in-time config connects a runner once
    runner_group_id: int = 1  # the scope's Default group (a repository's runners are always there)
    version: str | None = None  # the actions/runner version it connected with (None: not known)
    job: Job | None = None  # the job it runs
    scale_set_id: int | None = None  # a scale set's runner (generatejitconfig of the Actions service)
    runs_own_jobs: bool = False  # a runner process elsewhere, which reports its job's end (runner_service.py)
    heard_at: float = 0.0  # such a runner's last poll or lock renewal (monotonic)

    def as_json(self) -> JsonObject:
        return {
            "id": self.id,
            "name": self.name,
            "os": "Linux",
            "status": self.status,
            "busy": self.busy,
            "ephemeral": self.ephemeral,
            "runner_group_id": self.runner_group_id,
            "labels": [dict(label) for label in self.labels],
        }


@dataclass(frozen=True)
class _Start:
    """A job handed to a runner: its listener is told outside the lock, then its end is scheduled."""

    runner_id: int
    job_id: int
    listener: RunnerListener
    ends_in: float | None  # None: the job runs until finished by name, or its runner reports its end


def _no_job_event(kind: str, job: Job) -> None:
    """What the registry tells of a job when no Actions service listens (see ScaleSets.job_event)."""


class _RunnerRegistry:
    """Registrations, registration tokens, the job queue and running jobs, guarded by the double's one lock."""

    def __init__(
        self,
        lock: threading.Lock,
        token_lifetime: float,
        listing_order: ListingOrder = "id",
        *,
        session_expiry: float = SESSION_EXPIRY_SECONDS,
        job_abandon: float = JOB_ABANDON_SECONDS,
        refuses_jobs: Callable[[str | None], bool] = lambda _version: False,
        queue_limit: float = QUEUE_LIMIT_SECONDS,
    ) -> None:
        self._lock = lock
        self.remote_silence = REMOTE_SILENCE_SECONDS
        self._refuses_jobs = refuses_jobs
        self._queue_limit = queue_limit
        self.jobs = JobBook()
        # Told (lock held) of "JobStarted" and "JobCompleted" for jobs of a scale set, and of each job queued
        # ("JobQueued"), so that the Actions service can route it to a scale set (actions_service.py).
        self.job_event: Callable[[str, Job], None] = _no_job_event
        self._session_expiry = session_expiry
        self._job_abandon = job_abandon
        self._listing_order = listing_order
        self._job_clock = threading.Condition(lock)
        self._token_lifetime = token_lifetime
        self._tokens: dict[str, tuple[str, float]] = {}  # registration token -> (scope, monotonic expiry)
        self._runners: dict[int, _Runner] = {}  # ids only grow, so insertion order is id order
        self._label_ids: dict[str, int] = {}
        self._groups: dict[str, dict[str, int]] = {}  # an organization's or enterprise's groups besides Default
        self._next_group_id = _DEFAULT_RUNNER_GROUP_ID + 1
        self._next_runner_id = 1
        self._job_ends: list[tuple[float, int, int]] = []  # heap of (monotonic due time, runner id, job id)
        self._clock_thread: threading.Thread | None = None
        self._closed = False

    def issue_registration_token(self, scope: str) -> JsonObject:
        issued = _new_token(self._token_lifetime)
        with self._lock:
            self._tokens[issued["token"]] = (scope, time.monotonic() + self._token_lifetime)
        return issued

    def expire_token(self, token: str) -> None:
        with self._lock:
            if token in self._tokens:
                self._tokens[token] = (self._tokens[token][0], time.monotonic())

    def add_runner_group(self, scope: str, name: str) -> int:
        with self._lock:
            group_id, self._next_group_id = self._next_group_id, self._next_group_id + 1
            self._groups.setdefault(scope, {})[name] = group_id
            return group_id

    def runner_groups(self, scope: str) -> list[tuple[int, str]]:
        """(id, name) of the scope's groups, Default first."""
        with self._lock:
            named = self._groups.get(scope, {})
        return [(_DEFAULT_RUNNER_GROUP_ID, "Default"), *((i, n) for n, i in named.items())]

    def _group_named(self, scope: str, name: str | None) -> int:
        """The lock is held. config.sh --runnergroup: a group of the organization or enterprise, by name."""
        if not name or name == "Default":
            return _DEFAULT_RUNNER_GROUP_ID
        group_id = self._groups.get(scope, {}).get(name)
        if group_id is None:
            raise RegistrationRefused(f'Could not find any self-hosted runner group named "{name}".')
        return group_id

    def register(
        self,
        scope: str,
        token: str,
        name: str,
        labels: Sequence[str],
        ephemeral: bool,
        listener: RunnerListener,
        replace: bool,
        runner_group: str | None = None,
        *,
        session: bool = True,
        version: str | None = None,
    ) -> int:
        """config.sh: with ``--replace`` a registration of the name is taken over, busy or not (its runner's
        session ends, and a job it ran is lost), and keeps its id (actions/runner updates the existing agent);
        without, the name being taken fails the configuration. Without ``session`` the registration waits,
        offline, for its listener's `open_session` (run.sh); a stale session of the one replaced stays, and
        keeps it listed online, as does a dead runner's job lock keep it busy."""
        with self._lock:
            self._check_token(scope, token)
            group_id = self._group_named(scope, runner_group)
            replaced = [r for r in self._runners.values() if r.scope == scope and r.name == name]
            if replaced and not replace:
                raise RegistrationRefused(f"A runner exists with the same name {name} in {scope}")
            for runner in replaced[:-1]:
                del self._runners[runner.id]
            # Assigned in place: the listing keeps its id order.
            runner_id = replaced[-1].id if replaced else self._new_runner_id()
            registration = _Runner(
                runner_id,
                name,
                scope,
                ephemeral,
                self._labels(labels),
                listener,
                runner_group_id=group_id,
                version=version,
            )
            if not session:
                registration.status, registration.session = "offline", None
            if replaced and (kept := replaced[-1]).session == "stale":
                self._settle(kept)
                registration.status, registration.session, registration.stale_until = (
                    kept.status,
                    kept.session,
                    kept.stale_until,
                )
                registration.busy, registration.lock_until = kept.busy, kept.lock_until
                registration.job, kept.job = kept.job, None
            for runner in replaced:
                self._lose_job(runner, "its runner's registration was taken over by config.sh --replace")
            self._runners[runner_id] = registration
            starts = self._dispatch() if session else []
        _notify(runner.listener.removed for runner in replaced if runner.session == "live")
        self._run(starts)
        return runner_id

    def open_session(self, scope: str, runner_id: int, listener: RunnerListener) -> SessionOutcome:
        """A listener's CreateSession: one session per runner, so a live or stale one answers 409."""
        with self._lock:
            runner = self._runners.get(runner_id)
            if runner is None or runner.scope != scope:
                return SessionOutcome.GONE
            self._settle(runner)
            if runner.session is not None:
                return SessionOutcome.CONFLICT
            runner.session, runner.status, runner.listener = "live", "online", listener
            starts = self._dispatch()
        self._run(starts)
        return SessionOutcome.OPENED

    def end_session(self, runner_id: int, *, gracefully: bool) -> None:
        """The listener ended its session (a stop it was told of): offline at once. Not ``gracefully`` (its
        process killed): the session goes stale and keeps the runner listed online until it expires, and a job
        it ran holds the runner busy until GitHub abandons it."""
        with self._lock:
            runner = self._runners.get(runner_id)
            if runner is None or runner.session != "live":
                return
            runner.listener = _Unattached()
            if gracefully:
                self._lose_job(runner, "its runner was stopped while it ran the job")
                runner.session, runner.status, runner.busy = None, "offline", False
                return
            runner.session, runner.stale_until = "stale", time.monotonic() + self._session_expiry
            if runner.busy:
                runner.lock_until = time.monotonic() + self._job_abandon

    def _settle(self, runner: _Runner) -> None:
        """The lock is held. What GitHub has let lapse by now: a stale session, a dead runner's job lock. A runner
        process elsewhere that has not been heard of (no poll, no lock renewal) for REMOTE_SILENCE_SECONDS is
        taken for dead from when it was last heard of."""
        now = time.monotonic()
        if runner.runs_own_jobs and runner.session == "live" and now - runner.heard_at > self.remote_silence:
            runner.session = "stale"  # its listener (a mailbox) stays: the process may poll again
            runner.stale_until = runner.heard_at + self._session_expiry
            if runner.busy:
                runner.lock_until = runner.heard_at + self._job_abandon
        if runner.session == "stale" and now >= runner.stale_until:
            runner.session, runner.status = None, "offline"
        if runner.lock_until and now >= runner.lock_until:
            self._lose_job(runner, "its runner died while it ran the job, and GitHub abandoned it")
            runner.busy, runner.lock_until = False, 0.0

    def _lose_job(self, runner: _Runner, why: str) -> None:
        """The lock is held. The job the runner ran is lost, and recorded so."""
        job, runner.job = runner.job, None
        if job is not None and job.finished_at is None:
            job.finish(time.monotonic(), conclusion="failure", lost=True, why=why)
            self.job_event("JobCompleted", job)

    def _new_runner_id(self) -> int:
        """The lock is held."""
        runner_id, self._next_runner_id = self._next_runner_id, self._next_runner_id + 1
        return runner_id

    def create_jit(
        self,
        scope: str,
        name: str,
        labels: Sequence[str],
        group_id: int = _DEFAULT_RUNNER_GROUP_ID,
        scale_set_id: int | None = None,
    ) -> tuple[JsonObject, str] | None:
        """generate-jitconfig (REST's, or a scale set's): an offline ephemeral registration and the secret its
        config carries; None if the name is taken in the scope, which GitHub refuses rather than replacing, even
        on a retry of the same call."""
        with self._lock:
            if any(r.scope == scope and r.name == name for r in self._runners.values()):
                return None
            runner_id, secret = self._new_runner_id(), secrets.token_urlsafe(32)
            runner = _Runner(
                runner_id,
                name,
                scope,
                True,
                self._labels(labels, defaults=False),
                _Unattached(),
                status="offline",
                session=None,
                jit_secret=secret,
                runner_group_id=group_id,
                scale_set_id=scale_set_id,
            )
            self._runners[runner_id] = runner
            return runner.as_json(), secret

    def scale_set_runners(self, scale_set_id: int) -> list[JsonObject]:
        """The lock is held. A scale set's registrations, as the REST API lists them."""
        runners = [r for r in self._runners.values() if r.scale_set_id == scale_set_id]
        for runner in runners:
            self._settle(runner)
        return [runner.as_json() for runner in runners]

    def remove_idle_scale_set_runners(self, scale_set_id: int) -> None:
        """A deleted scale set's idle registrations go; busy ones finish their job (and go, being ephemeral)."""
        with self._lock:
            idle = [r for r in self._runners.values() if r.scale_set_id == scale_set_id and not r.busy]
            for runner in idle:
                del self._runners[runner.id]
        _notify(runner.listener.removed for runner in idle)

    def runners_of(self, scope: str) -> list[JsonObject]:
        """The scope's registrations with the scale set each belongs to (None: none), for the agents' look-up."""
        with self._lock:
            runners = [r for r in self._runners.values() if r.scope == scope]
            for runner in runners:
                self._settle(runner)
            return [runner.as_json() | {"scale_set_id": runner.scale_set_id} for runner in runners]

    def registration_token_valid(self, scope: str, token: str) -> bool:
        with self._lock:
            try:
                self._check_token(scope, token)
            except RegistrationRefused:
                return False
            return True

    def connect_jit(
        self,
        scope: str,
        runner_id: int,
        secret: str,
        listener: RunnerListener,
        version: str | None = None,
        *,
        runs_own_jobs: bool = False,
    ) -> None:
        """``run.sh --jitconfig``: the registration comes online once; messages never quote the config."""
        with self._lock:
            runner = self._runners.get(runner_id)
            if (
                runner is None
                or runner.scope != scope
                or runner.jit_secret is None
                or not secrets.compare_digest(runner.jit_secret, secret)
            ):
                raise RegistrationRefused(f"the registration of this JIT config is gone from {scope}")
            if runner.jit_used:
                raise RegistrationRefused(f"this JIT config (runner {runner.name!r}) was used already")
            runner.jit_used, runner.status, runner.listener, runner.session = True, "online", listener, "live"
            runner.version, runner.runs_own_jobs, runner.heard_at = version, runs_own_jobs, time.monotonic()
            starts = self._dispatch()
        self._run(starts)

    def _check_token(self, scope: str, token: str) -> None:
        issued_scope, expires = self._tokens.get(token, (None, 0.0))
        if issued_scope is None or expires <= time.monotonic():
            # What config.sh prints for a token unknown, used up or expired: the runner-registration endpoint's
            # 404, in .NET's words (ConfigurationManager.cs:868-874 lets EnsureSuccessStatusCode throw; not
            # retried; Runner.cs:154-164 writes the message and returns TerminatedError, exit 1).
            raise RegistrationRefused(REGISTRATION_NOT_FOUND)
        if issued_scope != scope:
            raise RegistrationRefused(f"registration token was issued for {issued_scope}, not {scope}")

    def _labels(self, custom: Sequence[str], *, defaults: bool = True) -> list[JsonObject]:
        """Read-only labels first, then custom ones; one id per label name, as GitHub shares label ids. config.sh
        gives a runner the read-only defaults; a just-in-time runner (``defaults`` False) has only the labels
        generate-jitconfig was given ("The names of the custom labels to add to the runner", its REST reference;
        GitHub adds no defaults to JIT runners, as terraform-aws-github-runner#3491 found). They are all custom
        here, "self-hosted" among them if asked for, so a labels PUT replaces every one: the unkinder reading,
        since the reference's example response types the default names read-only, which a PUT would keep."""
        read_only = _READ_ONLY_LABELS if defaults else ()
        kinds = dict.fromkeys(read_only, "read-only") | {name: "custom" for name in custom if name not in read_only}
        return [
            {"id": self._label_ids.setdefault(name, len(self._label_ids) + 1), "name": name, "type": kind}
            for name, kind in kinds.items()
        ]

    def set_labels(self, scope: str, runner_id: int, custom: Sequence[str]) -> JsonObject | None:
        """Replace a runner's custom labels; None if the scope has no such runner."""
        with self._lock:
            runner = self._runners.get(runner_id)
            if runner is None or runner.scope != scope:
                return None
            runner.labels = self._labels(custom, defaults=runner.jit_secret is None)
            return runner.as_json()

    def mark_offline(self, runner_id: int) -> None:
        """The process stopped, its session ended: GitHub keeps the registration, and a job it ran is lost."""
        with self._lock:
            runner = self._runners.get(runner_id)
            if runner is not None:
                self._lose_job(runner, "its runner stopped while it ran the job")
                runner.status, runner.busy, runner.session, runner.lock_until = "offline", False, None, 0.0

    def start_job(
        self,
        runner_name: str,
        duration_seconds: float | None,
        scope: str | None,
    ) -> None:
        """A job straight to the named runner, queued and started at once. ``duration_seconds`` None: it runs
        until `finish_job`. None goes to a runner of a version GitHub sends no jobs, even before its run.sh
        exits: GitHub stops offering jobs to a runner 30 days behind a newer release (community discussion
        #194762, summarized in ../shared/reference/runner-versions.md), whether or not the runner has noticed."""
        with self._lock:
            named = [r for r in self._runners.values() if r.name == runner_name and scope in (None, r.scope)]
            for each in named:
                self._settle(each)
            # Only a listener takes a job: a stale session is listed online, but nothing there asks for work.
            runner = next(
                (r for r in named if r.session == "live" and not r.busy and not self._refuses_jobs(r.version)), None
            )
            if runner is None:
                raise LookupError(
                    f"no online idle runner named {runner_name!r} that GitHub sends jobs to in {scope or 'any scope'}"
                )
            # A job belongs to a repository: for a runner of an organization or enterprise, one named "ci" of it.
            job_scope = runner.scope if runner.scope.startswith("repos/") else f"repos/{runner.scope.split('/')[1]}/ci"
            custom = tuple(label["name"] for label in runner.labels if label["type"] == "custom")
            (job,) = self.jobs.add_run(job_scope, custom, duration_seconds, 1, time.monotonic())
            job.scale_set_id = runner.scale_set_id
            start = self._begin(job, runner)
        self._run([start])

    def queue(self, scope: str, runs_on: Sequence[str], duration: float | None, count: int) -> list[Job]:
        """A workflow run of ``count`` jobs queued in a repository (``repos/OWNER/REPO``); each goes to an idle
        runner that may take it, now or when one comes, in queue order."""
        scopes_for(scope)
        if count < 1:
            raise ValueError(f"count must be at least 1, not {count}")
        with self._lock:
            jobs = self.jobs.add_run(scope, runs_on, duration, count, time.monotonic())
            for job in jobs:
                self.job_event("JobQueued", job)
            starts = self._dispatch()
        self._run(starts)
        return jobs

    def dispatch(self) -> None:
        """Hand queued jobs to the runners that may take them now (after a scale set acquired some)."""
        with self._lock:
            starts = self._dispatch()
        self._run(starts)

    def _dispatch(self) -> list[_Start]:
        """The lock is held. Each queued job, oldest first, to an idle online runner that may take it: one of its
        scale set's once that set has acquired it, else one with all its labels. A job waiting longer than
        GitHub's limit fails."""
        now = time.monotonic()
        starts = []
        for job in self.jobs.queued():
            if now - job.queued_at >= self._queue_limit:
                job.finish(now, conclusion="failure", why=FAILED_IN_QUEUE)
                self.job_event("JobCompleted", job)
                continue
            if job.scale_set_id is not None and job.acquired_at is None:
                continue
            runner = self._idle_runner_for(job)
            if runner is not None:
                starts.append(self._begin(job, runner))
        return starts

    def _idle_runner_for(self, job: Job) -> _Runner | None:
        """The lock is held. The oldest registration that may take the job now (GitHub documents no order)."""
        scopes = scopes_for(job.scope)
        for runner in self._runners.values():
            if runner.scope not in scopes or runner.scale_set_id != job.scale_set_id:
                continue
            self._settle(runner)
            if runner.session != "live" or runner.busy or self._refuses_jobs(runner.version):
                continue
            if job.scale_set_id is not None or takes(job.runs_on, [label["name"] for label in runner.labels]):
                return runner
        return None

    def _begin(self, job: Job, runner: _Runner) -> _Start:
        """The lock is held. The runner takes the job."""
        runner.busy, runner.job = True, job
        job.start(runner.id, runner.name, runner.runner_group_id, time.monotonic())
        if job.scale_set_id is not None:
            self.job_event("JobStarted", job)
        return _Start(runner.id, job.id, runner.listener, None if runner.runs_own_jobs else job.duration)

    def _run(self, starts: Sequence[_Start]) -> None:
        """Tell each runner of its job, then schedule the job's end: so that job_finished cannot overtake
        job_started."""
        _notify(start.listener.job_started for start in starts)
        timed = [(start.ends_in, start.runner_id, start.job_id) for start in starts if start.ends_in is not None]
        if not timed:
            return
        with self._lock:
            for ends_in, runner_id, job_id in timed:
                heapq.heappush(self._job_ends, (time.monotonic() + ends_in, runner_id, job_id))
            if self._clock_thread is None:
                self._clock_thread = threading.Thread(target=self._end_jobs, name="github-double-jobs", daemon=True)
                self._clock_thread.start()
            self._job_clock.notify()

    def _end_jobs(self) -> None:
        """One thread ends every job, so hundreds of busy runners do not cost a thread each."""
        while True:
            with self._lock:
                while not self._closed and not (self._job_ends and self._job_ends[0][0] <= time.monotonic()):
                    self._job_clock.wait(self._job_ends[0][0] - time.monotonic() if self._job_ends else None)
                if self._closed:
                    return
                _, runner_id, job_id = heapq.heappop(self._job_ends)
                callbacks = self._end_job(runner_id, job_id=job_id)
                starts = self._dispatch()
            _notify(callbacks)
            self._run(starts)

    def lose_assignment(self, runner_name: str, scope: str | None) -> int:
        """A job is assigned to the named idle ephemeral runner, which consumes its registration, and is gone
        (cancelled, or acquired by another) before the runner acquires it: acquirejob answers 404 or 409, and
        the listener skips the message and polls on (Runner.cs:735-745), never told that its registration is
        gone (actions/runner#4617): a pod that runs and takes no job. Returns the registration's id; LookupError
        if no such runner listens."""
        with self._lock:
            named = [r for r in self._runners.values() if r.name == runner_name and scope in (None, r.scope)]
            runner = next((r for r in named if r.ephemeral and r.session == "live" and not r.busy), None)
            if runner is None:
                raise LookupError(f"no online idle ephemeral runner named {runner_name!r} in {scope or 'any scope'}")
            del self._runners[runner.id]
            return runner.id

    def finish_job(self, runner_name: str, scope: str | None) -> None:
        """The job that the named runner is running ends now; LookupError if none of that name is busy."""
        with self._lock:
            busy = [
                r.id for r in self._runners.values() if r.name == runner_name and r.busy and scope in (None, r.scope)
            ]
            if not busy:
                raise LookupError(f"no runner named {runner_name!r} is running a job in {scope or 'any scope'}")
            callbacks = [callback for runner_id in busy for callback in self._end_job(runner_id)]
            starts = self._dispatch()
        _notify(callbacks)
        self._run(starts)

    def complete_job(self, runner_id: int, conclusion: str | None = None) -> bool:
        """A runner process elsewhere reports its job done (runner_service.py); False if it ran none."""
        with self._lock:
            runner = self._runners.get(runner_id)
            if runner is None or runner.job is None:
                return False
            callbacks = self._end_job(runner_id, conclusion)
            starts = self._dispatch()
        _notify(callbacks)
        self._run(starts)
        return bool(callbacks)

    def connect_remote(self, runner_id: int, secret: str, listener: RunnerListener, version: str | None) -> str | None:
        """A runner process elsewhere connects with a JIT config (runner_service.py): it reports its jobs' ends
        and renews their locks itself. The refusal, in the runner's words, or None."""
        with self._lock:
            runner = self._runners.get(runner_id)
            scope = runner.scope if runner is not None else ""
        try:
            self.connect_jit(scope, runner_id, secret, listener, version, runs_own_jobs=True)
        except RegistrationRefused as refused:
            return str(refused)
        return None

    def note_heard(self, runner_id: int) -> None:
        """The lock is held. A runner process elsewhere polled for messages or renewed its job's lock: one taken
        for dead since (not heard of for a while) is alive after all, unless GitHub has abandoned its job."""
        runner = self._runners.get(runner_id)
        if runner is None:
            return
        self._settle(runner)
        runner.heard_at = time.monotonic()
        if runner.runs_own_jobs and runner.session == "stale":
            runner.session, runner.status, runner.lock_until = "live", "online", 0.0

    def renew_job_lock(self, runner_id: int) -> str | None:
        """A runner process renews the lock of the job it runs: the time it is locked until (RFC 3339), or None
        if it runs none."""
        with self._lock:
            runner = self._runners.get(runner_id)
            self.note_heard(runner_id)
            if runner is None or runner.job is None:
                return None
            until = datetime.now(UTC) + timedelta(seconds=self._job_abandon)
            return until.isoformat(timespec="seconds")

    def job_of(self, runner_id: int) -> Job | None:
        with self._lock:
            runner = self._runners.get(runner_id)
            return None if runner is None else runner.job

    def _end_job(
        self, runner_id: int, conclusion: str | None = None, *, job_id: int | None = None
    ) -> list[Callable[[], None]]:
        """The lock is held. The job the runner runs ends (``job_id``: only if it is still that one); the
        listeners to tell, outside the lock, none if nothing ended."""
        runner = self._runners.get(runner_id)
        if runner is None or not runner.busy or runner.lock_until:
            return []  # the runner stopped, died or was replaced meanwhile, and its job went with it
        if job_id is not None and (runner.job is None or runner.job.id != job_id):
            return []  # that job was lost meanwhile, and the runner runs another
        runner.busy = False
        job, runner.job = runner.job, None
        if job is not None:
            cancelled = conclusion == "cancelled"  # by its runner's stop: lost
            why = "its runner was stopped while it ran the job" if cancelled else None
            job.finish(time.monotonic(), conclusion=conclusion or "success", lost=cancelled, why=why)
            if job.scale_set_id is not None:
                self.job_event("JobCompleted", job)
        if not runner.ephemeral:
            return [runner.listener.job_finished]
        del self._runners[runner_id]
        return [runner.listener.job_finished, runner.listener.removed]

    def remove(self, scope: str, runner_id: int) -> tuple[Literal["removed", "busy", "unknown"], str]:
        """RemoveRunner, atomic with its busy check: the one safe way for a client to retire a runner."""
        with self._lock:
            runner = self._runners.get(runner_id)
            if runner is None or runner.scope != scope:
                return "unknown", ""
            self._settle(runner)
            if runner.busy:
                return "busy", runner.name
            del self._runners[runner_id]
        _notify([runner.listener.removed])
        return "removed", runner.name

    def get(self, scope: str, runner_id: int) -> JsonObject | None:
        with self._lock:
            runner = self._runners.get(runner_id)
            if runner is None or runner.scope != scope:
                return None
            self._settle(runner)
            return runner.as_json()

    def select(self, scope: str | None, name: str | None = None, *, with_scope: bool = False) -> list[JsonObject]:
        """Runners in the listing order (id order by default, as GitHub appears to page them); without a scope,
        of every scope."""
        with self._lock:
            runners = [r for r in self._runners.values() if scope in (None, r.scope) and name in (None, r.name)]
            for runner in runners:
                self._settle(runner)
            if self._listing_order == "name":
                runners.sort(key=lambda r: (r.name, r.id))
            elif self._listing_order == "newest_first":
                runners.reverse()
            return [r.as_json() | ({"scope": r.scope} if with_scope else {}) for r in runners]

    def restore(self, scope: str, tokens: dict[str, float], runners: Sequence[dict[str, Any]]) -> None:
        """GitHubDouble.restore, for one scope."""
        with self._lock:
            for token, seconds in tokens.items():
                self._tokens[token] = (scope, time.monotonic() + seconds)
            for runner in sorted(runners, key=lambda r: int(r["id"])):
                runner_id, name = int(runner["id"]), str(runner["name"])
                if runner_id < self._next_runner_id:
                    raise ValueError(f"runner id {runner_id} is not above the ids given ({self._next_runner_id})")
                if any(r.scope == scope and r.name == name for r in self._runners.values()):
                    raise ValueError(f"a runner named {name!r} exists in {scope}")
                labels = [
                    {"id": self._label_ids.setdefault(label["name"], len(self._label_ids) + 1)}
                    | {"name": label["name"], "type": label["type"]}
                    for label in runner["labels"]
                ]
                online, jit_secret = runner.get("online", True), runner.get("jit_secret")
                self._runners[runner_id] = _Runner(
                    runner_id,
                    name,
                    scope,
                    bool(runner["ephemeral"]),
                    labels,
                    _Unattached(),
                    status="online" if online else "offline",
                    session="live" if online else None,
                    jit_secret=jit_secret,
                    jit_used=bool(online and jit_secret),
                    runner_group_id=int(runner.get("runner_group_id", _DEFAULT_RUNNER_GROUP_ID)),
                )
                self._next_runner_id = runner_id + 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._job_clock.notify_all()


# --- Traffic policy: the request log, injected faults and delays, rate limits ------------------------------


@dataclass
class _Reply:
    status: int
    body: JsonObject | list[JsonObject] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang_up: bool = False  # no answer: the connection is closed instead


# Injected "statuses" that are no answer: the connection closes before the request is served (a reset), or after
# it took effect (a lost answer, as when a load balancer drops it). The call log records them as status 0.
RESET = -1
LOST_ANSWER = 0
_HANG_UP = _Reply(0, hang_up=True)


def _error(status: int, message: str, documentation_url: str = _DOCS, errors: Sequence[str] = ()) -> _Reply:
    """GitHub's error body; a validation failure (422) also lists what was wrong."""
    body = {"message": message, "documentation_url": documentation_url, "status": str(status)}
    return _Reply(status, body | ({"errors": list(errors)} if errors else {}))


def _jit_request_errors(payload: object) -> list[str]:
    """What is wrong with a generate-jitconfig body, by GitHub's schema for it; empty if nothing is."""
    if not isinstance(payload, dict):
        return ["The request body must be a JSON object."]
    errors = [f'"{key}" wasn\'t supplied.' for key in ("name", "runner_group_id", "labels") if key not in payload]
    name, group, labels = payload.get("name", "-"), payload.get("runner_group_id", 1), payload.get("labels", ["-"])
    if not isinstance(name, str) or not name.strip():
        errors.append('"name" must be a non-empty string.')
    if not isinstance(group, int) or isinstance(group, bool):
        errors.append('"runner_group_id" must be an integer.')
    if not (
        isinstance(labels, list)
        and 1 <= len(labels) <= _MAX_JIT_LABELS
        and all(isinstance(label, str) and label.strip() for label in labels)
    ):
        errors.append(f'"labels" must be 1 to {_MAX_JIT_LABELS} non-empty strings.')
    if not isinstance(payload.get("work_folder", "_work"), str):
        errors.append('"work_folder" must be a string.')
    return errors


@dataclass
class _Injection:
    """A fault (``status``) or a delay (``seconds``) for the next ``remaining`` matching requests."""

    method: str | None
    path_pattern: re.Pattern[str]
    remaining: int
    status: int = 0
    seconds: float = 0.0
    retry_after: int | None = None
    rate_limit_reset_in: int | None = None


def _take(injections: list[_Injection], method: str, path: str) -> _Injection | None:
    """Use up one application of the first injection that matches the request."""
    for injection in injections:
        if injection.method in (None, method) and injection.path_pattern.search(path):
            injection.remaining -= 1
            if injection.remaining == 0:
                injections.remove(injection)
            return injection
    return None


@dataclass
class _RateBudget:
    """GitHub's primary rate limit: a fixed window (an hour, unless scaled down) per credential, one unit per
    request."""

    limit: int
    window: float = 3600.0  # seconds
    used: int = 0
    reset_at: float = 0.0  # epoch seconds at which the window ends

    def _roll_window(self) -> None:
        if time.time() >= self.reset_at:
            self.used, self.reset_at = 0, time.time() + self.window

    def try_spend(self) -> bool:
        self._roll_window()
        if self.used >= self.limit:
            return False
        self.used += 1
        return True

    def as_json(self) -> JsonObject:
        self._roll_window()
        return {
            "limit": self.limit,
            "remaining": self.limit - self.used,
            "reset": math.ceil(self.reset_at),  # whole seconds, as GitHub sends; never before the window ends
            "used": self.used,
        }

    def headers(self) -> dict[str, str]:
        return {f"x-ratelimit-{key}": str(value) for key, value in self.as_json().items()} | {
            "x-ratelimit-resource": "core"
        }


@dataclass(frozen=True)
class _SecondaryLimits:
    """GitHub's secondary limits per credential, scalable so that a benchmark can shrink the minute (and the
    hour, alike: content-creating requests are limited per minute and per hour)."""

    max_concurrent: int
    points: int  # per endpoint and window
    content_creating: int  # per window
    window: float  # seconds
    content_creating_hourly: int = 500  # per hour
    hour: float = 3600.0  # seconds: the primary limit's hour, scaled alike


@dataclass
class _WindowBudget:
    """A sliding-window budget: a secondary limit counts what was spent in the last window, not per hour."""

    limit: int
    window: float
    spent: deque[tuple[float, int]] = field(default_factory=deque)  # (monotonic time, cost), oldest first

    def wait(self, cost: int, now: float) -> float:
        """Seconds until ``cost`` more fits: 0 if it fits now, a whole window if it never can."""
        while self.spent and self.spent[0][0] <= now - self.window:
            self.spent.popleft()
        excess = sum(spent_cost for _, spent_cost in self.spent) + cost - self.limit
        if excess <= 0:
            return 0.0
        for spent_at, spent_cost in self.spent:
            excess -= spent_cost
            if excess <= 0:
                return spent_at + self.window - now
        return self.window


def _endpoint(method: str, path: str) -> str:
    """The (method, route template) whose points a request spends: all RemoveRunner calls share one budget."""
    match = _RUNNERS_ROUTE.fullmatch(path)
    if match is None:
        return f"{method} {path}"
    item = match["item"]
    suffix = "" if item is None else "/{runner_id}" if item.isdigit() else f"/{item}"
    return f"{method} /{_SCOPE_TEMPLATE[match['scope'].split('/')[0]]}/actions/runners{suffix}"


class _SecondaryBudget:
    """One credential's secondary budgets: requests in flight, points per endpoint, content-creating requests.
    The caller holds the lock."""

    def __init__(self, limits: _SecondaryLimits) -> None:
        self.limits = limits
        self.in_flight = 0
        self._points: dict[str, _WindowBudget] = {}
        self._content_creating = _WindowBudget(limits.content_creating, limits.window)
        self._content_creating_hourly = _WindowBudget(limits.content_creating_hourly, limits.hour)

    def _charges(self, method: str, path: str) -> list[tuple[_WindowBudget, int]]:
        endpoint = _endpoint(method, path)
        if endpoint not in self._points:
            self._points[endpoint] = _WindowBudget(self.limits.points, self.limits.window)
        charges = [(self._points[endpoint], _WRITE_POINTS if method in _WRITE_METHODS else 1)]
        if method in _CONTENT_CREATING_METHODS:
            charges += [(self._content_creating, 1), (self._content_creating_hourly, 1)]
        return charges

    def wait(self, method: str, path: str, now: float) -> float:
        """Seconds until every budget the request spends can afford it; 0 if they can now."""
        return max(budget.wait(cost, now) for budget, cost in self._charges(method, path))

    def spend(self, method: str, path: str, now: float) -> None:
        for budget, cost in self._charges(method, path):
            budget.spent.append((now, cost))


def _secondary_limit_body(request_id: str) -> JsonObject:
    return {
        "message": _SECONDARY_LIMIT_MESSAGE.format(request_id=request_id),
        "documentation_url": f"{_RATE_DOCS}#about-secondary-rate-limits",
    }


def _credential(authorization: str | None) -> str:
    """The token of ``Authorization: Bearer T`` or ``Authorization: token T``, the forms GitHub accepts."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() in ("bearer", "token") else ""


class _TrafficPolicy:
    """What a REST request meets before the runners: the log, injected delays and faults, rate limits."""

    def __init__(
        self,
        lock: threading.Lock,
        credentials: Iterable[str],
        rate_limit_per_hour: int,
        rate_limit_window: float,
        secondary_limits: _SecondaryLimits,
    ) -> None:
        self._lock = lock
        self._user_ids = {credential: user_id for user_id, credential in enumerate(credentials, start=1)}
        self._budgets = {
            credential: _RateBudget(rate_limit_per_hour, rate_limit_window) for credential in self._user_ids
        }
        self._secondary = {credential: _SecondaryBudget(secondary_limits) for credential in self._user_ids}
        self._secondary_limit_hits = 0
        self._rate_limit_per_hour, self._rate_limit_window = rate_limit_per_hour, rate_limit_window
        self._secondary_limits = secondary_limits
        self._rate_limit_refusals = 0  # primary and secondary; injected faults are not counted
        self._anonymous_budget = _RateBudget(_ANONYMOUS_LIMIT_PER_HOUR, rate_limit_window)
        self._faults: list[_Injection] = []
        self._delays: list[_Injection] = []
        self._hang_ups: list[_Injection] = []
        self._calls: list[JsonObject] = []

    def admit(self, principal: str) -> None:
        """A credential that GitHub made meanwhile (an App installation's): budgets of its own from now on."""
        with self._lock:
            if principal not in self._user_ids:
                self._user_ids[principal] = len(self._user_ids) + 1
                self._budgets[principal] = _RateBudget(self._rate_limit_per_hour, self._rate_limit_window)
                self._secondary[principal] = _SecondaryBudget(self._secondary_limits)

    def log(self, method: str, path: str, query: str, headers: Message) -> JsonObject:
        """Record a request on arrival; its status stays None until it is answered."""
        entry = {
            "method": method,
            "path": path,
            "query": dict(parse_qsl(query, keep_blank_values=True)),
            "status": None,
            "at": time.monotonic(),
            "headers": dict(headers.items()),
        }
        with self._lock:
            self._calls.append(entry)
        return entry

    def record_status(self, entry: JsonObject, status: int) -> None:
        with self._lock:
            entry["status"] = status

    def calls(self, method: str | None, path_regex: str | None) -> list[JsonObject]:
        pattern = re.compile(path_regex or "")
        with self._lock:
            return [
                {**entry, "headers": dict(entry["headers"])}
                for entry in self._calls
                if method in (None, entry["method"]) and pattern.search(entry["path"])
            ]

    def inject(self, injection: _Injection) -> None:
        if injection.remaining < 1:
            raise ValueError(f"count must be at least 1, not {injection.remaining}")
        with self._lock:
            if injection.seconds:
                self._delays.append(injection)
            else:
                (self._hang_ups if injection.status in (RESET, LOST_ANSWER) else self._faults).append(injection)

    def clear_injections(self) -> int:
        with self._lock:
            unused = sum(i.remaining for i in (*self._faults, *self._delays, *self._hang_ups))
            self._faults.clear()
            self._delays.clear()
            self._hang_ups.clear()
        return unused

    def take_fault(self, method: str, path: str) -> _Injection | None:
        """The injected fault the request meets, if any (for the paths no REST budget gates)."""
        with self._lock:
            return _take(self._faults, method, path)

    def hang_up_for(self, method: str, path: str) -> int | None:
        """RESET or LOST_ANSWER if the request's connection is to close without an answer."""
        with self._lock:
            hang_up = _take(self._hang_ups, method, path)
        return hang_up.status if hang_up else None

    def delay_for(self, method: str, path: str) -> float:
        with self._lock:
            delay = _take(self._delays, method, path)
        return delay.seconds if delay else 0.0

    def _limited(self, path: str, credential: str) -> _SecondaryBudget | None:
        """The secondary budget a request counts against; None for GET /rate_limit and unknown credentials."""
        return None if path == "/rate_limit" else self._secondary.get(credential)

    def enter(self, path: str, credential: str, request_id: str) -> _Reply | None:
        """Count the request among its credential's concurrent ones, or refuse it if there are too many."""
        with self._lock:
            secondary = self._limited(path, credential)
            if secondary is None:
                return None
            if secondary.in_flight >= secondary.limits.max_concurrent:
                reply = self._secondary_limit_reply(request_id, wait=0.0)
                reply.headers |= self._budgets[credential].headers()
                return reply
            secondary.in_flight += 1
            return None

    def leave(self, path: str, credential: str) -> None:
        """The request that `enter` let in has been answered."""
        with self._lock:
            secondary = self._limited(path, credential)
            if secondary is not None:
                secondary.in_flight -= 1

    def gate(self, method: str, path: str, credential: str, request_id: str) -> tuple[_Reply | None, dict[str, str]]:
        """Refuse the request (401, injected fault, spent budget) or let it through, and give the rate-limit
        headers its answer carries. Refusals are decided before spending: a refused request costs nothing."""
        with self._lock:
            budget = self._budgets.get(credential)
            if budget is None and not credential and _RELEASES_ROUTE.fullmatch(path):
                if self._anonymous_budget.try_spend():
                    return None, self._anonymous_budget.headers()
                self._rate_limit_refusals += 1
                return _error(403, _ANONYMOUS_LIMIT_MESSAGE, _RATE_DOCS), self._anonymous_budget.headers()
            if budget is None:
                self._anonymous_budget.try_spend()
                return _error(401, "Bad credentials"), self._anonymous_budget.headers()
            fault = _take(self._faults, method, path)
            if fault is not None:
                return self._fault_reply(fault, credential, budget.limit, request_id), budget.headers()
            secondary = self._limited(path, credential)
            if secondary is None:
                return None, budget.headers()
            now = time.monotonic()
            wait = secondary.wait(method, path, now)
            if wait > 0:
                return self._secondary_limit_reply(request_id, wait), budget.headers()
            if not budget.try_spend():
                self._rate_limit_refusals += 1
                return self._primary_limit_reply(403, credential), budget.headers()
            secondary.spend(method, path, now)
            return None, budget.headers()

    def _secondary_limit_reply(self, request_id: str, wait: float) -> _Reply:
        """A 403, as GitHub mostly answers, telling when to retry in whole seconds (at least 1). Lock held."""
        self._secondary_limit_hits += 1
        self._rate_limit_refusals += 1
        return _Reply(403, _secondary_limit_body(request_id), {"retry-after": str(max(1, math.ceil(wait)))})

    def secondary_limit_hits(self) -> int:
        with self._lock:
            return self._secondary_limit_hits

    def rate_limit_refusals(self) -> int:
        with self._lock:
            return self._rate_limit_refusals

    def _fault_reply(self, fault: _Injection, credential: str, limit: int, request_id: str) -> _Reply:
        if fault.status >= 500:
            return _Reply(fault.status, {"message": "Server Error"})
        if fault.status not in (403, 429):
            return _error(fault.status, HTTPStatus(fault.status).phrase)
        if fault.rate_limit_reset_in is not None:
            reply = self._primary_limit_reply(fault.status, credential)
            reply.headers["x-ratelimit-used"] = str(limit)
            reply.headers["x-ratelimit-reset"] = str(int(time.time()) + fault.rate_limit_reset_in)
            return reply
        retry_after = {} if fault.retry_after is None else {"retry-after": str(fault.retry_after)}
        return _Reply(fault.status, _secondary_limit_body(request_id), retry_after)

    def _primary_limit_reply(self, status: int, credential: str) -> _Reply:
        body = {
            "message": f"API rate limit exceeded for user ID {self._user_ids[credential]}.",
            "documentation_url": f"{_RATE_DOCS}#about-the-primary-rate-limit",
        }
        return _Reply(status, body, {"x-ratelimit-remaining": "0"})

    def rate_limit_overview(self, credential: str) -> JsonObject:
        """GET /rate_limit, which costs nothing, as on GitHub; search (30 a minute) is never used here."""
        with self._lock:
            core = self._budgets[credential].as_json()
        search = {"limit": 30, "remaining": 30, "reset": int(time.time()) + 60, "used": 0}
        return {"resources": {"core": core, "search": search}, "rate": core}


# --- HTTP: server, handler and routing ---------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog of 5 refuses connections when ~100 clients arrive at once

    def __init__(self, double: GitHubDouble) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.double = double
        self.stopped = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a provider process killed mid-request) is no server error worth a traceback."""
        if not isinstance(sys.exc_info()[1], OSError):  # reset, broken pipe, TLS cut short
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients pool their connections to GitHub
    server_version, sys_version = "GitHub.com", ""
    server: _Server

    def do_GET(self) -> None:
        if self.server.stopped:
            # A client's pooled connection outlived the server: hang up, as a dead server would.
            self.close_connection = True
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply = self.server.double._answer(self.command, self.path, self.headers, body)
        if reply.hang_up:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.body is None:  # a 204 must carry neither body nor Content-Length; a 202 (an empty poll) has none
            if reply.status != HTTPStatus.NO_CONTENT:
                self.send_header("Content-Length", "0")
            self.end_headers()
            return
        payload = json.dumps(reply.body).encode()
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: `GitHubDouble.calls` is the record."""


def _positive_int(raw: str | None, default: int) -> int:
    value = int(raw) if raw and raw.isdigit() else 0
    return value if value > 0 else default


def _request_id() -> str:
    """Shaped like GitHub's x-github-request-id, which its secondary-limit message asks users to quote."""
    return ":".join(secrets.token_hex(size).upper() for size in (2, 3, 3, 3, 4))


class GitHubDouble:
    """GitHub's REST API for self-hosted runners on 127.0.0.1, with the runner side reachable in-process."""

    def __init__(
        self,
        *,
        credentials: Iterable[str] = ("ghp_simulator",),
        read_only_credentials: Iterable[str] = (),
        token_lifetime: float = 3600.0,
        rate_limit_per_hour: int = 5000,
        max_concurrent_requests: int = 100,
        points_per_minute: int = 900,
        content_creating_per_minute: int = 80,
        window_seconds: float = 60.0,
        rate_limit_window_seconds: float = 3600.0,
        content_creating_per_hour: int = 500,
        listing_order: ListingOrder = "id",
        session_expiry_seconds: float = SESSION_EXPIRY_SECONDS,
        job_abandon_seconds: float = JOB_ABANDON_SECONDS,
        runner_releases: Iterable[tuple[str, str]] | None = None,
        queue_limit_seconds: float = QUEUE_LIMIT_SECONDS,
    ) -> None:
        """Budgets are per credential. The limits default to GitHub's documented ones; "per minute" means per
        ``window_seconds`` and "per hour" per ``rate_limit_window_seconds``, so a benchmark can scale time down
        together with the limits. ``read_only_credentials`` are fine-grained tokens granted the runners' read
        permission only (organization "Self-hosted runners: read", repository "Administration: read"): GitHub
        answers their writes 403 "Resource not accessible by personal access token". ``listing_order``: the order
        runner listings page in (see ListingOrder). ``session_expiry_seconds`` and ``job_abandon_seconds``: what a
        runner that died leaves behind lasts that long (see SESSION_EXPIRY_SECONDS). ``runner_releases``: the
        actions/runner releases, (version, published_at) pairs (None: runner_releases.DEFAULT_RELEASE); `releases`
        publishes more while the double runs, and GitHub's version policy follows them (runner_releases.py).
        ``queue_limit_seconds``: how long a queued job waits for a runner before it fails (GitHub's 24 hours)."""
        read_only = tuple(read_only_credentials)
        self._read_only = frozenset(read_only)
        credentials = (*credentials, *read_only)
        lock = self._lock = threading.Lock()  # the one lock, shared by the registry and the traffic policy
        self._token_lifetime = token_lifetime
        self.releases = RunnerReleases(runner_releases)
        self._registry = _RunnerRegistry(
            lock,
            token_lifetime,
            listing_order,
            session_expiry=session_expiry_seconds,
            job_abandon=job_abandon_seconds,
            refuses_jobs=self.refuses_jobs,
            queue_limit=queue_limit_seconds,
        )
        secondary_limits = _SecondaryLimits(
            max_concurrent_requests,
            points_per_minute,
            content_creating_per_minute,
            window_seconds,
            content_creating_per_hour,
            rate_limit_window_seconds,
        )
        self._traffic = _TrafficPolicy(
            lock, credentials, rate_limit_per_hour, rate_limit_window_seconds, secondary_limits
        )
        self.apps = GitHubApps(token_lifetime=3600.0)  # GitHub Apps: add_app, and their installation tokens
        self.service = ActionsService(lock, self._registry, self._remember)  # runner scale sets (actions_service.py)
        self.runner_connections = RunnerConnections(lock, self._registry)  # runner processes (runner_service.py)
        self._server: _Server | None = None
        self._issued: list[str] = []
        self._issued_lock = threading.Lock()
        self.url = ""
        self.api_url = ""

    def start(self) -> GitHubDouble:
        """Listen on a free loopback port; a double starts once."""
        if self.url:
            raise RuntimeError("GitHubDouble already started")
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.api_url = self.url + API_PREFIX
        self.apps.api_url = self.api_url
        self.service.base_url = self.url + SERVICE_PREFIX
        serve = functools.partial(self._server.serve_forever, poll_interval=0.05)  # so that stop() is quick
        threading.Thread(target=serve, name="github-double-http", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and ending jobs; calling it again does nothing."""
        server, self._server = self._server, None
        if server is not None:
            server.stopped = True
            server.shutdown()
            server.server_close()
            self._registry.close()
            self.service.close()
            self.runner_connections.close()

    # --- the runner side, in-process ---

    def register_runner(
        self,
        *,
        github_url: str,
        token: str,
        name: str,
        labels: Sequence[str],
        ephemeral: bool,
        listener: RunnerListener | None = None,
        replace: bool = True,
        runner_group: str | None = None,
        session: bool = True,
        version: str | None = None,
    ) -> int:
        """``config.sh --unattended [--replace]``: with ``replace``, a runner of the same name in the scope is
        replaced (and a job it runs is lost); without, a taken name is refused. Without a ``listener`` the runner
        runs elsewhere: it is listed online, and nothing here hears of it. A simulated runner registers without
        a ``session`` and opens one as its run.sh does (`open_session`). A ``version`` below the minimum GitHub
        lets register is refused (runner_releases.py); None: a runner whose version the caller does not know."""
        scope = self._scope_of(github_url)
        self._check_version(version)
        listener = listener or _Unattached()
        return self._registry.register(
            scope, token, name, labels, ephemeral, listener, replace, runner_group, session=session, version=version
        )

    def open_session(self, github_url: str, runner_id: int, listener: RunnerListener) -> SessionOutcome:
        """The listener's CreateSession for a registration config.sh made."""
        return self._registry.open_session(self._scope_of(github_url), runner_id, listener)

    def end_session(self, runner_id: int, *, gracefully: bool) -> None:
        """The runner's process ended: told to stop (``gracefully``: offline at once), or killed (the session
        stays until GitHub expires it, and a job it ran keeps it busy until GitHub abandons that)."""
        self._registry.end_session(runner_id, gracefully=gracefully)

    def expire_token(self, token: str) -> None:
        """A registration token's hour is up: config.sh fails with it from now on, as with any expired one."""
        self._registry.expire_token(token)

    def add_runner_group(self, scope: str, name: str) -> int:
        """A runner group of an organization ("orgs/ORG") or enterprise ("enterprises/ENT"): its id."""
        return self._registry.add_runner_group(scope, name)

    def connect_jit_runner(
        self,
        *,
        github_url: str | None,
        encoded_jit_config: str,
        listener: RunnerListener,
        version: str | None = None,
    ) -> int:
        """``./run.sh --jitconfig``: the registration that generate-jitconfig (REST, or a scale set's) made comes
        online, for one job. Refused if that registration is gone, the config was used before, or it is for
        another server or scope (``github_url`` None: the config's own, as a runner given only the config), or if
        the runner's ``version`` is below the minimum GitHub lets connect."""
        self._check_version(version)
        try:
            config = jit_config.decode(encoded_jit_config)
        except ValueError as malformed:
            raise RegistrationRefused(str(malformed)) from None
        scope = config["scope"] if github_url is None else self._scope_of(github_url)
        if (config["server"], config["scope"]) != (self.url, scope):
            raise RegistrationRefused(
                f"JIT config was issued by {config['server']} for {config['scope']}, not by {self.url} for {scope}"
            )
        self._registry.connect_jit(scope, config["runner_id"], config["secret"], listener, version)
        return config["runner_id"]

    def _check_version(self, version: str | None) -> None:
        refusal = None if version is None else self.releases.registration_refusal(parse_version(version))
        if refusal is not None:
            raise RegistrationRefused(refusal)

    def refuses_jobs(self, version: str | None) -> bool:
        """Whether GitHub sends no more jobs to a runner of ``version`` (None: a version nobody knows, let be)."""
        return version is not None and self.releases.refuses_jobs(parse_version(version))

    def _scope_of(self, github_url: str) -> str:
        """The REST scope that a config.sh --url names; a URL of another server can never register here."""
        if not self.url or not github_url.startswith(self.url + "/"):
            raise RegistrationRefused(f"{github_url} is not served by this double ({self.url or 'not started'})")
        segments = github_url.removeprefix(self.url + "/").strip("/").split("/")
        if len(segments) == 2:
            return f"enterprises/{segments[1]}" if segments[0] == "enterprises" else "repos/" + "/".join(segments)
        if len(segments) == 1 and segments[0]:
            return f"orgs/{segments[0]}"
        raise RegistrationRefused(f"{github_url} names no repository, organization or enterprise")

    def runner_offline(self, runner_id: int) -> None:
        """The runner process stopped: status "offline", registration kept; unknown ids are ignored."""
        self._registry.mark_offline(runner_id)

    def start_job(self, runner_name: str, duration_seconds: float | None, *, scope: str | None = None) -> None:
        """An online idle runner takes a job for ``duration_seconds`` (None: until `finish_job`); LookupError if
        there is none."""
        self._registry.start_job(runner_name, duration_seconds, scope)

    def queue_jobs(
        self, repository_url: str, runs_on: Sequence[str], duration_seconds: float | None, *, count: int = 1
    ) -> list[JsonObject]:
        """A workflow run of ``count`` jobs with ``runs-on: runs_on`` queued in the repository of
        ``repository_url`` (as config.sh's --url names it); GitHub hands each to an idle runner that has its
        labels, or to the scale set it names, in queue order. Their records (`jobs`)."""
        scope = self._scope_of(repository_url)
        return [job.record() for job in self._registry.queue(scope, runs_on, duration_seconds, count)]

    def jobs(self, status: str | None = None) -> list[JsonObject]:
        """Every job so far (or those of a ``status``: queued, in_progress, completed), oldest first, with its
        times, its runner and whether it was lost."""
        with self._lock:
            return [job.record() for job in self._registry.jobs.all() if status in (None, job.status)]

    def finish_job(self, runner_name: str, *, scope: str | None = None) -> None:
        """End the job the named runner runs now (a held one); LookupError if it runs none."""
        self._registry.finish_job(runner_name, scope)

    def lose_job_assignment(self, runner_name: str, *, scope: str | None = None) -> int:
        """The named idle ephemeral runner loses a job it was assigned, and with it its registration, without
        noticing (see `_RunnerRegistry.lose_assignment`); returns the registration's id."""
        return self._registry.lose_assignment(runner_name, scope)

    # --- inspection and fault injection ---

    def runners(self, scope: str | None = None) -> list[JsonObject]:
        """Registrations (of one scope, if given) as GitHub lists them, plus their "scope"."""
        return self._registry.select(scope, with_scope=True)

    def calls(self, method: str | None = None, path_regex: str | None = None) -> list[JsonObject]:
        """REST requests so far, oldest first; ``path_regex`` is searched in the path without /api/v3."""
        return self._traffic.calls(method and method.upper(), path_regex)

    def issued_credentials(self) -> list[str]:
        """Every registration token, remove token, just-in-time config and installation token handed out so far."""
        with self._issued_lock:
            return [*self._issued, *self.apps.issued]

    def secondary_limit_hits(self) -> int:
        """How many REST requests a secondary limit refused, so a benchmark can show that it stayed within."""
        return self._traffic.secondary_limit_hits()

    def rate_limit_refusals(self) -> int:
        """How many REST requests a primary or secondary rate limit refused (403); injected faults not counted."""
        return self._traffic.rate_limit_refusals()

    def fail_next(
        self,
        status: int,
        *,
        count: int = 1,
        method: str | None = None,
        path_regex: str = ".*",
        retry_after: int | None = None,
        rate_limit_reset_in: int | None = None,
    ) -> None:
        """Answer the next ``count`` matching REST requests with ``status`` instead of serving them."""
        pattern = re.compile(path_regex)
        self._traffic.inject(
            _Injection(
                method and method.upper(),
                pattern,
                count,
                status=status,
                retry_after=retry_after,
                rate_limit_reset_in=rate_limit_reset_in,
            )
        )

    def reset_next(self, *, count: int = 1, method: str | None = None, path_regex: str = ".*") -> None:
        """Close the connection of the next ``count`` matching REST requests before serving them."""
        self._traffic.inject(_Injection(method and method.upper(), re.compile(path_regex), count, status=RESET))

    def lose_next_answer(self, *, count: int = 1, method: str | None = None, path_regex: str = ".*") -> None:
        """Serve the next ``count`` matching REST requests, then close their connection instead of answering."""
        self._traffic.inject(_Injection(method and method.upper(), re.compile(path_regex), count, status=LOST_ANSWER))

    def delay_next(self, seconds: float, *, count: int = 1, method: str | None = None, path_regex: str = ".*") -> None:
        """Hold the next ``count`` matching REST requests for ``seconds``, so a client's timeout can fire."""
        if seconds > 0:
            self._traffic.inject(_Injection(method and method.upper(), re.compile(path_regex), count, seconds=seconds))

    def clear_faults(self) -> int:
        """Forget every fault, delay and hang-up injected and not used yet; how many requests they were for."""
        return self._traffic.clear_injections()

    # --- HTTP routing ---

    def _answer(self, method: str, target: str, headers: Message, body: bytes) -> _Reply:
        url = urlsplit(target)
        if url.path.startswith("/_simulator/"):
            return self._answer_control(method, url.path, body)
        is_api = url.path.startswith(API_PREFIX + "/")
        is_service = url.path.startswith(SERVICE_PREFIX + "/")
        path = url.path.removeprefix(API_PREFIX) if is_api else url.path
        entry = self._traffic.log(method, path, url.query, headers)
        request_id = _request_id()
        hang_up = self._traffic.hang_up_for(method, path) if is_api or is_service else None
        if hang_up == RESET:
            self._traffic.record_status(entry, 0)
            return _HANG_UP
        if is_service:
            reply = self._answer_service(method, path, url.query, headers, body)
        elif is_api:
            reply = self._answer_api(method, path, url.query, headers, body, request_id)
        else:
            reply = _error(404, "Not Found")
        if hang_up == LOST_ANSWER:
            self._traffic.record_status(entry, 0)
            return _HANG_UP
        reply.headers["x-github-request-id"] = request_id
        self._traffic.record_status(entry, reply.status)
        return reply

    def _answer_service(self, method: str, path: str, query: str, headers: Message, body: bytes) -> _Reply:
        """The Actions service (actions_service.py), after the delays and faults injected for its paths; it has
        no REST rate budget of GitHub's (its own limits are not published)."""
        injected = self._injected(method, path)
        if injected is not None:
            return injected
        route = path.removeprefix(SERVICE_PREFIX)
        runner_call = route.removeprefix(f"/{POOL_PATH}/")
        if runner_call != route and runner_call.split("/")[0] in ("sessions", "messages", "jobrequests"):
            status, answer, answer_headers = self.runner_connections.answer(
                method, runner_call, query, headers.get("Authorization"), body
            )
        else:
            status, answer, answer_headers = self.service.answer(
                method, route, query, headers.get("Authorization"), headers, body
            )
        return _Reply(status, answer, answer_headers)

    def _injected(self, method: str, path: str) -> _Reply | None:
        """For a request no REST budget gates (the Actions service's): its injected delay, then its injected fault's
        answer, if one was staged (with Retry-After, if given)."""
        time.sleep(self._traffic.delay_for(method, path))
        fault = self._traffic.take_fault(method, path)
        if fault is None:
            return None
        retry_after = {} if fault.retry_after is None else {"retry-after": str(fault.retry_after)}
        return _Reply(fault.status, {"message": HTTPStatus(fault.status).phrase}, retry_after)

    def _served_scope(self, github_url: str) -> str | None:
        """The scope a config URL names, or None if it is not one this double serves."""
        try:
            return self._scope_of(github_url)
        except RegistrationRefused:
            return None

    def _answer_api(self, method: str, path: str, query: str, headers: Message, body: bytes, request_id: str) -> _Reply:
        """Serve a REST request; it counts as in flight from arrival, through any injected delay. An App's JWT
        reaches only the App endpoints; an installation token counts against its installation's budgets and
        reaches the scopes of its installation's account only."""
        if (method, path) == ("POST", "/actions/runner-registration"):
            injected = self._injected(method, path)
            if injected is not None:
                return injected
            status, answer, _ = self.service.register(headers.get("Authorization"), body, self._served_scope)
            return _Reply(status, answer)
        credential = _credential(headers.get("Authorization"))
        app_answer = self.apps.answer(method, path, credential)
        if app_answer is not None:
            status, body = app_answer
            return _Reply(status, body | ({"status": str(status)} if status >= 400 else {}))
        if credential in self._read_only and method not in ("GET", "HEAD"):
            return _error(403, "Resource not accessible by personal access token", _RUNNER_DOCS)
        grant = self.apps.grant(credential)
        if grant is not None:
            credential = grant.principal
            self._traffic.admit(credential)
            match = _RUNNERS_ROUTE.fullmatch(path) or _GROUPS_ROUTE.fullmatch(path) or _RUNS_ROUTE.fullmatch(path)
            if match is not None and match["scope"].split("/")[1].lower() != grant.account.lower():
                return _error(403, "Resource not accessible by integration", _RUNNER_DOCS)
        too_many = self._traffic.enter(path, credential, request_id)
        if too_many is not None:
            return too_many
        try:
            time.sleep(self._traffic.delay_for(method, path))
            refusal, rate_headers = self._traffic.gate(method, path, credential, request_id)
            reply = refusal or self._route(method, path, query, credential, body)
            reply.headers = rate_headers | reply.headers
            return reply
        finally:
            self._traffic.leave(path, credential)

    def _route(self, method: str, path: str, query: str, credential: str, body: bytes) -> _Reply:
        if (method, path) == ("GET", "/rate_limit"):
            return _Reply(200, self._traffic.rate_limit_overview(credential))
        releases = _RELEASES_ROUTE.fullmatch(path)
        if method == "GET" and releases is not None:
            return self._runner_releases(path, query, latest=releases["latest"] is not None)
        groups = _GROUPS_ROUTE.fullmatch(path)
        if method == "GET" and groups is not None:
            return self._list_runner_groups(groups["scope"], query)
        runs = _RUNS_ROUTE.fullmatch(path)
        if method == "GET" and runs is not None:
            return self._list_runs(runs["scope"], runs["run_id"], query)
        match = _RUNNERS_ROUTE.fullmatch(path)
        if match is None or (match["labels"] and not (match["item"] or "").isdigit()):
            return _error(404, "Not Found")
        scope, item = match["scope"], match["item"]
        if match["labels"]:
            return self._runner_labels(method, scope, int(item), body)
        article = _SCOPE_ARTICLE[scope.split("/")[0]]
        if (method, item) == ("GET", None):
            return self._list_runners(scope, query)
        if (method, item) == ("POST", "registration-token"):
            return self._handed_out(_Reply(201, self._registry.issue_registration_token(scope)), "token")
        if (method, item) == ("POST", "remove-token"):
            return self._handed_out(_Reply(201, _new_token(self._token_lifetime)), "token")
        if (method, item) == ("POST", "generate-jitconfig"):
            documentation_url = f"{_RUNNER_DOCS}#create-configuration-for-a-just-in-time-runner-for-{article}"
            return self._handed_out(self._generate_jitconfig(scope, body, documentation_url), "encoded_jit_config")
        if method == "GET" and item and item.isdigit():
            runner = self._registry.get(scope, int(item))
            if runner is None:
                return _error(404, "Not Found", f"{_RUNNER_DOCS}#get-a-self-hosted-runner-for-{article}")
            return _Reply(200, runner)
        if method == "DELETE" and item and item.isdigit():
            outcome, name = self._registry.remove(scope, int(item))
            documentation_url = f"{_RUNNER_DOCS}#delete-a-self-hosted-runner-from-{article}"
            if outcome == "unknown":
                return _error(404, "Not Found", documentation_url)
            if outcome == "busy":
                return _error(422, f'Bad request - Runner "{name}" is still running a job"', documentation_url)
            return _Reply(204)
        return _error(404, "Not Found")

    def _remember(self, credential: str) -> None:
        with self._issued_lock:
            self._issued.append(credential)

    def _handed_out(self, reply: _Reply, key: str) -> _Reply:
        """Remember the credential a reply carries, so a soak or test can look for it where none may be."""
        if isinstance(reply.body, dict) and key in reply.body:
            with self._issued_lock:
                self._issued.append(reply.body[key])
        return reply

    def _generate_jitconfig(self, scope: str, body: bytes, documentation_url: str) -> _Reply:
        """A registration made offline now, and the opaque config with which exactly one runner can connect."""
        try:
            payload = json.loads(body or b"null")
        except ValueError:
            return _error(400, "Problems parsing JSON", documentation_url)
        errors = _jit_request_errors(payload)
        if errors:
            return _error(422, "Validation Failed", documentation_url, errors)
        if payload["runner_group_id"] not in [group_id for group_id, _ in self._registry.runner_groups(scope)]:
            return _error(404, "Not Found", documentation_url)
        created = self._registry.create_jit(scope, payload["name"], payload["labels"], payload["runner_group_id"])
        if created is None:
            message = f"Already exists - A runner with the name {payload['name']} already exists."
            return _error(409, message, documentation_url)
        runner, secret = created
        encoded = jit_config.encode(self.url, scope, runner["id"], secret)
        return _Reply(201, {"runner": runner, "encoded_jit_config": encoded})

    def _runner_labels(self, method: str, scope: str, runner_id: int, body: bytes) -> _Reply:
        """GET, or PUT (set every custom label), a runner's labels; read-only labels stay."""
        documentation_url = (
            f"{_RUNNER_DOCS}#set-custom-labels-for-a-self-hosted-runner-for-{_SCOPE_ARTICLE[scope.split('/')[0]]}"
        )
        if method == "PUT":
            try:
                payload = json.loads(body or b"null")
            except ValueError:
                return _error(400, "Problems parsing JSON", documentation_url)
            labels = payload.get("labels") if isinstance(payload, dict) else None
            if (
                not isinstance(labels, list)
                or len(labels) > _MAX_JIT_LABELS
                or not all(isinstance(x, str) for x in labels)
            ):
                return _error(
                    422, "Validation Failed", documentation_url, ['"labels" must be an array of at most 100 strings.']
                )
            found = self._registry.set_labels(scope, runner_id, labels)
        elif method == "GET":
            found = self._registry.get(scope, runner_id)
        else:
            return _error(404, "Not Found")
        if found is None:
            return _error(404, "Not Found", documentation_url)
        return _Reply(200, {"total_count": len(found["labels"]), "labels": found["labels"]})

    def _runner_releases(self, path: str, query: str, *, latest: bool) -> _Reply:
        """actions/runner's newest release, or its releases newest first (paginated, a bare array as GitHub's)."""
        releases = [release.as_json(self.api_url) for release in self.releases.newest_first()]
        if latest:
            if not releases:
                return _error(404, "Not Found", f"{_RELEASE_DOCS}#get-the-latest-release")
            return _Reply(200, releases[0])
        return self._page(path, query, None, releases)

    def _list_runners(self, scope: str, query: str) -> _Reply:
        runners = self._registry.select(scope, dict(parse_qsl(query)).get("name"))
        return self._page(f"/{scope}/actions/runners", query, "runners", runners)

    def _list_runs(self, scope: str, run_id: str | None, query: str) -> _Reply:
        """A repository's workflow runs, newest first, filtered by ``status`` as GitHub filters them; or one run's
        jobs. Both paginated."""
        self._registry.dispatch()  # a job past GitHub's queue limit is listed failed, as GitHub would show it
        groups = dict(self._registry.runner_groups(f"orgs/{scope.split('/')[1]}"))
        with self._lock:
            runs = self._registry.jobs.runs(scope)
            if run_id is not None:
                jobs = runs.get(int(run_id))
                if jobs is None:
                    return _error(404, "Not Found", f"{_DOCS}/actions/workflow-jobs#list-jobs-for-a-workflow-run")
                listed = [job.rest_json(self.api_url, groups.get(job.runner_group_id or 0)) for job in jobs]
                return self._page(f"/{scope}/actions/runs/{run_id}/jobs", query, "jobs", listed)
            listed = [run_json(self.api_url, number, jobs) for number, jobs in runs.items()]
        wanted = dict(parse_qsl(query)).get("status")  # a status or a conclusion, as GitHub's filter takes
        listed = [run for run in listed if wanted in (None, run["status"], run["conclusion"])]
        return self._page(f"/{scope}/actions/runs", query, "workflow_runs", listed)

    def _list_runner_groups(self, scope: str, query: str) -> _Reply:
        """An organization's or enterprise's runner groups, as GitHub lists them (by id, paginated)."""
        organization = scope.startswith("orgs/")
        groups = []
        for group_id, name in self._registry.runner_groups(scope):
            url = f"{self.api_url}/{scope}/actions/runner-groups/{group_id}"
            group = {
                "id": group_id,
                "name": name,
                "visibility": "all",
                "default": group_id == _DEFAULT_RUNNER_GROUP_ID,
                "runners_url": f"{url}/runners",
                "allows_public_repositories": False,
            }
            groups.append(
                group
                | ({"inherited": False} if organization else {"selected_organizations_url": f"{url}/organizations"})
            )
        return self._page(f"/{scope}/actions/runner-groups", query, "runner_groups", groups)

    def _page(self, path: str, query: str, key: str | None, items: list[JsonObject]) -> _Reply:
        """One page of ``items`` (``per_page`` at most 100, 30 by default), with GitHub's Link header; under
        ``key`` with a ``total_count``, or (``key`` None) a bare array, as the releases listing is."""
        parameters = dict(parse_qsl(query))
        per_page = min(_positive_int(parameters.get("per_page"), 30), 100)
        page = _positive_int(parameters.get("page"), 1)
        first = (page - 1) * per_page
        on_page = items[first : first + per_page]
        reply = _Reply(200, on_page if key is None else {"total_count": len(items), key: on_page})
        last_page = max(1, -(-len(items) // per_page))
        if last_page > 1:
            reply.headers["Link"] = self._link_header(path, query, page, last_page)
        return reply

    def _link_header(self, path: str, query: str, page: int, last_page: int) -> str:
        """GitHub's pagination links, in its order (prev, next, last, first), keeping the client's query."""
        kept = [(key, value) for key, value in parse_qsl(query, keep_blank_values=True) if key != "page"]

        def link(target_page: int, relation: str) -> str:
            target_query = urlencode([*kept, ("page", target_page)])
            return f'<{self.api_url}{path}?{target_query}>; rel="{relation}"'

        links = [link(page - 1, "prev")] if page > 1 else []
        if page < last_page:
            links += [link(page + 1, "next"), link(last_page, "last")]
        if page > 1:
            links.append(link(1, "first"))
        return ", ".join(links)

    def _answer_control(self, method: str, path: str, body: bytes) -> _Reply:
        """Endpoints for tests and demos in another process: no auth, not logged, not GitHub's."""
        try:
            return self._route_control(method, path, json.loads(body or b"{}"))
        except (KeyError, TypeError, ValueError, re.error) as error:
            return _Reply(400, {"message": f"bad simulator request: {error!r}"})

    def _route_control(self, method: str, path: str, payload: JsonObject) -> _Reply:
        if (method, path) == ("GET", "/_simulator/runners"):
            return _Reply(200, self.runners())
        if (method, path) == ("GET", "/_simulator/calls"):
            return _Reply(200, [{k: v for k, v in call.items() if k != "headers"} for call in self.calls()])
        if (method, path) == ("POST", "/_simulator/jobs"):
            # "duration_seconds": null holds the job until POST /_simulator/jobs/finish names its runner.
            name, seconds = payload["runner_name"], payload["duration_seconds"]
            duration = None if seconds is None else float(seconds)
            try:
                self.start_job(name, duration, scope=payload.get("scope"))
            except LookupError as error:
                return _Reply(409, {"message": str(error)})
            return _Reply(201, {"runner_name": name, "duration_seconds": duration})
        if (method, path) == ("POST", "/_simulator/jobs/queue"):
            labels, count = [str(label) for label in payload["labels"]], int(payload.get("count", 1))
            seconds = payload["duration_seconds"]
            try:
                queued = self.queue_jobs(
                    payload["url"], labels, None if seconds is None else float(seconds), count=count
                )
            except RegistrationRefused as refused:
                return _Reply(400, {"message": str(refused)})
            return _Reply(201, queued)
        if (method, path) == ("GET", "/_simulator/scale-sets"):
            return _Reply(200, self.service.scale_sets())
        if (method, path) == ("GET", "/_simulator/jobs"):
            return _Reply(200, self.jobs())
        if (method, path) == ("POST", "/_simulator/jobs/finish"):
            try:
                self.finish_job(payload["runner_name"], scope=payload.get("scope"))
            except LookupError as error:
                return _Reply(409, {"message": str(error)})
            return _Reply(200, {"runner_name": payload["runner_name"]})
        if (method, path) == ("POST", "/_simulator/releases"):
            published = self.releases.publish(payload["version"], payload.get("published_at"))
            return _Reply(201, published.as_control_json())
        if (method, path) == ("POST", "/_simulator/faults"):
            options = ("count", "method", "path_regex", "retry_after", "rate_limit_reset_in")
            self.fail_next(int(payload["status"]), **{key: payload[key] for key in options if key in payload})
            return _Reply(201, payload)
        return _Reply(404, {"message": "Not Found"})

    def restore(
        self,
        *,
        github_url: str,
        tokens: dict[str, float] | None = None,
        runners: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Recreate in this double what a recorded GitHub held for a scope, so that a stack's state from another
        run is true here (tests/test_upgrades.py: a stack made by an earlier release). ``tokens`` maps each
        registration token to the seconds config.sh may still use it. Each of ``runners`` is a registration with
        the given ``id``, ``name``, ``labels`` (GitHub's label objects: ``name`` and ``type``), ``ephemeral`` and
        optional ``runner_group_id``; ``online`` (default True) lists it online with no runner process here (one
        running elsewhere), False offline until a runner takes it over (config.sh --replace keeps its id) or,
        given ``jit_secret`` (the secret its just-in-time config carries), connects with that config. Ids must be
        above every id this double gave, so listings keep id order; later registrations get higher ids."""
        self._registry.restore(self._scope_of(github_url), tokens or {}, runners)
