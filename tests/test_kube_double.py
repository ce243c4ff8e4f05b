"""The Kubernetes double, driven only through the official client and a kubeconfig it wrote, as the provider does."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import kubernetes
import pytest
import urllib3
from kubernetes.client import CoreV1Api, V1Pod
from kubernetes.client.exceptions import ApiException

from actions_runners_simulator.kube_double import KubeDouble, PodProcess

T = TypeVar("T")


class RecordingRuntime:
    """Remembers every container start and SIGTERM; exits on SIGTERM only when told to."""

    def __init__(self) -> None:
        self.exit_on_terminate = True
        self.started: list[PodProcess] = []
        self.terminated: list[PodProcess] = []
        self._lock = threading.Lock()

    def start(self, process: PodProcess) -> None:
        with self._lock:
            self.started.append(process)

    def terminate(self, process: PodProcess) -> None:
        with self._lock:
            self.terminated.append(process)
        if self.exit_on_terminate:
            process.exited(0)

    def latest(self, name: str) -> PodProcess:
        with self._lock:
            return [process for process in self.started if process.name == name][-1]

    def starts(self, name: str) -> int:
        with self._lock:
            return sum(process.name == name for process in self.started)


@pytest.fixture
def runtime() -> RecordingRuntime:
    return RecordingRuntime()


@pytest.fixture
def double(runtime: RecordingRuntime) -> Iterator[KubeDouble]:
    kube = KubeDouble(runtime, schedule_delay=0.02, restart_backoff=0.05).start()
    yield kube
    kube.stop()


def client_for(kubeconfig: str) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(config_file=kubeconfig)


@pytest.fixture
def core(double: KubeDouble, tmp_path: Any) -> Iterator[CoreV1Api]:
    api_client = client_for(str(double.write_kubeconfig(tmp_path / "kubeconfig")))
    yield CoreV1Api(api_client)
    api_client.close()


def wait_until(condition: Callable[[], T], timeout: float = 3.0) -> T:
    """Poll until condition() is truthy and return it; fail the test if it never becomes so."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.01)
    return result


def pod_manifest(name: str, *, restart_policy: str = "Never", env: list[dict] | None = None, **metadata: Any) -> dict:
    container = {"name": "runner", "image": "ghcr.io/actions/runner:2.330.0", "env": env or []}
    return {
        "metadata": {"name": name, **metadata},
        "spec": {"containers": [container], "restartPolicy": restart_policy},
    }


