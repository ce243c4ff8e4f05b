"""programs/typescript through the real pulumi CLI: our Node.js language host (tools/pulumi-languages) running
the program on the SDK's own runner, the SDK generated from the plugin's schema (sdk/nodejs, built by
tools/plugin/build-nodejs-sdk.sh), and the provider plugin: preview, up, a rotation with a busy runner waited
for, a lost pool imported back, destroy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.tools import tool_dirs
from actions_runners_simulator.workspace import PulumiWorkspace, nodejs_host, provider_plugin
from tests.conftest import ROOT, quick_simulator
from tests.helpers import NAMESPACE, events_for, grace_after, up_while_busy

PROGRAM = ROOT / "programs" / "typescript"
POOL = "actions-runners:index:RunnerPool"


@pytest.fixture(scope="module")
def sdk_package() -> Path:
    """sdk/nodejs compiled into the package the program installs (once: npm install and tsc take seconds)."""
    built = subprocess.run(
        [str(ROOT / "tools" / "plugin" / "build-nodejs-sdk.sh")],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(built.stdout.strip().splitlines()[-1])


@pytest.fixture
def sim(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    with quick_simulator(kube_api_server) as simulator:
        yield simulator


@pytest.fixture
def stack(cli_dir: Path, sdk_package: Path, sim: Simulator) -> Iterator[PulumiWorkspace]:
    languages = tool_dirs("pulumi-languages")["pulumi-languages"]
    with PulumiWorkspace(PROGRAM, cli_dir, plugins=nodejs_host(languages) | provider_plugin()) as ws:
        ws.env["KUBECONFIG"] = str(sim.kubeconfig)
        # The copy installs the checkout's SDK package (the program names it relative to the checkout).
        package = json.loads((ws.project / "package.json").read_text())
        package["dependencies"]["@pulumi-actions-runners/actions-runners"] = f"file:{sdk_package}"
        (ws.project / "package.json").write_text(json.dumps(package))
        ws.run("install")
        ws.new_stack(
            config={"githubUrl": sim.repo_url, "runners": "2", "gracePeriodSeconds": "1", "maxUnavailable": "1"},
            secrets={"githubToken": sim.credential},
        )
        yield ws


def pool_state(ws: PulumiWorkspace) -> dict:
    state = json.loads(ws.run("stack", "export", "--show-secrets").stdout)
    return next(r for r in state["deployment"]["resources"] if r["type"] == POOL)


def test_a_typescript_program_rotates_with_a_busy_runner_waited_for_imports_and_destroys(
    stack: PulumiWorkspace, sim: Simulator
) -> None:
    preview = stack.run("preview").stdout
    assert f" +  {POOL} pool create" in preview and "warning" not in preview, preview
    stack.run("up", "--yes")
    assert len([r for r in sim.github.runners() if r["status"] == "online"]) == 2
    runners = {r["name"]: r for r in pool_state(stack)["outputs"]["runners"]}
    assert json.loads(stack.run("stack", "output", "runnerNames", "--json").stdout) == sorted(runners)

    # The token falls due; the busy runner keeps its pod until its job is done.
    stack.run("config", "set", "tokenRefreshBeforeSeconds", "3000")
    busy = runners[min(runners)]
    up = up_while_busy(stack, sim, busy["name"], int(busy["id"]))
    removals = [c for c in sim.github.calls("DELETE") if c["path"].endswith(f"/{int(busy['id'])}")]
    assert removals[0]["status"] == 422 and removals[-1]["status"] in (204, 404), removals
    pod_events = events_for(sim, busy["pod"], "pod_terminating", "pod_removed")
    assert pod_events and all(e["at"] >= removals[-1]["at"] + grace_after(removals[-1]) for e in pod_events)
    assert sim.runners.jobs_killed == []
    assert re.search(rf"{POOL} pool .*waiting on 1 busy runner \(RemoveRunner 422\)", up), up

    # The pool is lost from the state, and imported back by id: no runner is touched.
    stack.run("config", "set", "tokenRefreshBeforeSeconds", "0")
    pool = pool_state(stack)
    pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)}
    stack.run("state", "delete", pool["urn"], "--yes")
    stack.env["GITHUB_TOKEN"] = sim.credential  # an import reads with the environment's credential
    pool_name = pool["outputs"]["poolName"]
    imported = stack.run("import", POOL, "pool", f"{NAMESPACE}/{pool_name}@{sim.repo_url}", "--yes").stdout
    assert "new runners.RunnerPool" in imported or "RunnerPool(" in imported, imported
    assert "3 unchanged" in stack.run("up", "--yes").stdout
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)} == pods

    stack.run("destroy", "--yes")
    assert sim.github.runners() == [] and sim.kube.pods(NAMESPACE) == []
