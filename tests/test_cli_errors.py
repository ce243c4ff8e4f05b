"""Errors a user can act on, through the real pulumi CLI with programs/runners' pool: a missing kubeconfig and a
missing namespace say what to set before anything is written, leave nothing in the state and ask for no retry; a
pool that never made a runner does not block its own replacement when its old settings reach no cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from tests.conftest import ROOT, quick_simulator

OTHER_NAMESPACE = "ci-2"


@pytest.fixture
def sim(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    with quick_simulator(kube_api_server, namespaces=("actions-runners", OTHER_NAMESPACE)) as simulator:
        yield simulator


@pytest.fixture
def stack(cli_dir: Path, sim: Simulator, tmp_path: Path) -> Iterator[PulumiWorkspace]:
    """A pool of 2 with no kubeconfig anywhere: no input, no KUBECONFIG, an empty home, not in a cluster."""
    with PulumiWorkspace(ROOT, cli_dir) as workspace:
        workspace.new_stack(
            config=sim.stack_config(runners=2, grace_period_seconds=1, pool=True),
            secrets={"githubToken": sim.credential},
        )
        workspace.run("config", "rm", "kubeconfig")
        for variable in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
            workspace.env.pop(variable, None)
        workspace.env["HOME"] = str(tmp_path)
        yield workspace


def pools(stack: PulumiWorkspace) -> list[dict]:
    state = json.loads(stack.run("stack", "export").stdout)
    return [r for r in state["deployment"]["resources"] if r["type"].endswith(":RunnerPool")]


def test_no_kubeconfig_says_where_it_looked_and_what_to_set_and_records_nothing(
    stack: PulumiWorkspace, sim: Simulator
) -> None:
    failed = stack.run("up", "--yes", check=False)
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "no kubeconfig found" in output, output
    for looked_at in ("the kubeconfig input is not set", "KUBECONFIG is not set", "~/.kube/config does not exist"):
        assert looked_at in output, output
    assert "Set the kubeconfig input" in output and "again to continue" not in output, output
    assert "Service host/port" not in output, output
    assert pools(stack) == [] and sim.kube.pods(sim.namespace) == []

    stack.run("config", "set", "kubeconfig", str(sim.kubeconfig))
    stack.run("up", "--yes")
    assert len(pools(stack)[0]["outputs"]["runners"]) == 2


def test_a_namespace_that_does_not_exist_or_is_not_granted_says_so_and_records_nothing(
    stack: PulumiWorkspace, sim: Simulator
) -> None:
    stack.run("config", "set", "kubeconfig", str(sim.kubeconfig))
    stack.run("config", "set", "namespace", "no-such-namespace")
    failed = stack.run("up", "--yes", check=False)
    output = failed.stdout + failed.stderr
    # As a real cluster would: the provider's identity has no Role in a namespace that does not exist (403).
    assert failed.returncode != 0 and "may not use namespace no-such-namespace" in output, output
    assert "either it does not exist, or" in output and "again to continue" not in output, output
    assert pools(stack) == [] and sim.github.runners() == []


def test_a_pool_whose_create_never_reached_a_cluster_is_replaced_though_its_old_settings_reach_none(
    stack: PulumiWorkspace, sim: Simulator, tmp_path: Path
) -> None:
    """0.1.0 recorded a pool whose create failed for want of a kubeconfig: in the state with no runner, and the
    Kubernetes client's words as its problem. A new kubeconfig input and namespace replace it, and the delete, which
    uses the old settings (no cluster), finds nothing to take down instead of failing the stack. A pool whose
    create did reach a cluster is not taken for one: its delete with no cluster says what to set."""
    stack.env["KUBECONFIG"] = str(sim.kubeconfig)  # reached, through the environment; GitHub then fails
    sim.github.fail_next(500, count=5, method="GET", path_regex=r"/actions/runners$")  # a try and 4 retries
    failed = stack.run("up", "--yes", check=False)
    assert failed.returncode != 0 and "did not converge, 1 problem " in failed.stdout + failed.stderr
    [pool] = pools(stack)
    assert pool["outputs"]["runners"] == [] and "kubeconfig" not in pool["inputs"]

    del stack.env["KUBECONFIG"]
    stack.run("config", "set", "kubeconfig", str(sim.kubeconfig))
    stack.run("config", "set", "namespace", OTHER_NAMESPACE)
    refused = stack.run("up", "--yes", check=False)
    assert refused.returncode != 0 and "no kubeconfig found" in refused.stdout + refused.stderr
    assert pools(stack)[0]["inputs"]["namespace"] == sim.namespace  # kept: it could have left something there

    state = json.loads(stack.run("stack", "export").stdout)
    [pool] = [r for r in state["deployment"]["resources"] if r["type"].endswith(":RunnerPool")]
    pool["outputs"]["problems"] = [f"pool {pool['outputs']['pool_name']}: Service host/port is not set."]  # 0.1.0's
    (tmp_path / "state.json").write_text(json.dumps(state))
    stack.run("stack", "import", "--file", str(tmp_path / "state.json"))
    up = stack.run("up", "--yes").stdout
    assert "its create never reached a cluster" in up and "Traceback" not in up, up
    [pool] = pools(stack)
    assert pool["inputs"]["namespace"] == OTHER_NAMESPACE and len(pool["outputs"]["runners"]) == 2
