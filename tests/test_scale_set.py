"""RunnerScaleSet end to end: its scale set on the GitHub double's Actions service, its listener run by the
kubelet stand-in from its own entry point (a process of this machine, with its pod's ServiceAccount token, so
that the real API server's RBAC judges it by its Role), its runners simulated as actions/runner behaves."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine, ProviderError
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners.kube.scale_set_manifests import SCALE_SET_LABEL as LABEL
from pulumi_actions_runners.kube.scale_set_manifests import listener_selector, runner_selector
from pulumi_actions_runners.report import build_report, render
from tests.conftest import ROOT, quick_simulator, wait_until
from tests.helpers import NAMESPACE
from tests.programs import scale_set

SET = "linux-set"


@contextlib.contextmanager
def scale_set_simulator(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    """A quick simulator whose Actions service answers a long poll in 1 s and drops a silent session in 3 s."""
    with quick_simulator(kube_api_server) as simulator:
        simulator.github.service.long_poll_seconds = 1.0
        simulator.github.service.session_silence_seconds = 3.0
        yield simulator


@pytest.fixture
def sim(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    with scale_set_simulator(kube_api_server) as simulator:
        yield simulator


def pods(sim: Simulator, selector: str) -> list[Any]:
    with sim.kube.api_server.admin_client() as admin:
        return client.CoreV1Api(admin).list_namespaced_pod(NAMESPACE, label_selector=selector).items


def runner_pods(sim: Simulator) -> list[Any]:
    return [p for p in pods(sim, runner_selector(SET)) if p.metadata.deletion_timestamp is None]


def listener_log(sim: Simulator) -> str:
    assert sim.kube.processes is not None
    return "".join(sim.kube.processes.log_of(NAMESPACE, p) for p in sim.kube.processes.started)


def jobs_done(sim: Simulator, count: int) -> bool:
    return len([j for j in sim.github.jobs("completed") if j["conclusion"] == "success"]) >= count


def check_failures(sim: Simulator, **args: Any) -> dict[str, str]:
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as failed:
        engine.up(scale_set(sim, **args))
    assert all(isinstance(cause, CheckFailed) for cause in failed.value.errors), failed.value.errors
    return {prop: reason for cause in failed.value.errors for prop, reason in cause.failures}


def test_max_below_min_and_names_github_refuses_are_check_failures_naming_the_property(sim: Simulator) -> None:
    assert "is below min_runners (5)" in check_failures(sim, min_runners=5, max_runners=2)["max_runners"]
    assert "1 to 45 lowercase letters" in check_failures(sim, scale_set_name="Linux Set")["scale_set_name"]
    assert "1 to 45 lowercase letters" in check_failures(sim, scale_set_name="a" * 46)["scale_set_name"]
    assert "from 1 to 1000" in check_failures(sim, max_runners=0)["max_runners"]
    assert not sim.github.service.scale_sets()


def spec_hashes(sim: Simulator) -> list[str]:
    return sorted(p.metadata.annotations["actions-runners.pulumi.io/spec-hash"] for p in runner_pods(sim))


def busy_names(sim: Simulator) -> set[str]:
    return {j["runner_name"] for j in sim.github.jobs("in_progress")}


def test_a_destroy_waits_for_a_busy_runner_within_its_bound_then_keeps_the_resource(sim: Simulator) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(scale_set(sim, unregister_timeout_seconds=2))
        sim.github.queue_jobs(sim.repo_url, [SET], None)
        wait_until(lambda: busy_names(sim), "a busy runner", 30)
        (busy,) = busy_names(sim)
        with pytest.raises(ProviderError, match="runners still ran jobs"):
            engine.destroy()
        assert busy in {p.metadata.name for p in runner_pods(sim)}
        assert sim.github.service.scale_sets(), "the scale set went with a runner still busy"
        sim.github.finish_job(busy)
        engine.destroy()
        assert not sim.github.service.scale_sets() and not runner_pods(sim)
        assert not [j for j in sim.github.jobs() if j["lost"]]
        assert not leftovers(sim), leftovers(sim)


def test_the_real_cli_on_the_simulator_through_a_scale_set_s_life(cli_dir: Path, sim: Simulator) -> None:
    """programs/runners with `scaleSet`, as issue 42's "done when" lists it: a Check failure naming the property;
    create; a burst served within max_runners and back to min_runners; a preview and report of a bounds change; a
    runner spec change while runners are busy; the listener killed mid-burst; the set deleted on GitHub's side;
    destroy leaving nothing on GitHub or in the namespace; no job lost, no busy runner's pod deleted."""
    with PulumiWorkspace(ROOT, cli_dir) as stack:
        config = sim.stack_config(runners=0, grace_period_seconds=0.5)
        stack.new_stack(
            config={**config, "scaleSet": "true", "scaleSetName": SET, "minRunners": "5", "maxRunners": "2"},
            secrets={"githubToken": sim.credential},
        )
        refused = stack.run("preview", check=False)
        assert refused.returncode != 0, refused.stdout
        assert "property max_runners value {2} has a problem: 2 is below min_runners (5)" in refused.stdout
        stack.run("config", "set", "minRunners", "1")
        stack.run("config", "set", "maxRunners", "4")
        stack.run("up", "--yes")
        wait_until(lambda: len(runner_pods(sim)) == 1, "the idle runner min_runners keeps", 30)

        sampler = PeakSampler(sim)
        sim.github.queue_jobs(sim.repo_url, [SET], 1.0, count=8)
        wait_until(lambda: jobs_done(sim, 8), "a burst of eight jobs served", 60)
        wait_until(lambda: len(runner_pods(sim)) == 1, "back to min_runners", 30)
        assert sampler.stop() <= 4, "more runner pods at once than max_runners"

        stack.run("config", "set", "maxRunners", "6")
        report = render.text(build_report(json.loads(stack.run("preview", "--json").stdout)))
        assert "capacity from min 1, max 4 to min 1, max 6 (no runner is replaced for it)" in report, report
        stack.run("up", "--yes")

        sim.github.queue_jobs(sim.repo_url, [SET], None, count=2)  # held until finished by name
        wait_until(lambda: len(busy_names(sim)) == 2 and len(runner_pods(sim)) == 3, "2 busy and 1 idle runner", 30)
        busy, old = busy_names(sim), spec_hashes(sim)[0]
        stack.run("config", "set", "runnerCpu", "1")  # a pod template: a new runner spec
        stack.run("up", "--yes")
        new = scale_set_outputs(stack)["spec_hash"]
        assert scale_set_outputs(stack)["update_kind"] == ["runners"] and new != old
        wait_until(lambda: spec_hashes(sim) == sorted([old, old, new]), "the idle runner replaced", 30)
        assert busy <= {p.metadata.name for p in runner_pods(sim)}, "a busy runner's pod was deleted"
        for name in busy:
            sim.github.finish_job(name)
        wait_until(lambda: spec_hashes(sim) == [new], "the old spec's runners gone after their jobs", 30)

        sim.github.queue_jobs(sim.repo_url, [SET], 2.0, count=6)
        wait_until(lambda: sim.github.jobs("in_progress"), "a job running", 30)
        (listener,) = [p.metadata.name for p in pods(sim, listener_selector(SET))]
        assert sim.kube.processes is not None and sim.kube.processes.crash(NAMESPACE, listener)
        wait_until(lambda: jobs_done(sim, 16), "the burst served across the listener's restart", 90)
        assert "has an active session already" in listener_log(sim)  # the dead one's, waited out

        first = scale_set_outputs(stack)["scale_set_id"]
        sim.github.service.forget_scale_set(int(first))
        wait_until(lambda: sim.github.service.scale_sets(), "the set made again", 30)
        sim.github.queue_jobs(sim.repo_url, [SET], 0.5, count=2)
        wait_until(lambda: jobs_done(sim, 18), "jobs served by the set made again", 60)
        stack.run("refresh", "--yes")
        assert scale_set_outputs(stack)["scale_set_id"] != first
        assert "is gone on GitHub's side; made again" in listener_log(sim)

        stack.run("destroy", "--yes")
        assert not sim.github.service.scale_sets() and not sim.github.runners()
        assert not leftovers(sim), leftovers(sim)
    assert not [j for j in sim.github.jobs() if j["lost"]] and not sim.runners.jobs_killed
    assert sim.credential not in listener_log(sim)


