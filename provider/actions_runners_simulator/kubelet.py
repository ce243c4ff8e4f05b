"""The node a real control plane lacks on a test bed: a kubelet stand-in, through the official client.

kube-apiserver stores pods and kube-controller-manager's controllers make and delete them (kube_apiserver.py),
but nothing runs them. This plays, against the API server and only through its API, what a cluster's node
components do for the pods the provider makes:

- the scheduler: it binds each new pod to one simulated node (``pods/binding``) when the pod's nodeSelector
  matches the node's labels, else reports the pod unschedulable as the scheduler does;
- the kubelet: it resolves each container's environment from the real Secrets (``secretKeyRef``, ``envFrom``),
  starts the containers in a pluggable runtime (the simulated runner, runner.py), writes pod status through the
  ``status`` subresource (phase, conditions, containerStatuses with restart counts, termination messages),
  honours ``restartPolicy`` with the kubelet's crash-loop back-off (`CrashLoopBackOff`), and on graceful
  deletion sends SIGTERM, kills what still runs when the grace period ends (SIGKILL, exit 137), and confirms
  with the final grace-0 delete (preconditioned on the pod's uid); it runs the containers' startup, readiness
  and liveness probes as the kubelet's prober does (httpGet and tcpSocket; kubelet_probes.py has every rule and
  its source), so a container is ready only once its readiness probe passes, and one whose liveness probe fails
  is killed and restarted;
- a cluster admin's namespace provisioning, if given one (``provision_namespace``): called for each new
  namespace as its creation is seen, before any other namespace event is handled, so that what it grants (the
  provider's Role, cluster.py) is in force within milliseconds of the namespace's creation.

An image from a registry under the reserved ``.invalid`` domain cannot be pulled (ErrImagePull, then
ImagePullBackOff), so tests can reach that path. A node's bad moments can be staged too: pods that find no room
(never scheduled), a registry that refuses pulls, deletions the node is slow to act on (pods stuck terminating).
Everything it does is recorded in ``events()``.

Each pod gets an address of its own, a loopback one (127.244.x.y) that its process binds and probes reach, from a
/24 this node claims on the machine for as long as it runs (pod_addresses.py says why and how).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import heapq
import itertools
import json
import logging
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from .kubelet_probes import (
    FAILURE,
    INITIAL_RESULTS,
    LIVENESS,
    READINESS,
    STARTUP,
    SUCCESS,
    WARNING,
    ProbeTimings,
    ProbeWorker,
    probe,
)
from .pod_addresses import PodAddresses

_log = logging.getLogger(__name__)

NODE_NAME = "simulator-node"
NODE_LABELS = {"kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
TERMINAL_PHASES = ("Succeeded", "Failed")
UNPULLABLE_DOMAIN = ".invalid"  # RFC 2606: never resolves, so no registry there can serve an image
WATCH_SECONDS = 5  # a watch is renewed this often, so one left by stop() ends soon (stop() waits for none)
_HOST_IP = "10.0.0.10"
REQUEST_TIMEOUT = (5, 30)
TIMER_WORKERS = 16
PROBE_WORKERS = 8  # probes in flight at once, each bounded by its timeoutSeconds; apart from TIMER_WORKERS' steps
MIN_KILL_GRACE_SECONDS = 2  # kuberuntime: minimumGracePeriodInSeconds, "a minimal shutdown window"


class PodProcess(Protocol):
    """One start of one container, as the kubelet hands it to a ContainerRuntime."""

    namespace: str
    name: str  # the pod's
    container: str
    image: str
    restart_policy: str
    env: dict[str, str]
    command: tuple[str, ...]  # the container's command and args, as its spec gives them

    def exited(self, exit_code: int, last_log_line: str = "") -> None:
        """The container's process ended (from any thread, once per start); its last log line becomes the
        termination message of a failed container with ``terminationMessagePolicy: FallbackToLogsOnError``."""


class ContainerRuntime(Protocol):
    """What runs inside containers: the kubelet decides when they start and stop, the runtime what they do."""

    def start(self, process: PodProcess) -> None:
        """The container started; return quickly and do the work on your own threads or timers."""

    def terminate(self, process: PodProcess) -> None:
        """SIGTERM; call process.exited(...) once the container has stopped (if it ever does by itself)."""

    def kill(self, process: PodProcess) -> None:
        """SIGKILL: the kubelet has recorded the exit (137); nothing of the process may act after this."""


class _IdleRuntime:
    """Containers that run until stopped."""

    def start(self, process: PodProcess) -> None:
        pass

    def terminate(self, process: PodProcess) -> None:
        process.exited(0)

    def kill(self, process: PodProcess) -> None:
        pass


@dataclass(frozen=True)
class CrashLoopBackOff:
    """The kubelet's restart delays: 10 s, doubled at each restart up to 300 s, and back to 10 s for a container
    whose exit comes more than 600 s after its last restart (kubelet.go: initialCrashLoopBackOff,
    MaxContainerBackOff, and the crashLoopBackOff's HasExpiredFunc; client-go flowcontrol/backoff.go), whatever
    the exit code. ``faster`` divides them for a test bed."""

    initial_seconds: float = 10.0
    max_seconds: float = 300.0
    reset_after_seconds: float = 600.0

    def faster(self, speedup: float) -> CrashLoopBackOff:
        return CrashLoopBackOff(*(value / speedup for value in dataclasses.astuple(self)))

    def next_delay(self, previous: float | None, ran_seconds: float) -> float:
        """The delay before this restart, given the one before (None: the first) and how long it ran since."""
        if previous is None or ran_seconds > self.reset_after_seconds:
            return self.initial_seconds
        return min(previous * 2, self.max_seconds)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Timers:
    """One thread keeps every delayed step and a few workers run them (each an API call or two), so hundreds of
    pods cost a handful of threads, and one slow call does not hold up every other pod."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # breaks deadline ties, so callbacks are never compared
        self._wakeup = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="kubelet-timers", daemon=True)
        self._workers = ThreadPoolExecutor(max_workers=TIMER_WORKERS, thread_name_prefix="kubelet-step")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._wakeup:
            self._stopped = True
            self._wakeup.notify()
        if self._thread.is_alive():
            self._thread.join()
        self._workers.shutdown(wait=False, cancel_futures=True)

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        with self._wakeup:
            heapq.heappush(self._heap, (time.monotonic() + delay, next(self._order), callback))
            self._wakeup.notify()

    def _run(self) -> None:
        while True:
            with self._wakeup:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._wakeup.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                if self._stopped:
                    return
                callback = heapq.heappop(self._heap)[2]
            self._workers.submit(_run_step, callback)


