"""A pod template shapes the runner pods of a Runner and a RunnerPool alike: what it gives arrives intact on the
pod, what the provider owns is a Check failure naming its path, what only the API server judges fails at Create
and leaves nothing behind, and a change of it recreates runners, whatever its key order."""

from __future__ import annotations

import contextlib
import copy

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pulumi_kubernetes.core import v1 as core
from pulumi_kubernetes.meta import v1 as meta

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine
from pulumi_actions_runners import Runner
from pulumi_actions_runners.kube.manifests import EVICTION_SAFETY, SPEC_HASH_ANNOTATION
from tests.conftest import ROOT, wait_until
from tests.helpers import NAMESPACE, new_token, outputs
from tests.programs import jit_runner, runner_and_pool, token_and_pool, token_and_runners

TEMPLATE = {
    "metadata": {
        "creationTimestamp": None,  # as kubectl writes it: a pasted template passes
        "labels": {"team": "ci"},
        "annotations": {"example.com/owner": "platform", "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
    },
    "spec": {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}],
        "serviceAccountName": "ci-runner",
        "securityContext": {"fsGroup": 1001},
        "terminationGracePeriodSeconds": 45,
        "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}}],
        "initContainers": [{"name": "warm-cache", "image": "busybox:1.36", "command": ["true"]}],
        "containers": [
            {
                "name": "runner",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 2, "memory": "4Gi"}},
                "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                "env": [
                    {"name": "RUNNER_CACHE", "value": "/cache"},
                    {"name": "ACTIONS_RUNNER_HOOK_JOB_STARTED", "value": "/cache/job-started.sh"},
                ],
            },
            {"name": "log-shipper", "image": "busybox:1.36", "args": ["tail", "-f", "/dev/null"]},
        ],
    },
}

TEMPLATE_ARGS = core.PodTemplateSpecArgs(
    metadata=meta.ObjectMetaArgs(
        labels={"team": "ci"},
        annotations={"example.com/owner": "platform", "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
    ),
    spec=core.PodSpecArgs(
        node_selector={"kubernetes.io/os": "linux"},
        tolerations=[core.TolerationArgs(key="dedicated", operator="Equal", value="ci", effect="NoSchedule")],
        service_account_name="ci-runner",
        security_context=core.PodSecurityContextArgs(fs_group=1001),
        termination_grace_period_seconds=45,
        volumes=[core.VolumeArgs(name="cache", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit="1Gi"))],
        init_containers=[core.ContainerArgs(name="warm-cache", image="busybox:1.36", command=["true"])],
        containers=[
            core.ContainerArgs(
                name="runner",
                resources=core.ResourceRequirementsArgs(
                    requests={"cpu": "500m", "memory": "1Gi"}, limits={"cpu": "2", "memory": "4Gi"}
                ),
                volume_mounts=[core.VolumeMountArgs(name="cache", mount_path="/cache")],
                env=[
                    core.EnvVarArgs(name="RUNNER_CACHE", value="/cache"),
                    core.EnvVarArgs(name="ACTIONS_RUNNER_HOOK_JOB_STARTED", value="/cache/job-started.sh"),
                ],
            ),
            core.ContainerArgs(name="log-shipper", image="busybox:1.36", args=["tail", "-f", "/dev/null"]),
        ],
    ),
)


def _service_account(sim) -> None:
    """Made as the cluster's admin (the provider's role has no service accounts); kept on a shared API server."""
    with sim.kube.api_server.admin_client() as admin, contextlib.suppress(ApiException):
        client.CoreV1Api(admin).create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "ci-runner"}})


def _containers(pod: dict) -> dict[str, dict]:
    return {c["name"]: c for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]}


def _check_failures(error: DeploymentFailed) -> dict[str, str]:
    found: dict[str, str] = {}
    for cause in error.errors:
        assert isinstance(cause, CheckFailed), f"expected a Check failure, got {cause!r}"
        found.update(dict(cause.failures))
    return found


