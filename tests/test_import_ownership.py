"""`pulumi import` through the real CLI and the plugin, of what another resource made: a stack that imports a pool
or a runner of another stack is refused, saying whose it is, and neither its state nor the runners change (its next
up would have rotated them to its own token, its destroy removed them); the stack that made them, having lost its
state, still adopts them; a read that fails is said as the API server's answer, not the client's dump."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from tests.conftest import quick_simulator
from tests.helpers import NAMESPACE, new_token, sha256
from tests.test_plugin_yaml import IMPORTING_PROGRAM, POOL, workspace

PROJECT = "actions-runners-yaml-import"  # IMPORTING_PROGRAM's
RUNNER = "actions-runners:index:Runner"
DUMP = "HTTP response headers"  # what str() of the Kubernetes client's ApiException holds


@pytest.fixture(scope="module")
def sim(kube_api_server: KubeApiServer, cli_dir: Path, yaml_dir: Path) -> Iterator[Simulator]:
    """Stack "made" of IMPORTING_PROGRAM up once: a pool of 2 (pool `imported`) and a lone runner (`lone`), which
    every test imports from elsewhere. No test changes them, or stages a fault it does not use up."""
    with (
        quick_simulator(kube_api_server) as simulator,
        workspace(IMPORTING_PROGRAM, cli_dir, yaml_dir, simulator, stack="made") as made,
    ):
        made.new_stack(
            config={"githubUrl": simulator.repo_url, "namespace": NAMESPACE},
            secrets={"githubToken": simulator.credential, "registrationToken": new_token(simulator)},
        )
        made.run("up", "--yes")
        assert len(simulator.kube.pods(NAMESPACE)) == 3 and len(simulator.github.runners()) == 3
        yield simulator


def importing(sim: Simulator, cli_dir: Path, yaml_dir: Path, stack: str) -> PulumiWorkspace:
    """A stack of the same project with a state of its own (a new backend), reading with the environment's
    credential as an import does. An import runs no program: its config only has to be set."""
    ws = workspace(IMPORTING_PROGRAM, cli_dir, yaml_dir, sim, stack=stack)
    ws.env["GITHUB_TOKEN"] = sim.credential
    ws.new_stack(
        config={"githubUrl": sim.repo_url, "namespace": NAMESPACE},
        secrets={"githubToken": sim.credential, "registrationToken": "not-read-by-an-import"},
    )
    return ws


def ownership_id(stack: str, resource_type: str, name: str) -> str:
    """As names.ownership_id, computed here."""
    return sha256(f"{PROJECT}/{stack}/{resource_type}/{name}")[:16]


def what_is_there(sim: Simulator) -> dict[str, Any]:
    """The pods (their uids), the registrations (their names and labels) and GitHub's writes so far."""
    return {
        "pods": {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)},
        "registrations": {r["id"]: (r["name"], sorted(x["name"] for x in r["labels"])) for r in sim.github.runners()},
        "github writes": len([c for c in sim.github.calls() if c["method"] != "GET"]),
    }


def ours_in_state(ws: PulumiWorkspace) -> dict[str, dict]:
    state = json.loads(ws.run("stack", "export").stdout)
    resources = state["deployment"].get("resources") or []
    return {r["urn"].rsplit("::", 1)[-1]: r for r in resources if r["type"] in (POOL, RUNNER)}