def _run_step(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # one broken step must not stop every later one
        _log.exception("kubelet stand-in: a delayed step failed")


def _pulled(container: _Container, registry_refuses: bool) -> bool:
    """Whether the container's image can be pulled; if not, the container waits as a kubelet's would: in
    InvalidImageName for a reference that does not parse (the API server accepts any non-empty image), else in
    ErrImagePull the first time and ImagePullBackOff after."""
    image = container.spec["image"]
    if (unparsable := _unparsable(image)) is not None:
        container.state = {"waiting": {"reason": "InvalidImageName", "message": unparsable}}
        return False
    registry = image.split("/", 1)[0] if "/" in image else ""
    if registry_refuses:
        error = f'failed to pull and unpack image "{image}": unexpected status from HEAD request: 503'
    elif registry.split(":")[0].endswith(UNPULLABLE_DOMAIN):
        error = f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": no such host'
    else:
        return True
    if container.state.get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff"):
        waiting = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}": ErrImagePull: {error}'}
    else:
        waiting = {"reason": "ErrImagePull", "message": error}
    container.state = {"waiting": waiting}
    return False


# The image reference grammar the kubelet parses with (github.com/distribution/reference v0.6.0, regexp.go: name
# components lowercase, an optional domain and port, a tag, a digest), through parsers.ParseImageName in
# applyDefaultImageTag (k8s.io/kubernetes v1.37.2 pkg/kubelet/images/image_manager.go:183-187, 424-428): an image
# that does not parse never reaches a pull, and the container waits in InvalidImageName for good.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?"
_REFERENCE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)


def _unparsable(image: str) -> str | None:
    """The kubelet's message for an image reference that does not parse, None for one that does."""
    if _REFERENCE.match(image) and len(image.split("@")[0].split(":")[0]) <= 255:
        return None
    why = "invalid reference format"
    if _REFERENCE.match(image.lower()):
        why += f": repository name ({image.split(':')[0].split('@')[0]}) must be lowercase"
    return f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": {why}'


class _ContainerConfigError(Exception):
    """The container's config cannot be built yet (a referenced Secret or key is missing)."""


@dataclass
class _Process:
    """One start of one container; its exit report goes back to the kubelet."""

    kubelet: Kubelet
    run: _PodRun
    container: str
    image: str
    restart_policy: str
    env: dict[str, str]
    command: tuple[str, ...] = ()
    started_at: str = field(default_factory=_now)
    started: float = field(default_factory=time.monotonic)
    ended: bool = False
    # The probes' results for this instance (the prober's results managers key them by container ID): absent
    # until its worker has met it; None for a startup probe not yet decided.
    results: dict[str, str | None] = field(default_factory=dict)
    killed_for: str | None = None  # LIVENESS or STARTUP: the kubelet is killing it for that probe's failure

    @property
    def namespace(self) -> str:
        return self.run.namespace

    @property
    def name(self) -> str:
        return self.run.name

    def exited(self, exit_code: int, last_log_line: str = "") -> None:
        self.kubelet._container_exited(self, exit_code, last_log_line)


@dataclass
class _Container:
    spec: dict[str, Any]
    sidecar: bool = False  # an init container with restartPolicy Always: runs beside the others
    init: bool = False
    restart_count: int = 0
    backoff: float | None = None  # the delay before its last restart (CrashLoopBackOff)
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    process: _Process | None = None  # the instance running now
    instance: _Process | None = None  # the instance started last, running or not (its status's containerID)

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def started(self) -> bool:
        """isContainerStarted (prober_manager.go): running, and its startup probe, if it has one, succeeded."""
        process = self.process
        if process is None or "running" not in self.state:
            return False
        return self.spec.get("startupProbe") is None or process.results.get(STARTUP) == SUCCESS

    def ready(self) -> bool:
        """UpdatePodStatus (prober_manager.go): an init container is ready once it exited 0; any other container
        once started, and its readiness probe, if it has one, succeeded for this instance."""
        if self.init and not self.sidecar:
            return self.state.get("terminated", {}).get("exitCode") == 0
        if not self.started() or self.process is None:
            return False
        return self.spec.get("readinessProbe") is None or self.process.results.get(READINESS) == SUCCESS

    def status(self, uid: str) -> dict[str, Any]:
        running = "running" in self.state
        image = self.spec["image"]
        answer: dict[str, Any] = {
            "name": self.name,
            "image": image,
            "imageID": "",
            "ready": self.ready(),
            "started": self.started(),
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        if running or "terminated" in self.state:
            answer |= {
                "imageID": f"{image}@sha256:{uid.replace('-', '')[:32]:0<64}",
                "containerID": f"containerd://{uid}-{self.name}",
            }
        return answer


@dataclass
class _PodRun:
    """What the kubelet knows of one pod it runs."""

    uid: str
    namespace: str
    name: str
    spec: dict[str, Any]
    pod_ip: str
    containers: list[_Container]
    lock: threading.RLock = field(default_factory=threading.RLock)
    phase: str = "Pending"
    start_time: str = field(default_factory=_now)
    deleting: bool = False
    kill_at: float | None = None
    done: bool = False  # removed from the API server: nothing more is written
    confirmed: bool = False  # its final grace-0 delete is sent
    pulls_refused: bool = False  # staged: its images cannot be pulled
    stalled_until: float = 0.0  # staged: its deletion is not acted on before this (monotonic)
    workers: list[ProbeWorker] = field(default_factory=list)
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)  # condition: (status, since when)

    def regular(self) -> list[_Container]:
        return [c for c in self.containers if not c.init]