def test_a_pod_template_arrives_intact_on_the_runner_pod(sim) -> None:
    _service_account(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_runners(sim, 1, pod_template=TEMPLATE))
        pod = sim.kube.pod(NAMESPACE, outputs(engine, "runner-0")["pod_name"])
        spec, given = pod["spec"], TEMPLATE["spec"]

        for field in ("nodeSelector", "serviceAccountName", "securityContext", "terminationGracePeriodSeconds"):
            assert spec[field] == given[field], field
        assert given["tolerations"][0] in spec["tolerations"]  # the API server adds its not-ready/unreachable ones
        assert given["volumes"][0] in spec["volumes"]
        containers = _containers(pod)
        runner = containers["runner"]
        assert runner["resources"] == {
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "limits": {"cpu": "2", "memory": "4Gi"},
        }
        assert {"name": "cache", "mountPath": "/cache"} in [
            {k: m[k] for k in ("name", "mountPath")} for m in runner["volumeMounts"]
        ]
        env = [variable["name"] for variable in runner["env"]]
        assert env[0] == "ACTIONS_RUNNER_INPUT_URL"  # the provider's come first, the template's after them
        assert env[-2:] == ["RUNNER_CACHE", "ACTIONS_RUNNER_HOOK_JOB_STARTED"]  # the image's hooks are the user's
        assert {"ACTIONS_RUNNER_INPUT_DISABLEUPDATE", "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"} <= set(env)
        newest = ".".join(map(str, sim.github.releases.latest().version))
        assert runner["image"] == f"ghcr.io/actions/actions-runner:{newest}"  # no image given: the newest release
        shipper = containers["log-shipper"]
        assert (shipper["image"], shipper["args"]) == ("busybox:1.36", ["tail", "-f", "/dev/null"])
        assert containers["warm-cache"]["command"] == ["true"]
        assert spec["restartPolicy"] == "Never"  # the provider's: an ephemeral runner

        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert labels["team"] == "ci" and labels["app.kubernetes.io/managed-by"] == "pulumi-actions-runners"
        assert annotations["example.com/owner"] == "platform"
        assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "true"  # overridden by the template
        assert annotations["karpenter.sh/do-not-disrupt"] == "true"  # the default, kept
        assert {r["status"] for r in sim.github.runners()} == {"online"}
        engine.destroy()
    assert sim.kube.pods(NAMESPACE) == [] and sim.github.runners() == []


def test_a_runner_pod_without_a_template_is_safe_from_eviction_by_autoscalers(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_runners(sim, 1))
        pod = sim.kube.pod(NAMESPACE, outputs(engine, "runner-0")["pod_name"])
        assert EVICTION_SAFETY.items() <= pod["metadata"]["annotations"].items()
        assert "initContainers" not in pod["spec"] and len(pod["spec"]["containers"]) == 1
        engine.destroy()


def test_runner_pods_mount_no_service_account_token_unless_the_template_asks_for_one(sim) -> None:
    """A job runs what a workflow says; with the token mounted it could do whatever the pod's service account may."""
    wants_token = {"spec": {"automountServiceAccountToken": True}}
    with MiniEngine(ROOT) as engine:
        engine.up(runner_and_pool(sim, new_token(sim)))
        assert {pod["spec"]["automountServiceAccountToken"] for pod in sim.kube.pods(NAMESPACE)} == {False}

        engine.up(token_and_runners(sim, 1, pod_template=wants_token))
        pod = sim.kube.pod(NAMESPACE, outputs(engine, "runner-0")["pod_name"])
        assert pod["spec"]["automountServiceAccountToken"] is True
        engine.destroy()


def test_pod_template_args_and_a_dict_make_the_same_pod(sim) -> None:
    _service_account(sim)
    token = new_token(sim)

    def program() -> None:
        for name, template in (("from-dict", TEMPLATE), ("from-args", TEMPLATE_ARGS)):
            Runner(
                name,
                github_url=sim.repo_url,
                namespace=NAMESPACE,
                registration_token=token,
                github_token=sim.credential,
                kubeconfig=str(sim.kubeconfig),
                grace_period_seconds=0.5,
                pod_template=template,
            )

    with MiniEngine(ROOT) as engine:
        engine.up(program)
        from_dict, from_args = (outputs(engine, name) for name in ("from-dict", "from-args"))
        pods = [sim.kube.pod(NAMESPACE, out["pod_name"]) for out in (from_dict, from_args)]
        # One spec hash: the same template, though the dict's cpu limit is the number 2 and the Args' the string "2".
        assert len({pod["metadata"]["annotations"][SPEC_HASH_ANNOTATION] for pod in pods}) == 1
        containers = [_containers(pod) for pod in pods]
        for name in ("runner", "log-shipper", "warm-cache"):
            assert containers[0][name]["resources"] == containers[1][name]["resources"], name
        for field in ("nodeSelector", "tolerations", "securityContext", "serviceAccountName"):
            assert pods[0]["spec"][field] == pods[1]["spec"][field], field
        engine.destroy()


