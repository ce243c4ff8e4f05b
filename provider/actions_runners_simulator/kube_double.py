"""A loopback test double of the Kubernetes core/v1 API, for machines without a cluster.

The provider runs in its own process and reaches Kubernetes through the official client and a kubeconfig,
so in-process mocking cannot reach it: this double serves real HTTP JSON shaped like kube-apiserver's,
close enough for the client's strict deserialisation. It models what the provider depends on: namespaces,
secrets and pods with uid/resourceVersion/generateName, label and field selectors, Status errors, and a
kubelet-like pod lifecycle (secret-backed env, phases, restarts, graceful deletion) whose container
behaviour is delegated to a pluggable ContainerRuntime. Only a pod's first container is run and reported.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import heapq
import itertools
import json
import logging
import os
import pathlib
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

_log = logging.getLogger(__name__)

_KINDS = {"namespaces": "Namespace", "pods": "Pod", "secrets": "Secret"}
_REMOVAL_EVENTS = {"namespaces": "namespace_deleted", "pods": "pod_removed", "secrets": "secret_deleted"}
_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}  # fmt: skip
_MERGE_PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
_SERVER_OWNED_METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")
_GENERATED_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's: no vowels, so no accidental words
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_ROUTE = re.compile(
    r"/api/v1(?:/namespaces/(?P<namespace>[^/]+))?/(?P<resource>namespaces|pods|secrets)(?:/(?P<name>[^/]+))?"
)
_HOST_IP = "10.0.0.10"


class PodProcess(Protocol):
    """The running container of a pod, as the double hands it to a ContainerRuntime."""

    namespace: str
    name: str
    image: str
    restart_policy: str
    env: dict[str, str]

    def exited(self, exit_code: int, last_log_line: str = "") -> None:
        """Report that the container process ended (from any thread, at most once per start); its last log line
        becomes the termination message of a container with ``terminationMessagePolicy: FallbackToLogsOnError``
        that failed."""


class ContainerRuntime(Protocol):
    """What runs inside pods: the double decides when containers start and stop, the runtime what they do."""

    def start(self, process: PodProcess) -> None:
        """The container started; return quickly and do the work on your own threads or timers."""

    def terminate(self, process: PodProcess) -> None:
        """SIGTERM on deletion; call process.exited(...) once the container has stopped."""


class _IdleRuntime:
    """The default runtime: a container idles until terminated, then exits 0 at once."""

    def start(self, process: PodProcess) -> None:
        """Nothing to run: the container simply stays up."""

    def terminate(self, process: PodProcess) -> None:
        process.exited(0)


class _ApiError(Exception):
    """A failure the API reports as a Status object, the way kube-apiserver does."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: dict | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict:
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": str(self)}
        status |= {"reason": self.reason, "code": self.code}
        if self.details is not None:
            status["details"] = self.details
        return status


def _not_found(resource: str, name: str) -> _ApiError:
    return _ApiError(404, f'{resource} "{name}" not found', details={"name": name, "kind": resource})


def _invalid(kind: str, name: str, field: str, problem: str) -> _ApiError:
    cause = {"reason": "FieldValueInvalid", "message": problem, "field": field}
    details = {"name": name, "kind": kind, "causes": [cause]}
    return _ApiError(422, f'{kind} "{name}" is invalid: {field}: {problem}', details=details)


