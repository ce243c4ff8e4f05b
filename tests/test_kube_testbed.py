"""The simulator's Kubernetes: a real API server, the kubelet stand-in that runs its pods, and the fault proxy.

What the API server does (validation, defaults, graceful deletion's two steps) is its own; these tests pin what
the stand-in adds, as a kubelet would, that the provider's own paths through it hold, and that the provider's
identity reaches pods and Secrets only in a runners' namespace (as docs/operations/rbac.md says).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from actions_runners_simulator.engine import DeploymentFailed, MiniEngine
from actions_runners_simulator.kube_apiserver import (
    NAMESPACE_RULES,
    PROVIDER_USER,
    RBAC_GROUP,
    RUNNER_NAMESPACE_RULES,
    SYSTEM_NAMESPACES,
)
from actions_runners_simulator.runner import INPUT, SIGTERM_EXIT, RunnerTimings, SimulatedRunners
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners.kube.client import MERGE_PATCH, KubeClient, PodRejected
from pulumi_actions_runners.kube.manifests import RUNNER_COMMAND
from pulumi_actions_runners.kube.scale_set_manifests import (
    ListenerSpec,
    credential_secret,
    listener_deployment,
    listener_rbac,
)
from pulumi_actions_runners.kube.scale_set_objects import ScaleSetObjects
from tests.conftest import ROOT, wait_until
from tests.fakes import FakePodProcess
from tests.helpers import NAMESPACE, core_api, new_token
from tests.programs import runner_with_token


def pod(name: str, *containers: dict, **spec: object) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": list(containers), **spec}}


def container(name: str = "main", image: str = "busybox:1.37", **fields: object) -> dict:
    return {"name": name, "image": image, **fields}


def status(sim: Simulator, name: str) -> dict:
    return (sim.kube.pod(NAMESPACE, name) or {}).get("status", {})


def waiting_reason(sim: Simulator, name: str, index: int = 0) -> str | None:
    statuses = status(sim, name).get("containerStatuses") or [{}]
    return (statuses[index].get("state", {}).get("waiting") or {}).get("reason")


def _online(sim: Simulator) -> set[str]:
    return {r["name"] for r in sim.github.runners() if r["status"] == "online"}


def _job_of_ephemeral_runners(sim: Simulator, parallelism: int) -> dict:
    """Each pod an ephemeral runner named after its pod, its registration token read from a Secret as it starts."""
    env = [
        {"name": f"{INPUT}URL", "value": sim.repo_url},
        {"name": f"{INPUT}NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": f"{INPUT}TOKEN", "valueFrom": {"secretKeyRef": {"name": "pool-token", "key": "token"}}},
        {"name": f"{INPUT}EPHEMERAL", "value": "true"},
    ]
    runner = container("runner", "ghcr.io/actions/actions-runner:2.336.0", env=env)
    # A pod deleted before its runner's run.sh traps SIGTERM takes its whole grace period (runner.py): 1 s here.
    template = {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [runner]}}
    spec = {"parallelism": parallelism, "completions": 1000, "backoffLimit": 3, "template": template}
    return {"metadata": {"name": "pool"}, "spec": spec}


def test_the_real_job_controller_starts_a_fresh_runner_pod_when_one_has_taken_its_job(sim: Simulator) -> None:
    """kube-controller-manager's Job controller, not a stand-in: an ephemeral runner exits 0 after its one job,
    its pod Succeeded counts a completion, and the controller makes a new pod at once, whose fresh runner
    registers under the new pod's name, with nothing of ours running."""
    with sim.kube.api_server.admin_client() as admin:
        token = {"metadata": {"name": "pool-token"}, "stringData": {"token": new_token(sim)}}
        client.CoreV1Api(admin).create_namespaced_secret(NAMESPACE, token)
        client.BatchV1Api(admin).create_namespaced_job(NAMESPACE, _job_of_ephemeral_runners(sim, 2))
        first = wait_until(lambda: len(online := _online(sim)) == 2 and online, "two runners online", timeout=30)
        took_a_job = sorted(first)[0]
        sim.github.start_job(took_a_job, 0.05)

        wait_until(lambda: len(_online(sim)) == 2 and took_a_job not in _online(sim), "a fresh runner", timeout=30)
        wait_until(lambda: _succeeded_and_active(admin) == (1, 2), "the Job to count 1 completion and 2 active pods")
        pods = {p["metadata"]["name"]: p for p in sim.kube.pods(NAMESPACE)}
        online = _online(sim)  # before the Job goes: its deletion takes its pods, and their runners, with it
        client.BatchV1Api(admin).delete_namespaced_job("pool", NAMESPACE, propagation_policy="Background")

    assert pods[took_a_job]["status"]["phase"] == "Succeeded"
    assert pods[took_a_job]["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert online - first and sim.runners.jobs_killed == []


def _succeeded_and_active(admin: client.ApiClient) -> tuple[int | None, int | None]:
    status = client.BatchV1Api(admin).read_namespaced_job("pool", NAMESPACE).status
    return status.succeeded, status.active


def test_the_real_garbage_collector_deletes_a_job_s_pods_with_it(sim: Simulator) -> None:
    with sim.kube.api_server.admin_client() as admin:
        token = {"metadata": {"name": "pool-token"}, "stringData": {"token": new_token(sim)}}
        client.CoreV1Api(admin).create_namespaced_secret(NAMESPACE, token)
        client.BatchV1Api(admin).create_namespaced_job(NAMESPACE, _job_of_ephemeral_runners(sim, 1))
        wait_until(lambda: _online(sim), "the Job's runner to come online", timeout=30)
        client.BatchV1Api(admin).delete_namespaced_job("pool", NAMESPACE, propagation_policy="Background")

        wait_until(lambda: not sim.kube.pods(NAMESPACE), "the garbage collector to delete the pod", timeout=30)


def test_the_real_namespace_controller_empties_a_deleted_namespace_and_finalizes_it(sim: Simulator) -> None:
    with sim.kube.api_server.admin_client() as admin:
        core = client.CoreV1Api(admin)
        core.create_namespace({"metadata": {"name": "short-lived"}})
        wait_until(lambda: _has_default_account(core, "short-lived"), "the service-account controller's account")
        core.create_namespaced_pod("short-lived", pod("idle", container()))
        core.create_namespaced_secret("short-lived", {"metadata": {"name": "kept"}, "stringData": {"k": "v"}})
        running = lambda: (sim.kube.pod("short-lived", "idle") or {}).get("status", {}).get("phase") == "Running"  # noqa: E731
        wait_until(running, "the pod to run")
        core.delete_namespace("short-lived")

        deleted = lambda: any(e["name"] == "short-lived" for e in sim.kube.events() if e["type"] == "namespace_deleted")  # noqa: E731
        wait_until(deleted, "the namespace controller to empty and finalize the namespace", 30)
    assert "short-lived" not in {n["metadata"]["name"] for n in sim.kube.namespaces()}


def _has_default_account(core: client.CoreV1Api, namespace: str) -> bool:
    try:
        core.read_namespaced_service_account("default", namespace)
    except ApiException:
        return False
    return True


def test_a_pod_is_bound_run_and_reported_through_the_status_subresource(sim: Simulator) -> None:
    core_api(sim).create_namespaced_pod(NAMESPACE, pod("idle", container(), container("sidecar")))

    wait_until(lambda: status(sim, "idle").get("phase") == "Running", "the pod to run")
    found = sim.kube.pod(NAMESPACE, "idle")
    assert found["spec"]["nodeName"] == "simulator-node"
    assert [c["name"] for c in found["status"]["containerStatuses"]] == ["main", "sidecar"]
    assert all(c["ready"] and "running" in c["state"] for c in found["status"]["containerStatuses"])
    assert {c["type"]: c["status"] for c in found["status"]["conditions"]}["Ready"] == "True"
    assert found["status"]["qosClass"] == "BestEffort"  # the API server's own default, kept by status writes


def test_graceful_deletion_stops_the_containers_then_confirms_with_the_grace_0_delete(sim: Simulator) -> None:
    core_api(sim).create_namespaced_pod(NAMESPACE, pod("leaving", container()))
    wait_until(lambda: status(sim, "leaving").get("phase") == "Running", "the pod to run")

    core_api(sim).delete_namespaced_pod("leaving", NAMESPACE)

    wait_until(lambda: sim.kube.pod(NAMESPACE, "leaving") is None, "the pod to be removed")
    kinds = [e["type"] for e in sim.kube.events() if e["name"] == "leaving"]
    assert kinds.index("pod_terminating") < kinds.index("container_exited") < kinds.index("pod_removed"), kinds
    assert "container_killed" not in kinds  # it stopped within its grace


def test_a_missing_secret_holds_the_container_until_it_exists(sim: Simulator) -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "token"}}}]
    core_api(sim).create_namespaced_pod(NAMESPACE, pod("waits", container(env=env)))
    wait_until(lambda: waiting_reason(sim, "waits") == "CreateContainerConfigError", "the config error")
    assert status(sim, "waits")["phase"] == "Pending"

    core_api(sim).create_namespaced_secret(NAMESPACE, {"metadata": {"name": "later"}, "stringData": {"token": "t"}})

    wait_until(lambda: status(sim, "waits").get("phase") == "Running", "the pod to run once the Secret exists")