def refused(ws: PulumiWorkspace, *args: str) -> str:
    result = ws.run("import", *args, "--yes", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output and DUMP not in output, output
    return output


def assert_refused_as_another_s(ws: PulumiWorkspace, sim: Simulator, kind: str, made: str, name: str, id_: str) -> None:
    """Importing ``id_`` into resource ``name`` of ``ws``'s stack is refused, saying that what it names is the
    ``made`` resource's of stack "made"; nothing enters the state."""
    output = refused(ws, f"actions-runners:index:{kind}", name, f"{NAMESPACE}/{id_}@{sim.repo_url}")
    found, wanted = ownership_id("made", kind, made), ownership_id(ws.stack, kind, name)
    importer = f"project {PROJECT}, stack {ws.stack}, {kind} {name}"
    assert f"ownership id {found}, not this resource's {wanted} ({importer})" in output, output
    assert "belongs to another resource, of another stack or another resource name" in output, output
    assert "Import it from the stack that owns it, under that resource's name" in output, output
    assert ours_in_state(ws) == {}


@pytest.mark.parametrize(
    ("kind", "name", "import_id"),
    [("RunnerPool", "pool", "imported"), ("Runner", "lone", "lone")],
    ids=["pool", "runner"],
)
def test_what_another_stack_made_is_refused_saying_whose_and_nothing_changes(
    sim: Simulator, cli_dir: Path, yaml_dir: Path, kind: str, name: str, import_id: str
) -> None:
    before = what_is_there(sim)
    with importing(sim, cli_dir, yaml_dir, "neighbour") as ws:
        assert_refused_as_another_s(ws, sim, kind, name, name, import_id)
    assert what_is_there(sim) == before


def test_the_stack_that_made_them_adopts_them_after_losing_its_state_under_their_own_names_only(
    sim: Simulator, cli_dir: Path, yaml_dir: Path
) -> None:
    before = what_is_there(sim)
    with importing(sim, cli_dir, yaml_dir, "made") as lost:
        # Another resource name of the same stack is another resource.
        assert_refused_as_another_s(lost, sim, "RunnerPool", "pool", "fleet", "imported")

        lost.run("import", POOL, "pool", f"{NAMESPACE}/imported@{sim.repo_url}", "--yes")
        lost.run("import", RUNNER, "lone", f"{NAMESPACE}/lone@{sim.repo_url}", "--yes")
        adopted = ours_in_state(lost)
        assert adopted.keys() == {"pool", "lone"}, adopted
        assert adopted["pool"]["outputs"]["owner"] == ownership_id("made", "RunnerPool", "pool")
        assert adopted["lone"]["outputs"]["owner"] == ownership_id("made", "Runner", "lone")
        pool_runners = {r["name"]: r["id"] for r in adopted["pool"]["outputs"]["runners"]}
        registered = {r["name"]: r["id"] for r in sim.github.runners()}
        assert pool_runners == {name: registered[name] for name in pool_runners} and len(pool_runners) == 2
        assert adopted["lone"]["outputs"]["runnerId"] == registered["lone"]
    assert what_is_there(sim) == before


def test_an_import_whose_reads_fail_says_the_answer_not_the_client_s_dump(
    sim: Simulator, cli_dir: Path, yaml_dir: Path
) -> None:
    before = what_is_there(sim)
    with importing(sim, cli_dir, yaml_dir, "made") as lost:
        # A namespace the provider's identity has no Role in (as a real cluster would, the API server says 403).
        output = refused(lost, POOL, "pool", f"no-such-namespace/imported@{sim.repo_url}")
        assert "may not use namespace no-such-namespace (Kubernetes answered 403 Forbidden: " in output, output
        assert "either it does not exist, or the provider's identity has no Role there" in output, output

        # The API server fails the pod's read (the first try and the client's 4 retries).
        sim.kube.fail_next("GET", rf"/namespaces/{NAMESPACE}/pods/lone$", 500, count=5)
        output = refused(lost, RUNNER, "lone", f"{NAMESPACE}/lone@{sim.repo_url}")
        said = f"pod {NAMESPACE}/lone could not be read: Kubernetes answered 500 Internal Server Error"
        assert said in output, output

        # GitHub refuses the listing that proves the registrations ours.
        sim.github.fail_next(401, method="GET", path_regex=r"/actions/runners$")
        output = refused(lost, RUNNER, "lone", f"{NAMESPACE}/lone@{sim.repo_url}")
        listing = f"the runners registered at {sim.repo_url} could not be listed with the credential in the environment"
        assert listing in output and "GITHUB_TOKEN" in output and " answered 401" in output, output
        assert sim.credential not in output
        assert sim.kube.clear_faults() == 0 and sim.github.clear_faults() == 0
        assert ours_in_state(lost) == {}
    assert what_is_there(sim) == before