def secret_ref(variable: str, secret: str, key: str) -> dict:
    return {"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def api_error(call: Callable[[], object]) -> tuple[int, str, str]:
    """(HTTP status, Status reason, Status message) of a call that must fail."""
    with pytest.raises(ApiException) as raised:
        call()
    status = json.loads(raised.value.body)
    assert status["kind"] == "Status" and status["code"] == raised.value.status
    return raised.value.status, status["reason"], status["message"]


def phase(core: CoreV1Api, name: str, namespace: str = "default") -> str:
    return core.read_namespaced_pod(name, namespace).status.phase


def running_pod(core: CoreV1Api, manifest: dict) -> V1Pod:
    core.create_namespaced_pod("default", manifest)
    name = manifest["metadata"]["name"]
    wait_until(lambda: phase(core, name) == "Running")
    return core.read_namespaced_pod(name, "default")


def test_version_and_namespace_lifecycle_with_cascading_delete(core: CoreV1Api, double: KubeDouble) -> None:
    assert kubernetes.client.VersionApi(core.api_client).get_code().major == "1"
    created = core.create_namespace({"metadata": {"name": "runners", "labels": {"team": "ci"}}})
    assert created.metadata.uid and created.status.phase == "Active"
    assert "runners" in [ns.metadata.name for ns in core.list_namespace(label_selector="team=ci").items]
    core.create_namespaced_secret("runners", {"metadata": {"name": "creds"}, "stringData": {"token": "t"}})
    core.create_namespaced_pod("runners", pod_manifest("runner-1"))

    status = core.delete_namespace("runners")

    assert status["status"] == "Success"
    assert api_error(lambda: core.read_namespace("runners"))[:2] == (404, "NotFound")
    assert double.pods("runners") == [] and double.secrets("runners") == []
    assert "runners" not in [ns["metadata"]["name"] for ns in double.namespaces()]


def test_secret_string_data_is_stored_as_base64_data(core: CoreV1Api, double: KubeDouble) -> None:
    created = core.create_namespaced_secret(
        "default", {"metadata": {"name": "creds"}, "data": {"a": "YQ=="}, "stringData": {"token": "s3cret"}}
    )

    assert created.data == {"a": "YQ==", "token": base64.b64encode(b"s3cret").decode()}
    assert created.type == "Opaque"
    stored = double.secret("default", "creds")
    assert stored is not None and "stringData" not in stored
    assert [event["type"] for event in double.events()][-1] == "secret_created"


def test_secret_replace_patch_and_delete(core: CoreV1Api, double: KubeDouble) -> None:
    first = core.create_namespaced_secret("default", {"metadata": {"name": "creds"}, "stringData": {"token": "one"}})
    replaced = core.replace_namespaced_secret(
        "creds", "default", {"metadata": {"name": "creds"}, "stringData": {"token": "two"}}
    )
    assert replaced.data["token"] == base64.b64encode(b"two").decode()
    assert replaced.metadata.uid == first.metadata.uid
    assert int(replaced.metadata.resource_version) > int(first.metadata.resource_version)

    stale = {"metadata": {"name": "creds", "resourceVersion": first.metadata.resource_version}, "data": {}}
    assert api_error(lambda: core.replace_namespaced_secret("creds", "default", stale))[:2] == (409, "Conflict")

    patched = core.patch_namespaced_secret("creds", "default", {"metadata": {"labels": {"runner": "r1"}}})
    assert patched.metadata.labels == {"runner": "r1"} and patched.data == replaced.data

    assert core.delete_namespaced_secret("creds", "default")["status"] == "Success"
    assert api_error(lambda: core.read_namespaced_secret("creds", "default"))[:2] == (404, "NotFound")
    assert double.events()[-1]["type"] == "secret_deleted"


def test_pod_create_read_list_and_generate_name(core: CoreV1Api) -> None:
    manifest = pod_manifest("", generateName="runner-", labels={"app": "runner"})
    created = core.create_namespaced_pod("default", manifest)

    name = created.metadata.name
    assert name.startswith("runner-") and len(name) == len("runner-") + 5
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    assert created.status.phase == "Pending"
    assert created.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    read = core.read_namespaced_pod(name, "default")
    assert read.metadata.uid == created.metadata.uid and read.spec.restart_policy == "Never"
    assert [pod.metadata.name for pod in core.list_pod_for_all_namespaces().items] == [name]
    assert [
        pod.metadata.name for pod in core.list_namespaced_pod("default", field_selector=f"metadata.name={name}").items
    ] == [name]
    assert core.list_namespaced_pod("default", field_selector="metadata.name=other").items == []


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=runner", ["a", "b"]),
        ("app==runner,tier=x", ["a"]),
        ("app!=runner", ["c"]),
        ("tier", ["a", "c"]),
        ("!tier", ["b"]),
        ("tier in (x, z)", ["a"]),
        ("tier notin (x),app", ["b", "c"]),
        ("app=runner,tier in (y,x)", ["a"]),
    ],
)
def test_label_selectors(core: CoreV1Api, selector: str, expected: list[str]) -> None:
    core.create_namespaced_pod("default", pod_manifest("a", labels={"app": "runner", "tier": "x"}))
    core.create_namespaced_pod("default", pod_manifest("b", labels={"app": "runner"}))
    core.create_namespaced_pod("default", pod_manifest("c", labels={"app": "web", "tier": "y"}))

    found = core.list_namespaced_pod("default", label_selector=selector).items

    assert [pod.metadata.name for pod in found] == expected


def test_not_found_errors(core: CoreV1Api) -> None:
    assert api_error(lambda: core.read_namespaced_pod("ghost", "default")) == (
        404,
        "NotFound",
        'pods "ghost" not found',
    )
    create_elsewhere = lambda: core.create_namespaced_pod("nowhere", pod_manifest("p"))  # noqa: E731
    assert api_error(create_elsewhere) == (404, "NotFound", 'namespaces "nowhere" not found')
    assert api_error(lambda: core.delete_namespaced_secret("ghost", "default"))[:2] == (404, "NotFound")


def test_already_exists(core: CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("twin"))

    failure = api_error(lambda: core.create_namespaced_pod("default", pod_manifest("twin")))

    assert failure == (409, "AlreadyExists", 'pods "twin" already exists')


@pytest.mark.parametrize(
    "manifest",
    [
        pod_manifest("Not_A_Name"),
        {"metadata": {"name": "no-containers"}, "spec": {"containers": []}},
        {"metadata": {"name": "no-image"}, "spec": {"containers": [{"name": "runner"}]}},
    ],
)
def test_invalid_pods_are_rejected(core: CoreV1Api, double: KubeDouble, manifest: dict) -> None:
    assert api_error(lambda: core.create_namespaced_pod("default", manifest))[:2] == (422, "Invalid")
    assert double.pods() == []