def test_an_image_from_an_invalid_registry_cannot_be_pulled(sim: Simulator) -> None:
    core_api(sim).create_namespaced_pod(NAMESPACE, pod("unpullable", container(image="registry.invalid/runner:1")))

    wait_until(lambda: waiting_reason(sim, "unpullable") == "ErrImagePull", "ErrImagePull")
    wait_until(lambda: waiting_reason(sim, "unpullable") == "ImagePullBackOff", "ImagePullBackOff")


def test_a_pod_whose_node_selector_matches_no_node_is_unschedulable(sim: Simulator) -> None:
    core_api(sim).create_namespaced_pod(NAMESPACE, pod("nowhere", container(), nodeSelector={"pool": "gpu"}))

    wait_until(lambda: status(sim, "nowhere").get("conditions"), "the scheduler's verdict")
    [condition] = status(sim, "nowhere")["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("PodScheduled", "False", "Unschedulable")
    assert "nodeName" not in sim.kube.pod(NAMESPACE, "nowhere")["spec"]


def test_the_api_server_refuses_what_no_double_would_know_to(sim: Simulator) -> None:
    """A privileged container passes (--allow-privileged), a bad restart policy does not, with the field named."""
    privileged = container(securityContext={"privileged": True})
    core_api(sim).create_namespaced_pod(NAMESPACE, pod("dind", privileged))
    with pytest.raises(ApiException) as refused:
        core_api(sim).create_namespaced_pod(NAMESPACE, pod("bad", container(), restartPolicy="Sometimes"))
    assert refused.value.status == 422 and "spec.restartPolicy" in str(refused.value.body)


def test_the_fault_proxy_answers_with_a_status_or_loses_an_answer_after_it_took_effect(sim: Simulator) -> None:
    sim.kube.fail_next("POST", r"/secrets$", 503)
    with pytest.raises(ApiException) as refused:
        core_api(sim).create_namespaced_secret(NAMESPACE, {"metadata": {"name": "s"}})
    assert refused.value.status == 503 and '"kind": "Status"' in refused.value.body
    assert sim.kube.secret(NAMESPACE, "s") is None

    sim.kube.lose_next_answer("POST", r"/secrets$")
    with pytest.raises(Exception):  # noqa: B017 - the client's own error for a connection closed unanswered
        core_api(sim).create_namespaced_secret(NAMESPACE, {"metadata": {"name": "s"}}, _request_timeout=5)
    assert sim.kube.secret(NAMESPACE, "s") is not None
    assert [status for method, _path, status in sim.kube.requests() if method == "POST"] == [503, 0]


def test_a_runner_whose_image_cannot_be_pulled_fails_create_saying_so_and_leaves_nothing(sim: Simulator) -> None:
    program = runner_with_token(sim, new_token(sim), image="registry.invalid/actions-runner:2.329.0")
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as failed:
        engine.up(program)

    assert "could not be pulled" in str(failed.value) and "registry.invalid" in str(failed.value), failed.value
    wait_until(lambda: sim.kube.pods(NAMESPACE) == [], "the pod to be removed")
    assert sim.kube.secrets(NAMESPACE) == [] and sim.github.runners() == []


def test_an_init_container_that_cannot_start_holds_back_the_containers_after_it(sim: Simulator) -> None:
    init = container("fetch", image="registry.invalid/fetcher:1")
    core_api(sim).create_namespaced_pod(NAMESPACE, pod("held", container(), initContainers=[init]))

    wait_until(
        lambda: (status(sim, "held").get("initContainerStatuses") or [{}])[0].get("state", {}).get("waiting"),
        "the init container to wait",
    )
    assert status(sim, "held")["phase"] == "Pending"
    assert waiting_reason(sim, "held") == "ContainerCreating"
    assert not [e for e in sim.kube.events() if e["name"] == "held" and e["type"] == "container_started"]


def runner_env(sim: Simulator, name: str) -> dict[str, str]:
    return {f"{INPUT}URL": sim.repo_url, f"{INPUT}NAME": name, f"{INPUT}TOKEN": new_token(sim)}


def test_sigterm_during_config_sh(sim: Simulator) -> None:
    """Without a TERM trap the shell, PID 1, drops the signal: the runner registers and comes online after its
    stop (the unkind truth). With the provider's command (manifests.STOP_BEFORE_RUN) the trap runs once
    config.sh returns: the container exits 143, its registration offline, never listening."""
    runners = SimulatedRunners(sim.github, timings=RunnerTimings(config_seconds=0.3).faster(1))
    untrapped = FakePodProcess(name="untrapped", env=runner_env(sim, "untrapped"))
    command = ("/bin/bash", "-c", RUNNER_COMMAND)
    trapped = FakePodProcess(name="trapped", env=runner_env(sim, "trapped"), command=command)

    for process in (untrapped, trapped):
        runners.start(process)
        runners.terminate(process)

    wait_until(lambda: trapped.exit_codes, "the trapping shell to exit")
    assert trapped.exit_codes == [SIGTERM_EXIT] and runners.sigterms_ignored == ["untrapped"]
    wait_until(lambda: {r["name"]: r["status"] for r in sim.github.runners()}.get("untrapped") == "online", "online")
    assert {r["name"]: r["status"] for r in sim.github.runners()} == {"untrapped": "online", "trapped": "offline"}
    assert untrapped.exit_codes == [] and runners.jobs_killed == []


def test_staged_node_faults_leave_a_pod_unscheduled_unpulled_or_stuck_terminating(sim: Simulator) -> None:
    sim.kube.leave_unscheduled(1)
    sim.kube.fail_image_pulls(1)
    core_api(sim).create_namespaced_pod(NAMESPACE, pod("no-room", container()))
    wait_until(lambda: status(sim, "no-room").get("conditions"), "the scheduler's verdict")
    [condition] = status(sim, "no-room")["conditions"]
    assert condition["reason"] == "Unschedulable" and "Insufficient cpu" in condition["message"]

    core_api(sim).create_namespaced_pod(NAMESPACE, pod("no-pull", container()))
    wait_until(lambda: waiting_reason(sim, "no-pull") == "ImagePullBackOff", "ImagePullBackOff")
    assert "503" in status(sim, "no-pull")["containerStatuses"][0]["state"]["waiting"]["message"]

    core_api(sim).create_namespaced_pod(NAMESPACE, pod("slow-node", container()))
    wait_until(lambda: status(sim, "slow-node").get("phase") == "Running", "the third pod to run: faults used up")
    sim.kube.stall_terminations(1.5)
    deleted = time.monotonic()
    core_api(sim).delete_namespaced_pod("slow-node", NAMESPACE)
    wait_until(lambda: sim.kube.pod(NAMESPACE, "slow-node") is None, "the stalled deletion to finish")
    assert time.monotonic() - deleted >= 1.5

    def seen() -> list[str]:
        return [e["type"] for e in sim.kube.events() if e["name"] == "slow-node"]

    # The kubelet records the removal when its watch brings it, a moment after the API server's deletion.
    wait_until(lambda: seen()[-1:] == ["pod_removed"], "the kubelet to see the pod gone")
    assert seen()[-4:] == [
        "pod_stalled", "pod_terminating", "container_exited", "pod_removed"
    ]  # fmt: skip
    assert sim.kube.clear_faults() == 0


def test_the_fault_proxy_holds_a_request_past_the_clients_timeout_and_forwards_it_late(sim: Simulator) -> None:
    sim.kube.delay_next("POST", r"/secrets$", 1.0)
    with pytest.raises(Exception):  # noqa: B017 - the client's own read timeout
        core_api(sim).create_namespaced_secret(NAMESPACE, {"metadata": {"name": "late"}}, _request_timeout=(5, 0.3))
    assert sim.kube.secret(NAMESPACE, "late") is None
    wait_until(lambda: sim.kube.secret(NAMESPACE, "late"), "the held request to reach the API server")
    sim.kube.fail_next("DELETE", r"/secrets/", 500, count=3)
    assert sim.kube.clear_faults() == 3


@pytest.mark.parametrize(
    ("bad", "refusal"),
    [
        (pod("Not_A_Name", container()), 'metadata.name: Invalid value: "Not_A_Name"'),
        (pod("twice", container("main"), container("main")), 'spec.containers[1].name: Duplicate value: "main"'),
        (pod("sized", container(resources={"limits": {"cpu": "2 cores"}})), "quantities must match"),
        (pod("labelled", container()) | {"metadata": {"name": "labelled", "labels": {"a": "b c"}}}, "labels"),
        (pod("in-use", container(), initContainers=[container("main")]), "Duplicate value"),
    ],
)
def test_the_provider_s_dry_run_meets_the_api_server_s_own_validation(sim: Simulator, bad: dict, refusal: str) -> None:
    """What a pod template can get wrong that only the API server judges: refused before anything is written."""
    manifest = bad | {"metadata": bad["metadata"] | {"namespace": NAMESPACE}}
    with KubeClient(str(sim.kubeconfig)) as kube, pytest.raises(PodRejected) as refused:
        kube.validate_pod(manifest)
    assert refusal in str(refused.value), refused.value
    assert sim.kube.pods(NAMESPACE) == []


# --- RBAC: the provider's identity reaches pods and Secrets in a runners' namespace only ----------------------


@pytest.fixture
def provider_api(sim: Simulator) -> Iterator[client.ApiClient]:
    """The API as the provider and programs reach it: sim.kubeconfig's identity, through the fault proxy."""
    with config.new_client_from_config(config_file=str(sim.kubeconfig), persist_config=False) as api:
        yield api


def refusal(call: Callable[[], object]) -> int | None:
    """The status the API server refused ``call`` with; None if it was allowed."""
    try:
        call()
    except ApiException as error:
        return error.status
    return None


def allowed(api: client.ApiClient, verb: str, resource: str, namespace: str | None = None) -> bool:
    """What the authorizer says of the caller's own ``verb`` on ``resource`` (SelfSubjectAccessReview)."""
    groups = {"jobs": "batch", "deployments": "apps", "roles": RBAC_GROUP, "rolebindings": RBAC_GROUP}
    group = groups.get(resource, "")
    attributes = {"verb": verb, "resource": resource, "group": group} | ({"namespace": namespace} if namespace else {})
    review = {"spec": {"resourceAttributes": attributes}}
    answer = client.AuthorizationV1Api(api).create_self_subject_access_review(review)
    return bool(answer.status.allowed)


def names_provider(binding: client.V1RoleBinding | client.V1ClusterRoleBinding) -> bool:
    return any(subject.name == PROVIDER_USER for subject in binding.subjects or ())


SCALE_SET_KINDS = ("configmaps", "serviceaccounts", "roles", "rolebindings")


def granted(rules: list[dict]) -> set[tuple[str, str]]:
    return {(resource, verb) for rule in rules for resource in rule["resources"] for verb in rule["verbs"]}


def test_the_provider_s_rules_are_what_kube_client_calls_and_pods_are_never_replaced() -> None:
    """docs/operations/rbac.md quotes these: a verb added or dropped is a decision, made here and there together."""
    assert granted(RUNNER_NAMESPACE_RULES) == {
        *(("pods", verb) for verb in ("create", "get", "list", "patch", "delete")),
        *(("secrets", verb) for verb in ("create", "get", "list", "update", "patch", "delete")),
        *(("jobs", verb) for verb in ("create", "get", "list", "patch", "delete")),
        *(("deployments", verb) for verb in ("create", "get", "list", "patch", "delete")),
        *((kind, verb) for kind in SCALE_SET_KINDS for verb in ("create", "get", "patch", "delete")),
    }
    # pulumi_kubernetes' server-side apply: a PATCH that may create; GET, LIST and WATCH to await; DELETE.
    verbs = ("get", "list", "watch", "create", "patch", "delete")
    assert granted(NAMESPACE_RULES) == {("namespaces", verb) for verb in verbs}


def test_the_permissions_page_grants_what_the_test_bed_binds() -> None:
    """Its table and its Role manifest, which users apply as they are, say exactly what the suite proves enough."""
    page = (ROOT / "docs" / "operations" / "rbac.md").read_text()
    manifest = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    role = next(document for document in yaml.safe_load_all(manifest) if document["kind"] == "Role")
    assert granted(role["rules"]) == granted(RUNNER_NAMESPACE_RULES)
    table = {
        (resource, verb)
        for row in re.findall(r"^\| `(\w+)`[^|]* \| ([^|]+) \|", page, flags=re.MULTILINE)
        for resource in [row[0]]
        for verb in re.findall(r"`(\w+)`", row[1])
    }
    assert table == granted(RUNNER_NAMESPACE_RULES)


def test_the_permissions_page_shows_the_listener_s_role_as_the_provider_makes_it() -> None:
    page = (ROOT / "docs" / "operations" / "rbac.md").read_text()
    manifest = page.split("## A RunnerScaleSet's listener", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = ListenerSpec("linux", NAMESPACE, "https://github.com/o/r", "l:1", None, {"GITHUB_TOKEN": "t"})
    role = next(m for m in listener_rbac(spec) if m["kind"] == "Role")
    shown = yaml.safe_load(manifest.replace("<scale_set_name>", "linux"))["rules"]
    assert shown == role["rules"]
    assert granted(role["rules"]) <= granted(RUNNER_NAMESPACE_RULES)  # the provider holds what it grants


def test_the_provider_s_identity_makes_a_listener_s_objects_with_its_own_client(sim: Simulator) -> None:
    """Server-side apply of each (a create, then a change), a read, and a delete, as lifecycle/scale_set.py does."""
    spec = ListenerSpec("linux", NAMESPACE, "https://github.com/o/r", "l:1", "me", {"GITHUB_TOKEN": "t"})
    manifests = [credential_secret(spec), *listener_rbac(spec), listener_deployment(spec)]
    with KubeClient(str(sim.kubeconfig)) as kube:
        objects = ScaleSetObjects(kube)
        for manifest in manifests:
            objects.apply(manifest)
            objects.apply(manifest)
            assert objects.read(manifest["kind"], NAMESPACE, manifest["metadata"]["name"]) is not None
        for manifest in reversed(manifests):
            objects.delete(manifest["kind"], NAMESPACE, manifest["metadata"]["name"])
            objects.delete(manifest["kind"], NAMESPACE, manifest["metadata"]["name"])  # gone: done


def test_the_provider_s_identity_may_make_and_list_pods_and_secrets_in_the_runners_namespace(
    sim: Simulator, provider_api: client.ApiClient
) -> None:
    """In force as soon as the simulator has started (its namespace was bound before start returned), for each
    form of call the provider makes; nothing more."""
    with sim.kube.api_server.admin_client() as admin:
        bindings = client.RbacAuthorizationV1Api(admin).list_namespaced_role_binding(NAMESPACE).items
        assert [b.role_ref.name for b in bindings if names_provider(b)] == [PROVIDER_USER]  # before any call
    core = client.CoreV1Api(provider_api)
    mine = pod("mine", container()) | {"metadata": {"name": "mine", "namespace": NAMESPACE}}
    with KubeClient(str(sim.kubeconfig)) as kube:  # the provider's own client for pods
        kube.validate_pod(mine)  # a create, as a server-side dry run
        kube.create_pod(mine)
        assert kube.read_pod(NAMESPACE, "mine") is not None
        assert [p.metadata.name for p in kube.list_pods(NAMESPACE, "")] == ["mine"]
        kube.annotate_pod(NAMESPACE, "mine", {"seen": "yes"})
        kube.delete_pod(NAMESPACE, "mine", grace_seconds=0)
        # A refilling pool's Job, as refill_pool.py reaches it.
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "mine", "namespace": NAMESPACE},
            "spec": {"parallelism": 0, "template": {"spec": mine["spec"] | {"restartPolicy": "Never"}}},
        }
        kube.validate_job(job)
        assert kube.create_job(job)
        assert [j.metadata.name for j in kube.list_jobs(NAMESPACE, "")] == ["mine"]
        kube.scale_job(NAMESPACE, "mine", 0)
        kube.orphan_job(NAMESPACE, "mine", kube.read_job(NAMESPACE, "mine").metadata.uid)

    # Secrets as the provider reaches them: by their metadata alone, replaced at a resourceVersion, deleted by uid.
    made = core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": "mine"}, "stringData": {"token": "t"}})
    metadata_only = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}
    core.read_namespaced_secret("mine", NAMESPACE, _headers=metadata_only, _preload_content=False)
    metadata_list = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
    core.list_namespaced_secret(NAMESPACE, _headers=metadata_list, _preload_content=False)
    body = {"metadata": {"name": "mine", "resourceVersion": made.metadata.resource_version}, "stringData": {"a": "b"}}
    core.replace_namespaced_secret("mine", NAMESPACE, body)
    core.patch_namespaced_secret("mine", NAMESPACE, {"stringData": {"c": "d"}}, _content_type=MERGE_PATCH)
    preconditioned = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=made.metadata.uid))
    core.delete_namespaced_secret("mine", NAMESPACE, body=preconditioned)

    for resource, verb in granted(RUNNER_NAMESPACE_RULES):
        assert allowed(provider_api, verb, resource, NAMESPACE), (verb, resource)
    assert not allowed(provider_api, "update", "pods", NAMESPACE)  # nothing replaces a pod
    assert not allowed(provider_api, "watch", "pods", NAMESPACE)
    assert not allowed(provider_api, "list", "configmaps", NAMESPACE)
    assert not allowed(provider_api, "escalate", "roles", NAMESPACE)  # it grants only what it holds
    assert not allowed(provider_api, "bind", "roles", NAMESPACE)


