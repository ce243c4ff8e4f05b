"""The Actions service as a runner process elsewhere meets it: what `actions-runners-simulator runner`
(runner_process.py) speaks, so that an autoscaler that starts runners as processes can run them against the
simulator.

It follows the calls actions/runner makes (its source, github.com/actions/runner, src/Runner.Common/
RunnerServer.cs and src/Runner.Listener/MessageListener.cs, JobDispatcher.cs), with two simplifications a
process-starting autoscaler cannot see: the runner's bearer is the secret its JIT config carries (the real
runner exchanges the RSA key its config carries for an OAuth token first), and a job message carries how long
the job runs instead of its steps.

- ``POST {service}/_apis/distributedtask/pools/0/sessions`` ``{"agent": {"id"}, "ownerName"}``: the runner's
  session, once its JIT config is used (409 "A session for this runner already exists." while one lives; 404
  "The runner no longer exists on the server." once the registration is gone).
- ``GET .../messages?sessionId=S`` (a long poll, 202 when nothing comes): a ``RunnerJobRequest`` for each job
  GitHub gives it; 404 once its registration is gone. ``DELETE .../messages/{id}`` acknowledges.
- ``PATCH .../jobrequests/{requestId}``: without a ``result`` it renews the job's lock (the runner does so every
  60 s, JobDispatcher.cs:886; GitHub abandons a job whose lock lapses, JOB_ABANDON_SECONDS after the last
  renewal, and the job is lost); with one (``succeeded``, ``canceled``) it ends the job, and an ephemeral
  runner's registration with it.
- ``DELETE .../sessions/{id}``: the runner stopped, told to (offline at once).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from .job_queue import Job

if TYPE_CHECKING:
    from .github_double import _RunnerRegistry

POOL_PATH = "_apis/distributedtask/pools/0"
GONE = "The runner no longer exists on the server."
SESSION_CONFLICT = "A session for this runner already exists."
_NOT_FOUND = "GitHub.DistributedTask.WebApi.TaskAgentNotFoundException"
_CONFLICT = "GitHub.DistributedTask.WebApi.TaskAgentSessionConflictException"

JsonObject = dict[str, Any]
Answer = tuple[int, Any, dict[str, str]]


class _Mailbox:
    """A runner process's side of the registry: what GitHub does to its registration, queued for its polls."""

    def __init__(self, connections: RunnerConnections, runner_id: int) -> None:
        self._connections = connections
        self.runner_id = runner_id
        self.session_id = str(uuid.uuid4())
        self.messages: deque[JsonObject] = deque()
        self.gone = False  # the registration is gone
        self.ended = False  # the runner ended its session: its JIT config is used up
        self._next_id = 1

    def job_started(self) -> None:
        job = self._connections.registry.job_of(self.runner_id)
        if job is not None:
            self._connections.deliver(self, _job_request(job))

    def job_finished(self) -> None:
        """The runner reported it itself."""

    def removed(self) -> None:
        self._connections.deliver(self, None)

    def next_message_id(self) -> int:
        message_id, self._next_id = self._next_id, self._next_id + 1
        return message_id


def _job_request(job: Job) -> JsonObject:
    return {
        "messageType": "RunnerJobRequest",
        "body": json.dumps(
            {"runnerRequestId": job.request_id, "jobDisplayName": job.name, "durationSeconds": job.duration}
        ),
    }