def _rfc3339(seconds_from_now: float = 0) -> str:
    """Second-precision UTC with a Z, as the API serialises metav1.Time."""
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _field_value(obj: dict, path: str) -> str | None:
    """The value at a dotted field path such as metadata.name, as field selectors and fieldRefs see it."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return None if value is None else str(value)


# A requirement is (operator, key, values); "in"/"notin" also express equality, so one evaluator serves both.
_Requirement = tuple[str, str, frozenset[str]]
_OPERATORS: dict[str, Callable[[str | None, frozenset[str]], bool]] = {
    "in": lambda value, values: value in values,
    "notin": lambda value, values: value not in values,
    "exists": lambda value, _: value is not None,
    "!exists": lambda value, _: value is None,
}
_EQUALITY = {"=": "in", "==": "in", "!=": "notin"}


def _parse_selector(selector: str, *, labels: bool) -> list[_Requirement]:
    """Parse a label selector (equality, set-based, existence) or a field selector (equality only)."""
    requirements = []
    for text in (part.strip() for part in re.findall(r"[^,(]+(?:\([^)]*\))?", selector)):
        if not text:
            continue
        if labels and (found := re.fullmatch(r"(\S+)\s+(in|notin)\s*\(([^)]*)\)", text)):
            key, operator, values = found.groups()
            requirements.append((operator, key, frozenset(value.strip() for value in values.split(","))))
        elif found := re.fullmatch(r"([^\s!=]+)\s*(==|=|!=)\s*([^\s!=]*)", text):
            key, operator, value = found.groups()
            requirements.append((_EQUALITY[operator], key, frozenset([value])))
        elif labels and (found := re.fullmatch(r"(!?)\s*([^\s!=()]+)", text)):
            requirements.append((f"{found[1]}exists", found[2], frozenset()))
        else:
            raise _ApiError(400, f"unable to parse requirement: {text!r}")
    return requirements


def _satisfies(requirements: list[_Requirement], lookup: Callable[[str], str | None]) -> bool:
    return all(_OPERATORS[operator](lookup(key), values) for operator, key, values in requirements)


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge_patch(merged.get(key), value)
    return merged


def _fold_string_data(secret: dict) -> None:
    """Merge stringData into base64 data and drop it, as the API does on every write; reject data not base64."""
    data = dict(secret.get("data") or {})
    for key, value in data.items():
        try:
            base64.b64decode(value, validate=True)
        except (TypeError, ValueError):
            raise _ApiError(400, f"Secret.data[{key!r}]: illegal base64 data") from None
    for key, value in (secret.pop("stringData", None) or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    if data:
        secret["data"] = data
    secret.setdefault("type", "Opaque")


def _pod_conditions(ready: bool) -> list[dict]:
    now = _rfc3339()
    kinds = {"PodScheduled": True, "Initialized": True, "ContainersReady": ready, "Ready": ready}
    return [{"type": kind, "status": str(met), "lastTransitionTime": now} for kind, met in kinds.items()]


def _outside_labels(pod: dict) -> dict:
    """A pod without its labels and annotations: the part a PATCH must leave as it is."""
    metadata = {key: value for key, value in pod["metadata"].items() if key not in ("labels", "annotations")}
    return pod | {"metadata": metadata}


class _ContainerConfigError(Exception):
    """The kubelet cannot build the container's config yet (a referenced Secret or key is missing)."""


