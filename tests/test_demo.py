"""The demo's verdict on a busy runner's replacement: it must say "not protected" whenever the records show it
was not, since the demo's printed claims rest on it. Records are written here as the simulator writes them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from actions_runners_simulator.demo import HeldJob, SimulatorProcess, judge, pod_problem, timeline
from actions_runners_simulator.tools import tool_dirs
from actions_runners_simulator.workspace import PulumiFailed, PulumiWorkspace
from tests.conftest import ROOT, wait_until

SCOPE = "/repos/octo-org/ci/actions/runners"
BUSY_ID, OTHER_ID = 7, 8
JOB = HeldJob("runner-0", BUSY_ID, True, "runner-0", held_at=100.0, released_at=110.0)


def remove(runner_id: int, status: int, at: float) -> dict[str, Any]:
    return {"method": "DELETE", "path": f"{SCOPE}/{runner_id}", "query": {}, "status": status, "at": at}


def pod_event(kind: str, at: float, name: str = "runner-0") -> dict[str, Any]:
    return {"type": kind, "namespace": "actions-runners", "name": name, "at": at}


LISTING = {"method": "GET", "path": SCOPE, "query": {"per_page": "100"}, "status": 200, "at": 104.0}
PROTECTED_CALLS = [remove(OTHER_ID, 204, 103.0), remove(BUSY_ID, 422, 103.1), LISTING, remove(BUSY_ID, 404, 110.5)]
PROTECTED_EVENTS = [
    pod_event("pod_terminating", 105.0, name="runner-1"),
    pod_event("container_exited", 110.4),  # the ephemeral runner ends after its job: not a deletion
    pod_event("pod_removed", 112.5),
]


def test_a_protected_replacement_is_judged_protected_with_its_figures() -> None:
    outcome = judge(JOB, PROTECTED_CALLS, PROTECTED_EVENTS, jobs_lost=0)

    assert outcome.problems == ()
    assert (outcome.refusals, outcome.all_refusals, outcome.first_refusal_at) == (1, 1, 103.1)
    assert outcome.unregistered == (404, 110.5)
    assert outcome.pod_deleted_at == 112.5
    assert outcome.others_unregistered_while_held == 1


def test_a_history_without_a_422_is_not_protected() -> None:
    calls = [call for call in PROTECTED_CALLS if call["status"] != 422]

    outcome = judge(JOB, calls, PROTECTED_EVENTS, jobs_lost=0)

    assert outcome.refusals == 0
    assert any("never answered 422" in problem for problem in outcome.problems)


def test_a_422_for_another_runner_does_not_count_for_the_busy_one() -> None:
    calls = [remove(OTHER_ID, 422, 103.0), remove(OTHER_ID, 204, 104.0), remove(BUSY_ID, 404, 110.5)]

    outcome = judge(JOB, calls, PROTECTED_EVENTS, jobs_lost=0)

    assert (outcome.refusals, outcome.all_refusals) == (0, 1)
    assert any("never answered 422" in problem for problem in outcome.problems)


def test_a_runner_unregistered_while_its_job_was_held_is_not_protected() -> None:
    calls = [remove(BUSY_ID, 422, 103.1), remove(BUSY_ID, 204, 106.0)]

    outcome = judge(JOB, calls, PROTECTED_EVENTS, jobs_lost=0)

    assert outcome.problems == ("runner-0 was unregistered 4.0 s before its job was released",)


def test_a_pod_deleted_while_its_job_was_held_is_not_protected() -> None:
    events = [pod_event("pod_terminating", 104.0), *PROTECTED_EVENTS]

    outcome = judge(JOB, PROTECTED_CALLS, events, jobs_lost=0)

    assert outcome.pod_deleted_at == 104.0
    assert outcome.problems == ("pod runner-0 was deleted 6.0 s before its job was released",)


def test_a_lost_job_is_not_protected() -> None:
    assert judge(JOB, PROTECTED_CALLS, PROTECTED_EVENTS, jobs_lost=1).problems == (
        "1 job(s) lost (the simulator's jobs_killed)",
    )


def test_an_unregistration_or_deletion_never_seen_is_not_taken_for_granted() -> None:
    calls = [remove(BUSY_ID, 422, 103.1)]
    events = [pod_event("pod_removed", 90.0)]  # an earlier pod of the name, gone before the job was held

    problems = judge(JOB, calls, events, jobs_lost=0).problems

    assert any("not seen unregistered" in problem for problem in problems)
    assert "pod runner-0 was not seen deleted" in problems


def test_what_happened_before_the_job_was_held_is_left_out() -> None:
    calls = [remove(BUSY_ID, 204, 90.0), *PROTECTED_CALLS]  # an earlier registration's id reused: not this job's

    assert judge(JOB, calls, PROTECTED_EVENTS, jobs_lost=0).problems == ()


@pytest.mark.parametrize(
    ("pod", "problem"),
    [
        (None, "it is gone"),
        ({"metadata": {"uid": "other"}, "status": {"phase": "Running"}}, "it was replaced by another pod of the name"),
        (
            {"metadata": {"uid": "u1", "deletion_timestamp": "2026-01-01"}, "status": {"phase": "Running"}},
            "terminating",
        ),
        ({"metadata": {"uid": "u1", "deletion_timestamp": None}, "status": {"phase": "Succeeded"}}, "not Running"),
    ],
)
def test_a_pod_not_left_running_is_reported(pod: dict[str, Any] | None, problem: str) -> None:
    assert problem in (pod_problem(pod, "u1") or "")


def test_a_pod_left_running_has_no_problem() -> None:
    assert (
        pod_problem({"metadata": {"uid": "u1", "deletion_timestamp": None}, "status": {"phase": "Running"}}, "u1")
        is None
    )


def test_the_timeline_is_in_the_order_it_happened_with_the_recorded_figures() -> None:
    outcome = judge(JOB, PROTECTED_CALLS, PROTECTED_EVENTS, jobs_lost=0)

    lines = timeline(JOB, outcome, started=99.0, elapsed=13.6)

    steps = [step.groups() for line in lines if (step := re.fullmatch(r" +([+-][0-9.]+) s  (.*)", line))]
    assert steps == [
        ("+4.1", "RemoveRunner of runner-0 answered 422, busy (1 time for it)"),
        ("+11.0", "the demo releases its job"),
        (
            "+11.5",
            "runner-0 unregistered: RemoveRunner answered 404 (GitHub no longer knew it: ephemeral, removed after"
            " its job)",
        ),
        ("+13.5", "its pod runner-0 deleted, 2.0 s after (grace period 2 s)"),
    ]
    assert "which took 13.6 s" in lines[0]
    assert lines[-3:] == [
        "  RemoveRunner answered 422 1 time(s) in all during the update; other runners",
        "  unregistered while the job was held: 1.",
        "  Jobs lost during the update (the simulator's jobs_killed): 0.",
    ]


def test_a_persistent_runner_unregistered_is_not_said_to_be_ephemeral() -> None:
    job = replace(JOB, ephemeral=False)
    outcome = judge(job, PROTECTED_CALLS, PROTECTED_EVENTS, jobs_lost=0)

    assert "runner-0 unregistered: RemoveRunner answered 404 (GitHub no longer knew it)" in "\n".join(
        timeline(job, outcome, started=99.0, elapsed=13.6)
    )


def test_the_simulator_process_reports_what_it_saw() -> None:
    simulator = SimulatorProcess(tool_dirs("kube")["kube"])
    try:
        with config.new_client_from_config(config_file=simulator.info["kubeconfig"], persist_config=False) as api:
            core = client.CoreV1Api(api)
            pod = {"metadata": {"name": "probe"}, "spec": {"containers": [{"name": "idle", "image": "busybox"}]}}
            core.create_namespaced_pod(simulator.info["namespace"], pod)
        seen = wait_until(
            lambda: (
                {e["type"] for e in simulator.report()["kube_events"] if e["name"] == "probe"}
                >= {"pod_scheduled", "container_started"}
            ),
            "the pod to start",
        )
        assert seen
        assert simulator.report()["jobs_killed"] == []
        assert simulator.job("jobs", "nobody").status_code == 409
        assert simulator.job("jobs/finish", "nobody").status_code == 409
    finally:
        assert simulator.stop()["jobs_killed"] == []


FAKE_PULUMI = """#!/bin/sh
case "$1" in
  hang) trap 'kill $!; echo interrupted; exit 130' INT; echo started; sleep 30 & wait ;;
  fail) echo boom >&2; exit 3 ;;
  *) echo "ran $*" ;;
