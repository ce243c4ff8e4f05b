"""GitHub's Actions service as a runner scale set's owner calls it: the scale set, its session and message queue,
its runners' just-in-time configs and their removal.

GitHub does not document this API. The calls and answers are those actions/scaleset's client and
actions-runner-controller's listener use (../shared/reference/runner-scale-sets.md; SS = actions/scaleset
client.go, session_client.go, common_client.go):

- **Auth** (§1): a registration token from the REST API buys, through ``POST {api}/actions/runner-registration``
  (``RemoteAuth``), the service's URL and an admin JWT; its ``exp`` is read unverified, and the chain runs again
  when it is less than a minute away, or when the service answers 401 (SS ``updateTokenIfNeeded``).
- **Retries** (§5): transport errors, 429 and 5xx are retried four times, 1 s doubling, ``Retry-After`` obeyed
  up to a minute (SS's go-retryablehttp settings), but never a POST: one whose answer was lost may have been done,
  so its caller looks again instead (a runner by its name, a set by its name). runner-registration's refusal of a
  token minted a moment ago (401/403) is tried again, 0.5 s doubling (ARC #3377, #3724). Every call is bounded by
  ``timeout``.
- **Refusals** are exceptions that name what GitHub said, by the ``typeName`` clients match (SS errors.go):
  `SessionConflict` (409), `ScaleSetNotFound` (404), `QueueTokenExpired` (401 on the queue), and a busy
  runner's removal is `RemoveOutcome.BUSY` (400 ``JobStillRunningException``, or 409 as SS's test has it).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from ..redaction import remember
from .client import DEFAULT_RUNNER_GROUP_ID, GitHubClient, GitHubError, RemoveOutcome, RunnerGroupNotFound

log = logging.getLogger(__name__)

API_VERSION = "6.0-preview"
SCALE_SETS = "_apis/runtime/runnerscalesets"
AGENTS = "_apis/distributedtask/pools/0/agents"
GROUPS = "_apis/runtime/runnergroups"
ADMIN_TOKEN_MARGIN_SECONDS = 60.0  # SS: a token expiring within a minute is renewed first
LONG_POLL_TIMEOUT_SECONDS = 300.0  # SS's client timeout for the message queue's long poll
MAX_RETRY_AFTER_SECONDS = 60.0
# runner-registration may refuse a registration token minted a moment ago (401/403): SS tries 4 times, ARC's old
# client 5, 0.5 s doubling to 20 s (#3377, #3724).
REGISTRATION_ATTEMPTS, REGISTRATION_FIRST_DELAY_SECONDS, REGISTRATION_LAST_DELAY_SECONDS = 5, 0.5, 20.0
AGENT_NOT_FOUND = "AgentNotFoundException"
JOB_STILL_RUNNING = "JobStillRunningException"
SESSION_CONFLICT = "RunnerScaleSetSessionConflictException"
SET_NOT_FOUND = "RunnerScaleSetNotFoundException"


class _BoundedRetry(Retry):
    """SS's retries (go-retryablehttp: 4, 1 s doubling to 30 s, Retry-After obeyed), with a Retry-After of more
    than `MAX_RETRY_AFTER_SECONDS` cut to it: urllib3 would sleep whatever the header says, unlogged and deaf to
    SIGTERM."""

    def get_retry_after(self, response: Any) -> float | None:
        retry_after = super().get_retry_after(response)
        return None if retry_after is None else min(retry_after, MAX_RETRY_AFTER_SECONDS)


class ScaleSetNotFound(GitHubError):
    """The scale set is gone on GitHub's side (deleted, or cleaned up after days without a listener)."""


class SessionConflict(GitHubError):
    """The scale set has an active session already: another listener's, or a dead one's not yet expired."""


class SessionGone(GitHubError):
    """GitHub no longer knows the session (it dropped it): a new one must be made."""


class QueueTokenExpired(GitHubError):
    """The message queue's token expired: the session must be refreshed."""


@dataclass(frozen=True)
class ScaleSet:
    id: int
    name: str
    runner_group_id: int
    labels: tuple[str, ...]
    statistics: dict[str, int] = field(default_factory=dict, compare=False)  # GitHub's counts, as it answered


@dataclass(frozen=True)
class Session:
    id: str
    owner: str
    queue_url: str
    queue_token: str = field(repr=False)
    statistics: dict[str, int]


@dataclass(frozen=True)
class Message:
    id: int
    jobs: list[dict[str, Any]]
    statistics: dict[str, int] | None  # None: the message had none


