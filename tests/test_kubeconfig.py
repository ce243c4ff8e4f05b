"""The kubeconfig input and the cluster it leads to, through the real clients against two real API servers: a path
is not a cluster (a new path to the same cluster touches no runner), a pool or runner moved to another cluster is
replaced with its old cluster drained first (a busy runner waited for), or refused, touching nothing, when its old
settings no longer reach the old cluster; a kubeconfig that is missing or a directory is a problem for the call
that needs the cluster, said as such, and not for a pipeline's preview, which has none."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actions_runners_simulator.cluster import SimulatedCluster
from actions_runners_simulator.engine import DeploymentFailed, MiniEngine
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.kubelet import CrashLoopBackOff
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.tools import tool_dirs
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool
from pulumi_actions_runners.inputs.cluster import cluster_of
from pulumi_actions_runners.kube.manifests import MANAGED_BY_LABEL
from tests.conftest import ROOT, RUNNER_SPEEDUP, wait_until
from tests.helpers import NAMESPACE, outputs

WRITES = ("POST", "PUT", "PATCH", "DELETE")
HELD_SECONDS = 1.0  # how long the busy runner's pod is watched, once RemoveRunner was refused, before its job ends


@pytest.fixture(scope="module")
def second_api_server() -> Iterator[KubeApiServer]:
    """Another cluster's API server (its own address and CA), started once for the module."""
    with KubeApiServer(tool_dirs("kube")["kube"]) as server:
        yield server


