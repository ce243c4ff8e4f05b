"""What the listener does about its runners at one turn of its loop: plain decisions on what the pods and the
message queue say, with no call made here.

The count is actions-runner-controller's (cmd/ghalistener/scaler/scaler.go): ``min(max_runners, min_runners +
assigned jobs)``, where assigned counts the jobs acquired and those running (``totalAssignedJobs``), so that
``min_runners`` idle runners wait beside the busy ones. Runners leave by the seed's retirement
(lifecycle/scale_set_runners.py), whose removal GitHub refuses for a busy runner: a runner chosen here is only a
candidate, never a pod deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..lifecycle.scale_set_runners import SetRunner


def desired_runners(min_runners: int, max_runners: int, assigned_jobs: int) -> int:
    return min(max_runners, min_runners + max(0, assigned_jobs))


ROTATION, SCALE_DOWN, NOT_ONLINE = "rotation", "scale_down", "not_online"  # metrics.RETIRE_REASONS


@dataclass(frozen=True)
class Why:
    """Why a runner retires: one of the reasons above (None: a retirement already under way), and in words."""

    reason: str | None
    text: str


@dataclass(frozen=True)
class Plan:
    start: int  # new runners
    retire: dict[str, Why] = field(default_factory=dict)  # by runner name
    clean: list[str] = field(default_factory=list)  # ended pods


def plan(
    runners: list[SetRunner],
    *,
    desired: int,
    max_runners: int,
    spec_hash: str,
    busy: set[int],
    online: set[int],
    now: datetime,
    register_timeout_seconds: float,
    finishing: frozenset[int] | set[int] = frozenset(),
) -> Plan:
    """``busy``: runner ids the queue said run a job (or whose removal GitHub refused); ``online``: those known to
    have come online; ``finishing``: those whose one job just completed, leaving by themselves (neither serving
    nor to retire: a turn between the job's end and its pod's would replace a warm idle runner for it). Surplus
    runners are chosen among the idle: those not yet running first, then the newest. No more runners start than
    leave ``max_runners`` pods up."""
    clean = [r.name for r in runners if r.ended and not r.terminating]
    retire: dict[str, Why] = {}
    for runner in runners:
        if runner.ended or runner.terminating or runner.runner_id in finishing:
            continue
        if runner.removed_at is not None:
            retire[runner.name] = Why(None, "its retirement goes on")
        elif runner.runner_id in busy:
            continue
        elif runner.spec_hash != spec_hash:
            retire[runner.name] = Why(ROTATION, "its spec is an earlier one")
        elif _late(runner, now, register_timeout_seconds) and runner.runner_id not in online:
            late = runner.stuck or f"not online {register_timeout_seconds:.0f} s after its start"
            retire[runner.name] = Why(NOT_ONLINE, late)
    serving = [
        r for r in runners if not (r.ended or r.terminating) and r.name not in retire and r.runner_id not in finishing
    ]
    surplus = len(serving) - desired
    if surplus > 0:
        idle = [r for r in serving if r.runner_id not in busy]
        idle.sort(key=lambda r: (r.running, -(r.created.timestamp() if r.created else float("inf"))))
        for runner in idle[:surplus]:
            retire[runner.name] = Why(SCALE_DOWN, f"more runners than the {desired} wanted")
    # Pods still up count against max_runners until they are gone: a retiring runner's too (its grace period).
    up = sum(1 for r in runners if not r.ended)
    return Plan(start=max(0, min(desired - len(serving), max_runners - up)), retire=retire, clean=clean)


def _late(runner: SetRunner, now: datetime, timeout: float) -> bool:
    return runner.created is not None and (now - runner.created).total_seconds() > timeout