class _Timers:
    """One thread runs every delayed transition, so hundreds of pods cost one thread, not hundreds."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # breaks deadline ties, so callbacks are never compared
        self._wakeup = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="kube-double-timers", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._wakeup:
            self._stopped = True
            self._wakeup.notify()
        if self._thread.is_alive():
            self._thread.join()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> None:
        """Run callback on the timer thread once time.monotonic() reaches deadline."""
        with self._wakeup:
            heapq.heappush(self._heap, (deadline, next(self._order), callback))
            self._wakeup.notify()

    def _run(self) -> None:
        while True:
            with self._wakeup:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._wakeup.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                if self._stopped:
                    return
                callback = heapq.heappop(self._heap)[2]
            try:
                callback()
            except Exception:  # one broken transition must not stop every later one
                _log.exception("kube double timer callback failed")


class _Process:
    """One start of a pod's container; its exit report goes back to the cluster that started it.

    The runtime is called outside the cluster's lock, so a DELETE can decide to terminate a container whose
    start is not delivered yet: the SIGTERM then waits for the start, and the runtime sees them in order.
    """

    def __init__(self, cluster: _Cluster, pod: dict, env: dict[str, str]) -> None:
        self.namespace: str = pod["metadata"]["namespace"]
        self.name: str = pod["metadata"]["name"]
        self.uid: str = pod["metadata"]["uid"]
        self.image: str = pod["spec"]["containers"][0]["image"]
        self.restart_policy: str = pod["spec"]["restartPolicy"]
        self.env = env
        self._cluster = cluster
        self._delivery_lock = threading.Lock()
        self._start_delivered = False
        self._terminate_requested = False

    def exited(self, exit_code: int, last_log_line: str = "") -> None:
        self._cluster.container_exited(self, exit_code, last_log_line)

    def start_in(self, runtime: ContainerRuntime) -> None:
        with self._delivery_lock:
            _call_runtime(runtime.start, self)
            self._start_delivered = True
            terminate_now = self._terminate_requested
        if terminate_now:
            _call_runtime(runtime.terminate, self)

    def terminate_in(self, runtime: ContainerRuntime) -> None:
        with self._delivery_lock:
            self._terminate_requested = True
            if not self._start_delivered:
                return
        _call_runtime(runtime.terminate, self)


def _call_runtime(call: Callable[[_Process], None], process: _Process) -> None:
    """A failing runtime must not take the API or the timer thread down with it."""
    try:
        call(process)
    except Exception:
        _log.exception("container runtime failed in %s for pod %s/%s", call.__name__, process.namespace, process.name)


class _Cluster:
    """The stored objects and the pod lifecycle: what the apiserver, scheduler and kubelet would do."""

    def __init__(
        self, runtime: ContainerRuntime, timers: _Timers, schedule_delay: float, restart_backoff: float
    ) -> None:
        self._runtime = runtime
        self._timers = timers
        self._schedule_delay = schedule_delay
        self._restart_backoff = restart_backoff
        self._lock = threading.Lock()
        self._objects: dict[str, dict[tuple[str, str], dict]] = {resource: {} for resource in _KINDS}
        self._revision = 0
        self._events: list[dict] = []
        self._processes: dict[str, _Process] = {}  # pod uid → its running container
        self._kill_deadlines: dict[str, float] = {}  # pod uid → monotonic time its deletion grace ends
        self._pod_ips = itertools.count()
        for name in ("default", "kube-node-lease", "kube-public", "kube-system"):
            self.create("namespaces", "", {"metadata": {"name": name}})

    def events(self) -> list[dict]:
        with self._lock:
            return copy.deepcopy(self._events)

    def get(self, resource: str, namespace: str, name: str) -> dict:
        with self._lock:
            return copy.deepcopy(self._stored(resource, namespace, name))

    def list_matching(
        self, resource: str, namespace: str | None, label_selector: str = "", field_selector: str = ""
    ) -> dict:
        labels = _parse_selector(label_selector, labels=True)
        fields = _parse_selector(field_selector, labels=False)
        with self._lock:
            items = [
                copy.deepcopy(obj)
                for (obj_namespace, _), obj in sorted(self._objects[resource].items())
                if namespace in (None, obj_namespace)
                and _satisfies(labels, (obj["metadata"].get("labels") or {}).get)
                and _satisfies(fields, lambda path, obj=obj: _field_value(obj, path))
            ]
            metadata = {"resourceVersion": str(self._revision)}
        return {"kind": f"{_KINDS[resource]}List", "apiVersion": "v1", "metadata": metadata, "items": items}

    def create(self, resource: str, namespace: str, body: Any) -> dict:
        kind = _KINDS[resource]
        obj = copy.deepcopy(body) if isinstance(body, dict) else {}
        metadata = obj["metadata"] = dict(obj.get("metadata") or {})
        with self._lock:
            if metadata.pop("namespace", None) not in (None, namespace):
                message = "the namespace of the provided object does not match the namespace sent on the request"
                raise _ApiError(400, message)
            if namespace and ("", namespace) not in self._objects["namespaces"]:
                raise _not_found("namespaces", namespace)
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = metadata["generateName"] + "".join(random.choices(_GENERATED_NAME_ALPHABET, k=5))
            self._validate(resource, obj)
            key = (namespace, metadata["name"])
            if key in self._objects[resource]:
                details = {"name": key[1], "kind": resource}
                raise _ApiError(409, f'{resource} "{key[1]}" already exists', "AlreadyExists", details)
            metadata |= {"namespace": namespace} if namespace else {}
            metadata |= {"uid": str(uuid.uuid4()), "creationTimestamp": _rfc3339()}
            obj |= {"kind": kind, "apiVersion": "v1"}
            if resource == "namespaces":
                metadata["labels"] = (metadata.get("labels") or {}) | {"kubernetes.io/metadata.name": key[1]}
                obj |= {"spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
            elif resource == "secrets":
                _fold_string_data(obj)
            else:
                self._admit_pod(obj)
            self._objects[resource][key] = obj
            self._bump(obj)
            self._record(f"{kind.lower()}_created", obj)
            return copy.deepcopy(obj)

    def replace(self, resource: str, namespace: str, name: str, body: Any) -> dict:
        with self._lock:
            current = self._stored(resource, namespace, name)
            replacement = copy.deepcopy(body) if isinstance(body, dict) else {}
            self._check_fresh(current, replacement)
            if (given := (replacement.get("metadata") or {}).get("name", name)) != name:
                raise _ApiError(400, f"the name of the object ({given}) does not match the name on the URL ({name})")
            return self._store_update(resource, current, replacement)

    def patch(self, resource: str, namespace: str, name: str, patch: Any) -> dict:
        if not isinstance(patch, dict):
            raise _ApiError(400, "a merge patch must be a JSON object")
        with self._lock:
            current = self._stored(resource, namespace, name)
            self._check_fresh(current, patch)
            patched = _merge_patch(current, patch)
            if resource == "pods":
                patched["status"] = current["status"]  # status is only writable through the status subresource
                if _outside_labels(patched) != _outside_labels(current):
                    problem = "Forbidden: pod updates may not change fields other than labels and annotations"
                    raise _invalid("Pod", name, "spec", problem)
            return self._store_update(resource, current, patched)

    def delete(self, resource: str, namespace: str, name: str, grace_seconds: int | None) -> dict:
        """Delete at once, or for a pod with a running container, start its graceful termination."""
        with self._lock:
            obj = self._stored(resource, namespace, name)
            if resource == "pods":
                answer, to_terminate = self._delete_pod(obj, grace_seconds)
            else:
                to_terminate = self._remove(resource, (namespace, name))
                details = {"name": name, "kind": resource, "uid": obj["metadata"]["uid"]}
                answer = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
        for process in to_terminate:
            process.terminate_in(self._runtime)
        return answer

    def container_exited(self, process: _Process, exit_code: int, last_log_line: str = "") -> None:
        """Kubelet's part: finish, restart or (while terminating) remove the pod whose container ended."""
        with self._lock:
            if self._processes.get(process.uid) is not process:
                return  # a second report, or a container whose pod was removed already
            del self._processes[process.uid]
            key = (process.namespace, process.name)
            pod = self._objects["pods"][key]
            self._record("container_exited", pod, exit_code=exit_code)
            if "deletionTimestamp" in pod["metadata"]:
                self._remove("pods", key)
                return
            status, container = pod["status"], pod["status"]["containerStatuses"][0]
            terminated = {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": container["state"]["running"]["startedAt"],
                "finishedAt": _rfc3339(),
                "containerID": container["containerID"],
            }
            policy = pod["spec"]["containers"][0]["terminationMessagePolicy"]
            if exit_code != 0 and policy == "FallbackToLogsOnError" and last_log_line:
                terminated["message"] = last_log_line
            container |= {"ready": False, "started": False}
            status["conditions"] = _pod_conditions(ready=False)
            if process.restart_policy == "Always" or (process.restart_policy == "OnFailure" and exit_code != 0):
                container["restartCount"] += 1
                container["lastState"] = {"terminated": terminated}
                message = f"back-off {self._restart_backoff}s restarting failed container={container['name']}"
                container["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
                self._start_later(self._restart_backoff, key, process.uid)
            else:
                container["state"] = {"terminated": terminated}
                status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
            self._bump(pod)

    def _stored(self, resource: str, namespace: str, name: str) -> dict:
        try:
            return self._objects[resource][(namespace, name)]
        except KeyError:
            raise _not_found(resource, name) from None

    def _validate(self, resource: str, obj: dict) -> None:
        kind, name = _KINDS[resource], obj["metadata"].get("name") or ""
        if not name:
            raise _invalid(kind, name, "metadata.name", "Required value: name or generateName is required")
        pattern, limit = (_DNS_LABEL, 63) if resource == "namespaces" else (_DNS_SUBDOMAIN, 253)
        if len(name) > limit or not pattern.fullmatch(name):
            problem = f'Invalid value: "{name}": must be a lowercase RFC 1123 name of at most {limit} characters'
            raise _invalid(kind, name, "metadata.name", problem)
        if resource != "pods":
            return
        containers = (obj.get("spec") or {}).get("containers")
        if not containers:
            raise _invalid(kind, name, "spec.containers", "Required value")
        for index, container in enumerate(containers):
            for field in ("name", "image"):
                if not container.get(field):
                    raise _invalid(kind, name, f"spec.containers[{index}].{field}", "Required value")

    def _check_fresh(self, current: dict, change: dict) -> None:
        """Optimistic concurrency: a write that names a resourceVersion must name the current one."""
        expected = (change.get("metadata") or {}).get("resourceVersion")
        if expected and expected != current["metadata"]["resourceVersion"]:
            resource, name = current["kind"].lower() + "s", current["metadata"]["name"]
            message = (
                f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again"
            )
            raise _ApiError(409, message, "Conflict", {"name": name, "kind": resource})

    def _store_update(self, resource: str, current: dict, updated: dict) -> dict:
        metadata = updated["metadata"] = dict(updated.get("metadata") or {})
        for field in _SERVER_OWNED_METADATA:  # clients cannot rename, re-identify or undelete an object
            if field in current["metadata"]:
                metadata[field] = current["metadata"][field]
            else:
                metadata.pop(field, None)
        updated |= {"kind": current["kind"], "apiVersion": "v1"}
        if resource == "secrets":
            _fold_string_data(updated)
        current.clear()
        current.update(updated)
        self._bump(current)
        return copy.deepcopy(current)

    def _admit_pod(self, pod: dict) -> None:
        spec, metadata = pod["spec"], pod["metadata"]
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec["nodeName"] = "simulator-node"
        container = spec["containers"][0]
        for each in spec["containers"]:  # the API server's defaults
            each.setdefault("terminationMessagePath", "/dev/termination-log")
            each.setdefault("terminationMessagePolicy", "File")
        container_status = {"name": container["name"], "image": container["image"], "imageID": "", "ready": False}
        container_status |= {"restartCount": 0, "started": False, "state": {"waiting": {"reason": "ContainerCreating"}}}
        conditions = _pod_conditions(ready=False)
        pod["status"] = {"phase": "Pending", "qosClass": "BestEffort", "conditions": conditions}
        pod["status"]["containerStatuses"] = [container_status]
        self._start_later(self._schedule_delay, (metadata["namespace"], metadata["name"]), metadata["uid"])

    def _start_later(self, delay: float, key: tuple[str, str], uid: str) -> None:
        self._timers.call_at(time.monotonic() + delay, lambda: self._start_container(key, uid))

    def _start_container(self, key: tuple[str, str], uid: str) -> None:
        """Kubelet's part: start the container once its env resolves, else say why and try again later."""
        with self._lock:
            pod = self._objects["pods"].get(key)
            if pod is None or pod["metadata"]["uid"] != uid or uid in self._processes:
                return  # removed, re-created under the same name, or running already
            status, container = pod["status"], pod["status"]["containerStatuses"][0]
            try:
                env = self._resolve_env(pod)
            except _ContainerConfigError as error:
                waiting = {"waiting": {"reason": "CreateContainerConfigError", "message": str(error)}}
                if container["state"] != waiting:
                    container["state"] = waiting
                    self._bump(pod)
                self._start_later(self._schedule_delay, key, uid)
                return
            now = _rfc3339()
            if status["phase"] == "Pending":
                ordinal = next(self._pod_ips)
                pod_ip = f"10.244.{ordinal // 250 % 250}.{ordinal % 250 + 2}"
                status |= {"phase": "Running", "startTime": now, "hostIP": _HOST_IP, "podIP": pod_ip}
                status |= {"hostIPs": [{"ip": _HOST_IP}], "podIPs": [{"ip": pod_ip}]}
            digest = hashlib.sha256(container["image"].encode()).hexdigest()
            container |= {"ready": True, "started": True, "state": {"running": {"startedAt": now}}}
            container |= {"imageID": f"{container['image']}@sha256:{digest}", "containerID": f"containerd://{uid}"}
            status["conditions"] = _pod_conditions(ready=True)
            process = self._processes[uid] = _Process(self, pod, env)
            self._bump(pod)
            self._record("container_started", pod, restart_count=container["restartCount"])
        process.start_in(self._runtime)

    def _resolve_env(self, pod: dict) -> dict[str, str]:
        """The first container's env as the kubelet hands it over: secretKeyRefs and fieldRefs resolved."""
        namespace, env = pod["metadata"]["namespace"], {}
        for variable in pod["spec"]["containers"][0].get("env") or []:
            source = variable.get("valueFrom") or {}
            if reference := source.get("secretKeyRef"):
                secret_name, key = reference.get("name", ""), reference.get("key", "")
                secret = self._objects["secrets"].get((namespace, secret_name))
                encoded = (secret or {}).get("data", {}).get(key)
                if encoded is not None:
                    env[variable["name"]] = base64.b64decode(encoded).decode(errors="replace")
                elif reference.get("optional"):
                    continue
                elif secret is None:
                    raise _ContainerConfigError(f'secret "{secret_name}" not found')
                else:
                    raise _ContainerConfigError(f"couldn't find key {key} in Secret {namespace}/{secret_name}")
            elif reference := source.get("fieldRef"):
                env[variable["name"]] = _field_value(pod, reference.get("fieldPath", "")) or ""
            else:
                env[variable["name"]] = variable.get("value", "")
        return env

    def _delete_pod(self, pod: dict, grace_seconds: int | None) -> tuple[dict, list[_Process]]:
        metadata = pod["metadata"]
        key, uid = (metadata["namespace"], metadata["name"]), metadata["uid"]
        if grace_seconds is None:
            grace_seconds = pod["spec"].get("terminationGracePeriodSeconds", 30)
        already_terminating = "deletionTimestamp" in metadata
        if uid not in self._processes or grace_seconds <= 0:  # nothing running to stop gracefully, or a kill
            if uid in self._processes:
                self._record("container_killed", pod)
            metadata |= {"deletionTimestamp": _rfc3339(), "deletionGracePeriodSeconds": 0}
            answer = copy.deepcopy(pod)
            left_running = self._remove("pods", key)
            return answer, [] if already_terminating else left_running
        deadline = time.monotonic() + grace_seconds
        if already_terminating and deadline >= self._kill_deadlines[uid]:
            return copy.deepcopy(pod), []  # a repeated delete may shorten the grace, never lengthen it
        self._kill_deadlines[uid] = deadline
        metadata |= {"deletionTimestamp": _rfc3339(grace_seconds), "deletionGracePeriodSeconds": grace_seconds}
        self._bump(pod)
        self._record("pod_terminating", pod, grace_seconds=grace_seconds)
        self._timers.call_at(deadline, lambda: self._grace_ended(key, uid))
        return copy.deepcopy(pod), [] if already_terminating else [self._processes[uid]]

    def _grace_ended(self, key: tuple[str, str], uid: str) -> None:
        with self._lock:
            pod = self._objects["pods"].get(key)
            if pod is None or pod["metadata"]["uid"] != uid or self._kill_deadlines[uid] > time.monotonic():
                return  # removed already, or the timer of a grace that was shortened since
            self._record("container_killed", pod)
            self._remove("pods", key)

    def _remove(self, resource: str, key: tuple[str, str]) -> list[_Process]:
        """Drop an object (a namespace takes its pods and secrets along); return the containers left running."""
        obj = self._objects[resource].pop(key)
        self._revision += 1
        self._record(_REMOVAL_EVENTS[resource], obj)
        if resource == "pods":
            self._kill_deadlines.pop(obj["metadata"]["uid"], None)
            process = self._processes.pop(obj["metadata"]["uid"], None)
            return [process] if process else []
        if resource == "secrets":
            return []
        members = [
            (kind, member) for kind in ("pods", "secrets") for member in self._objects[kind] if member[0] == key[1]
        ]
        return [process for kind, member in members for process in self._remove(kind, member)]

    def _bump(self, obj: dict) -> None:
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)

    def _record(self, event_type: str, obj: dict, **details: Any) -> None:
        metadata = obj["metadata"]
        event = {"type": event_type, "namespace": metadata.get("namespace", ""), "name": metadata["name"]}
        self._events.append(event | {"at": time.monotonic()} | details)


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    status: int  # LOST_ANSWER: the request takes effect, and the connection closes before any answer
    remaining: int


