"""The listener's decisions (scaler.plan) and the seed's retirement of a scale set's runner (retire_step), as
plain code driven by a fake clock and fakes of GitHub and the API server."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from actions_runners_simulator.github_double import GitHubDouble
from pulumi_actions_runners.github.client import GitHubClient, RemoveOutcome
from pulumi_actions_runners.github.scale_sets import ActionsServiceClient
from pulumi_actions_runners.github.url import parse_github_url
from pulumi_actions_runners.lifecycle.scale_set_runners import Retirement, SetRunner, clean_ended, retire_step
from pulumi_actions_runners.listener.scaler import ROTATION, Why, desired_runners, plan

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
        finishing=kw.pop("finishing", set()),
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
    assert decided.retire == {"b": Why(ROTATION, "its spec is an earlier one")} and decided.start == 1


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


def test_a_runner_whose_job_completed_is_neither_serving_nor_retired_while_it_leaves() -> None:
    """Between a job's end and its pod's, a turn would otherwise retire a warm idle runner for it, and start a cold
    one once the pod had gone (the churn an adversarial review found)."""
    runners = [runner("done", 1), runner("warm-a", 2), runner("warm-b", 3)]
    decided = decide(runners, 2, finishing={1})
    assert decided.retire == {} and decided.start == 0


def test_a_start_cut_short_is_finished_or_undone_by_the_sweep() -> None:
    from pulumi_actions_runners.kube.client import SecretMetadata
    from pulumi_actions_runners.kube.manifests import RUNNER_LABEL
    from pulumi_actions_runners.lifecycle.scale_set_runners import sweep_orphans

    class Named(FakeGitHub):
        def runner_id_by_name(self, name: str) -> int | None:
            return {"no-pod": 7}.get(name)

    class Owners:
        def __init__(self) -> None:
            self.owned: list[tuple[str, str]] = []

        def own_secret(self, namespace: str, name: str, owner: dict[str, Any]) -> None:
            self.owned.append((name, owner["uid"]))

    class Secrets(FakePods):
        def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> bool:
            self.calls.append(f"delete secret {name}")
            return True

    def secret(name: str, *, owned: bool = False, age: float = 60) -> SecretMetadata:
        created = (NOW - timedelta(seconds=age)).isoformat()
        return SecretMetadata(f"{name}-registration", "u", "1", {RUNNER_LABEL: name}, owned=owned, created=created)

    github, pods, owners = Named(registered={7}), Secrets(), Owners()
    config = type("C", (), {"runner": type("R", (), {"namespace": "ci"})()})()  # only its namespace is read
    secrets = [secret("with-pod"), secret("no-pod"), secret("young", age=5), secret("owned", owned=True)]
    handled = sweep_orphans(config, github, pods, owners, secrets, {"with-pod": "uid-1"}, NOW)  # type: ignore[arg-type]
    assert handled == 2
    assert owners.owned == [("with-pod-registration", "uid-1")]  # its pod owns it now
    assert github.calls == ["remove 7"] and pods.calls == ["delete secret no-pod-registration"]


def test_the_listener_s_entry_point_imports_no_pulumi_and_no_front_door() -> None:
    """It runs in a small image with no Pulumi SDK, and never goes through the provider's front doors."""
    import subprocess
    import sys

    script = (
        "import sys, pulumi_actions_runners.listener.__main__\n"
        "front = ('pulumi_actions_runners.' + part for part in ('providers', 'resources', 'plugin', 'inputs'))\n"
        "print([m for m in sys.modules if m == 'pulumi' or m.startswith(tuple(front))])"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"


def test_the_client_retries_a_new_token_s_refusal_and_never_repeats_a_post_whose_answer_was_lost(
    github: GitHubDouble,
) -> None:
    """runner-registration may refuse a token minted a moment ago (ARC #3377, #3724): tried again. A POST whose
    answer was lost is not sent again (it may have been done: its repeat would meet a 409 for it)."""
    target = parse_github_url(f"{github.url}/octo/app")
    with GitHubClient(target, "ghp_simulator") as rest, ActionsServiceClient(rest) as service:
        github.fail_next(401, count=2, method="POST", path_regex="/actions/runner-registration")
        made = service.create_scale_set("linux", service.runner_group_id("Default"), ())
        assert len(github.calls("POST", "runner-registration")) == 3
        github.lose_next_answer(method="POST", path_regex="generatejitconfig")
        with pytest.raises(requests.ConnectionError):
            service.generate_jit_config(made.id, "linux-lost1")
        assert len(github.calls("POST", "generatejitconfig")) == 1
        assert service.runner_id_by_name("linux-lost1") is not None  # made: what the sweep finds by its name
        assert service.remove_runner(4242) is RemoveOutcome.REMOVED  # gone: the service answers 204