def scale_set_outputs(stack: PulumiWorkspace) -> dict[str, Any]:
    state = json.loads(stack.run("stack", "export").stdout)
    (found,) = [r for r in state["deployment"]["resources"] if r["type"].endswith(":RunnerScaleSet")]
    return found["outputs"]


class PeakSampler:
    """The most runner pods up at once, looked at every 50 ms."""

    def __init__(self, sim: Simulator) -> None:
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, args=(sim,), daemon=True)
        self._thread.start()

    def _run(self, sim: Simulator) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, len(runner_pods(sim)))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def leftovers(sim: Simulator) -> list[str]:
    """Anything of the scale set's left in the namespace."""
    with sim.kube.api_server.admin_client() as admin:
        core, apps, rbac = client.CoreV1Api(admin), client.AppsV1Api(admin), client.RbacAuthorizationV1Api(admin)
        found = [
            *core.list_namespaced_pod(NAMESPACE).items,
            *core.list_namespaced_secret(NAMESPACE).items,
            *core.list_namespaced_config_map(NAMESPACE, label_selector=LABEL).items,
            *core.list_namespaced_service_account(NAMESPACE, label_selector=LABEL).items,
            *apps.list_namespaced_deployment(NAMESPACE).items,
            *rbac.list_namespaced_role(NAMESPACE, label_selector=LABEL).items,
            *rbac.list_namespaced_role_binding(NAMESPACE, label_selector=LABEL).items,
        ]
    return [f"{type(o).__name__} {o.metadata.name}" for o in found]