LOST_ANSWER = 0


class _Server(ThreadingHTTPServer):
    """Remembers its open connections, so that closing it cuts off keep-alive clients too."""

    def __init__(self, double: KubeDouble) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.double = double
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """Hands each HTTP request to the double and writes its answer back as JSON."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall between
    server: _Server

    def do_GET(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        status, payload = self.server.double._respond(self.command, self.path, self.headers, self.rfile.read(length))
        if status == LOST_ANSWER:
            self.close_connection = True  # hung up with no answer: the client cannot tell whether it took effect
            return
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 429:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests inspect KubeDouble.requests() instead of stderr."""


class KubeDouble:
    """A Kubernetes core/v1 API on 127.0.0.1 that the official client can use through a kubeconfig."""

    def __init__(
        self,
        runtime: ContainerRuntime | None = None,
        *,
        schedule_delay: float = 0.1,
        restart_backoff: float = 1.0,
        bearer_token: str = "simulator-kube-token",
    ) -> None:
        self._timers = _Timers()
        self._cluster = _Cluster(runtime or _IdleRuntime(), self._timers, schedule_delay, restart_backoff)
        self._bearer_token = bearer_token
        self._bookkeeping_lock = threading.Lock()
        self._faults: list[_Fault] = []
        self._served: list[tuple[str, str, int]] = []
        self._server: _Server | None = None

    def start(self) -> KubeDouble:
        """Bind a free loopback port and serve on a daemon thread."""
        if self._server is not None:
            raise RuntimeError("the Kubernetes double is running already")
        self._server = _Server(self)
        self._timers.start()
        serve = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="kube-double-http", daemon=True)
        serve.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop all pending transitions; safe to call more than once."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        self._timers.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the Kubernetes double is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def write_kubeconfig(self, path: str | os.PathLike, *, namespace: str = "default") -> pathlib.Path:
        """Write a kubeconfig (JSON, which is valid YAML) whose current context points at this double."""
        context = {"cluster": "simulator", "user": "simulator", "namespace": namespace}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "simulator", "cluster": {"server": self.url}}],
            "users": [{"name": "simulator", "user": {"token": self._bearer_token}}],
            "contexts": [{"name": "simulator", "context": context}],
            "current-context": "simulator",
        }
        target = pathlib.Path(path)
        target.write_text(json.dumps(config, indent=2))
        return target

    def pod(self, namespace: str, name: str) -> dict | None:
        return self._find("pods", namespace, name)

    def pods(self, namespace: str | None = None) -> list[dict]:
        return self._cluster.list_matching("pods", namespace)["items"]

    def secret(self, namespace: str, name: str) -> dict | None:
        return self._find("secrets", namespace, name)

    def secrets(self, namespace: str | None = None) -> list[dict]:
        return self._cluster.list_matching("secrets", namespace)["items"]

    def namespaces(self) -> list[dict]:
        return self._cluster.list_matching("namespaces", None)["items"]

    def events(self) -> list[dict]:
        """What happened, oldest first, each with a time.monotonic() "at" so tests can check timing."""
        return self._cluster.events()

    def fail_next(self, method: str, path_regex: str, status: int, *, count: int = 1) -> None:
        """Answer the next `count` requests with this method whose path re.search-es path_regex with `status`."""
        with self._bookkeeping_lock:
            self._faults.append(_Fault(method.upper(), re.compile(path_regex), status, count))

    def lose_next_answer(self, method: str, path_regex: str, *, count: int = 1) -> None:
        """Serve the next `count` matching requests, then hang up before answering (a lost response)."""
        with self._bookkeeping_lock:
            self._faults.append(_Fault(method.upper(), re.compile(path_regex), LOST_ANSWER, count))

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path without query, status) of every request served, oldest first."""
        with self._bookkeeping_lock:
            return list(self._served)

    def _find(self, resource: str, namespace: str, name: str) -> dict | None:
        try:
            return self._cluster.get(resource, namespace, name)
        except _ApiError:
            return None

    def _respond(self, method: str, target: str, headers: Message, raw_body: bytes) -> tuple[int, dict]:
        url = urlsplit(target)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        try:
            if headers.get("Authorization") != f"Bearer {self._bearer_token}":
                raise _ApiError(401, "Unauthorized")
            lost = self._raise_injected_fault(method, url.path)
            body = json.loads(raw_body) if raw_body.strip() else None
            status, payload = self._route(method, url.path, query, headers.get("Content-Type") or "", body)
            status = LOST_ANSWER if lost else status
        except json.JSONDecodeError as error:
            status, payload = 400, _ApiError(400, f"the request body is not valid JSON: {error}").status()
        except _ApiError as error:
            status, payload = error.code, error.status()
        except Exception as error:  # a malformed object the double does not expect: answer, do not hang up
            _log.exception("kube double failed on %s %s", method, target)
            status, payload = 500, _ApiError(500, f"internal error: {error!r}").status()
        with self._bookkeeping_lock:
            self._served.append((method, url.path, status))
        return status, payload

    def _raise_injected_fault(self, method: str, path: str) -> bool:
        """Raises an injected failure; True if the request is to be served and its answer lost."""
        with self._bookkeeping_lock:
            fault = next((f for f in self._faults if f.method == method and f.path.search(path)), None)
            if fault is None:
                return False
            fault.remaining -= 1
            if fault.remaining <= 0:
                self._faults.remove(fault)
        if fault.status == LOST_ANSWER:
            return True
        details = {"retryAfterSeconds": 1} if fault.status == 429 else None
        raise _ApiError(fault.status, f"injected failure ({fault.status}) for {method} {path}", details=details)

    def _route(self, method: str, path: str, query: dict[str, str], content_type: str, body: Any) -> tuple[int, dict]:
        if method == "GET" and path in ("/version", "/version/"):
            build = {"gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z"}
            toolchain = {"goVersion": "go1.23", "compiler": "gc", "platform": "linux/amd64"}
            return 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-simulator"} | build | toolchain
        if method == "GET" and path in ("/api", "/api/"):
            addresses = [{"clientCIDR": "0.0.0.0/0", "serverAddress": urlsplit(self.url).netloc}]
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": addresses}
        route = _ROUTE.fullmatch(path)
        if not _is_api_path(route):
            raise _ApiError(404, "the server could not find the requested resource")
        resource, namespace, name = route["resource"], route["namespace"] or "", route["name"]
        if name is None and method == "GET":
            selectors = (query.get("labelSelector", ""), query.get("fieldSelector", ""))
            return 200, self._cluster.list_matching(resource, route["namespace"], *selectors)
        if name is None and method == "POST" and (namespace or resource == "namespaces"):
            return 201, self._cluster.create(resource, namespace, body)
        if name is not None and method == "GET":
            return 200, self._cluster.get(resource, namespace, name)
        if name is not None and method == "DELETE":
            return 200, self._cluster.delete(resource, namespace, name, _grace_seconds(query, body))
        if name is not None and method == "PATCH":
            if content_type.split(";")[0].strip() not in _MERGE_PATCH_TYPES:
                accepted = ", ".join(_MERGE_PATCH_TYPES)
                raise _ApiError(
                    415, f"the body of the request was in an unknown format - accepted media types: {accepted}"
                )
            return 200, self._cluster.patch(resource, namespace, name, body)
        if name is not None and method == "PUT" and resource == "secrets":
            return 200, self._cluster.replace(resource, namespace, name, body)
        raise _ApiError(405, f"the server does not allow {method} on the requested resource")


def _is_api_path(route: re.Match[str] | None) -> bool:
    """Namespaces are cluster-scoped; pods and secrets are namespaced but also listable cluster-wide."""
    if route is None:
        return False
    if route["resource"] == "namespaces":
        return route["namespace"] is None
    return route["namespace"] is not None or route["name"] is None


def _grace_seconds(query: dict[str, str], delete_options: Any) -> int | None:
    """The grace a DELETE asks for: the query parameter wins over DeleteOptions in the body."""
    requested = query.get("gracePeriodSeconds")
    if requested is None and isinstance(delete_options, dict):
        requested = delete_options.get("gracePeriodSeconds")
    try:
        return None if requested is None else int(requested)
    except (TypeError, ValueError):
        raise _ApiError(400, f"gracePeriodSeconds must be an integer, not {requested!r}") from None
