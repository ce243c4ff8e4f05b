"""The listener's decisions (scaler.plan) and the seed's retirement of a scale set's runner (retire_step), as
plain code driven by a fake clock and fakes of GitHub and the API server."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pulumi_actions_runners.github.client import RemoveOutcome
from pulumi_actions_runners.lifecycle.scale_set_runners import Retirement, SetRunner, clean_ended, retire_step
from pulumi_actions_runners.listener.scaler import desired_runners, plan

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def runner(
    name: str, runner_id: int, *, spec: str = "s1", age: float = 5, running: bool = True, **kw: Any
) -> SetRunner:
    return SetRunner(
        name=name,
        namespace="ci",
        runner_id=runner_id,
        spec_hash=spec,
        created=NOW - timedelta(seconds=age),
        removed_at=kw.pop("removed_at", None),
        running=running,
        ended=kw.pop("ended", False),
        terminating=kw.pop("terminating", False),
        stuck=kw.pop("stuck", None),
    )


def decide(runners: list[SetRunner], desired: int, **kw: Any) -> Any:
    return plan(
        runners,
        desired=desired,
        max_runners=kw.pop("max_runners", 10),
        spec_hash="s1",
        busy=kw.pop("busy", set()),
        online=kw.pop("online", {r.runner_id for r in runners}),
        now=NOW,
        register_timeout_seconds=60,
    )


def test_the_count_is_arcs_min_plus_assigned_within_max() -> None:
    assert desired_runners(0, 10, 0) == 0
    assert desired_runners(2, 10, 3) == 5
    assert desired_runners(2, 10, 30) == 10


def test_surplus_runners_are_chosen_among_idle_ones_never_a_busy_one() -> None:
    runners = [runner("a", 1, age=30), runner("b", 2, age=20), runner("c", 3, running=False, age=10)]
    decided = decide(runners, 1, busy={1})
    assert set(decided.retire) == {"b", "c"} and decided.start == 0
    assert set(decide(runners, 0, busy={1, 2, 3}).retire) == set()  # all busy: none leaves


def test_idle_runners_of_an_earlier_spec_are_replaced_and_busy_ones_kept() -> None:
    runners = [runner("a", 1, spec="s0"), runner("b", 2, spec="s0"), runner("c", 3)]
    decided = decide(runners, 3, busy={1})
    assert decided.retire == {"b": "its spec is an earlier one"} and decided.start == 1


def test_a_runner_never_online_within_the_timeout_is_replaced_and_starts_stay_within_max_pods_up() -> None:
    runners = [runner("late", 1, age=90), runner("young", 2, age=5)]
    decided = decide(runners, 2, online=set())
    assert list(decided.retire) == ["late"] and decided.start == 1
    crowded = [*runners, runner("going", 3, removed_at=1.0)]
    assert decide(crowded, 4, online={1, 2}, max_runners=3).start == 0  # a retiring pod still counts
    assert decide([runner("gone", 4, ended=True)], 0).clean == ["gone"]


@dataclass
class FakeGitHub:
    registered: set[int] = field(default_factory=set)
    busy: set[int] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)

    def generate_jit_config(self, scale_set_id: int, name: str) -> None:
        raise AssertionError("not here")

    def runner(self, runner_id: int) -> dict[str, Any] | None:
        self.calls.append(f"get {runner_id}")
        return {"id": runner_id} if runner_id in self.registered else None

    def remove_runner(self, runner_id: int) -> RemoveOutcome:
        self.calls.append(f"remove {runner_id}")
        if runner_id in self.busy:
            return RemoveOutcome.BUSY
        if runner_id in self.registered:
            self.registered.remove(runner_id)
            return RemoveOutcome.REMOVED
        return RemoveOutcome.NOT_FOUND


@dataclass
class FakePods:
    calls: list[str] = field(default_factory=list)

    def create_secret(self, manifest: dict[str, Any]) -> bool:
        return True

    def create_pod(self, manifest: dict[str, Any]) -> Any:
        return manifest

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None, *, once: bool = False) -> None:
        self.calls.append(f"delete {name}")

    def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> bool:
        return True

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        self.calls.append(f"annotate {name} {sorted(annotations.items())}")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_busy_runner_stays_and_an_idle_one_goes_after_its_grace_with_a_last_look_first() -> None:
    github, pods, clock = FakeGitHub(registered={1, 2}, busy={1}), FakePods(), FakeClock()
    busy, idle = runner("busy", 1), runner("idle", 2)
    assert retire_step(busy, github, pods, clock, 5) is Retirement.BUSY
    assert busy.removed_at is None and not pods.calls
    assert retire_step(idle, github, pods, clock, 5) is Retirement.GRACE
    clock.sleep(4.9)
    assert retire_step(idle, github, pods, clock, 5) is Retirement.GRACE
    clock.sleep(0.2)
    assert retire_step(idle, github, pods, clock, 5) is Retirement.DELETED
    assert github.calls == ["remove 1", "remove 2", "get 2"]  # the look just before the pod goes
    assert pods.calls[-1] == "delete idle"


def test_a_registration_back_after_its_removal_starts_the_retirement_over() -> None:
    github, pods, clock = FakeGitHub(registered={2}), FakePods(), FakeClock()
    idle = runner("idle", 2)
    retire_step(idle, github, pods, clock, 1)
    github.registered.add(2)
    github.busy.add(2)  # and it took a job meanwhile: it stays
    clock.sleep(2)
    assert retire_step(idle, github, pods, clock, 1) is Retirement.BUSY
    assert "delete idle" not in pods.calls and idle.removed_at is None


def test_an_ended_pod_is_deleted_and_its_registration_removed_if_github_has_it() -> None:
    github, pods = FakeGitHub(registered={3}), FakePods()
    clean_ended(runner("done", 3, ended=True), github, pods)
    assert github.calls == ["remove 3"] and pods.calls == ["delete done"]