def test_the_provider_s_identity_is_refused_across_namespaces_in_system_namespaces_and_cluster_wide(
    sim: Simulator, provider_api: client.ApiClient
) -> None:
    """The suite fails if the provider ever reaches outside its namespace: each of these is a 403."""
    core = client.CoreV1Api(provider_api)
    assert refusal(lambda: core.list_pod_for_all_namespaces()) == 403
    assert refusal(lambda: core.list_secret_for_all_namespaces()) == 403
    for namespace in SYSTEM_NAMESPACES:
        assert refusal(lambda ns=namespace: core.list_namespaced_pod(ns)) == 403, namespace
        assert refusal(lambda ns=namespace: core.list_namespaced_secret(ns)) == 403, namespace
    assert refusal(lambda: core.create_namespaced_pod("default", pod("astray", container()))) == 403
    assert refusal(lambda: core.list_node()) == 403
    assert refusal(lambda: core.read_node("simulator-node")) == 403
    rbac_as_provider = client.RbacAuthorizationV1Api(provider_api)
    assert refusal(lambda: rbac_as_provider.list_cluster_role()) == 403
    widen = {"metadata": {"name": "more"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
             "name": "cluster-admin"}, "subjects": [{"kind": "User", "name": PROVIDER_USER}]}  # fmt: skip
    assert refusal(lambda: rbac_as_provider.create_namespaced_role_binding(NAMESPACE, widen)) == 403
    assert refusal(lambda: core.list_namespaced_config_map(NAMESPACE)) == 403  # in its namespace, only its rules
    with KubeClient(str(sim.kubeconfig)) as kube, pytest.raises(ApiException) as refused:
        kube.list_pods("default", "")
    assert refused.value.status == 403
    with sim.kube.api_server.admin_client() as admin:
        rbac = client.RbacAuthorizationV1Api(admin)
        bindings = rbac.list_role_binding_for_all_namespaces().items
        assert [b.metadata.namespace for b in bindings if names_provider(b)] == [NAMESPACE]  # none in a system one
        [cluster_wide] = [b for b in rbac.list_cluster_role_binding().items if names_provider(b)]
        role = rbac.read_cluster_role(cluster_wide.role_ref.name)
        assert {r for rule in role.rules for r in rule.resources} == {"namespaces"}  # nothing else cluster-wide