def test_invalid_namespace_name_and_pod_spec_change(core: CoreV1Api) -> None:
    assert api_error(lambda: core.create_namespace({"metadata": {"name": "a.b"}}))[:2] == (422, "Invalid")
    core.create_namespaced_pod("default", pod_manifest("p"))

    spec_change = {"spec": {"containers": [{"name": "runner", "image": "other"}]}}
    assert api_error(lambda: core.patch_namespaced_pod("p", "default", spec_change))[:2] == (422, "Invalid")
    relabelled = core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"state": "idle"}}})
    assert relabelled.metadata.labels == {"state": "idle"}
    json_patch = [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]
    assert api_error(lambda: core.patch_namespaced_pod("p", "default", json_patch))[0] == 415


def test_wrong_token_is_unauthorized(double: KubeDouble, tmp_path: Any) -> None:
    path = double.write_kubeconfig(tmp_path / "kubeconfig")
    config = json.loads(path.read_text())
    config["users"][0]["user"]["token"] = "not-the-token"
    path.write_text(json.dumps(config))

    with client_for(str(path)) as api_client:
        failure = api_error(lambda: CoreV1Api(api_client).list_namespaced_pod("default"))

    assert failure[:2] == (401, "Unauthorized")
    assert double.requests()[-1] == ("GET", "/api/v1/namespaces/default/pods", 401)