def test_every_override_of_what_the_provider_owns_is_a_check_failure_naming_its_path(sim) -> None:
    template = {
        "metadata": {
            "name": "mine",
            "labels": {"actions-runners.pulumi.io/runner": "x", "app.kubernetes.io/name": "mine"},
            "annotations": {"actions-runners.pulumi.io/token-hash": "0"},
        },
        "spec": {
            "restartPolicy": "Always",
            "containers": [
                {
                    "name": "runner",
                    "image": "mine:1",
                    "command": ["sh"],
                    "args": ["-c", "true"],
                    "restartPolicy": "Always",
                    "env": [
                        {"name": "ACTIONS_RUNNER_INPUT_LABELS", "value": "x"},
                        {"name": "DOCKER_HOST", "value": "tcp://docker:2375"},
                        {"name": "LEAK", "value": "$(ACTIONS_RUNNER_INPUT_TOKEN)"},
                    ],
                    "envFrom": [{"prefix": "ACTIONS_RUNNER_INPUT_", "configMapRef": {"name": "settings"}}],
                },
                {"name": "dind", "image": "docker:dind", "restartPolicy": "Always"},
            ],
        },
    }
    expected = {
        "pod_template.metadata.name",
        "pod_template.metadata.labels[actions-runners.pulumi.io/runner]",
        "pod_template.metadata.annotations[actions-runners.pulumi.io/token-hash]",
        "pod_template.spec.restartPolicy",
        "pod_template.spec.containers[runner].image",
        "pod_template.spec.containers[runner].command",
        "pod_template.spec.containers[runner].args",
        "pod_template.spec.containers[runner].env[ACTIONS_RUNNER_INPUT_LABELS]",
        "pod_template.spec.containers[runner].env[DOCKER_HOST]",
        "pod_template.metadata.labels[app.kubernetes.io/name]",
        "pod_template.spec.containers[runner].restartPolicy",
        "pod_template.spec.containers[runner].env[LEAK]",
        "pod_template.spec.containers[runner].envFrom[0].prefix",
        "pod_template.spec.containers[dind].restartPolicy",
    }
    requests = len(sim.kube.requests())
    for program in (
        token_and_runners(sim, 1, pod_template=template, docker=True),
        token_and_pool(sim, new_token(sim), pod_template=template, docker=True),
    ):
        with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
            engine.preview(program)
        failures = _check_failures(raised.value)
        assert set(failures) == expected, failures
        assert "is the provider's" in failures["pod_template.spec.containers[runner].command"]
        assert "ephemeral" in failures["pod_template.spec.restartPolicy"]
        assert "set the image input" in failures["pod_template.spec.containers[runner].image"]
    assert len(sim.kube.requests()) == requests  # Check judged it alone


@pytest.mark.parametrize(
    ("template", "path", "reason"),
    [
        ({"spec": {"nodeSelecter": {}}}, "pod_template.spec.nodeSelecter", "did you mean 'nodeSelector'?"),
        (
            {"spec": {"node_selector": {}}},
            "pod_template.spec.node_selector",
            "use Kubernetes' field name 'nodeSelector'",
        ),
        ({"spec": {"tolerations": {"key": "a"}}}, "pod_template.spec.tolerations", "must be a list, not a mapping"),
        (
            {"spec": {"containers": [{"name": "runner", "resources": {"limits": {"cpu": "2 cores"}}}]}},
            "pod_template.spec.containers[runner].resources.limits[cpu]",
            "'2 cores' is not a Kubernetes quantity",
        ),
        (
            {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]}},
            "pod_template.spec.containers[a]",
            "names a container twice",
        ),
        (
            {"spec": {"terminationGracePeriodSeconds": "45"}},
            "pod_template.spec.terminationGracePeriodSeconds",
            "whole number",
        ),
        ("spec: {}", "pod_template", "PodTemplateSpecArgs"),
        ({"spec": {"containers": [None]}}, "pod_template.spec.containers[0]", "must not be null"),
        (
            {"spec": {"terminationGracePeriodSeconds": 1.5}},
            "pod_template.spec.terminationGracePeriodSeconds",
            "not 1.5",
        ),
    ],
)
def test_a_malformed_template_is_a_check_failure_by_path(sim, template, path: str, reason: str) -> None:
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.preview(token_and_runners(sim, 1, pod_template=template))
    failures = _check_failures(raised.value)
    assert list(failures) == [path] and reason in failures[path], failures