class Kubelet:
    """``with Kubelet(api_client, runtime):`` the node, scheduler and controllers of a test-bed cluster."""

    def __init__(
        self,
        api_client: client.ApiClient,
        runtime: ContainerRuntime | None = None,
        *,
        schedule_delay: float = 0.1,
        crash_loop: CrashLoopBackOff | None = None,
        config_retry_seconds: float = 1.0,
        provision_namespace: Callable[[str, str], bool] | None = None,
        probes: ProbeTimings | None = None,
    ) -> None:
        """``provision_namespace(name, uid)``: what a new namespace gets before it is usable, True if it got
        anything (recorded as ``namespace_provisioned``); it returns once that is in force. ``probes``: how fast
        the prober's clock runs (a kubelet's by default)."""
        self._core = client.CoreV1Api(api_client)
        self._provision_namespace = provision_namespace
        self._provisioned: set[str] = set()  # uids of the namespaces provisioned: once each, whatever re-lists
        self._runtime = runtime or _IdleRuntime()
        self._schedule_delay = schedule_delay
        self._crash_loop = crash_loop or CrashLoopBackOff()
        self._probes = probes or ProbeTimings()
        self._probe_pool = ThreadPoolExecutor(max_workers=PROBE_WORKERS, thread_name_prefix="kubelet-probe")
        self._started_at = time.monotonic()  # the prober manager's start: workers made within a period jitter
        self._config_retry_seconds = config_retry_seconds  # a container whose Secret or image is not there yet
        self._timers = _Timers()
        self._runs: dict[str, _PodRun] = {}
        self._scheduling: set[str] = set()
        self._unschedulable: set[str] = set()
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._addresses = PodAddresses()  # under _lock
        self._stopped = threading.Event()
        self._streams: set[Any] = set()  # open watch responses, closed by stop()
        self._gone: set[str] = set()  # uids removed from the API server: never adopted after
        self._staged = {"unscheduled": 0, "pulls_refused": 0}  # counts of pods still to meet a staged fault
        self._stalls: list[float] = []  # seconds of the next deletions' stalls

    # --- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> Kubelet:
        self._started_at = time.monotonic()
        try:
            self._register_node()
            self._timers.start()
            for name, lister, handler, listed in (
                ("namespaces", self._core.list_namespace, self._namespace_event, None),
                ("pods", self._core.list_pod_for_all_namespaces, self._pod_event, self._forget_missing),
            ):
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._watch_forever,
                    args=(lister, handler, listed, ready),
                    name=f"kubelet-watch-{name}",
                    daemon=True,
                )
                thread.start()
                if not ready.wait(30):
                    raise RuntimeError(f"the kubelet stand-in's first list of {name} took more than 30 s")
        except BaseException:
            self.stop()  # no half-started kubelet may act on a shared API server after this
            raise
        return self

    def stop(self) -> None:
        """Stop watching and acting; containers still running are left to the runtime's own end."""
        self._stopped.set()
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            # Its socket shut, the blocked read ends at once (close() would wait for the read to end first).
            with contextlib.suppress(Exception):
                stream.connection.sock.shutdown(socket.SHUT_RDWR)
        self._timers.stop()
        self._probe_pool.shutdown(wait=False, cancel_futures=True)  # a probe under way ends within its timeout
        with self._lock:
            self._addresses.close()

    def __enter__(self) -> Kubelet:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    # --- staged faults -------------------------------------------------------------------------------------

    def leave_unscheduled(self, count: int) -> None:
        with self._lock:
            self._staged["unscheduled"] += count

    def fail_image_pulls(self, count: int) -> None:
        with self._lock:
            self._staged["pulls_refused"] += count

    def stall_terminations(self, seconds: float, count: int) -> None:
        with self._lock:
            self._stalls += [seconds] * count

    def clear_faults(self) -> int:
        """Forget the staged faults no pod has met yet (pods that met one keep it); how many there were."""
        with self._lock:
            unused = sum(self._staged.values()) + len(self._stalls)
            self._staged = dict.fromkeys(self._staged, 0)
            self._stalls.clear()
        return unused

    def _staged_fault(self, kind: str) -> bool:
        with self._lock:
            if self._staged[kind] <= 0:
                return False
            self._staged[kind] -= 1
            return True

    # --- watches -------------------------------------------------------------------------------------------

    def _watch_forever(
        self,
        lister: Callable[..., Any],
        handler: Callable[[str, dict], None],
        listed: Callable[[set[str]], None] | None,
        ready: threading.Event,
    ) -> None:
        """List, then watch from the list's version; list again when the server says the version is gone, and
        tell ``listed`` which uids a listing holds (what vanished between two watches was deleted meanwhile)."""
        while not self._stopped.is_set():
            try:
                listing = lister(_preload_content=False, _request_timeout=REQUEST_TIMEOUT)
                body = json.loads(listing.data)
                for item in body["items"]:
                    handler("ADDED", item)
                if listed is not None:
                    listed({item["metadata"]["uid"] for item in body["items"]})
                ready.set()
                version = body["metadata"]["resourceVersion"]
                while (version := self._watch(lister, handler, version)) is not None:
                    pass
            except Exception:
                if self._stopped.is_set():
                    return
                _log.exception("kubelet stand-in: watch broke; listing again")
                time.sleep(0.5)

    def _watch(self, lister: Callable[..., Any], handler: Callable[[str, dict], None], version: str) -> str | None:
        """One watch from ``version``, its events as JSON (the client's models cost milliseconds an object):
        the version to watch from next, or None to list again (stopped, or the version is gone: 410)."""
        stream = lister(
            watch=True,
            resource_version=version,
            timeout_seconds=WATCH_SECONDS,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=(REQUEST_TIMEOUT[0], WATCH_SECONDS + REQUEST_TIMEOUT[0]),
        )
        with self._lock:
            self._streams.add(stream)
        try:
            for line in iter_resp_lines(stream):
                if self._stopped.is_set():
                    return None
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return None
                    raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                version = obj["metadata"]["resourceVersion"]
                if kind != "BOOKMARK":
                    handler(kind, obj)
        finally:
            with self._lock:
                self._streams.discard(stream)
            stream.release_conn()
        return None if self._stopped.is_set() else version

    def _call(self, what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """An API call whose 404/409 means the object was removed or re-created meanwhile: nothing to do then."""
        if self._stopped.is_set():
            return None
        try:
            return method(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as error:
            if error.status in (404, 409):
                return None
            _log.warning("kubelet stand-in: %s failed: %s %s", what, error.status, error.reason)
        except Exception as error:  # the server is stopping, or a connection broke: the next event tells
            if not self._stopped.is_set():
                _log.warning("kubelet stand-in: %s failed: %s", what, error)
        return None

    def _record(self, event_type: str, namespace: str, name: str, **details: Any) -> None:
        with self._lock:
            self._events.append(
                {"type": event_type, "namespace": namespace, "name": name, "at": time.monotonic()} | details
            )

    # --- node and namespaces -------------------------------------------------------------------------------

    def _register_node(self) -> None:
        node = {"metadata": {"name": NODE_NAME, "labels": NODE_LABELS}}
        with contextlib.suppress(ApiException):
            self._core.create_node(node, _request_timeout=REQUEST_TIMEOUT)
        capacity = {"cpu": "64", "memory": "256Gi", "pods": "1000", "ephemeral-storage": "1Ti"}
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": _now()}],
            "addresses": [{"type": "InternalIP", "address": _HOST_IP}, {"type": "Hostname", "address": NODE_NAME}],
        }
        self._core.patch_node_status(NODE_NAME, {"status": status}, _request_timeout=REQUEST_TIMEOUT)

    def _namespace_event(self, event_type: str, namespace: dict) -> None:
        """Provisioning for a new namespace; the namespace controller empties and finalizes a deleted one."""
        name, uid = namespace["metadata"]["name"], namespace["metadata"]["uid"]
        if event_type == "DELETED":
            with self._lock:
                self._provisioned.discard(uid)
            self._record("namespace_deleted", "", name)
        elif namespace.get("status", {}).get("phase") == "Active":  # not Terminating
            self._provision(name, uid)

    def _provision(self, name: str, uid: str) -> None:
        """Here in the watch's own thread, not on a timer: the namespace's next event (and the next namespace)
        waits for it, and nothing queues before it. A namespace deleted meanwhile needs nothing (404, or 403
        while it terminates); any other failure is tried again shortly."""
        with self._lock:
            if self._provision_namespace is None or uid in self._provisioned or self._stopped.is_set():
                return
        try:
            provisioned = self._provision_namespace(name, uid)
        except ApiException as error:
            if error.status in (403, 404):
                return
            _log.warning("kubelet stand-in: provisioning namespace %s failed: %s %s", name, error.status, error.reason)
            self._timers.call_later(0.5, lambda: self._provision(name, uid))
            return
        except Exception as error:
            if not self._stopped.is_set():
                _log.warning("kubelet stand-in: provisioning namespace %s failed: %s", name, error)
                self._timers.call_later(0.5, lambda: self._provision(name, uid))
            return
        with self._lock:
            self._provisioned.add(uid)
        if provisioned:
            self._record("namespace_provisioned", "", name)

    # --- pods ----------------------------------------------------------------------------------------------

    def _pod_event(self, event_type: str, pod: dict) -> None:
        metadata, spec = pod["metadata"], pod["spec"]
        uid, namespace, name = metadata["uid"], metadata["namespace"], metadata["name"]
        if event_type == "DELETED":
            self._removed(uid, namespace, name)
            return
        with self._lock:
            run = self._runs.get(uid)
        if run is None:
            if event_type == "ADDED" and not metadata.get("deletionTimestamp"):
                self._record("pod_created", namespace, name)
            if not spec.get("nodeName"):
                self._schedule_later(pod)
                return
            if spec["nodeName"] != NODE_NAME or pod.get("status", {}).get("phase") in TERMINAL_PHASES:
                return
            run = self._adopt(pod)
        if run is not None and metadata.get("deletionTimestamp"):
            grace = int(metadata.get("deletionGracePeriodSeconds") or 0)
            with run.lock:
                if time.monotonic() < run.stalled_until:
                    return  # the stalled node acts on the deletion later
                stall = 0.0 if run.deleting or run.done else self._take_stall()
                run.stalled_until = time.monotonic() + stall if stall else 0.0
            if stall:
                self._record("pod_stalled", namespace, name, seconds=stall)
                self._timers.call_later(stall, lambda: self._terminating(run, grace))
            else:
                self._terminating(run, grace)

    def _take_stall(self) -> float:
        with self._lock:
            return self._stalls.pop(0) if self._stalls else 0.0

    def _schedule_later(self, pod: dict) -> None:
        uid = pod["metadata"]["uid"]
        with self._lock:
            if uid in self._scheduling or uid in self._unschedulable:
                return  # on its way, or no node will ever fit it: the one node never changes
            self._scheduling.add(uid)
        self._timers.call_later(self._schedule_delay, lambda: self._schedule(pod))

    def _schedule(self, pod: dict) -> None:
        metadata = pod["metadata"]
        namespace, name, uid = metadata["namespace"], metadata["name"], metadata["uid"]
        with self._lock:
            self._scheduling.discard(uid)
        selector = pod["spec"].get("nodeSelector") or {}
        no_room = self._staged_fault("unscheduled")
        if no_room or any(NODE_LABELS.get(key) != value for key, value in selector.items()):
            message = (
                "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                "1 No preemption victims found for incoming pod."
                if no_room
                else "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
            )
            condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            body = {"metadata": {"uid": uid}, "status": {"conditions": [condition | {"lastTransitionTime": _now()}]}}
            with self._lock:
                self._unschedulable.add(uid)
            self._call("unschedulable status", self._core.patch_namespaced_pod_status, name, namespace, body)
            self._record("pod_unschedulable", namespace, name)
            return
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME},
        }
        # Not deserialized: the client's V1Binding model rejects the API server's answer (a Status).
        try:
            bound = self._core.create_namespaced_pod_binding(
                name, namespace, binding, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as error:
            if error.status in (404, 409):
                return  # deleted before it was scheduled, or bound already
            self._bind_again(pod, error)
            return
        except Exception as error:  # a connection broken under load: the scheduler tries again, as a real one does
            self._bind_again(pod, error)
            return
        bound.release_conn()
        self._record("pod_scheduled", namespace, name)
        self._adopt(pod | {"spec": pod["spec"] | {"nodeName": NODE_NAME}})

    def _bind_again(self, pod: dict, error: Exception) -> None:
        """A binding that failed for a reason other than the pod's end: put back in the scheduling queue (the
        scheduler retries a pod until it is bound or gone; dropping it would leave it Pending for ever)."""
        if self._stopped.is_set():
            return
        _log.warning("kubelet stand-in: binding %s failed (%s); trying again", pod["metadata"]["name"], error)
        self._schedule_later(pod)

    def _forget_missing(self, listed: set[str]) -> None:
        """Pods a new listing lacks were deleted while no watch was open: removed, as if seen going."""
        with self._lock:
            missing = [run for uid, run in self._runs.items() if uid not in listed]
        for run in missing:
            self._removed(run.uid, run.namespace, run.name)

    def _adopt(self, pod: dict) -> _PodRun | None:
        """The kubelet takes the pod bound to its node; its containers start unless it is being deleted."""
        metadata, spec = pod["metadata"], pod["spec"]
        containers = [
            _Container(each, init=True, sidecar=each.get("restartPolicy") == "Always")
            for each in spec.get("initContainers") or []
        ] + [_Container(each) for each in spec["containers"]]
        run = _PodRun(
            uid=metadata["uid"],
            namespace=metadata["namespace"],
            name=metadata["name"],
            spec=spec,
            pod_ip="",
            containers=containers,
        )
        with self._lock:
            if run.uid in self._gone or self._stopped.is_set():
                return None  # removed while it was being bound, or the node is gone (its addresses with it)
            if (existing := self._runs.get(run.uid)) is not None:
                return existing
            run.pod_ip = self._addresses.allocate()
            self._runs[run.uid] = run
            if self._staged["pulls_refused"] > 0:
                self._staged["pulls_refused"] -= 1
                run.pulls_refused = True
        if not metadata.get("deletionTimestamp"):
            with run.lock:
                self._start_probes(run)
            self._timers.call_later(0, lambda: self._start_containers(run))
        return run

    def _start_containers(self, run: _PodRun) -> None:
        """Pull, configure and start every container not running yet, then write the status once."""
        to_start: list[_Process] = []
        with run.lock:
            if run.deleting or run.done or run.phase in TERMINAL_PHASES:
                return
            retry = False
            for index, container in enumerate(run.containers):
                if index and self._holds_back(run, run.containers[index - 1]):
                    break
                if container.process is not None or "terminated" in container.state:
                    continue  # running, or done for good (a container to restart waits in CrashLoopBackOff)
                env = None
                if _pulled(container, run.pulls_refused):
                    try:
                        env = self._resolve_env(run, container.spec)
                    except _ContainerConfigError as error:
                        container.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(error)}}
                if env is None:
                    retry = True
                    if container.init:
                        break  # an init container holds back every container after it
                    continue
                if container.init and not container.sidecar:
                    container.state = {
                        "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": _now(), "finishedAt": _now()}
                    }
                    continue
                policy = run.spec.get("restartPolicy", "Always")
                command = (*(container.spec.get("command") or ()), *(container.spec.get("args") or ()))
                process = _Process(self, run, container.name, container.spec["image"], policy, env, command)
                container.process = container.instance = process
                container.state = {"running": {"startedAt": process.started_at}}
                to_start.append(process)
            if to_start and run.phase == "Pending":
                run.phase = "Running"
            self._write_status(run)
            for process in to_start:
                self._record(
                    "container_started",
                    run.namespace,
                    run.name,
                    container=process.container,
                    restart_count=self._container(run, process.container).restart_count,
                )
                # Under the pod's lock, so that a deletion's SIGTERM always reaches the runtime after the start.
                try:
                    self._runtime.start(process)
                except Exception:
                    _log.exception("container runtime failed to start %s/%s", run.name, process.container)
        if retry:
            self._timers.call_later(self._config_retry_seconds, lambda: self._start_containers(run))

    @staticmethod
    def _holds_back(run: _PodRun, container: _Container) -> bool:
        """A native sidecar with a startup probe holds back the containers after it until it has started, while
        the pod is initializing (kuberuntime computeInitContainerActions: "If the startup probe has not been run,
        wait for it"); once a regular container has run, a restarting sidecar holds back nothing."""
        return (
            container.sidecar
            and container.spec.get("startupProbe") is not None
            and not container.started()
            and all(c.instance is None for c in run.regular())
        )

    def _restarts(self, run: _PodRun, container: _Container, exit_code: int, process: _Process) -> bool:
        if run.deleting or run.phase in TERMINAL_PHASES:
            return False
        if container.sidecar:
            return True
        policy = run.spec.get("restartPolicy", "Always")
        if process.killed_for is not None:
            return policy != "Never"  # computePodActions: restart := shouldRestartOnFailure(pod), any exit code
        return policy == "Always" or (policy == "OnFailure" and exit_code != 0)

    @staticmethod
    def _container(run: _PodRun, name: str) -> _Container:
        return next(c for c in run.containers if c.name == name)

    def _resolve_env(self, run: _PodRun, container: dict[str, Any]) -> dict[str, str]:
        """The container's environment as the kubelet builds it: envFrom first, then env, references resolved
        (each Secret or ConfigMap read once, however many variables name it)."""
        read: dict[tuple[bool, str], dict[str, str] | None] = {}

        def data_of(secret: bool, reference: dict[str, Any]) -> dict[str, str] | None:
            key = (secret, reference["name"])
            if key not in read:
                read[key] = self._data(run.namespace, secret, reference["name"], reference.get("optional"))
            return read[key]

        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            reference = source.get("secretRef") or source.get("configMapRef")
            if reference is None:
                continue
            data = data_of("secretRef" in source, reference)
            env |= {source.get("prefix", "") + key: value for key, value in (data or {}).items()}
        for variable in container.get("env") or []:
            source = variable.get("valueFrom") or {}
            reference = source.get("secretKeyRef") or source.get("configMapKeyRef")
            if reference is not None:
                data = data_of("secretKeyRef" in source, reference)
                if data is None:
                    continue
                if reference["key"] not in data:
                    if reference.get("optional"):
                        continue
                    kind = "Secret" if "secretKeyRef" in source else "ConfigMap"
                    raise _ContainerConfigError(
                        f"couldn't find key {reference['key']} in {kind} {run.namespace}/{reference['name']}"
                    )
                env[variable["name"]] = data[reference["key"]]
            elif "fieldRef" in source:
                path = source["fieldRef"]["fieldPath"]
                values = {
                    "metadata.name": run.name,
                    "metadata.namespace": run.namespace,
                    "metadata.uid": run.uid,
                    "spec.nodeName": NODE_NAME,
                    "status.podIP": run.pod_ip,
                    "status.hostIP": _HOST_IP,
                }
                env[variable["name"]] = values.get(path, "")
            else:
                env[variable["name"]] = variable.get("value", "")
        return env

    def _data(self, namespace: str, secret: bool, name: str, optional: bool | None) -> dict[str, str] | None:
        try:
            if secret:
                found = self._core.read_namespaced_secret(name, namespace, _request_timeout=REQUEST_TIMEOUT)
                return {k: base64.b64decode(v).decode(errors="replace") for k, v in (found.data or {}).items()}
            return dict(
                self._core.read_namespaced_config_map(name, namespace, _request_timeout=REQUEST_TIMEOUT).data or {}
            )
        except ApiException as error:
            if error.status != 404:
                raise _ContainerConfigError(f"reading {name}: {error.reason}") from None
            if optional:
                return None
            raise _ContainerConfigError(f'{"secret" if secret else "configmap"} "{name}" not found') from None

    def _container_exited(self, process: _Process, exit_code: int, last_log_line: str) -> None:
        run = process.run
        with run.lock:
            container = self._container(run, process.container)
            if process.ended or container.process is not process:
                return
            process.ended = True
            container.process = None
            self._record("container_exited", run.namespace, run.name, container=container.name, exit_code=exit_code)
            if run.done:
                return
            terminated: dict[str, Any] = {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": process.started_at,
                "finishedAt": _now(),
                "containerID": f"containerd://{run.uid}-{container.name}",
            }
            policy = container.spec.get("terminationMessagePolicy", "File")
            if exit_code != 0 and policy == "FallbackToLogsOnError" and last_log_line:
                terminated["message"] = last_log_line
            if run.deleting:
                container.state = {"terminated": terminated}
                self._write_status(run)
                self._confirm_if_stopped(run)
                return
            restart = self._restarts(run, container, exit_code, process)
            delay = 0.0
            if restart:
                container.restart_count += 1
                container.last_state = {"terminated": terminated}
                delay = container.backoff = self._crash_loop.next_delay(
                    container.backoff, time.monotonic() - process.started
                )
                message = f"back-off {delay:g}s restarting failed container={container.name} pod={run.name}"
                container.state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
            else:
                container.state = {"terminated": terminated}
            regular = run.regular()
            if all("terminated" in c.state for c in regular):
                # Every regular container is done for good: native sidecars are stopped, and the pod ends.
                for sidecar in (c for c in run.containers if c.sidecar and c.process is not None):
                    self._stop_container(run, sidecar)
                failed = any(c.state["terminated"]["exitCode"] != 0 for c in regular)
                run.phase = "Failed" if failed else "Succeeded"
            self._write_status(run)
        if restart:
            self._timers.call_later(delay, lambda: self._start_containers(run))

    def _stop_container(self, run: _PodRun, container: _Container) -> None:
        process = container.process
        if process is None:
            return
        try:
            self._runtime.terminate(process)
        except Exception:
            _log.exception("container runtime failed to stop %s/%s", run.name, container.name)

    def _kill_container(self, run: _PodRun, process: _Process) -> None:
        try:
            self._runtime.kill(process)
        except Exception:
            _log.exception("container runtime failed to kill %s/%s", run.name, process.container)

    def _terminating(self, run: _PodRun, grace_seconds: int) -> None:
        """Graceful deletion: SIGTERM now, SIGKILL when the grace runs out, then the final grace-0 delete. A
        repeated delete may shorten the grace, never lengthen it."""
        with run.lock:
            if run.done:
                return
            kill_at = time.monotonic() + grace_seconds
            first = not run.deleting
            if not first and run.kill_at is not None and kill_at >= run.kill_at:
                return
            run.deleting, run.kill_at = True, kill_at
            if first:
                self._record("pod_terminating", run.namespace, run.name, grace_seconds=grace_seconds)
                for worker in run.workers:  # StopLivenessAndStartup; readiness goes on while the pod terminates
                    worker.stopped = worker.stopped or worker.kind != READINESS
                for container in run.containers:
                    if container.process is not None:
                        self._stop_container(run, container)
            self._confirm_if_stopped(run)
        self._timers.call_later(max(grace_seconds, 0), lambda: self._grace_ended(run, kill_at))

    def _grace_ended(self, run: _PodRun, kill_at: float) -> None:
        with run.lock:
            if run.done or run.kill_at != kill_at:
                return
            for container in run.containers:
                if (process := container.process) is not None:  # SIGKILL: the runtime had its SIGTERM
                    self._record("container_killed", run.namespace, run.name, container=container.name)
                    process.ended = True
                    container.process = None
                    container.state = {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": _now()}}
                    self._kill_container(run, process)
            self._confirm_if_stopped(run)

    def _confirm_if_stopped(self, run: _PodRun) -> None:
        """The final grace-0 delete, once: when the last container has stopped, or the grace ran out."""
        if run.confirmed or any(c.process is not None for c in run.containers):
            return
        run.confirmed = True
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": run.uid}}
        self._timers.call_later(
            0,
            lambda: self._call("final delete", self._core.delete_namespaced_pod, run.name, run.namespace, body=options),
        )

    def _removed(self, uid: str, namespace: str, name: str) -> None:
        """Gone from the API server: a pod deleted at once (grace 0, or never scheduled) has its containers
        killed now, as a kubelet does when its pod disappears."""
        with self._lock:
            run = self._runs.pop(uid, None)
            self._scheduling.discard(uid)
            self._unschedulable.discard(uid)
            self._gone.add(uid)
            if run is not None:
                self._addresses.release(run.pod_ip)
        self._record("pod_removed", namespace, name, uid=uid)
        if run is None:
            return
        with run.lock:
            run.done = True
            for worker in run.workers:  # RemovePod
                worker.stopped = True
            for container in run.containers:
                if (process := container.process) is not None:
                    self._record("container_killed", namespace, name, container=container.name)
                    process.ended = True
                    container.process = None
                    self._kill_container(run, process)

    def _write_status(self, run: _PodRun) -> None:
        """The status subresource, as the kubelet's status manager writes it (a write to the pod itself would
        leave its status as it was). The conditions as pkg/kubelet/status/generate.go makes them: ContainersReady
        and Ready once every regular container and native sidecar is ready (`_Container.ready`), with the reason
        and message a kubelet gives when not (ContainersNotReady, PodCompleted, PodFailed), but never while the
        pod is being deleted (this stand-in's own rule: a kubelet goes on reporting readiness while a pod
        terminates); Initialized once every init container has succeeded and every native sidecar has started,
        or a regular container has run. A condition's lastTransitionTime is when its status last changed. Then,
        as UpdatePodStatus does, every started container whose readiness probe has not succeeded is probed at
        once."""
        regular = run.regular()
        unready = [c.name for c in run.containers if (c.sidecar or not c.init) and not c.ready()]
        ready: dict[str, Any] = {"status": run.phase == "Running" and not run.deleting}
        if run.phase in TERMINAL_PHASES:
            ready = {"status": False, "reason": "PodCompleted" if run.phase == "Succeeded" else "PodFailed"}
        elif unready:
            message = f"containers with unready status: [{' '.join(unready)}]"
            ready = {"status": False, "reason": "ContainersNotReady", "message": message}
        incomplete = [
            c.name for c in run.containers if c.init and not (c.started() if c.sidecar else "terminated" in c.state)
        ]
        initialized: dict[str, Any] = {"status": True}
        if incomplete and all(c.instance is None for c in regular):
            message = f"containers with incomplete status: [{' '.join(incomplete)}]"
            initialized = {"status": False, "reason": "ContainersNotInitialized", "message": message}
        conditions = [
            self._condition(run, kind, **fields)
            for kind, fields in (
                ("PodReadyToStartContainers", {"status": True}),
                ("Initialized", initialized),
                ("Ready", ready),
                ("ContainersReady", ready),
                ("PodScheduled", {"status": True}),
            )
        ]
        status: dict[str, Any] = {
            "phase": run.phase,
            "conditions": conditions,
            "hostIP": _HOST_IP,
            "hostIPs": [{"ip": _HOST_IP}],
            "podIP": run.pod_ip,
            "podIPs": [{"ip": run.pod_ip}],
            "startTime": run.start_time,
            "containerStatuses": [c.status(run.uid) for c in regular],
        }
        if any(c.init for c in run.containers):
            status["initContainerStatuses"] = [c.status(run.uid) for c in run.containers if c.init]
        body = {"metadata": {"uid": run.uid}, "status": status}
        self._call("status write", self._core.patch_namespaced_pod_status, run.name, run.namespace, body)
        for worker in run.workers:
            container = worker.container
            if worker.kind == READINESS and not worker.stopped and container.started() and not container.ready():
                self._trigger_probe(worker)

    @staticmethod
    def _condition(
        run: _PodRun, kind: str, status: bool, reason: str | None = None, message: str | None = None
    ) -> dict[str, Any]:
        """A reason or message of None is written as null, which the strategic merge patch deletes: a condition
        that became True keeps no reason it had while False."""
        value, now = str(status), _now()
        previous = run.transitions.get(kind)
        since = previous[1] if previous is not None and previous[0] == value else now
        run.transitions[kind] = (value, since)
        return {"type": kind, "status": value, "lastTransitionTime": since, "reason": reason, "message": message}

    # --- probes (kubelet_probes.py has the rules and their sources) -----------------------------------------

    def _start_probes(self, run: _PodRun) -> None:
        """AddPod: a worker for every probe of every container and native sidecar, each ticking from now on."""
        now = time.monotonic()
        for container in run.containers:
            if container.init and not container.sidecar:
                continue
            for kind in (STARTUP, READINESS, LIVENESS):
                spec = container.spec.get(f"{kind.lower()}Probe")
                if spec is None:
                    continue
                worker = ProbeWorker(run, container, kind, spec)
                run.workers.append(worker)
                if unsupported := [handler for handler in ("exec", "grpc") if spec.get(handler) is not None]:
                    _log.warning(
                        "kubelet stand-in: %s/%s: container %s has a %s %s probe, which this node cannot run: it "
                        "errors each period (Unhealthy events), and its result is thrown away",
                        *(run.namespace, run.name, container.name, unsupported[0], kind.lower()),
                    )
                period = self._probes.real(worker.period)
                self._schedule_probe(worker, random.random() * period if period > now - self._started_at else 0.0)

    def _schedule_probe(self, worker: ProbeWorker, delay: float) -> None:
        token = worker.token
        self._timers.call_later(delay, lambda: self._probe_tick(worker, token))

    def _probe_tick(self, worker: ProbeWorker, token: int) -> None:
        """The worker's ticker: the next tick a period on, whatever this probe takes."""
        with worker.run.lock:
            if worker.stopped or token != worker.token:
                return
            self._schedule_probe(worker, self._probes.real(worker.period))
            self._probe_now(worker)

    def _trigger_probe(self, worker: ProbeWorker) -> None:
        """The manual trigger: a probe now, and the ticker reset to tick a period from now (caller holds the
        pod's lock)."""
        worker.token += 1
        self._schedule_probe(worker, self._probes.real(worker.period))
        self._probe_now(worker)

    def _probe_now(self, worker: ProbeWorker) -> None:
        if worker.busy:
            worker.pending = True  # the worker's channels keep one tick or trigger while it probes
            return
        worker.busy = True
        try:
            self._probe_pool.submit(self._probe_loop, worker)
        except RuntimeError:  # the kubelet is stopping
            worker.busy = False

    def _probe_loop(self, worker: ProbeWorker) -> None:
        while True:
            try:
                keep_going = self._do_probe(worker)
            except Exception:  # doProbe's HandleCrash: logged, and the worker goes on
                _log.exception("kubelet stand-in: a %s probe of %s failed", worker.kind, worker.run.name)
                keep_going = True
            with worker.run.lock:
                worker.stopped = worker.stopped or not keep_going
                if worker.pending and not worker.stopped:
                    worker.pending = False
                    continue
                worker.busy = worker.pending = False
                return

    def _do_probe(self, worker: ProbeWorker) -> bool:
        """worker.go doProbe: probe once if the container is due one, and act on the result; whether the worker
        goes on."""
        run, container, kind = worker.run, worker.container, worker.kind
        with run.lock:
            if worker.stopped or run.done or run.phase in TERMINAL_PHASES:
                return False
            instance = container.instance
            if instance is None:
                return True  # not created yet
            if worker.instance is not instance:
                worker.instance, worker.on_hold = instance, False
                instance.results[kind] = INITIAL_RESULTS[kind]
            if worker.on_hold:
                return True
            if container.process is not instance:
                instance.results[kind] = FAILURE
                policy = run.spec.get("restartPolicy", "Always")
                return not ("terminated" in container.state and policy == "Never" and not container.sidecar)
            if run.deleting and kind != READINESS:
                instance.results[kind] = SUCCESS
                return False
            if int((time.monotonic() - instance.started) * self._probes.speedup) < worker.initial_delay:
                return True
            if container.started() if kind == STARTUP else not container.started():
                return True  # a started container's startup probe is done; the others wait for it
            pod_ip = run.pod_ip
        result, output, error = probe(worker.spec, container.spec, pod_ip)
        with run.lock:
            if run.done:
                return False
            self._probe_event(run, container, kind, result, output, error)
            if error is not None:
                return True
            result = SUCCESS if result == WARNING else result
            if worker.last_result == result:
                worker.result_run += 1
            else:
                worker.last_result, worker.result_run = result, 1
            if worker.result_run < (worker.failure_threshold if result == FAILURE else worker.success_threshold):
                return True
            self._probe_result(worker, instance, result)
            if (kind == LIVENESS and result == FAILURE) or kind == STARTUP:
                worker.on_hold, worker.result_run = True, 0
        return True

    def _probe_event(
        self, run: _PodRun, container: _Container, kind: str, result: str, output: str, error: str | None
    ) -> None:
        """prober.go probe's events: Unhealthy for a probe that failed or errored, ProbeWarning for a redirect
        to another host."""
        if error is not None:
            event, reason, message = "container_unhealthy", "Unhealthy", f"{kind} probe errored and resulted in "
            message += f"unknown state: {error}"
        elif result == FAILURE:
            event, reason, message = "container_unhealthy", "Unhealthy", f"{kind} probe failed: {output}"
        elif result == WARNING:
            event, reason, message = "probe_warning", "ProbeWarning", f"{kind} probe warning: {output}"
        else:
            return
        self._record(
            event, run.namespace, run.name, container=container.name, probe=kind, reason=reason, message=message
        )

    def _probe_result(self, worker: ProbeWorker, instance: _Process, result: str) -> None:
        """A result past its threshold, for the instance probed: the results manager's update, sent only when the
        result changes; the kubelet then kills a container that failed its liveness or startup probe, and
        writes the status if the container's started or ready changed."""
        run, container, kind = worker.run, worker.container, worker.kind
        if instance.results.get(kind) == result:
            return
        was = (container.started(), container.ready())
        instance.results[kind] = result
        if result == FAILURE and kind != READINESS:
            self._probe_kill(run, container, instance, kind)
        elif (container.started(), container.ready()) != was:
            self._write_status(run)
            if kind == STARTUP and container.sidecar:
                self._timers.call_later(0, lambda: self._start_containers(run))  # what it held back

    def _probe_kill(self, run: _PodRun, container: _Container, process: _Process, kind: str) -> None:
        """computePodActions and killContainer for a running container that failed its liveness or startup probe:
        SIGTERM now, SIGKILL when the grace runs out; its exit then restarts it (`_restarts`)."""
        if container.process is not process or process.ended or process.killed_for or run.deleting:
            return
        process.killed_for = kind
        if container.init:
            message = f"Init container {container.name} failed {kind.lower()} probe"
        else:
            message = f"Container {container.name} failed {kind.lower()} probe"
            if run.spec.get("restartPolicy", "Always") != "Never":
                message += ", will be restarted"
        pod_grace = run.spec.get("terminationGracePeriodSeconds")
        probe_grace = (container.spec.get(f"{kind.lower()}Probe") or {}).get("terminationGracePeriodSeconds")
        grace = MIN_KILL_GRACE_SECONDS if pod_grace is None else pod_grace if probe_grace is None else probe_grace
        grace = max(int(grace), MIN_KILL_GRACE_SECONDS)
        self._record(
            "container_killing",
            run.namespace,
            run.name,
            container=container.name,
            reason="Killing",
            message=message,
            grace_seconds=grace,
        )
        self._stop_container(run, container)
        self._timers.call_later(grace, lambda: self._probe_kill_ended(run, container, process))

    def _probe_kill_ended(self, run: _PodRun, container: _Container, process: _Process) -> None:
        with run.lock:
            if process.ended or container.process is not process or run.done:
                return
            self._record("container_killed", run.namespace, run.name, container=container.name)
            self._container_exited(process, 137, "")  # SIGKILL's exit; restarted as its pod's policy says
            self._kill_container(run, process)