def scale_set_step(op: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    urn = "urn:pulumi:dev::actions-runners::pulumi-python:dynamic/actions-runners:RunnerScaleSet::scale-set"
    return {"op": op, "urn": urn, "oldState": {"outputs": old}, "newState": {"inputs": new}}


def test_the_report_says_which_kind_of_update_and_how_many_runners_it_touches() -> None:
    old = {
        "github_url": "https://github.com/o/r",
        "namespace": "ci",
        "scale_set_name": SET,
        "min_runners": 0,
        "max_runners": 10,
        "labels": [],
        "image": "ghcr.io/actions/actions-runner:2.336.0",
        "listener_image": None,
        "runners": [{"name": f"{SET}-a{i}", "retiring": False} for i in range(3)],
    }

    def report(op: str, **new: Any) -> str:
        return render.text(build_report({"steps": [scale_set_step(op, old, {**old, **new})]}))

    assert "capacity from min 0, max 10 to min 2, max 10 (no runner is replaced for it)" in report(
        "update", min_runners=2
    )
    spec = report("update", image="ghcr.io/actions/actions-runner:2.337.0")
    assert (
        "it replaces its idle runners, busy ones finish their jobs on the old one (3 runners at its last refresh)"
        in spec
    )
    assert "roll its listener (a new pod; its runners are not touched)" in report("update", listener_image="r/l:2")
    assert "its listener stopped, then its runners (3 runners at its last refresh) taken down" in report("delete")


def test_a_runner_pod_the_api_server_refuses_fails_the_create_and_registers_nothing(sim: Simulator) -> None:
    refused = {"spec": {"containers": [{"name": "runner", "resources": {"requests": {"cpu": "2", "memory": "1Gi"},
                                                                         "limits": {"cpu": "1"}}}]}}  # fmt: skip
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed, match="was refused: Kubernetes answered 422"):
        engine.up(scale_set(sim, pod_template=refused))
    assert not sim.github.service.scale_sets()
    assert not pods(sim, listener_selector(SET))


def test_a_listener_that_cannot_run_fails_the_create_with_why_and_leaves_nothing(sim: Simulator) -> None:
    """As the default image would before the project publishes it: the create says so, and takes back the set."""
    unpullable = "registry.invalid/listener:0.2.0"
    why = r"does not run: its container is (ErrImagePull|ImagePullBackOff)"
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed, match=why):
        engine.up(scale_set(sim, listener_image=unpullable))
    assert not sim.github.service.scale_sets()
    assert not leftovers(sim), leftovers(sim)
