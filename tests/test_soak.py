"""A short seeded run of the soak (bench/soak.py), so that it cannot rot, and the audit it checks with."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from actions_runners_simulator import audit as audit_module
from actions_runners_simulator.audit import audit, state_runners, state_scale_sets
from actions_runners_simulator.engine import MiniEngine
from pulumi_actions_runners.github.client import GitHubClient
from pulumi_actions_runners.github.url import parse_github_url
from pulumi_actions_runners.kube.scale_set_manifests import COMPONENT_LABEL, SCALE_SET_LABEL
from tests.conftest import ROOT, wait_until
from tests.helpers import NAMESPACE, core_api, new_token
from tests.programs import scale_set as scale_set_program
from tests.programs import token_and_pool

SUMMARY = re.compile(
    r"soak: operations=(?P<operations>\d+) rounds=(?P<rounds>\d+) faults=(?P<faults>\d+) kills=(?P<kills>\d+) "
    r"violations=(?P<violations>\d+) jobs_killed=(?P<jobs_killed>\d+) leaked=(?P<leaked>\d+) seed=(?P<seed>\d+)"
)


def test_a_seeded_smoke_run_of_the_soak_holds_every_invariant() -> None:
    """Seed 19's first rounds, under a queue of jobs for the scale set: a token rotation (with runners held in
    config.sh), the scale set's bounds changed, then its name (a replacement), its new listener to be killed and
    two pods whose image cannot be pulled (the new listener's among them, healed once the faults are cleared)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--seed", "19", "--rounds", "3", "--minutes", "5"],
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
    assert figures["rounds"] == 3 and figures["seed"] == 19, last
    assert (figures["violations"], figures["jobs_killed"], figures["leaked"]) == (0, 0, 0), output
    assert figures["operations"] > 50 and figures["faults"] > 0, last
    # The rename replaces the set, unless an image-pull fault struck the new listener's pod: its create then fails
    # saying so (ListenerNotRunning) and takes everything back, and the settling runs make it.
    renamed = "(replaced scale-set)" in run.stdout or "ListenerNotRunning: the listener of scale set" in run.stdout
    assert "(updated scale-set)" in run.stdout and renamed, output
    queued = re.search(r"soak: scale set: (\d+) jobs queued for it", run.stdout)
    assert queued is not None and int(queued.group(1)) > 0, output
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


def test_the_audit_judges_a_scale_set_by_its_own_records_and_finds_what_is_left_of_one(
    sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scale set's runners are not in the state: its look judges them (and only it: a Secret of the set is not
    also a runners' leak), a set of another id on GitHub is untrue, and once the state lists none, everything of
    it, on GitHub and in the namespace, is a leftover."""
    # The set settles within the audit's own 60 s (a passing look returns at once); only the look expected to
    # find something is shortened, below.
    monkeypatch.setattr(audit_module, "COLLECTED_WITHIN_SECONDS", 1.0)
    sim.github.service.long_poll_seconds, sim.github.service.session_silence_seconds = 1.0, 3.0

    program = scale_set_program(sim, scale_set_name="soak-set", min_runners=1, max_runners=2)

    def resources(engine: MiniEngine) -> list:
        return [(r.type, urn.split("::")[-1], r.outputs) for urn, r in engine.state.items()]

    with MiniEngine(ROOT) as engine:
        engine.up(program)
        (scale_set,) = state_scale_sets(resources(engine))
        assert (scale_set.scale_set_name, scale_set.min_runners, scale_set.max_runners) == ("soak-set", 1, 2)
        assert audit(sim, [], namespace=NAMESPACE, foreign_ids=(), scale_sets=[scale_set]) == []
        sim.github.queue_jobs(sim.repo_url, ["soak-set"], 0.5, count=3)
        assert audit(sim, [], namespace=NAMESPACE, foreign_ids=(), scale_sets=[scale_set]) == []  # none waits
        wait_until(
            lambda: len([j for j in sim.github.jobs("completed") if j["conclusion"] == "success"]) == 3,
            "the three jobs served",
            30,
        )

        labels = {"app.kubernetes.io/managed-by": "pulumi-actions-runners", SCALE_SET_LABEL: "soak-set"}
        stray = {"name": "soak-set-stray-registration", "labels": {**labels, COMPONENT_LABEL: "runner"}}
        core_api(sim).create_namespaced_secret(NAMESPACE, {"metadata": stray})
        monkeypatch.setattr(audit_module, "SCALE_SET_SETTLES_WITHIN_SECONDS", 1.0)
        findings = [str(f) for f in audit(sim, [], namespace=NAMESPACE, foreign_ids=(), scale_sets=[scale_set])]
        assert findings == [
            "leaked: scale-set: Secret soak-set-stray-registration belongs to no runner pod of the set"
        ], findings

        sim.github.service.forget_scale_set(scale_set.scale_set_id)  # its listener makes it again: another id
        wait_until(lambda: sim.github.service.scale_sets(), "the set made again", 30)
        findings = [str(f) for f in audit(sim, [], namespace=NAMESPACE, foreign_ids=(), scale_sets=[scale_set])]
        (again,) = sim.github.service.scale_sets()
        assert f"untrue: scale-set: scale set id {scale_set.scale_set_id}, GitHub has [{again['id']}]" in findings
        assert f"leaked: scale set soak-set (id {again['id']}) on GitHub belongs to no resource in the state" in (
            findings
        )
        engine.refresh()
        (scale_set,) = state_scale_sets(resources(engine))
        assert scale_set.scale_set_id == again["id"]

        forgotten = [str(f) for f in audit(sim, [], namespace=NAMESPACE, foreign_ids=(), scale_sets=[])]
        for leftover in (
            f"leaked: scale set soak-set (id {again['id']}) on GitHub belongs to no resource in the state",
            "leaked: ConfigMap soak-set-listener of scale set soak-set belongs to no resource in the state",
            "leaked: Deployment soak-set-listener of scale set soak-set belongs to no resource in the state",
            "leaked: RoleBinding soak-set-listener of scale set soak-set belongs to no resource in the state",
            "leaked: Secret soak-set-listener-github of scale set soak-set belongs to no resource in the state",
        ):
            assert leftover in forgotten, forgotten
        assert [f for f in forgotten if "registration" in f and "belongs to no resource" in f], forgotten

        engine.destroy()
    monkeypatch.setattr(audit_module, "COLLECTED_WITHIN_SECONDS", 10.0)  # the garbage collector's time
    assert [str(f) for f in audit(sim, [], namespace=NAMESPACE, foreign_ids=())] == [
        "leaked: Secret soak-set-stray-registration of scale set soak-set belongs to no resource in the state"
    ]
