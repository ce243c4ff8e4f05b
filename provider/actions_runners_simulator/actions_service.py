"""GitHub's Actions service as a runner scale set's listener meets it: the runner scale set protocol that
actions-runner-controller's listener and GitHub's actions/scaleset client speak, served by the GitHub double.

GitHub does not document this API. What is reproduced, and from where (keys as in
../shared/reference/runner-scale-sets.md: SS = actions/scaleset, ARC = actions-runner-controller):

- **Auth.** ``POST /api/v3/actions/runner-registration`` with ``Authorization: RemoteAuth <registration token>``
  and ``{"url", "runner_event": "register"}`` answers the service's URL and an admin token, a JWT whose ``exp``
  the client reads unverified (SS client.go; §1). An unknown or expired registration token is answered 404, as
  config.sh meets it. Admin calls with an expired admin token are answered 401; the client reruns the chain.
- **Calls** (§2): runner groups by name, scale sets by name or id, create (200), update (PATCH), delete (204),
  ``generatejitconfig`` (409 ``AgentExistsException`` for a name taken), sessions (one per scale set: a second is
  409 ``RunnerScaleSetSessionConflictException``; refresh gives a new message-queue token; delete 204),
  ``acquirejobs`` with the message-queue token (401 once it expired), the agents by name or id (404
  ``AgentNotFoundException``) and their delete: 204, also for one gone, and 400 ``JobStillRunningException``
  while the runner runs a job (ADR 2022-12-27 and ARC 0.9.3 say 400; SS's test says 409; clients match the name).
- **The message queue** (§2, §3, §4): a long poll answered 200 with a message, or 202 with nothing when nothing
  came within it; each message is ``RunnerScaleSetJobMessages`` with a body that is a JSON string of at most 50
  job messages and the scale set's statistics; unacknowledged messages come again (from the oldest after the
  ``lastMessageId`` the client names); a DELETE acknowledges. ``X-ScaleSetMaxCapacity`` caps how many jobs the
  service offers the set at once (ARC #3431, #3446).
- **Jobs** (§4, §5): a queued job whose ``runs-on`` names the set (its name, or labels of its) is offered
  (JobAvailable); acquired by the listener, it is assigned to the set (JobAssigned), then to an idle runner of
  the set (JobStarted), and ends (JobCompleted, ``succeeded``, ``failed`` if its runner was lost, ``canceled``
  if it ends before a runner took it). A job the listener does not acquire within ``offer_seconds`` is offered
  again, up to three times more (SS README: "canceled and reassigned up to three times, each time with new
  messages"); how long GitHub waits is not published, so the double's window is a setting. After that it waits,
  offered no more, until GitHub's 24-hour limit fails it.
- **The unkind parts** (§5): a dead listener's session that keeps refusing a new one (409) until it has gone
  unpolled for ``session_silence_seconds``, tokens that expire (`expire_admin_tokens`, `expire_queue_tokens`, or short
  lifetimes), a session GitHub drops (`drop_session`: its queue and refresh are answered 404, and a new session
  may be made), a scale set deleted on GitHub's side after inactivity (`forget_scale_set`: 404
  ``RunnerScaleSetNotFoundException`` from then on), and rate limits with ``Retry-After`` (the double's
  injected faults reach these paths too).

Type names of the exceptions GitHub's sources do not quote (a scale set name taken, an unknown session) are the
double's own, in the form of the ones they do.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import jwt

from . import jit_config
from .job_queue import Job, scopes_for, wanted

if TYPE_CHECKING:
    from .github_double import _RunnerRegistry

SERVICE_PREFIX = "/pipelines/simulated"  # where the double serves the Actions service
_SCALE_SETS = "_apis/runtime/runnerscalesets"
_AGENTS = "_apis/distributedtask/pools/0/agents"
_GROUPS = "_apis/runtime/runnergroups"
_QUEUES = "message-queues"
_WEB_API = "GitHub.Actions.Runtime.WebApi"
_TASK_API = "GitHub.DistributedTask.WebApi"
MESSAGE_TYPE = "RunnerScaleSetJobMessages"
MAX_JOB_MESSAGES = 50  # per message (SS README.md)
REOFFERS = 3
LONG_POLL_SECONDS = 50.0  # an empty poll's length (SS README.md: "after about 50 seconds, nothing")
MAX_LONG_POLL_SECONDS = 100.0  # below the runner process's 120 s poll timeout and the double's silence limit
_GO_ZERO_TIME = "0001-01-01T00:00:00Z"  # what Go's encoding/json writes for a time not set

JsonObject = dict[str, Any]
Answer = tuple[int, Any, dict[str, str]]  # status, JSON body (None: none), headers


def _rfc3339(at: datetime | None) -> str:
    return _GO_ZERO_TIME if at is None else at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _exception(status: int, name: str, message: str) -> Answer:
    """The Actions service's error body: the exception's type name and its message (SS errors.go)."""
    return status, {"typeName": name, "message": message}, {}


@dataclass
class _Session:
    id: str
    owner: str
    queue_token: str
    token_expires: float  # monotonic
    last_seen: float = field(default_factory=time.monotonic)  # its queue's last poll ended (or it was made)
    polling: int = 0  # polls of its queue under way

    def silent_for(self, now: float) -> float:
        return 0.0 if self.polling else now - self.last_seen


@dataclass
class _ScaleSet:
    id: int
    name: str
    scope: str
    runner_group_id: int
    runner_group_name: str
    labels: list[JsonObject]
    disable_update: bool
    created_on: datetime = field(default_factory=lambda: datetime.now(UTC))
    session: _Session | None = None
    capacity: int | None = None  # the last X-ScaleSetMaxCapacity its listener sent
    pending: list[JsonObject] = field(default_factory=list)  # job messages not in a message yet
    unacked: list[JsonObject] = field(default_factory=list)  # messages delivered and not deleted, oldest first
    next_message_id: int = 1

    def label_names(self) -> set[str]:
        return {label["name"].lower() for label in self.labels}


class ActionsService:
    """The scale sets of every scope, their sessions and message queues; it shares the double's one lock and
    its runner registry, whose runners a scale set's are."""

    def __init__(
        self,
        lock: threading.Lock,
        registry: _RunnerRegistry,
        remember: Callable[[str], None],
        *,
        admin_token_seconds: float = 3600.0,
        queue_token_seconds: float = 3600.0,
        long_poll_seconds: float = LONG_POLL_SECONDS,
        offer_seconds: float = 60.0,
        session_silence_seconds: float = 120.0,
    ) -> None:
        """``remember``: told of each credential handed out (the double's issued_credentials). Token lifetimes
        are not published; an hour each unless told otherwise. ``offer_seconds``: how long a job offered to a
        scale set waits to be acquired before it is offered again. ``session_silence_seconds``: how long the
        session of a listener that died without deleting it (its queue polled by no one) still refuses a new
        one with 409; GitHub publishes no figure (stale sessions of dead listeners block new ones: ARC #4285,
        #3209), so it is the double's setting, above the long poll's 50 s."""
        self._lock = lock
        self._registry = registry
        self._remember = remember
        self.admin_token_seconds = admin_token_seconds
        self.queue_token_seconds = queue_token_seconds
        self.long_poll_seconds = long_poll_seconds
        self.offer_seconds = offer_seconds
        self.session_silence_seconds = session_silence_seconds
        self._changed = threading.Condition(lock)  # a message queue got something, or a session went
        self._signing_key = secrets.token_bytes(32)
        self._admin_tokens: dict[str, tuple[str, float]] = {}  # admin JWT -> (scope, monotonic expiry)
        self._sets: dict[int, _ScaleSet] = {}
        self._next_set_id = 1
        self._closed = False
        self._ticker: threading.Thread | None = None
        self.base_url = ""  # set when the double starts: {url}{SERVICE_PREFIX}
        registry.job_event = self.job_event

    # --- what tests stage --------------------------------------------------------------------------------

    def expire_admin_tokens(self) -> None:
        """Every admin token handed out so far has expired (its JWT's exp stays as it was)."""
        with self._lock:
            self._admin_tokens = {token: (scope, 0.0) for token, (scope, _) in self._admin_tokens.items()}

    def expire_queue_tokens(self) -> None:
        """Every session's message-queue token has expired: the queue answers 401 until the session is refreshed."""
        with self._lock:
            for scale_set in self._sets.values():
                if scale_set.session is not None:
                    scale_set.session.token_expires = 0.0

    def drop_session(self, scale_set_id: int) -> bool:
        """GitHub drops the scale set's session (as it does one it considers dead): its queue and refresh are
        answered 404 from now on, and a new session may be created. False if it had none."""
        with self._lock:
            scale_set = self._sets.get(scale_set_id)
            if scale_set is None or scale_set.session is None:
                return False
            scale_set.session = None
            self._changed.notify_all()
            return True

    def forget_scale_set(self, scale_set_id: int) -> bool:
        """GitHub deletes the scale set, as its cleanup of sets unconnected for days does (ADR 2022-10-27): from
        now on it is unknown (404 RunnerScaleSetNotFoundException), its runners are removed and its jobs not on a
        runner go back to the queue. False if there is no such set."""
        return self._remove_set(scale_set_id)

    def scale_sets(self) -> list[JsonObject]:
        with self._lock:
            return [self._set_json(scale_set) for scale_set in self._sets.values()]

    def statistics(self, scale_set_id: int) -> JsonObject:
        with self._lock:
            return self._statistics(self._sets[scale_set_id])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify_all()

    # --- the registry's events (the lock is held) ------------------------------------------------------------

    def job_event(self, kind: str, job: Job) -> None:
        """A job was queued (route it to a scale set its runs-on names), or one of a scale set started or ended."""
        if kind == "JobQueued":
            scale_set = self._set_for(job)
            if scale_set is not None:
                job.scale_set_id = scale_set.id
                self._offer_waiting(scale_set)
            return
        scale_set = self._sets.get(job.scale_set_id) if job.scale_set_id is not None else None
        if scale_set is None:
            return
        if kind == "JobStarted":
            self._post(scale_set, self._job_message("JobStarted", job, scale_set))
        elif kind == "JobCompleted":
            if job.offers or job.started_at is not None:  # one the set was told of
                self._post(scale_set, self._job_message("JobCompleted", job, scale_set))
            self._offer_waiting(scale_set)

    def _set_for(self, job: Job) -> _ScaleSet | None:
        """The scale set a job's runs-on names, among those its repository may use."""
        labels, scopes = wanted(job.runs_on), scopes_for(job.scope)
        return next(
            (s for s in self._sets.values() if s.scope in scopes and labels and labels <= s.label_names()), None
        )

    def _offer_waiting(self, scale_set: _ScaleSet) -> None:
        """Offer the set's jobs never offered, in queue order, as far as its listener's capacity allows."""
        jobs = [job for job in self._registry.jobs.queued() if job.scale_set_id == scale_set.id]
        running = [job for job in self._registry.jobs.all() if job.scale_set_id == scale_set.id]
        in_hand = sum(1 for job in jobs if job.offers) + sum(1 for job in running if job.status == "in_progress")
        for job in jobs:
            if job.offers:
                continue
            if scale_set.capacity is not None and in_hand >= scale_set.capacity:
                return
            self._offer(scale_set, job)
            in_hand += 1

    def _offer(self, scale_set: _ScaleSet, job: Job) -> None:
        job.offers += 1
        job.offered_at = time.monotonic()
        self._post(scale_set, self._job_message("JobAvailable", job, scale_set))
        self._start_ticker()

    def _post(self, scale_set: _ScaleSet, job_message: JsonObject) -> None:
        scale_set.pending.append(job_message)
        self._changed.notify_all()

    def _remove_set(self, scale_set_id: int) -> bool:
        """The set is gone, by its delete or GitHub's cleanup: its jobs not on a runner go to another set their
        runs-on names, or wait in the queue; its idle runners are removed, its busy ones finish their jobs. False
        if there was no such set."""
        with self._lock:
            scale_set = self._sets.pop(scale_set_id, None)
            if scale_set is None:
                return False
            self._release_jobs(scale_set)
            self._changed.notify_all()
        self._registry.remove_idle_scale_set_runners(scale_set_id)
        self._registry.dispatch()  # its jobs may go to runners that are no set's
        return True

    def _release_jobs(self, scale_set: _ScaleSet) -> None:
        """The lock is held, and the set is gone from _sets: its jobs not on a runner, to another set or the queue."""
        others = set()
        for job in self._registry.jobs.queued():
            if job.scale_set_id == scale_set.id:
                job.scale_set_id, job.offers, job.offered_at = None, 0, None
                job.unassign()
                other = self._set_for(job)  # another set its runs-on names takes it (the set is gone from _sets)
                if other is not None:
                    job.scale_set_id = other.id
                    others.add(other.id)
        for other_id in others:
            self._offer_waiting(self._sets[other_id])

    def _start_ticker(self) -> None:
        """The lock is held. One thread offers again what was not acquired in time."""
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._reoffer, name="actions-service-offers", daemon=True)
            self._ticker.start()

    def _reoffer(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                for job in self._registry.jobs.queued():
                    scale_set = self._sets.get(job.scale_set_id) if job.scale_set_id is not None else None
                    if scale_set is None or job.acquired_at is not None or job.offered_at is None:
                        continue
                    if now - job.offered_at >= self.offer_seconds and job.offers <= REOFFERS:
                        self._offer(scale_set, job)
                self._changed.wait(min(1.0, self.offer_seconds / 4))

    # --- HTTP ---------------------------------------------------------------------------------------------

    def register(self, authorization: str | None, body: bytes, scope_of: Callable[[str], str | None]) -> Answer:
        """``POST /actions/runner-registration``: a registration token for the config URL's scope buys the
        service's URL and an admin token. ``scope_of``: the scope a config URL names, None if this GitHub serves
        none such."""
        scheme, _, token = (authorization or "").partition(" ")
        try:
            payload = json.loads(body or b"null")
            url = payload["url"]
        except (ValueError, TypeError, KeyError):
            return 400, {"message": "Problems parsing JSON"}, {}
        scope = scope_of(url) if isinstance(url, str) else None
        if scope is None or scheme != "RemoteAuth" or not self._registry.registration_token_valid(scope, token.strip()):
            return 404, {"message": "Not Found"}, {}
        expires = time.time() + self.admin_token_seconds
        admin = jwt.encode(
            {"iss": "actions-service", "aud": scope, "exp": int(expires), "nbf": int(time.time()) - 1},
            self._signing_key,
            algorithm="HS256",
        )
        with self._lock:
            self._admin_tokens[admin] = (scope, time.monotonic() + self.admin_token_seconds)
        self._remember(admin)
        return 200, {"url": self.base_url + "/", "token": admin, "token_schema": "OAuthAccessToken"}, {}

    def answer(
        self, method: str, path: str, query: str, authorization: str | None, headers: Any, body: bytes
    ) -> Answer:
        """A request under SERVICE_PREFIX (``path`` without it)."""
        parameters = dict(parse_qsl(query))
        bearer = (authorization or "").removeprefix("Bearer ").strip()
        parts = path.strip("/").split("/")
        if parts[0] == _QUEUES:
            return self._queue(method, parts[1:], parameters, bearer, headers)
        if path.strip("/").startswith(_SCALE_SETS) and parts[-1] == "acquirejobs":
            return self._acquire(int(parts[-2]) if parts[-2].isdigit() else 0, bearer, body)
        scope = self._admin_scope(bearer)
        if scope is None:
            return _exception(401, "Microsoft.VisualStudio.Services.Common.VssUnauthorizedException", "Unauthorized")
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            return 400, {"message": "Problems parsing JSON"}, {}
        route = path.strip("/")
        if route.startswith(_GROUPS) and method == "GET":
            return self._groups(scope, parameters.get("groupName", ""))
        if route.startswith(_AGENTS):
            return self._agents(method, scope, route.removeprefix(_AGENTS).strip("/"), parameters)
        if route.startswith(_SCALE_SETS):
            return self._scale_set_call(method, scope, route.removeprefix(_SCALE_SETS).strip("/"), parameters, payload)
        return 404, {"message": "Not Found"}, {}

    def _admin_scope(self, bearer: str) -> str | None:
        with self._lock:
            scope, expires = self._admin_tokens.get(bearer, (None, 0.0))
        return scope if scope is not None and expires > time.monotonic() else None

    def _groups(self, scope: str, name: str) -> Answer:
        """Runner groups by name (GitHub's "Default" also as "default"), as the Actions service lists them."""
        groups = self._registry.runner_groups(scope)
        found = [
            {"id": group_id, "name": group, "size": 0, "isDefaultGroup": group_id == 1}
            for group_id, group in groups
            if group.lower() == name.lower()
        ]
        return 200, {"count": len(found), "value": found}, {}

    def _scale_set_call(self, method: str, scope: str, rest: str, parameters: dict[str, str], payload: Any) -> Answer:
        parts = [part for part in rest.split("/") if part]
        if not parts:
            if method == "GET":
                return self._list_sets(scope, parameters)
            if method == "POST":
                return self._create_set(scope, payload)
            return 404, {"message": "Not Found"}, {}
        if not parts[0].isdigit():
            return 404, {"message": "Not Found"}, {}
        with self._lock:
            scale_set = self._sets.get(int(parts[0]))
            if scale_set is None or scale_set.scope != scope:
                return _exception(
                    404, f"{_WEB_API}.RunnerScaleSetNotFoundException", f"Runner scale set {parts[0]} not found."
                )
        if len(parts) == 1:
            if method == "GET":
                with self._lock:
                    return 200, self._set_json(scale_set), {}
            if method == "PATCH":
                return self._update_set(scale_set, payload)
            if method == "DELETE":
                return self._delete_set(scale_set)
        elif parts[1] == "generatejitconfig" and method == "POST":
            return self._generate_jit_config(scale_set, payload)
        elif parts[1] == "sessions":
            return self._session_call(method, scale_set, parts[2] if len(parts) > 2 else None, payload)
        return 404, {"message": "Not Found"}, {}

    def _list_sets(self, scope: str, parameters: dict[str, str]) -> Answer:
        group = parameters.get("runnerGroupId")
        name = parameters.get("name")
        with self._lock:
            found = [
                self._set_json(s)
                for s in self._sets.values()
                if s.scope == scope
                and (group is None or str(s.runner_group_id) == group)
                and (name is None or s.name.lower() == name.lower())
            ]
        return 200, {"count": len(found), "value": found}, {}

    def _create_set(self, scope: str, payload: Any) -> Answer:
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str) or not payload["name"].strip():
            return _exception(400, "System.ArgumentException", "A runner scale set needs a name.")
        name = payload["name"]
        group_id = int(payload.get("runnerGroupId") or 1)
        groups = dict(self._registry.runner_groups(scope))
        if group_id not in groups:
            return _exception(404, f"{_WEB_API}.RunnerGroupNotFoundException", f"Runner group {group_id} not found.")
        labels = [
            {"name": str(label.get("name", "")), "type": str(label.get("type") or "System")}
            for label in payload.get("labels") or []
            if isinstance(label, dict) and label.get("name")
        ] or [{"name": name, "type": "System"}]
        setting = payload.get("RunnerSetting") or payload.get("runnerSetting") or {}
        with self._lock:
            if any(s.scope == scope and s.name.lower() == name.lower() for s in self._sets.values()):
                return _exception(
                    409, f"{_WEB_API}.RunnerScaleSetExistsException", f"A runner scale set named {name} exists."
                )
            scale_set = _ScaleSet(
                self._next_set_id, name, scope, group_id, groups[group_id], labels, bool(setting.get("disableUpdate"))
            )
            self._next_set_id += 1
            self._sets[scale_set.id] = scale_set
            for job in self._registry.jobs.queued():  # jobs that waited for a set of that name
                if job.scale_set_id is None and self._set_for(job) is scale_set:
                    job.scale_set_id = scale_set.id
            self._offer_waiting(scale_set)
            return 200, self._set_json(scale_set), {}

    def _update_set(self, scale_set: _ScaleSet, payload: Any) -> Answer:
        if not isinstance(payload, dict):
            return 400, {"message": "Problems parsing JSON"}, {}
        groups = dict(self._registry.runner_groups(scale_set.scope))
        with self._lock:
            if isinstance(payload.get("name"), str) and payload["name"].strip():
                scale_set.name = payload["name"]
            if payload.get("runnerGroupId") is not None:
                group_id = int(payload["runnerGroupId"])
                if group_id not in groups:
                    return _exception(
                        404, f"{_WEB_API}.RunnerGroupNotFoundException", f"Runner group {group_id} not found."
                    )
                scale_set.runner_group_id, scale_set.runner_group_name = group_id, groups[group_id]
            if isinstance(payload.get("labels"), list) and payload["labels"]:
                scale_set.labels = [
                    {"name": str(label["name"]), "type": str(label.get("type") or "System")}
                    for label in payload["labels"]
                    if isinstance(label, dict) and label.get("name")
                ]
            setting = payload.get("RunnerSetting") or payload.get("runnerSetting")
            if isinstance(setting, dict):
                scale_set.disable_update = bool(setting.get("disableUpdate"))
            return 200, self._set_json(scale_set), {}

    def _delete_set(self, scale_set: _ScaleSet) -> Answer:
        """Gone at once for the client; its busy runners finish their jobs (the ADR says the deletion waits for
        them), its other runners are removed, and its jobs not on a runner wait in the queue again."""
        self._remove_set(scale_set.id)
        return 204, None, {}

    def _generate_jit_config(self, scale_set: _ScaleSet, payload: Any) -> Answer:
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str) or not payload["name"].strip():
            return _exception(400, "System.ArgumentException", "A runner needs a name.")
        labels = [label["name"] for label in scale_set.labels]
        created = self._registry.create_jit(
            scale_set.scope, payload["name"], labels, scale_set.runner_group_id, scale_set.id
        )
        if created is None:
            return _exception(
                409, f"{_TASK_API}.AgentExistsException", f"A runner named {payload['name']} already exists."
            )
        registered, secret = created
        encoded = jit_config.encode(
            self.base_url.removesuffix(SERVICE_PREFIX), scale_set.scope, registered["id"], secret
        )
        self._remember(encoded)
        runner = {"id": registered["id"], "name": payload["name"], "runnerScaleSetId": scale_set.id}
        return 200, {"runner": runner, "encodedJITConfig": encoded}, {}

    def _session_call(self, method: str, scale_set: _ScaleSet, session_id: str | None, payload: Any) -> Answer:
        with self._lock:
            if session_id is None and method == "POST":
                stale = scale_set.session
                if stale is not None and stale.silent_for(time.monotonic()) > self.session_silence_seconds:
                    scale_set.session = None  # its listener is gone: GitHub expired it
                if scale_set.session is not None:
                    owner = scale_set.session.owner
                    return _exception(
                        409,
                        f"{_WEB_API}.RunnerScaleSetSessionConflictException",
                        f"The actions runner scale set {scale_set.name} already has an active session for owner "
                        f"{owner}.",
                    )
                owner = str((payload or {}).get("ownerName") or "")
                scale_set.session = _Session(str(uuid.uuid4()), owner, "", 0.0)
                self._new_queue_token(scale_set.session)
                return 200, self._session_json(scale_set), {}
            session = scale_set.session
            if session is None or session.id != session_id:
                return _exception(404, f"{_WEB_API}.RunnerAdminException", f"Session {session_id} was not found.")
            if method == "PATCH":
                self._new_queue_token(session)
                return 200, self._session_json(scale_set), {}
            if method == "DELETE":
                scale_set.session = None
                self._changed.notify_all()
                return 204, None, {}
        return 404, {"message": "Not Found"}, {}

    def _new_queue_token(self, session: _Session) -> None:
        session.queue_token = secrets.token_urlsafe(32)
        session.token_expires = time.monotonic() + self.queue_token_seconds
        self._remember(session.queue_token)

    def _by_queue_token(self, bearer: str) -> tuple[_ScaleSet | None, bool]:
        """The lock is held. The scale set whose session holds the token, and whether the token is still valid."""
        for scale_set in self._sets.values():
            session = scale_set.session
            if session is not None and bearer and secrets.compare_digest(session.queue_token, bearer):
                return scale_set, session.token_expires > time.monotonic()
        return None, False

    def _queue(self, method: str, parts: list[str], parameters: dict[str, str], bearer: str, headers: Any) -> Answer:
        """The message queue of a session: GET (long poll), DELETE .../{messageId} (acknowledge)."""
        with self._lock:
            scale_set = self._sets_by_session(parts[0] if parts else "")
            if scale_set is None:
                return _exception(404, f"{_WEB_API}.MessageQueueNotFoundException", "The message queue was not found.")
            holder, valid = self._by_queue_token(bearer)
            if holder is not scale_set or not valid:
                return 401, {"message": "The message queue token has expired or is not valid."}, {}
            if method == "DELETE" and len(parts) == 2 and parts[1].isdigit():
                scale_set.unacked = [m for m in scale_set.unacked if m["messageId"] != int(parts[1])]
                return 204, None, {}
            if method != "GET" or len(parts) != 1:
                return 404, {"message": "Not Found"}, {}
            capacity = headers.get("X-ScaleSetMaxCapacity")
            if capacity is not None and capacity.strip().isdigit():
                scale_set.capacity = int(capacity)
                self._offer_waiting(scale_set)
            session = scale_set.session
            assert session is not None
            last = int(parameters.get("lastMessageId", "0") or 0)
            deadline = time.monotonic() + self.long_poll_seconds
            session.polling += 1
            try:
                while True:
                    message = self._next_message(scale_set, last)
                    if message is not None:
                        return 200, message, {}
                    left = deadline - time.monotonic()
                    if (
                        left <= 0
                        or self._closed
                        or scale_set.session is not session
                        or self._sets.get(scale_set.id) is None
                    ):
                        return 202, None, {}
                    self._changed.wait(left)
            finally:
                session.polling -= 1
                session.last_seen = time.monotonic()

    def _sets_by_session(self, session_id: str) -> _ScaleSet | None:
        return next(
            (s for s in self._sets.values() if s.session is not None and s.session.id == session_id and session_id),
            None,
        )

    def _next_message(self, scale_set: _ScaleSet, last: int) -> JsonObject | None:
        """The lock is held. The oldest unacknowledged message after ``last``, else one made of what is pending."""
        for message in scale_set.unacked:
            if message["messageId"] > last:
                return message
        if not scale_set.pending:
            return None
        batch, scale_set.pending = scale_set.pending[:MAX_JOB_MESSAGES], scale_set.pending[MAX_JOB_MESSAGES:]
        message = {
            "messageId": scale_set.next_message_id,
            "messageType": MESSAGE_TYPE,
            "body": json.dumps(batch),
            "statistics": self._statistics(scale_set),
        }
        scale_set.next_message_id += 1
        scale_set.unacked.append(message)
        return message

    def _acquire(self, scale_set_id: int, bearer: str, body: bytes) -> Answer:
        """``acquirejobs``, with the message-queue token: the jobs of those offered that the listener now holds."""
        try:
            ids = [int(x) for x in json.loads(body or b"[]")]
        except (ValueError, TypeError):
            return 400, {"message": "Problems parsing JSON"}, {}
        with self._lock:
            holder, valid = self._by_queue_token(bearer)
            if holder is None or holder.id != scale_set_id or not valid:
                return 401, {"message": "The message queue token has expired or is not valid."}, {}
            acquired = []
            now = time.monotonic()
            for job in self._registry.jobs.queued():
                if (
                    job.request_id in ids
                    and job.scale_set_id == scale_set_id
                    and job.offers
                    and job.acquired_at is None
                ):
                    job.acquired_at, job.assigned_on = now, datetime.now(UTC)
                    acquired.append(job.request_id)
                    self._post(holder, self._job_message("JobAssigned", job, holder))
        self._registry.dispatch()
        return 200, {"count": len(acquired), "value": acquired}, {}

    def _agents(self, method: str, scope: str, rest: str, parameters: dict[str, str]) -> Answer:
        if not rest and method == "GET":
            found = [
                _agent_json(r) for r in self._registry.runners_of(scope) if r["name"] == parameters.get("agentName")
            ]
            return 200, {"count": len(found), "value": found}, {}
        if not rest.isdigit():
            return 404, {"message": "Not Found"}, {}
        runner_id = int(rest)
        if method == "GET":
            found = [_agent_json(r) for r in self._registry.runners_of(scope) if r["id"] == runner_id]
            if not found:
                return _exception(404, f"{_TASK_API}.AgentNotFoundException", f"No agent found with id {runner_id}.")
            return 200, found[0], {}
        if method == "DELETE":
            outcome, name = self._registry.remove(scope, runner_id)
            if outcome == "busy":
                return _exception(
                    400,
                    f"{_TASK_API}.JobStillRunningException",
                    f"The runner {name} is running a job and cannot be deleted.",
                )
            return 204, None, {}
        return 404, {"message": "Not Found"}, {}

    # --- shapes -------------------------------------------------------------------------------------------

    def _statistics(self, scale_set: _ScaleSet) -> JsonObject:
        """The lock is held. The counts the service sends with each message (SS types.go)."""
        runners = self._registry.scale_set_runners(scale_set.id)  # first: settling them may end a job
        jobs = [
            job for job in self._registry.jobs.all() if job.scale_set_id == scale_set.id and job.finished_at is None
        ]
        available = [job for job in jobs if job.offers and job.acquired_at is None and job.started_at is None]
        acquired = [job for job in jobs if job.acquired_at is not None and job.started_at is None]
        running = [job for job in jobs if job.started_at is not None]
        busy = sum(1 for runner in runners if runner["busy"])
        return {
            "totalAvailableJobs": len(available),
            "totalAcquiredJobs": len(acquired),
            "totalAssignedJobs": len(acquired) + len(running),
            "totalRunningJobs": len(running),
            "totalRegisteredRunners": len(runners),
            "totalBusyRunners": busy,
            "totalIdleRunners": len(runners) - busy,
        }

    def _set_json(self, scale_set: _ScaleSet) -> JsonObject:
        return {
            "id": scale_set.id,
            "name": scale_set.name,
            "runnerGroupId": scale_set.runner_group_id,
            "runnerGroupName": scale_set.runner_group_name,
            "labels": [dict(label) for label in scale_set.labels],
            "RunnerSetting": {"disableUpdate": scale_set.disable_update, "ephemeral": True, "isElastic": True},
            "createdOn": _rfc3339(scale_set.created_on),
            "runnerJitConfigUrl": f"{self.base_url}/{_SCALE_SETS}/{scale_set.id}/generatejitconfig",
            "statistics": self._statistics(scale_set),
        }

    def _session_json(self, scale_set: _ScaleSet) -> JsonObject:
        session = scale_set.session
        assert session is not None
        return {
            "sessionId": session.id,
            "ownerName": session.owner,
            "runnerScaleSet": self._set_json(scale_set),
            "messageQueueUrl": f"{self.base_url}/{_QUEUES}/{session.id}",
            "messageQueueAccessToken": session.queue_token,
            "statistics": self._statistics(scale_set),
        }

    def _job_message(self, kind: str, job: Job, scale_set: _ScaleSet) -> JsonObject:
        owner, repository = job.scope.split("/")[1:3]
        message = {
            "messageType": kind,
            "runnerRequestId": job.request_id,
            "repositoryName": repository,
            "ownerName": owner,
            "jobId": str(uuid.UUID(int=job.id)),
            "jobWorkflowRef": f"{owner}/{repository}/.github/workflows/ci.yml@refs/heads/main",
            "jobDisplayName": job.name,
            "workflowRunId": job.run_id,
            "eventName": "push",
            "requestLabels": list(job.runs_on),
            "queueTime": _rfc3339(job.queued_on),
            "scaleSetAssignTime": _rfc3339(job.assigned_on),
            "runnerAssignTime": _rfc3339(job.started_on),
            "finishTime": _rfc3339(job.finished_on),
        }
        if kind == "JobAvailable":
            message["acquireJobUrl"] = f"{self.base_url}/{_SCALE_SETS}/{scale_set.id}/acquirejobs"
        if kind in ("JobStarted", "JobCompleted"):
            message |= {"runnerId": job.runner_id or 0, "runnerName": job.runner_name or ""}
        if kind == "JobCompleted":
            message["result"] = (
                "canceled"
                if job.started_at is None
                else "failed"
                if job.lost or job.conclusion != "success"
                else "succeeded"
            )
        return message


def _agent_json(runner: JsonObject) -> JsonObject:
    return {
        "id": runner["id"],
        "name": runner["name"],
        "runnerScaleSetId": runner.get("scale_set_id") or 0,
        "status": runner["status"],
        "busy": runner["busy"],
        "ephemeral": runner["ephemeral"],
    }