def test_pod_waits_for_its_secret_then_runs_with_resolved_env(core: CoreV1Api, runtime: RecordingRuntime) -> None:
    pod_name = {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    env = [{"name": "PLAIN", "value": "1"}, pod_name, secret_ref("RUNNER_TOKEN", "creds", "token")]
    core.create_namespaced_pod("default", pod_manifest("runner", env=env))

    def waiting_message() -> str | None:
        waiting = core.read_namespaced_pod("runner", "default").status.container_statuses[0].state.waiting
        return waiting.message if waiting.reason == "CreateContainerConfigError" else None

    assert wait_until(waiting_message) == 'secret "creds" not found'
    core.create_namespaced_secret("default", {"metadata": {"name": "creds"}, "stringData": {"other": "x"}})
    wait_until(lambda: waiting_message() == "couldn't find key token in Secret default/creds")
    assert phase(core, "runner") == "Pending" and runtime.started == []

    core.patch_namespaced_secret("creds", "default", {"stringData": {"token": "AAA-registration"}})

    wait_until(lambda: phase(core, "runner") == "Running")
    pod = core.read_namespaced_pod("runner", "default")
    assert pod.status.pod_ip and pod.status.host_ip and pod.status.start_time is not None
    status = pod.status.container_statuses[0]
    assert status.ready and status.state.running.started_at is not None
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    process = wait_until(lambda: runtime.started and runtime.latest("runner"))
    assert process.env == {"PLAIN": "1", "POD": "runner", "RUNNER_TOKEN": "AAA-registration"}
    assert (process.namespace, process.restart_policy) == ("default", "Never")


def test_graceful_delete_keeps_the_pod_until_its_container_exits(
    core: CoreV1Api, double: KubeDouble, runtime: RecordingRuntime
) -> None:
    runtime.exit_on_terminate = False
    running_pod(core, pod_manifest("runner"))

    answer = core.delete_namespaced_pod("runner", "default", grace_period_seconds=30)

    assert answer.metadata.deletion_timestamp is not None and answer.metadata.deletion_grace_period_seconds == 30
    terminating = core.read_namespaced_pod("runner", "default")
    assert terminating.metadata.deletion_timestamp == answer.metadata.deletion_timestamp
    assert [process.name for process in runtime.terminated] == ["runner"]
    shorter = core.delete_namespaced_pod("runner", "default", grace_period_seconds=20)
    assert shorter.metadata.deletion_grace_period_seconds == 20
    longer = core.delete_namespaced_pod("runner", "default", grace_period_seconds=60)
    assert longer.metadata.deletion_grace_period_seconds == 20

    runtime.terminated[0].exited(0)

    assert api_error(lambda: core.read_namespaced_pod("runner", "default"))[:2] == (404, "NotFound")
    types = [event["type"] for event in double.events() if event["name"] == "runner"]
    assert types[-3:] == ["pod_terminating", "container_exited", "pod_removed"]


def test_graceful_delete_kills_a_container_that_outlives_its_grace(
    core: CoreV1Api, double: KubeDouble, runtime: RecordingRuntime
) -> None:
    runtime.exit_on_terminate = False
    running_pod(core, pod_manifest("stubborn"))

    core.delete_namespaced_pod("stubborn", "default", body={"gracePeriodSeconds": 1})

    time.sleep(0.5)
    assert core.read_namespaced_pod("stubborn", "default").metadata.deletion_grace_period_seconds == 1
    wait_until(lambda: double.pod("default", "stubborn") is None)
    events = {event["type"]: event for event in double.events() if event["name"] == "stubborn"}
    assert events["pod_terminating"]["grace_seconds"] == 1
    assert 0.9 <= events["container_killed"]["at"] - events["pod_terminating"]["at"] < 1.5
    assert events["pod_removed"]["at"] >= events["container_killed"]["at"]


def test_default_runtime_exits_on_sigterm_and_pod_goes_away(tmp_path: Any) -> None:
    idle = KubeDouble(schedule_delay=0.02).start()
    try:
        with client_for(str(idle.write_kubeconfig(tmp_path / "idle"))) as api_client:
            core = CoreV1Api(api_client)
            running_pod(core, pod_manifest("idle"))
            core.delete_namespaced_pod("idle", "default")
            assert idle.pod("default", "idle") is None
    finally:
        idle.stop()


def test_pending_and_finished_pods_are_removed_at_once(core: CoreV1Api, runtime: RecordingRuntime) -> None:
    core.create_namespaced_pod("default", pod_manifest("pending", env=[secret_ref("T", "missing", "t")]))
    answer = core.delete_namespaced_pod("pending", "default", grace_period_seconds=30)
    assert answer.metadata.name == "pending"
    assert api_error(lambda: core.read_namespaced_pod("pending", "default"))[0] == 404

    running_pod(core, pod_manifest("done"))
    runtime.latest("done").exited(0)
    wait_until(lambda: phase(core, "done") == "Succeeded")
    core.delete_namespaced_pod("done", "default", grace_period_seconds=30)
    assert api_error(lambda: core.read_namespaced_pod("done", "default"))[0] == 404
    assert [process.name for process in runtime.terminated] == []


@pytest.mark.parametrize(
    ("exit_code", "expected_phase", "reason"), [(0, "Succeeded", "Completed"), (3, "Failed", "Error")]
)
def test_restart_policy_never_finishes_the_pod(
    core: CoreV1Api, runtime: RecordingRuntime, exit_code: int, expected_phase: str, reason: str
) -> None:
    running_pod(core, pod_manifest("once"))

    runtime.latest("once").exited(exit_code)

    terminated = core.read_namespaced_pod("once", "default").status.container_statuses[0]
    assert phase(core, "once") == expected_phase
    assert not terminated.ready
    assert (terminated.state.terminated.exit_code, terminated.state.terminated.reason) == (exit_code, reason)
    assert terminated.state.terminated.finished_at is not None
    time.sleep(0.1)
    assert runtime.starts("once") == 1


def test_restart_policy_always_restarts_and_counts(core: CoreV1Api, runtime: RecordingRuntime) -> None:
    running_pod(core, pod_manifest("forever", restart_policy="Always"))

    runtime.latest("forever").exited(1)

    backing_off = core.read_namespaced_pod("forever", "default").status.container_statuses[0]
    assert backing_off.restart_count == 1 and backing_off.state.waiting.reason == "CrashLoopBackOff"
    assert backing_off.last_state.terminated.exit_code == 1
    assert phase(core, "forever") == "Running"
    wait_until(lambda: runtime.starts("forever") == 2)
    runtime.latest("forever").exited(0)
    wait_until(lambda: runtime.starts("forever") == 3)
    restarted = core.read_namespaced_pod("forever", "default").status.container_statuses[0]
    assert restarted.restart_count == 2 and restarted.state.running is not None


def test_fail_next_answers_injected_statuses_then_recovers(core: CoreV1Api, double: KubeDouble) -> None:
    core.create_namespaced_secret("default", {"metadata": {"name": "creds"}})
    double.fail_next("GET", r"/secrets/creds$", 503, count=2)
    double.fail_next("POST", r"/pods$", 429)

    assert api_error(lambda: core.read_namespaced_secret("creds", "default"))[:2] == (503, "ServiceUnavailable")
    assert api_error(lambda: core.read_namespaced_secret("creds", "default"))[:2] == (503, "ServiceUnavailable")
    assert core.read_namespaced_secret("creds", "default").metadata.name == "creds"
    assert api_error(lambda: core.create_namespaced_pod("default", pod_manifest("p")))[:2] == (429, "TooManyRequests")
    assert double.pods() == []

    path = "/api/v1/namespaces/default/secrets/creds"
    assert [status for method, served, status in double.requests() if served == path] == [503, 503, 200]


def test_hundreds_of_pods_run_without_a_thread_each(
    core: CoreV1Api, double: KubeDouble, runtime: RecordingRuntime
) -> None:
    threads_before = threading.active_count()

    for index in range(500):
        core.create_namespaced_pod("default", pod_manifest(f"runner-{index}", labels={"fleet": "big"}))

    wait_until(lambda: len(runtime.started) == 500, timeout=10)
    assert {pod.status.phase for pod in core.list_namespaced_pod("default", label_selector="fleet=big").items} == {
        "Running"
    }
    assert threading.active_count() <= threads_before + 1


def test_stop_cuts_off_clients_with_open_connections(core: CoreV1Api, double: KubeDouble) -> None:
    assert core.list_namespace().items  # the client now holds a keep-alive connection

    double.stop()
    double.stop()

    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_namespace()