esac
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[PulumiWorkspace]:
    """A workspace whose `pulumi` is a script: how `start` runs, fails and is stopped, without the real CLI."""
    (tmp_path / "pulumi").write_text(FAKE_PULUMI)
    (tmp_path / "pulumi").chmod(0o755)
    with PulumiWorkspace(ROOT, tmp_path) as stack:
        yield stack


def test_a_started_command_runs_in_the_background_and_gives_its_output(workspace: PulumiWorkspace) -> None:
    result = workspace.start("up", "--yes").wait()

    # The test bed asks no preview of an `up` (skip_preview); a tour asks the preview a user's `up --yes` makes.
    assert result.stdout == f"ran up --yes --skip-preview --non-interactive --cwd {workspace.project}\n"
    workspace.skip_preview = False
    assert workspace.start("up", "--yes").wait().stdout == f"ran up --yes --non-interactive --cwd {workspace.project}\n"


def test_a_started_command_that_fails_raises_with_its_output(workspace: PulumiWorkspace) -> None:
    with pytest.raises(PulumiFailed, match="boom"):
        workspace.start("fail").wait()


def test_a_started_command_is_interrupted_by_stop(workspace: PulumiWorkspace) -> None:
    command = workspace.start("hang")
    [stdout] = workspace.root.glob("output-*/stdout")
    wait_until(lambda: stdout.read_text(), "the command to start")

    command.stop()

    assert not command.running()
    result = command.wait(check=False)
    assert (result.returncode, result.stdout) == (130, "started\ninterrupted\n")
