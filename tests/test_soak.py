"""A short seeded run of the soak (bench/soak.py), so that it cannot rot, and the audit it checks with."""

from __future__ import annotations

import re
import subprocess
import sys

from actions_runners_simulator.audit import audit, state_runners
from actions_runners_simulator.engine import MiniEngine
from pulumi_actions_runners.github.client import GitHubClient
from pulumi_actions_runners.github.url import parse_github_url
from tests.conftest import ROOT, wait_until
from tests.helpers import NAMESPACE, core_api, new_token
from tests.programs import token_and_pool

SUMMARY = re.compile(
    r"soak: operations=(?P<operations>\d+) rounds=(?P<rounds>\d+) faults=(?P<faults>\d+) kills=(?P<kills>\d+) "
    r"violations=(?P<violations>\d+) jobs_killed=(?P<jobs_killed>\d+) leaked=(?P<leaked>\d+) seed=(?P<seed>\d+)"
)


def test_a_seeded_smoke_run_of_the_soak_holds_every_invariant() -> None:
    """Seed 5's first rounds: three token rotations under five faults; in the second the provider is to be
    killed in a Create, in the third in a Create, Delete or Update (if one is under way), each followed by a
    run with another change."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--seed", "5", "--rounds", "3", "--minutes", "5"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]
    summary = SUMMARY.fullmatch(last)
    assert summary is not None, output
    assert run.returncode == 0, output
    figures = {key: int(value) for key, value in summary.groupdict().items()}
    assert figures["rounds"] == 3 and figures["seed"] == 5, last
    assert (figures["violations"], figures["jobs_killed"], figures["leaked"]) == (0, 0, 0), output
    assert figures["operations"] > 50 and figures["faults"] > 0, last
    assert "Traceback" not in run.stderr, run.stderr


def test_the_audit_finds_a_runner_missing_at_github_and_a_leftover_of_ours(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, new_token(sim), replicas=2))
        resources = [(r.type, urn.split("::")[-1], r.outputs) for urn, r in engine.state.items()]
    runners = state_runners(resources)
    assert [r.name for r in runners] == ["pool-0", "pool-1"]
    assert audit(sim, runners, namespace=NAMESPACE, foreign_ids=()) == []

    with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
        github.remove_runner(runners[0].runner_id)  # behind the stack's back
    wait_until(
        lambda: sim.kube.pod(NAMESPACE, "pool-0")["status"]["phase"] == "Succeeded",
        "the runner to exit once its registration is gone",
    )
    stray = {"name": "stray-registration", "labels": {"app.kubernetes.io/managed-by": "pulumi-actions-runners"}}
    core_api(sim).create_namespaced_secret(NAMESPACE, {"metadata": stray})

    findings = [str(f) for f in audit(sim, runners, namespace=NAMESPACE, foreign_ids=())]
    assert findings == [
        "leaked: Secret stray-registration belongs to no resource in the state",
        "untrue: pool/pool-0: pod pool-0 is Succeeded, not running",
        f"missing: pool/pool-0: registration {runners[0].runner_id} does not exist",
    ], findings
    assert [str(f) for f in audit(sim, [], namespace=NAMESPACE, foreign_ids=[runners[1].runner_id])][-1] == (
        "leaked: Secret stray-registration belongs to no resource in the state"
    )