class RunnerConnections:
    """The sessions of runner processes elsewhere, by the secret of the JIT config each connected with."""

    def __init__(self, lock: threading.Lock, registry: _RunnerRegistry, *, long_poll_seconds: float = 50.0) -> None:
        self._lock = lock
        self.registry = registry
        self.long_poll_seconds = long_poll_seconds
        self._changed = threading.Condition(lock)
        self._by_secret: dict[str, _Mailbox] = {}
        self._closed = False

    def deliver(self, mailbox: _Mailbox, message: JsonObject | None) -> None:
        """A message for the runner's next poll (None: its registration is gone)."""
        with self._lock:
            if message is None:
                mailbox.gone = True
            else:
                mailbox.messages.append(message | {"messageId": mailbox.next_message_id()})
            self._changed.notify_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed.notify_all()

    def answer(self, method: str, path: str, query: str, authorization: str | None, body: bytes) -> Answer:
        """A runner's request under the pool's path (``path`` after it)."""
        secret = (authorization or "").removeprefix("Bearer ").strip()
        parts = [part for part in path.strip("/").split("/") if part]
        parameters = dict(parse_qsl(query))
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            return 400, {"message": "Problems parsing JSON"}, {}
        if parts == ["sessions"] and method == "POST":
            return self._open(secret, payload)
        with self._lock:
            mailbox = next((m for s, m in self._by_secret.items() if secrets.compare_digest(s, secret)), None)
        if mailbox is None:
            return 401, {"message": "Unauthorized"}, {}
        if parts[:1] == ["sessions"] and len(parts) == 2 and method == "DELETE":
            mailbox.ended = True
            self.registry.end_session(mailbox.runner_id, gracefully=True)
            return 204, None, {}
        if parts == ["messages"] and method == "GET":
            return self._poll(mailbox, parameters.get("sessionId", ""))
        if parts[:1] == ["messages"] and len(parts) == 2 and method == "DELETE":
            with self._lock:
                mailbox.messages = deque(m for m in mailbox.messages if str(m["messageId"]) != parts[1])
            return 204, None, {}
        if parts[:1] == ["jobrequests"] and len(parts) == 2 and method == "PATCH":
            if payload.get("result"):
                done = self.registry.complete_job(mailbox.runner_id, conclusion=_CONCLUSIONS.get(payload["result"]))
                return (200, {"requestId": int(parts[1])}, {}) if done else (404, {"message": "No such job."}, {})
            renewed = self.registry.renew_job_lock(mailbox.runner_id)
            return (200, {"lockedUntil": renewed}, {}) if renewed else (404, {"message": "No such job."}, {})
        return 404, {"message": "Not Found"}, {}

    def _open(self, secret: str, payload: JsonObject) -> Answer:
        """CreateSession with a JIT config's secret: the registration comes online the first time; a second
        session is a conflict while the first lives, and the secret of a registration gone is refused."""
        agent = payload.get("agent") or {}
        runner_id = agent.get("id")
        if not isinstance(runner_id, int):
            return 400, {"message": "agent.id is required"}, {}
        with self._lock:
            known = next((m for s, m in self._by_secret.items() if secrets.compare_digest(s, secret)), None)
        if known is not None and (known.gone or known.ended):  # a JIT config connects a runner once
            return 404, {"typeName": _NOT_FOUND, "message": GONE if known.gone else "This JIT config was used."}, {}
        if known is not None:
            return 409, {"typeName": _CONFLICT, "message": SESSION_CONFLICT}, {}
        mailbox = _Mailbox(self, runner_id)
        version = agent.get("version") if isinstance(agent.get("version"), str) else None
        refusal = self.registry.connect_remote(runner_id, secret, mailbox, version)
        if refusal is not None:
            return 404, {"typeName": _NOT_FOUND, "message": refusal}, {}
        with self._lock:
            self._by_secret[secret] = mailbox
        return 200, {"sessionId": mailbox.session_id, "ownerName": payload.get("ownerName", "")}, {}

    def _poll(self, mailbox: _Mailbox, session_id: str) -> Answer:
        if session_id != mailbox.session_id:
            return 404, {"message": "The session was not found."}, {}
        deadline = time.monotonic() + self.long_poll_seconds
        with self._lock:
            while True:
                self.registry.note_heard(mailbox.runner_id)
                if mailbox.messages:
                    return 200, mailbox.messages[0], {}
                if mailbox.gone:
                    return 404, {"typeName": _NOT_FOUND, "message": GONE}, {}
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return 202, None, {}
                self._changed.wait(left)


_CONCLUSIONS = {"succeeded": "success", "failed": "failure", "canceled": "cancelled", "cancelled": "cancelled"}
