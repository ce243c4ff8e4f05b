"""A namespace that exists but that the provider's identity has no Role in, as a user meets it: the test bed's
provisioning leaves it alone (UNPROVISIONED_LABEL), so its calls there get RBAC's 403. Through the real pulumi
CLI, a pool there, refilling or not, fails before anything is written, saying what to do, records nothing and
asks for no retry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from tests.conftest import ROOT, quick_simulator

UNBOUND = "no-role-here"


@pytest.fixture
def sim(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    with quick_simulator(kube_api_server) as simulator:
        simulator.kube.unprovisioned_namespace(UNBOUND)
        yield simulator


@pytest.mark.parametrize("refill", [False, True], ids=["pool", "refilling pool"])
def test_a_pool_in_a_namespace_without_the_role_says_so_before_writing_anything(
    cli_dir: Path, sim: Simulator, refill: bool
) -> None:
    with PulumiWorkspace(ROOT, cli_dir) as stack:
        stack.new_stack(
            config={**sim.stack_config(runners=2, grace_period_seconds=1, pool=True, refill=refill)},
            secrets={"githubToken": sim.credential},
        )
        stack.run("config", "set", "namespace", UNBOUND)
        failed = stack.run("up", "--yes", check=False)
        output = failed.stdout + failed.stderr
        assert failed.returncode != 0 and f"may not use namespace {UNBOUND}" in output, output
        assert "no Role there" in output and "again to continue" not in output, output
        state = json.loads(stack.run("stack", "export").stdout)
        assert [r for r in state["deployment"]["resources"] if r["type"].endswith(":RunnerPool")] == []
    assert sim.github.runners() == [] and sim.kube.pods(UNBOUND) == [] and sim.kube.jobs(UNBOUND) == []