def test_what_only_the_api_server_judges_fails_at_create_and_leaves_nothing(sim) -> None:
    bad_label = {"metadata": {"labels": {"team": "not a label value"}}}
    with MiniEngine(ROOT) as engine:
        with pytest.raises(DeploymentFailed) as raised:
            engine.up(jit_runner(sim, pod_template=bad_label))
        message = str(raised.value)
        assert "was refused: Kubernetes answered 422" in message, message
        assert 'metadata.labels: Invalid value: "not a label value"' in message, message
        assert "Traceback" not in message
        # Judged by a dry run before anything was written: no just-in-time registration, Secret or pod.
        assert sim.github.calls("POST") == [] and sim.github.runners() == []
        assert sim.kube.pods(NAMESPACE) == [] and sim.kube.secrets(NAMESPACE) == []

        # A pool's update with a volume name the API server refuses touches none of its runners.
        token = new_token(sim)
        engine.up(token_and_pool(sim, token, replicas=2))
        before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)}
        bad_volume = {"spec": {"volumes": [{"name": "Cache_Volume", "emptyDir": {}}]}}
        with pytest.raises(DeploymentFailed) as raised:
            engine.up(token_and_pool(sim, token, replicas=2, pod_template=bad_volume))
        assert 'spec.volumes[0].name: Invalid value: "Cache_Volume"' in str(raised.value), raised.value
        assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)} == before
        assert sim.github.calls("DELETE") == []
        assert outputs(engine, "pool").get("pod_template") is None  # the state is the last update's
        engine.destroy()


def test_a_changed_template_replaces_a_runner_and_rotates_a_pool_but_key_order_changes_nothing(sim) -> None:
    token = new_token(sim)
    shuffled = copy.deepcopy(TEMPLATE)
    shuffled["spec"] = dict(reversed(list(TEMPLATE["spec"].items())))
    shuffled["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "2"  # the number 2 before
    changed = copy.deepcopy(TEMPLATE)
    changed["spec"]["containers"][0]["resources"]["limits"]["memory"] = "8Gi"
    _service_account(sim)

    with MiniEngine(ROOT) as engine:
        engine.up(runner_and_pool(sim, token, pod_template=TEMPLATE))
        requests = len(sim.kube.requests())
        assert {s.op for s in engine.preview(runner_and_pool(sim, token, pod_template=shuffled))} == {"same"}
        steps = {s.name: (s.op, s.reasons) for s in engine.preview(runner_and_pool(sim, token, pod_template=changed))}
        assert steps["runner-0"] == ("replace", ("pod_template",))
        assert steps["pool"][0] == "update"
        assert len(sim.kube.requests()) == requests  # no Kubernetes call in Check or Diff

        old_hashes = {r["spec_hash"] for r in outputs(engine, "pool")["runners"]}
        engine.up(runner_and_pool(sim, token, pod_template=changed))
        new_hashes = {r["spec_hash"] for r in outputs(engine, "pool")["runners"]}
        assert len(new_hashes) == 1 and new_hashes.isdisjoint(old_hashes)
        limits = [_containers(pod)["runner"]["resources"]["limits"]["memory"] for pod in sim.kube.pods(NAMESPACE)]
        assert limits == ["8Gi"] * 3
        assert sim.runners.jobs_killed == []
        engine.destroy()


def test_a_runner_whose_sidecar_runs_on_after_it_has_exited_counts_as_ended(sim) -> None:
    """A sidecar in containers keeps the pod Running after an ephemeral runner's one job: refresh still sees the
    runner ended, and the next up starts it again."""
    sidecar = {"spec": {"containers": [{"name": "log-shipper", "image": "busybox:1.36"}]}}
    with MiniEngine(ROOT) as engine:
        program = token_and_runners(sim, 1, pod_template=sidecar)
        engine.up(program)
        out = outputs(engine, "runner-0")
        sim.github.start_job(out["runner_name"], 0.2)

        def runner_exited() -> bool:
            statuses = sim.kube.pod(NAMESPACE, out["pod_name"])["status"].get("containerStatuses", [])
            return any(s["name"] == "runner" and "terminated" in s["state"] for s in statuses)

        wait_until(runner_exited, "the ephemeral runner to exit after its job")
        assert sim.kube.pod(NAMESPACE, out["pod_name"])["status"]["phase"] == "Running"  # the sidecar runs on
        engine.refresh()
        assert outputs(engine, "runner-0")["pod_phase"] == "Succeeded"
        assert [(s.op, s.reasons) for s in engine.preview(program) if s.name == "runner-0"] == [
            ("replace", ("pod_phase",))
        ]
        engine.up(program)
        assert [r["status"] for r in sim.github.runners()] == ["online"]
        engine.destroy()