def test_a_namespace_made_after_start_is_provisioned_with_the_provider_s_role(sim: Simulator) -> None:
    """The cluster admin's provisioning stand-in binds the Role in each new non-system namespace as the kubelet
    stand-in sees it made, whoever made it and before any call of the provider there."""
    with sim.kube.api_server.admin_client() as admin:
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": "team-c"}})
        wait_until(
            lambda: [e for e in sim.kube.events() if e["type"] == "namespace_provisioned" and e["name"] == "team-c"],
            "the namespace to be provisioned",
        )
        rbac = client.RbacAuthorizationV1Api(admin)
        [binding] = [b for b in rbac.list_namespaced_role_binding("team-c").items if names_provider(b)]
        assert (binding.role_ref.kind, binding.role_ref.name) == ("Role", PROVIDER_USER)
        role = rbac.read_namespaced_role(PROVIDER_USER, "team-c")
        assert granted([r.to_dict() for r in role.rules]) == granted(RUNNER_NAMESPACE_RULES)
    provisioned = [e["name"] for e in sim.kube.events() if e["type"] == "namespace_provisioned"]
    assert provisioned == ["team-c"], provisioned  # not the one start bound, nor a system one


def test_the_provider_s_first_call_in_a_namespace_it_has_just_made_does_not_race_its_provisioning(
    sim: Simulator, tmp_path: Path
) -> None:
    """As programs/runners makes its namespace (createNamespace: a cluster-scoped create, which the namespaces
    ClusterRole allows), then calls in it at once. Straight to the API server (the fault proxy's own latency
    would hide the race): without the provisioning webhook most of these calls would meet a 403."""
    direct = sim.kube.api_server.write_kubeconfig(tmp_path / "direct.kubeconfig")
    with config.new_client_from_config(config_file=str(direct), persist_config=False) as api:
        core = client.CoreV1Api(api)
        for index in range(5):
            core.create_namespace({"metadata": {"name": f"made-{index}"}})
            assert core.list_namespaced_pod(f"made-{index}").items == []
        core.create_namespace({"metadata": {"name": "made-last"}})
        core.create_namespaced_pod("made-last", pod("first", container()))
        assert refusal(lambda: core.list_namespaced_pod("never-made")) == 403
        assert refusal(lambda: core.list_namespaced_pod("kube-system")) == 403  # still no Role there
    with sim.kube.api_server.admin_client() as admin:
        rbac = client.RbacAuthorizationV1Api(admin)
        bound = {b.metadata.namespace for b in rbac.list_role_binding_for_all_namespaces().items if names_provider(b)}
    assert bound == {NAMESPACE, "made-last", *(f"made-{index}" for index in range(5))}
