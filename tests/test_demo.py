"""The demo's verdicts, on a busy runner's replacement and on a scale set's burst: each must name a problem
whenever the records show one, since the demo's printed claims rest on them. Records are written here as the
simulator writes them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from actions_runners_simulator.demo import (
    HeldJob,
    Sample,
    SimulatorProcess,
    burst_summary,
    fleet_chart,
    judge,
    judge_burst,
    peak_runners,
    pod_problem,
    timeline,
)
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


OLD, NEW = "old-spec", "new-spec"
UPDATE = (10.0, 15.0)  # the spec change's `pulumi up`


def burst_job(job_id: int, runner: str | None, started: float | None, finished: float | None) -> dict[str, Any]:
    status = "queued" if started is None else "in_progress" if finished is None else "completed"
    return {
        "id": job_id,
        "labels": ["linux"],
        "status": status,
        "conclusion": "success" if status == "completed" else None,
        "runner_name": runner,
        "started_at": started,
        "finished_at": finished,
        "lost": False,
    }


def runner_events(name: str, created: float, exited: float | None, deleted: float | None) -> list[dict[str, Any]]:
    events = [pod_event("pod_created", created, name=name)]
    if exited is not None:
        events.append({**pod_event("container_exited", exited, name=name), "container": "runner", "exit_code": 0})
    if deleted is not None:
        events += [pod_event("pod_terminating", deleted, name=name), pod_event("pod_removed", deleted + 0.5, name=name)]
    return events


# Two runners busy from before the update to after it (held jobs), then one of the new spec for a queued job.
BURST_JOBS = [
    burst_job(1, "linux-aaaaa", 5.0, 20.0),
    burst_job(2, "linux-bbbbb", 5.5, 20.0),
    burst_job(3, "linux-ccccc", 21.0, 24.0),
]
BURST_EVENTS = [
    *runner_events("linux-aaaaa", 3.0, 20.3, 21.3),
    *runner_events("linux-bbbbb", 3.5, 20.3, 21.5),
    *runner_events("linux-ccccc", 20.5, 24.2, 25.0),
    pod_event("pod_created", 2.0, name="linux-listener-5d8f-x2x4q"),  # the listener's pod: not a runner
]
BURST_SPECS = {"linux-aaaaa": OLD, "linux-bbbbb": OLD, "linux-ccccc": NEW}


def burst_outcome(
    jobs: list[dict[str, Any]] = BURST_JOBS,
    events: list[dict[str, Any]] = BURST_EVENTS,
    specs: dict[str, str] = BURST_SPECS,
    **overrides: Any,
) -> Any:
    settings = {"old_hash": OLD, "new_hash": NEW, "update": UPDATE, "max_runners": 10, "jobs_killed": 0}
    return judge_burst(jobs, events, specs, **{**settings, **overrides})


def test_a_burst_served_as_a_scale_set_should_is_judged_so_with_its_figures() -> None:
    outcome = burst_outcome()

    assert outcome.problems == ()
    assert (outcome.peak, outcome.peak_at) == (2, 3.5)
    assert (outcome.served, outcome.lost) == (3, 0)
    assert [(b.name, b.spec_hash, b.finished_at, b.deleted_at) for b in outcome.busy_through_update] == [
        ("linux-aaaaa", OLD, 20.0, 21.3),
        ("linux-bbbbb", OLD, 20.0, 21.5),
    ]
    assert outcome.busy_finished_on_old_spec == 2
    assert (outcome.old_spec_jobs, outcome.new_spec_jobs) == (2, 1)
    assert outcome.back_to_zero_at == 24.2


def test_more_runners_at_once_than_max_runners_is_a_problem() -> None:
    assert burst_outcome(max_runners=1).problems == ("2 runners ran at once, above max_runners 1",)


def test_a_pod_deleted_while_its_job_ran_is_a_problem() -> None:
    events = [*BURST_EVENTS, pod_event("pod_terminating", 18.0, name="linux-aaaaa")]

    outcome = burst_outcome(events=events)

    assert outcome.problems == ("pod linux-aaaaa was deleted while its job 1 ran",)
    assert "  1 of their pods deleted before their jobs ended" in burst_summary(outcome, 3, UPDATE, 0.0)


def test_a_spec_change_that_met_no_busy_runner_is_a_problem() -> None:
    outcome = burst_outcome(update=(25.0, 26.0))

    assert outcome.busy_through_update == ()
    assert outcome.problems == ("no runner ran a job throughout the update: the spec change met no busy runner",)


def test_a_busy_runner_not_on_the_first_spec_is_a_problem() -> None:
    outcome = burst_outcome(specs={**BURST_SPECS, "linux-aaaaa": NEW})

    assert outcome.problems == ("busy runner linux-aaaaa did not finish on the first spec (new-spec)",)
    assert (outcome.busy_finished_on_old_spec, outcome.old_spec_jobs, outcome.new_spec_jobs) == (1, 1, 2)


def test_a_job_lost_or_not_served_is_a_problem() -> None:
    lost = [{**BURST_JOBS[0], "conclusion": "failure", "lost": True}, *BURST_JOBS[1:]]
    assert burst_outcome(jobs=lost).problems == (
        "1 of 3 jobs were not served",
        "jobs lost: 1 in GitHub's records, 0 in the simulator's jobs_killed",
    )
    assert burst_outcome(jobs_killed=1).lost == 1
    queued = [*BURST_JOBS, burst_job(4, None, None, None)]
    assert burst_outcome(jobs=queued).problems == ("1 of 4 jobs were not served",)


def test_a_fleet_not_back_to_zero_is_a_problem() -> None:
    events = [e for e in BURST_EVENTS if e["name"] != "linux-ccccc" or e["type"] == "pod_created"]

    outcome = burst_outcome(events=events)

    assert outcome.back_to_zero_at is None
    assert outcome.problems == ("the fleet is not back to 0: linux-ccccc still run",)


def test_a_runner_ending_as_another_starts_is_not_counted_with_it() -> None:
    assert peak_runners({"a": (1.0, 5.0), "b": (5.0, 9.0), "c": (6.0, None)}) == (2, 6.0)
    assert peak_runners({}) == (0, None)


def test_the_summary_says_the_recorded_figures() -> None:
    lines = burst_summary(burst_outcome(), 3, UPDATE, origin=1.0)

    assert lines[1:] == [
        "  runners at once, at most: 2 (max_runners 10), first at +2.5 s",
        "  the spec change, `pulumi up` from +9.0 s to +14.0 s: 2 runners ran jobs from before it began until after"
        " it ended",
        "  2 of them finished their jobs on the first spec, at +19.0 s",
        "  their pods deleted 1.3 s to 1.5 s after their jobs ended, none before",
        "  jobs run on the first spec: 2; on the new spec: 1",
        "  the fleet back to 0 runners at +23.2 s",
        "  jobs served: 3 of 3; jobs lost: 0",
    ]


def test_the_summary_gives_a_span_when_the_figures_differ() -> None:
    jobs = [BURST_JOBS[0], {**BURST_JOBS[1], "finished_at": 20.4}, BURST_JOBS[2]]

    lines = burst_summary(burst_outcome(jobs=jobs), 3, UPDATE, origin=1.0)

    assert "  2 of them finished their jobs on the first spec, from +19.0 s to +19.4 s" in lines
    assert "  their pods deleted 1.1 s to 1.3 s after their jobs ended, none before" in lines


def test_the_chart_has_the_first_sample_then_a_row_a_second_when_something_changed_and_the_last() -> None:
    def sample(at: float, runners: dict[str, str], busy: int) -> Sample:
        return Sample(at, runners, len(runners), busy, queued=3 - busy, done=0)

    samples = [
        sample(0.1, {}, 0),  # before the chart's start: not shown
        sample(0.6, {}, 0),
        sample(1.1, {"a": OLD}, 0),
        sample(1.6, {"a": OLD, "b": NEW}, 1),  # overtaken within the second: not shown
        sample(2.1, {"a": OLD, "b": NEW}, 2),
        sample(3.1, {"a": OLD, "b": NEW}, 2),  # as the row before: not shown
        sample(3.4, {"b": NEW}, 1),
        sample(3.9, {}, 0),  # after the chart's end: not shown
    ]

    rows = fleet_chart(samples, OLD, since=0.5, until=3.5, origin=0.0)

    assert rows == [
        "    +0.6 s   0              busy  0, queued  3, done  0",
        "    +1.1 s   1 #            busy  0, queued  3, done  0",
        "    +2.1 s   2 #+           busy  2, queued  1, done  0",
        "    +3.4 s   1 +            busy  1, queued  2, done  0",
    ]


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