@dataclass(frozen=True)
class ScaleSetRunner:
    """A runner GitHub made for the set with its just-in-time config, which is a credential: never in a repr."""

    id: int
    name: str
    encoded_jit_config: str = field(repr=False)


@dataclass
class _Admin:
    service_url: str
    token: str = field(repr=False)
    expires: float  # epoch seconds, from the JWT's exp


def _jwt_expiry(token: str) -> float:
    """The admin JWT's ``exp``, read unverified as SS does (it is the service's to verify)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return 0.0  # unknown: renewed before each call


def _type_name(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("typeName") or "") if isinstance(body, dict) else ""


def _message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason or f"HTTP {response.status_code}"
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return response.reason or f"HTTP {response.status_code}"


class ActionsServiceClient:
    """One scope's runner scale sets, called with the credential of ``rest`` (a `GitHubClient`), which mints the
    registration tokens the auth chain starts from."""

    def __init__(self, rest: GitHubClient, *, timeout: float = 30.0) -> None:
        self._rest = rest
        self._timeout = timeout
        self._admin: _Admin | None = None
        retry = _BoundedRetry(
            total=4,
            backoff_factor=1.0,
            backoff_max=30.0,
            status_forcelist=(429, 500, 502, 503, 504),
            # Not POST: one whose answer was lost may have been done (a runner, a session, a set made), and its
            # repeat would meet a 409 for it; each POST's caller looks again instead.
            allowed_methods=frozenset({"GET", "PATCH", "DELETE"}),
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        self._session = requests.Session()
        self._session.mount("http://", HTTPAdapter(max_retries=retry))
        self._session.mount("https://", HTTPAdapter(max_retries=retry))
        self._session.headers.update({"User-Agent": '{"subsystem":"pulumi-actions-runners"}'})

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> ActionsServiceClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def config_url(self) -> str:
        return self._rest.target.url

    # -- the scale set ------------------------------------------------------------------------------------

    def runner_group_id(self, name: str) -> int:
        """The group's id by name ("Default" is 1 and not looked up, as ARC does)."""
        if name in ("", "Default"):
            return DEFAULT_RUNNER_GROUP_ID
        body = self._admin_call("GET", f"{GROUPS}/", params={"groupName": name}).json()
        if not body.get("count"):
            raise RunnerGroupNotFound(name, self._rest.target.scope, sorted(self._rest.runner_groups()))
        return int(body["value"][0]["id"])

    def scale_set_by_name(self, name: str, runner_group_id: int) -> ScaleSet | None:
        body = self._admin_call("GET", SCALE_SETS, params={"runnerGroupId": runner_group_id, "name": name}).json()
        if not body.get("count"):
            return None
        if body["count"] > 1:
            raise GitHubError("GET", SCALE_SETS, 200, f"{body['count']} scale sets are named {name!r}")
        return _scale_set(body["value"][0])

    def scale_set(self, scale_set_id: int) -> ScaleSet | None:
        response = self._admin_call("GET", f"{SCALE_SETS}/{scale_set_id}", allow=(404,))
        return None if response.status_code == 404 else _scale_set(response.json())

    def create_scale_set(self, name: str, runner_group_id: int, labels: tuple[str, ...]) -> ScaleSet:
        """The set, its ``runs-on`` name a label of its own (as ARC makes it), the others after it."""
        body = {
            "name": name,
            "runnerGroupId": runner_group_id,
            "labels": [{"name": label, "type": "System"} for label in dict.fromkeys((name, *labels))],
            "RunnerSetting": {"disableUpdate": True},
        }
        return _scale_set(self._admin_call("POST", SCALE_SETS, json=body).json())

    def update_scale_set(
        self, scale_set_id: int, labels: tuple[str, ...], name: str, runner_group_id: int | None = None
    ) -> ScaleSet:
        """Its labels (its name first) and, if given, its runner group. GitHub may keep the labels it had: ARC
        #4424 reports an edit of them that github.com did not take."""
        body: dict[str, Any] = {
            "labels": [{"name": label, "type": "System"} for label in dict.fromkeys((name, *labels))]
        }
        if runner_group_id is not None:
            body["runnerGroupId"] = runner_group_id
        return _scale_set(self._admin_call("PATCH", f"{SCALE_SETS}/{scale_set_id}", json=body).json())

    def delete_scale_set(self, scale_set_id: int) -> None:
        self._admin_call("DELETE", f"{SCALE_SETS}/{scale_set_id}", allow=(404,))

    # -- runners ------------------------------------------------------------------------------------------

    def generate_jit_config(self, scale_set_id: int, name: str) -> ScaleSetRunner | None:
        """A runner of the set named ``name``; None if that name is taken (409 ``AgentExistsException``)."""
        path = f"{SCALE_SETS}/{scale_set_id}/generatejitconfig"
        response = self._admin_call("POST", path, json={"name": name, "workFolder": "_work"}, allow=(409,))
        if response.status_code == 409:
            return None
        body = response.json()
        remember(body["encodedJITConfig"])
        return ScaleSetRunner(int(body["runner"]["id"]), body["runner"]["name"], body["encodedJITConfig"])

    def runner(self, runner_id: int) -> dict[str, Any] | None:
        """The agent; None only when the service says it has none of that id (``AgentNotFoundException``): a
        404 of anything else (a moved URL, a proxy) is no proof that a runner is gone."""
        path = f"{AGENTS}/{runner_id}"
        response = self._admin_call("GET", path, allow=(404,))
        if response.status_code == 404:
            if AGENT_NOT_FOUND in _type_name(response):
                return None
            raise GitHubError("GET", path, 404, _message(response))
        return response.json()

    def listed_runner(self, runner_id: int) -> dict[str, Any] | None:
        """The runner as the REST API lists it (``status`` online or offline, ``busy``: documented fields)."""
        return self._rest.get_runner(runner_id)

    def runner_id_by_name(self, name: str) -> int | None:
        """The id of the set's runner of that name: a runner made by a call whose answer was lost."""
        body = self._admin_call("GET", AGENTS, params={"agentName": name}).json()
        found = [agent for agent in body.get("value") or [] if agent.get("name") == name]
        return int(found[0]["id"]) if found else None

    def remove_runner(self, runner_id: int) -> RemoveOutcome:
        """The agent delete: refused while the runner runs a job, the one race-free busy check. The service
        answers 204 for an agent gone too (the reference's §2); a 404 is one that says so, else an error."""
        path = f"{AGENTS}/{runner_id}"
        response = self._admin_call("DELETE", path, allow=(400, 404, 409))
        if response.status_code in (400, 409) and JOB_STILL_RUNNING in _type_name(response):
            return RemoveOutcome.BUSY
        if response.status_code == 404 and AGENT_NOT_FOUND in _type_name(response):
            return RemoveOutcome.NOT_FOUND
        if response.status_code in (400, 404, 409):
            raise GitHubError("DELETE", path, response.status_code, _message(response))
        return RemoveOutcome.REMOVED

    # -- the session and its message queue ----------------------------------------------------------------

    def create_session(self, scale_set_id: int, owner: str) -> Session:
        path = f"{SCALE_SETS}/{scale_set_id}/sessions"
        response = self._admin_call("POST", path, json={"ownerName": owner}, allow=(409,))
        if response.status_code == 409:
            raise SessionConflict("POST", path, 409, _message(response))
        return _session(response.json())

    def refresh_session(self, scale_set_id: int, session_id: str) -> Session:
        path = f"{SCALE_SETS}/{scale_set_id}/sessions/{session_id}"
        response = self._admin_call("PATCH", path, allow=(404,))
        if response.status_code == 404:
            raise SessionGone("PATCH", path, 404, _message(response))
        return _session(response.json())

    def delete_session(self, scale_set_id: int, session_id: str) -> None:
        self._admin_call("DELETE", f"{SCALE_SETS}/{scale_set_id}/sessions/{session_id}", allow=(404,))

    def get_message(self, session: Session, last_message_id: int, capacity: int) -> Message | None:
        """The next message, waiting up to the service's long poll; None when nothing came within it."""
        response = self._session.get(
            session.queue_url,
            params={"lastMessageId": last_message_id} if last_message_id else None,
            headers={
                "Authorization": f"Bearer {session.queue_token}",
                "Accept": f"application/json; api-version={API_VERSION}",
                "X-ScaleSetMaxCapacity": str(max(0, capacity)),
            },
            timeout=(self._timeout, LONG_POLL_TIMEOUT_SECONDS),
        )
        self._queue_refusal(response, "GET", "message queue")
        if response.status_code == 202 or not response.content:
            return None
        body = response.json()
        jobs: list[dict[str, Any]] = []
        if body.get("messageType") == "RunnerScaleSetJobMessages":
            try:
                decoded = json.loads(body.get("body") or "[]")
            except ValueError:
                log.warning("message %s: its body is not JSON; acknowledged and skipped", body.get("messageId"))
                decoded = []
            jobs = [job for job in decoded if isinstance(job, dict)] if isinstance(decoded, list) else []
        return Message(int(body["messageId"]), jobs, body.get("statistics"))

    def delete_message(self, session: Session, message_id: int) -> None:
        """Acknowledged: ``{queue path}/{id}``, the queue URL's query kept (SS session_client.go)."""
        url = urlsplit(session.queue_url)
        response = self._session.delete(
            urlunsplit(url._replace(path=f"{url.path.rstrip('/')}/{message_id}")),
            headers={"Authorization": f"Bearer {session.queue_token}"},
            timeout=self._timeout,
        )
        self._queue_refusal(response, "DELETE", "message")

    def acquire_jobs(self, session: Session, scale_set_id: int, request_ids: list[int]) -> list[int]:
        admin = self._admin_connection()
        response = self._session.post(
            f"{admin.service_url}{SCALE_SETS}/{scale_set_id}/acquirejobs",
            params={"api-version": API_VERSION},
            json=request_ids,
            headers={"Authorization": f"Bearer {session.queue_token}"},
            timeout=self._timeout,
        )
        self._queue_refusal(response, "POST", "acquirejobs")
        return [int(x) for x in response.json().get("value") or []]

    @staticmethod
    def _queue_refusal(response: requests.Response, method: str, what: str) -> None:
        if response.status_code == 401:
            raise QueueTokenExpired(method, what, 401, _message(response))
        if response.status_code == 404:
            raise SessionGone(method, what, 404, _message(response))
        if response.status_code not in (200, 202, 204):
            raise GitHubError(method, what, response.status_code, _message(response))

    # -- transport ----------------------------------------------------------------------------------------

    def _admin_connection(self, *, renew: bool = False) -> _Admin:
        """The service's URL and a valid admin token: the auth chain, run again when the token is near its end."""
        if renew or self._admin is None or self._admin.expires < time.time() + ADMIN_TOKEN_MARGIN_SECONDS:
            grant = self._rest.create_registration_token()
            url = f"{self._rest.target.api_url}/actions/runner-registration"
            delay = REGISTRATION_FIRST_DELAY_SECONDS
            for attempt in range(1, REGISTRATION_ATTEMPTS + 1):
                response = self._session.post(
                    url,
                    headers={"Authorization": f"RemoteAuth {grant.token}"},
                    json={"url": self._rest.target.url, "runner_event": "register"},
                    timeout=self._timeout,
                )
                if response.status_code not in (401, 403) or attempt == REGISTRATION_ATTEMPTS:
                    break
                log.info("runner-registration refused the new token (%d); again in %.1f s", response.status_code, delay)
                time.sleep(delay)
                delay = min(REGISTRATION_LAST_DELAY_SECONDS, delay * 2)
            if not response.ok:
                raise GitHubError("POST", "/actions/runner-registration", response.status_code, _message(response))
            body = response.json()
            remember(body["token"])
            service_url = body["url"] if body["url"].endswith("/") else body["url"] + "/"
            self._admin = _Admin(service_url, body["token"], _jwt_expiry(body["token"]))
        return self._admin

    def _admin_call(
        self, method: str, path: str, *, allow: tuple[int, ...] = (), params: dict | None = None, json: Any = None
    ) -> requests.Response:
        """An admin call; a 401 renews the admin token once. A 404 naming the scale set is `ScaleSetNotFound`."""
        for attempt in (1, 2):
            admin = self._admin_connection(renew=attempt == 2)
            response = self._session.request(
                method,
                f"{admin.service_url}{path}",
                params={**(params or {}), "api-version": API_VERSION},
                json=json,
                headers={"Authorization": f"Bearer {admin.token}", "Content-Type": "application/json"},
                timeout=self._timeout,
            )
            if response.status_code != 401:
                break
        if response.status_code == 404 and SET_NOT_FOUND in _type_name(response):
            raise ScaleSetNotFound(method, path, 404, _message(response))
        if response.ok or response.status_code in allow:
            return response
        raise GitHubError(method, path, response.status_code, _message(response))


def _scale_set(body: dict[str, Any]) -> ScaleSet:
    return ScaleSet(
        id=int(body["id"]),
        name=body["name"],
        runner_group_id=int(body.get("runnerGroupId") or DEFAULT_RUNNER_GROUP_ID),
        labels=tuple(label["name"] for label in body.get("labels") or []),
        statistics=dict(body.get("statistics") or {}),
    )


def _session(body: dict[str, Any]) -> Session:
    remember(body["messageQueueAccessToken"])
    return Session(
        id=body["sessionId"],
        owner=body.get("ownerName") or "",
        queue_url=body["messageQueueUrl"],
        queue_token=body["messageQueueAccessToken"],
        statistics=dict(body.get("statistics") or {}),
    )
