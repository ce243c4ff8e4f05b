"""The kubelet stand-in's container probes (kubelet_probes.py has the rules and their sources), against
the real API server: what a pod's status says, read back through the API server, and what the node did, from its
events. The container runtime here is a stand-in of the test's own: a served container runs a small HTTP server
on its pod's IP, answering what the test sets, since the kubelet is what is under test.

The prober's clock runs SPEEDUP times as fast as a kubelet's (`ProbeTimings`), so a probe of ``periodSeconds: 1``
comes every 0.1 s; a timeout and a kill's grace stay real seconds.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.kubelet import CrashLoopBackOff, Kubelet, PodProcess
from actions_runners_simulator.kubelet_probes import SUCCESS, WARNING, ProbeTimings, http_probe
from actions_runners_simulator.pod_addresses import PodAddresses
from tests.conftest import wait_until

NAMESPACE = "kubelet-probes"
SPEEDUP = 10.0
PERIOD = 1 / SPEEDUP  # what periodSeconds: 1 takes here
HTTP, METRICS = 8080, 9090


class Servers:
    """A ContainerRuntime: a container of the test's namespace serves HTTP on its pod's IP (``POD_IP``, from the
    downward API's status.podIP) on the ports the test gave its pod, from the pod's n-th start on; a path answers
    200 unless the test set another status. SIGTERM stops the servers and the process exits 143 (the signal's).
    Containers of other namespaces (left on the session's API server by an earlier test) idle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ports: dict[tuple[str, str], tuple[tuple[int, ...], int]] = {}  # (pod, container): ports, from
        self._answers: dict[tuple[str, str], int] = {}  # (pod, path): status
        self._starts: dict[tuple[str, str], int] = {}
        self._servers: dict[int, list[http.server.ThreadingHTTPServer]] = {}  # by id(process)
        self.requests: list[dict[str, Any]] = []
        self.terminated: list[str] = []
        self.killed: list[str] = []

    def serve(self, pod: str, *ports: int, container: str = "main", from_start: int = 1) -> None:
        with self._lock:
            self._ports[(pod, container)] = (ports, from_start)

    def answer(self, pod: str, path: str, status: int) -> None:
        with self._lock:
            self._answers[(pod, path)] = status

    def seen(self, pod: str, path: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["pod"] == pod and path in (None, r["path"])]

    def start(self, process: PodProcess) -> None:
        if process.namespace != NAMESPACE:
            return
        key = (process.name, process.container)
        with self._lock:
            start = self._starts[key] = self._starts.get(key, 0) + 1
            ports, first = self._ports.get(key, ((), 1))
        if start >= first:
            servers = [self._serve(process.name, process.env["POD_IP"], port) for port in ports]
            with self._lock:
                self._servers[id(process)] = servers

    def terminate(self, process: PodProcess) -> None:
        with self._lock:
            servers = self._servers.pop(id(process), [])
            self.terminated.append(process.name)
        code = 143 if process.namespace == NAMESPACE else 0
        threading.Thread(target=self._stop, args=(servers, lambda: process.exited(code)), daemon=True).start()

    def kill(self, process: PodProcess) -> None:
        with self._lock:
            servers = self._servers.pop(id(process), [])
            self.killed.append(process.name)
        threading.Thread(target=self._stop, args=(servers, None), daemon=True).start()

    def close(self) -> None:
        with self._lock:
            servers = [s for each in self._servers.values() for s in each]
            self._servers.clear()
        self._stop(servers, None)

    def _serve(self, pod: str, address: str, port: int) -> http.server.ThreadingHTTPServer:
        runtime = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with runtime._lock:
                    status = runtime._answers.get((pod, self.path), 200)
                    seen = {"pod": pod, "path": self.path, "address": address, "port": port, "status": status}
                    runtime.requests.append(seen | {"headers": dict(self.headers), "at": time.monotonic()})
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer((address, port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return server

    @staticmethod
    def _stop(servers: list[http.server.ThreadingHTTPServer], then: Callable[[], None] | None) -> None:
        for server in servers:
            server.shutdown()
            server.server_close()
        if then is not None:
            then()


@dataclass
class Node:
    core: client.CoreV1Api
    kubelet: Kubelet
    servers: Servers

    def create(self, name: str, *, sidecar: dict[str, Any] | None = None, **fields: object) -> None:
        """A pod of one container ``main`` with ``fields``, and a native sidecar ``proxy`` with ``sidecar``'s."""
        spec: dict[str, Any] = {"containers": [container("main", **fields)], "terminationGracePeriodSeconds": 1}
        if sidecar is not None:
            spec["initContainers"] = [container("proxy", restartPolicy="Always", **sidecar)]
        self.core.create_namespaced_pod(NAMESPACE, {"metadata": {"name": name}, "spec": spec})

    def status(self, name: str) -> dict[str, Any]:
        pod = json.loads(self.core.read_namespaced_pod(name, NAMESPACE, _preload_content=False).data)
        return dict(pod.get("status") or {})

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        return next((c for c in self.status(name).get("conditions") or [] if c["type"] == kind), {})

    def ready(self, name: str) -> str | None:
        return self.condition(name, "Ready").get("status")

    def container(self, name: str) -> dict[str, Any]:
        return dict((self.status(name).get("containerStatuses") or [{}])[0])

    def events(self, name: str, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.kubelet.events() if (e["namespace"], e["name"], e["type"]) == (NAMESPACE, name, kind)]

    def unhealthy(self, name: str, probe: str) -> list[dict[str, Any]]:
        return [e for e in self.events(name, "container_unhealthy") if e["probe"] == probe]


@pytest.fixture
def node(kube_api_server: KubeApiServer) -> Iterator[Node]:
    """A kubelet stand-in of its own on the session's API server, its prober's clock SPEEDUP times as fast."""
    admin = kube_api_server.admin_client()
    core = client.CoreV1Api(admin)
    with contextlib.suppress(ApiException):  # 409: an earlier test of this session made it
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    wait_until(lambda: _has_default_account(core), "the service-account controller's default account")
    servers = Servers()
    kubelet = Kubelet(
        admin,
        servers,
        schedule_delay=0.01,
        crash_loop=CrashLoopBackOff().faster(100),
        probes=ProbeTimings().faster(SPEEDUP),
    ).start()
    try:
        yield Node(core, kubelet, servers)
    finally:
        core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
        kubelet.stop()
        servers.close()
        admin.close()


def _has_default_account(core: client.CoreV1Api) -> bool:
    try:
        core.read_namespaced_service_account("default", NAMESPACE)
    except ApiException:
        return False
    return True


def container(name: str, **fields: object) -> dict[str, Any]:
    """Its ports named http and metrics, and told its pod's IP as POD_IP."""
    return {
        "name": name,
        "image": "busybox:1.37",
        "ports": [{"name": "http", "containerPort": HTTP}, {"name": "metrics", "containerPort": METRICS}],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        **fields,
    }


def http_get(path: str, port: int | str = "http", **fields: object) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": 1, **fields}


def test_the_readiness_probe_decides_the_ready_condition_both_ways(node: Node) -> None:
    """Not ready while /readyz answers 503, Ready once it answers 200, not Ready after failureThreshold (2)
    failures in a row; the probe goes to the pod's own loopback address, on the port named http."""
    node.servers.serve("ready", HTTP)
    node.servers.answer("ready", "/readyz", 503)
    node.create("ready", readinessProbe=http_get("/readyz", failureThreshold=2))

    wait_until(lambda: node.unhealthy("ready", "Readiness"), "a failed readiness probe")
    status = node.status("ready")
    assert status["phase"] == "Running" and status["podIP"].startswith("127.244.")
    assert node.ready("ready") == "False" and node.condition("ready", "ContainersReady")["status"] == "False"
    assert node.condition("ready", "Ready")["reason"] == "ContainersNotReady"
    assert (node.container("ready")["started"], node.container("ready")["ready"]) == (True, False)
    assert node.unhealthy("ready", "Readiness")[0]["message"] == (
        "Readiness probe failed: HTTP probe failed with statuscode: 503"
    )
    request = node.servers.seen("ready", "/readyz")[0]
    assert (request["address"], request["port"]) == (status["podIP"], HTTP)
    assert request["headers"]["User-Agent"] == "kube-probe/1.37" and request["headers"]["Accept"] == "*/*"

    node.servers.answer("ready", "/readyz", 200)
    wait_until(lambda: node.ready("ready") == "True", "the pod to be Ready")
    assert node.container("ready")["ready"] is True
    assert node.condition("ready", "ContainersReady")["status"] == "True"
    assert "reason" not in node.condition("ready", "Ready")  # the False condition's reason went with it

    failed_before = len(node.unhealthy("ready", "Readiness"))
    node.servers.answer("ready", "/readyz", 500)
    wait_until(lambda: node.ready("ready") == "False", "the pod to be not Ready again")
    assert len(node.unhealthy("ready", "Readiness")) - failed_before >= 2
    assert node.condition("ready", "Ready")["message"] == "containers with unready status: [main]"


def test_a_failing_liveness_probe_has_the_container_killed_and_restarted(node: Node) -> None:
    """failureThreshold (2) failures in a row: event Killing, SIGTERM (the runtime's terminate, not its kill),
    then a restart as after a crash, its restart count up and its last state the terminated one."""
    node.servers.serve("alive", METRICS)
    node.servers.answer("alive", "/healthz", 500)
    node.create("alive", livenessProbe=http_get("/healthz", port="metrics", failureThreshold=2))

    wait_until(lambda: node.container("alive").get("restartCount", 0) >= 1, "the container to restart")
    terminated = node.container("alive")["lastState"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (143, "Error")
    killing = node.events("alive", "container_killing")[0]
    assert (killing["reason"], killing["message"]) == (
        "Killing",
        "Container main failed liveness probe, will be restarted",
    )
    before = [e for e in node.unhealthy("alive", "Liveness") if e["at"] <= killing["at"]]
    assert len(before) >= 2
    assert {e["message"] for e in before} == {"Liveness probe failed: HTTP probe failed with statuscode: 500"}
    assert "alive" in node.servers.terminated and "alive" not in node.servers.killed
    assert {r["port"] for r in node.servers.seen("alive")} == {METRICS}

    node.servers.answer("alive", "/healthz", 200)
    wait_until(lambda: "running" in node.container("alive").get("state", {}), "the container to run again")


def test_a_startup_probe_holds_the_readiness_and_liveness_probes_until_it_succeeds(node: Node) -> None:
    node.servers.serve("slow", HTTP)
    node.servers.answer("slow", "/startz", 503)
    node.servers.answer("slow", "/healthz", 500)  # would have it killed at once, were it probed
    node.create(
        "slow",
        startupProbe=http_get("/startz", failureThreshold=1000),
        readinessProbe=http_get("/readyz"),
        livenessProbe=http_get("/healthz", failureThreshold=1),
    )

    wait_until(lambda: len(node.servers.seen("slow", "/startz")) >= 3, "three startup probes")
    container = node.container("slow")
    assert (container["started"], container["ready"], container["restartCount"]) == (False, False, 0)
    assert {r["path"] for r in node.servers.seen("slow")} == {"/startz"}

    node.servers.answer("slow", "/healthz", 200)
    node.servers.answer("slow", "/startz", 200)
    wait_until(lambda: node.ready("slow") == "True", "the pod to be Ready")
    wait_until(lambda: node.servers.seen("slow", "/healthz"), "a liveness probe")
    container = node.container("slow")
    assert (container["started"], container["ready"], container["restartCount"]) == (True, True, 0)
    started = next(r["at"] for r in node.servers.seen("slow", "/startz") if r["status"] == 200)
    assert all(r["at"] > started for r in node.servers.seen("slow") if r["path"] != "/startz")
    assert [r["status"] for r in node.servers.seen("slow", "/startz")][-1] == 200  # not probed after it passed


def test_a_failing_startup_probe_has_the_container_killed_and_restarted(node: Node) -> None:
    node.servers.serve("stuck", HTTP)
    node.servers.answer("stuck", "/startz", 503)
    node.create("stuck", startupProbe=http_get("/startz", failureThreshold=2))

    wait_until(lambda: node.container("stuck").get("restartCount", 0) >= 1, "the container to restart")
    killing = node.events("stuck", "container_killing")[0]
    assert killing["message"] == "Container main failed startup probe, will be restarted"
    assert node.container("stuck")["lastState"]["terminated"]["exitCode"] == 143


def test_a_sidecar_s_startup_probe_holds_back_the_containers_after_it(node: Node) -> None:
    """A native sidecar (an init container with restartPolicy Always) with a startup probe: the pod's containers
    start once it has started, and the pod is not Initialized until then."""
    node.servers.serve("side", HTTP, container="proxy")
    node.servers.answer("side", "/startz", 503)
    node.create("side", sidecar={"startupProbe": http_get("/startz", failureThreshold=1000)})

    wait_until(lambda: len(node.servers.seen("side", "/startz")) >= 3, "three startup probes")
    assert node.container("side")["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert node.condition("side", "Initialized")["reason"] == "ContainersNotInitialized"
    assert node.ready("side") == "False"

    node.servers.answer("side", "/startz", 200)
    wait_until(lambda: node.ready("side") == "True", "the pod to be Ready")
    assert "running" in node.container("side")["state"]
    assert node.condition("side", "Initialized")["status"] == "True"


def test_a_port_nothing_listens_on_fails_the_probes_with_connection_refused(node: Node) -> None:
    """Nothing listens in the container's first run: its tcpSocket readiness probe and httpGet liveness probe fail
    (connection refused), and it is killed; its second run listens, and the TCP probe connects."""
    node.servers.serve("deaf", HTTP, from_start=2)
    node.create(
        "deaf",
        readinessProbe={"tcpSocket": {"port": "http"}, "periodSeconds": 1, "failureThreshold": 1},
        livenessProbe=http_get("/healthz", failureThreshold=2),
    )

    wait_until(lambda: node.container("deaf").get("restartCount", 0) >= 1, "the container to restart")
    ip = node.status("deaf")["podIP"]
    assert node.unhealthy("deaf", "Liveness")[0]["message"] == (
        f'Liveness probe failed: Get "http://{ip}:{HTTP}/healthz": dial tcp {ip}:{HTTP}: connect: connection refused'
    )
    assert node.unhealthy("deaf", "Readiness")[0]["message"] == (
        f"Readiness probe failed: dial tcp {ip}:{HTTP}: connect: connection refused"
    )
    assert node.events("deaf", "container_killing")
    wait_until(lambda: node.ready("deaf") == "True", "the second run to be Ready")


def test_a_probe_that_cannot_run_errors_and_its_result_is_thrown_away(node: Node) -> None:
    """A port name the container lacks, or an exec probe (this node has no container to run it in): an Unhealthy
    event each time, and nothing changes, as a kubelet throws an errored probe's result away: never ready, never
    killed."""
    node.servers.serve("odd", HTTP)
    node.create(
        "odd",
        readinessProbe={"exec": {"command": ["true"]}, "periodSeconds": 1},
        livenessProbe=http_get("/healthz", port="nonexistent", failureThreshold=1),
    )

    wait_until(lambda: len(node.unhealthy("odd", "Liveness")) >= 3, "three errored liveness probes")
    assert node.unhealthy("odd", "Liveness")[0]["message"] == (
        'Liveness probe errored and resulted in unknown state: strconv.Atoi: parsing "nonexistent": invalid syntax'
    )
    assert "exec probes are not supported" in node.unhealthy("odd", "Readiness")[0]["message"]
    container = node.container("odd")
    assert (container["ready"], container["restartCount"], node.ready("odd")) == (False, 0, "False")
    assert node.servers.seen("odd") == [] and not node.events("odd", "container_killing")


def test_the_probes_stop_when_the_pod_is_removed(node: Node) -> None:
    node.servers.serve("brief", HTTP)
    node.servers.answer("brief", "/readyz", 503)
    node.create("brief", readinessProbe=http_get("/readyz"), livenessProbe=http_get("/healthz"))
    wait_until(lambda: node.unhealthy("brief", "Readiness"), "a failed readiness probe")

    node.core.delete_namespaced_pod("brief", NAMESPACE, grace_period_seconds=0)
    wait_until(lambda: node.events("brief", "pod_removed"), "the kubelet to see the pod gone")
    probed = len(node.events("brief", "container_unhealthy"))
    time.sleep(5 * PERIOD)  # its server is gone: a probe now would fail, refused
    assert len(node.events("brief", "container_unhealthy")) == probed


def test_pod_addresses_are_unique_on_the_machine_and_reused_once_released() -> None:
    """Two nodes of one machine (two test beds) never hand out the same address; a node with more pods than a
    /24 holds claims another; an address released is handed out again before any new block is claimed."""
    first, second, third = PodAddresses(), PodAddresses(), PodAddresses()
    try:
        many = [first.allocate() for _ in range(300)]
        few = [second.allocate() for _ in range(10)]
        assert len(set(many)) == 300 and not set(many) & set(few)
        assert all(a.startswith("127.244.") and not a.endswith((".0", ".1", ".255")) for a in many + few)
        block = [third.allocate() for _ in range(253)]
        third.release(block[7])
        assert third.allocate() == block[7]
    finally:
        for addresses in (first, second, third):
            addresses.close()


def test_http_probes_follow_redirects_to_the_same_host_only_and_send_the_given_headers() -> None:
    """pkg/probe/http: a redirect to the same host is followed, one to another host is a success with a warning,
    a status of 400 or more fails; given headers are sent canonicalized, Host as the request's host."""
    seen: list[tuple[str, dict[str, str]]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, dict(self.headers)))
            target = {"/here": "/final", "/away": "http://127.0.0.2:1/elsewhere"}.get(self.path)
            self.send_response(302 if target else 418 if self.path == "/teapot" else 200)
            if target:
                self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        port = server.server_address[1]
        headers = [{"name": "x-probe", "value": "yes"}, {"name": "host", "value": "example.test"}]
        here = {"path": "/here", "port": port, "httpHeaders": headers}
        assert http_probe(here, {}, "127.0.0.1", 1.0) == (SUCCESS, "")
        assert [path for path, _ in seen] == ["/here", "/final"]
        assert seen[0][1]["X-Probe"] == "yes" and seen[0][1]["Host"] == "example.test"
        assert http_probe({"path": "/away", "port": port}, {}, "127.0.0.1", 1.0)[0] == WARNING
        assert http_probe({"path": "/teapot", "port": port}, {}, "127.0.0.1", 1.0) == (
            "Failure",
            "HTTP probe failed with statuscode: 418",
        )
    finally:
        server.shutdown()
        server.server_close()