@pytest.fixture
def other(sim: Simulator, second_api_server: KubeApiServer) -> Iterator[SimulatedCluster]:
    """The second cluster, with the runners' namespace; its runners register with the same GitHub double."""
    cluster = SimulatedCluster(
        sim.runners,
        api_server=second_api_server,
        namespaces=(NAMESPACE,),
        schedule_delay=0.05,
        crash_loop=CrashLoopBackOff().faster(RUNNER_SPEEDUP),
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def fleet(sim: Simulator, kubeconfig: str | None, *, runner: bool = True) -> Callable[[], None]:
    """A RegistrationToken, a lone Runner (``runner-0``) and a RunnerPool of 2 (``pool``), with ``kubeconfig``."""

    def program() -> None:
        token = RegistrationToken("registration", github_url=sim.repo_url, github_token=sim.credential)
        settings: dict[str, Any] = {
            "github_url": sim.repo_url,
            "namespace": NAMESPACE,
            "registration_token": token,
            "github_token": sim.credential,
            "kubeconfig": kubeconfig,
            "grace_period_seconds": 0.3,
        }
        if runner:
            Runner("runner-0", **settings)
        RunnerPool("pool", pool_name="pool", replicas=2, max_unavailable="100%", **settings)

    return program


def ours(cluster: SimulatedCluster) -> list[str]:
    """The pods and Secrets this provider made in the cluster's runners' namespace."""
    made = [*cluster.pods(NAMESPACE), *cluster.secrets(NAMESPACE)]
    return sorted(item["metadata"]["name"] for item in made if MANAGED_BY_LABEL in item["metadata"].get("labels", {}))


def uids(cluster: SimulatedCluster) -> dict[str, str]:
    return {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in cluster.pods(NAMESPACE)}


def writes(sim: Simulator, other: SimulatedCluster, since: tuple[int, int, int]) -> list[Any]:
    """GitHub's and both clusters' writes since ``since`` (positions in their records, see `positions`)."""
    github = [(c["method"], c["path"]) for c in sim.github.calls()[since[0] :] if c["method"] in WRITES]
    kube = [r for r in [*sim.kube.requests()[since[1] :], *other.requests()[since[2] :]] if r[0] in WRITES]
    return github + kube


def positions(sim: Simulator, other: SimulatedCluster) -> tuple[int, int, int]:
    return len(sim.github.calls()), len(sim.kube.requests()), len(other.requests())


class Background:
    """A call on a thread of its own (the engine stand-in runs the program on the test's); ``wait`` raises what
    it raised."""

    def __init__(self, call: Callable[[], None]) -> None:
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(call,))
        self._thread.start()

    def _run(self, call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as error:
            self._errors.append(error)

    def wait(self) -> None:
        self._thread.join()
        if self._errors:
            raise self._errors[0]


def held_until_refused(sim: Simulator, runner_id: int, pod_name: str) -> None:
    """The busy runner's job ends once GitHub has refused its RemoveRunner (422) and its pod has stayed, not
    deleted, for HELD_SECONDS more; ended in any case, so that the update never waits for it in vain."""
    try:
        wait_until(
            lambda: any(c["status"] == 422 for c in sim.github.calls("DELETE", rf"/actions/runners/{runner_id}$")),
            f"RemoveRunner of the busy {pod_name} answered 422",
            timeout=120,
        )
        deadline = time.monotonic() + HELD_SECONDS
        while time.monotonic() < deadline:
            pod = sim.kube.pod(NAMESPACE, pod_name)
            assert pod is not None and "deletionTimestamp" not in pod["metadata"], f"{pod_name} was deleted mid-job"
            time.sleep(0.05)
    finally:
        sim.github.finish_job(pod_name)


def test_a_kubeconfig_that_is_a_directory_fails_the_call_saying_so_and_writes_nothing(
    sim: Simulator, tmp_path: Path
) -> None:
    """As the kubeconfig input (Check takes the path; the create judges it), and as KUBECONFIG."""
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as failed:
        engine.up(fleet(sim, str(tmp_path), runner=False))
    message = str(failed.value)
    assert f"the kubeconfig input names {tmp_path}, which is a directory, not a kubeconfig file" in message, message
    assert "used instead of KUBECONFIG" in message and "IsADirectoryError" not in message, message

    env = {**os.environ, "KUBECONFIG": str(tmp_path)}
    with MiniEngine(ROOT, env=env) as engine, pytest.raises(DeploymentFailed) as failed:
        engine.up(fleet(sim, None, runner=False))
    message = str(failed.value)
    assert f"KUBECONFIG names {tmp_path}, which is a directory, not a kubeconfig file" in message, message
    assert "IsADirectoryError" not in message and "did not converge" not in message, message
    assert not [r for r in sim.kube.requests() if r[0] in WRITES] and sim.kube.pods(NAMESPACE) == []


def test_a_pool_and_a_runner_moved_to_another_cluster_are_replaced_with_the_old_cluster_drained_first(
    sim: Simulator, other: SimulatedCluster, tmp_path: Path
) -> None:
    """A state from before records its cluster at its first update; a new path to the same cluster is an update
    that touches no runner; a kubeconfig leading to another cluster replaces both, the old cluster taken down
    through the old kubeconfig (a busy runner's pod left alone until its job ends), and nothing left there."""
    here, elsewhere = str(sim.kubeconfig), str(other.write_kubeconfig(tmp_path / "other.kubeconfig"))
    copy = str(shutil.copy(here, tmp_path / "same-cluster.kubeconfig"))
    with MiniEngine(ROOT) as engine:
        engine.up(fleet(sim, here))
        before, registered = uids(sim.kube), {r["name"]: r["id"] for r in sim.github.runners()}
        for resource in engine.state.values():  # as 0.2.0 recorded them: no cluster
            resource.inputs.pop("cluster", None)
            resource.outputs.pop("cluster", None)
        assert {s.op for s in engine.preview(fleet(sim, here))} == {"same"}

        steps = engine.up(fleet(sim, copy))  # the first update records the cluster
        assert {s.name: s.op for s in steps} == {"registration": "same", "runner-0": "update", "pool": "update"}
        assert uids(sim.kube) == before and {r["name"]: r["id"] for r in sim.github.runners()} == registered
        recorded = {outputs(engine, name)["cluster"] for name in ("runner-0", "pool")}
        assert recorded == {cluster_of(here)} == {cluster_of(copy)} != {cluster_of(elsewhere)}

        preview = engine.preview(fleet(sim, elsewhere))
        assert {s.name: (s.op, "cluster" in s.reasons) for s in preview if s.op != "same"} == {
            "pool": ("replace", True),
            "runner-0": ("replace", True),
        }
        sim.github.start_job("pool-0", None)  # held until the update is seen waiting on it
        watcher = Background(lambda: held_until_refused(sim, registered["pool-0"], "pool-0"))
        try:
            engine.up(fleet(sim, elsewhere))
        finally:
            watcher.wait()

        assert ours(sim.kube) == [], "left in the old cluster"
        runner_name = outputs(engine, "runner-0")["runner_name"]
        assert sorted(uids(other)) == sorted(["pool-0", "pool-1", runner_name])
        online = {r["name"]: r["id"] for r in sim.github.runners() if r["status"] == "online"}
        assert sorted(online) == sorted(registered) and not set(online.values()) & set(registered.values())
        assert sim.runners.jobs_killed == []
        assert outputs(engine, "pool")["cluster"] == outputs(engine, "runner-0")["cluster"] == cluster_of(elsewhere)
        assert {s.op for s in engine.preview(fleet(sim, elsewhere))} == {"same"}


def test_a_move_whose_old_settings_no_longer_reach_the_old_cluster_is_refused_and_touches_nothing(
    sim: Simulator, other: SimulatedCluster, tmp_path: Path
) -> None:
    """The same path, now to another cluster's kubeconfig: the replacement's delete would reach the new cluster,
    where none of the runners are. It refuses, saying where they are and what to do; so does a refresh."""
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copy(sim.kubeconfig, kubeconfig)
    here = cluster_of(str(kubeconfig))
    with MiniEngine(ROOT) as engine:
        engine.up(fleet(sim, str(kubeconfig)))
        state = {urn: resource.outputs for urn, resource in engine.state.items()}
        before, registered = uids(sim.kube), sim.github.runners()

        other.write_kubeconfig(kubeconfig)
        there = cluster_of(str(kubeconfig))
        since = positions(sim, other)
        with pytest.raises(DeploymentFailed) as failed:
            engine.up(fleet(sim, str(kubeconfig)))
        message = str(failed.value)
        for words in (
            f"pool pool is in the Kubernetes cluster {here}",
            f"would reach the cluster {there} (through the kubeconfig input, {kubeconfig})",
            "nothing was touched",
            "KUBECONFIG (or the old kubeconfig input) leading to the old cluster",
            "pulumi state delete URN",
        ):
            assert words in message, message
        assert "runner runner-0-" in message, message

        with pytest.raises(Exception, match="this refresh would reach the cluster"):
            engine.refresh()

        assert writes(sim, other, since) == []
        assert {urn: resource.outputs for urn, resource in engine.state.items()} == state
        assert uids(sim.kube) == before and sim.github.runners() == registered and ours(other) == []


def test_a_preview_with_the_kubeconfig_input_naming_a_missing_file_passes_and_the_up_says_what_to_set(
    cli_dir: Path, sim: Simulator, tmp_path: Path
) -> None:
    """your-cluster.md's stack in the shipped pipeline: its preview has no kubeconfig at all, its up has
    KUBECONFIG. The input wins over KUBECONFIG, so the up fails, saying so, before anything is written."""
    with PulumiWorkspace(ROOT, cli_dir) as stack:
        stack.new_stack(
            config=sim.stack_config(runners=2, grace_period_seconds=0.3, pool=True),
            secrets={"githubToken": sim.credential},
        )
        stack.run("up", "--yes")

        stack.run("config", "set", "kubeconfig", "~/.kube/config")
        stack.run("config", "set", "runners", "3")
        for variable in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
            stack.env.pop(variable, None)
        stack.env["HOME"] = str(tmp_path)  # no ~/.kube/config
        preview = json.loads(stack.run("preview", "--json").stdout)
        assert {s["urn"].split("::")[-1]: s["op"] for s in preview["steps"]}["pool"] == "update", preview

        stack.env["KUBECONFIG"] = str(sim.kubeconfig)
        since = len(sim.github.calls()), len(sim.kube.requests())
        failed = stack.run("up", "--yes", check=False)
        output = failed.stdout + failed.stderr
        assert failed.returncode != 0, output
        for words in ("the kubeconfig input names ~/.kube/config, which does not exist", "used instead of KUBECONFIG"):
            assert words in output, output
        assert "did not converge" not in output, output
        github = [c for c in sim.github.calls()[since[0] :] if c["method"] in WRITES]
        assert github == [] and [r for r in sim.kube.requests()[since[1] :] if r[0] in WRITES] == []
        assert len(sim.kube.pods(NAMESPACE)) == 2
