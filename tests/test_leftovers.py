"""Nothing left behind untracked: a pod whose create answer was lost, Secrets whose pod never came, labels that
GitHub would refuse, a runner whose Create was killed before it finished."""

from __future__ import annotations

import threading

import pytest

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine
from tests.conftest import ROOT, wait_until
from tests.helpers import NAMESPACE, core_api, new_token, outputs, sha256, up_killed_when
from tests.programs import jit_runner, runner_with_token, token_and_pool


def test_a_runner_whose_pod_create_answer_was_lost_adopts_the_pod_it_made(sim) -> None:
    sim.kube.lose_next_answer("POST", r"/pods$")  # the pod is made; the answer never comes; the client retries

    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, new_token(sim)))
        out = outputs(engine, "runner")

        posts = [status for method, path, status in sim.kube.requests() if (method, path[-5:]) == ("POST", "/pods")]
        assert posts == [0, 409], "the retried POST met the pod that the one answered with nothing (0) had made"
        assert [p["metadata"]["name"] for p in sim.kube.pods(NAMESPACE)] == [out["pod_name"]]
        assert {r["name"]: r["status"] for r in sim.github.runners()} == {out["runner_name"]: "online"}
        engine.destroy()
    assert sim.kube.pods(NAMESPACE) == [] and sim.kube.secrets(NAMESPACE) == []


def _leftover_secret(sim, name: str, pool: str) -> None:
    """A Secret as the provider writes it just before creating the pod, as if it had been stopped right then."""
    labels = {"actions-runners.pulumi.io/runner": name, "actions-runners.pulumi.io/pool": pool}
    body = {"metadata": {"name": f"{name}-registration", "labels": labels}, "stringData": {"token": "A" * 29}}
    core_api(sim).create_namespaced_secret(NAMESPACE, body)


def test_a_pools_secrets_without_a_runner_are_deleted_by_its_next_update_and_by_destroy(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, new_token(sim), replicas=2))
        _leftover_secret(sim, "pool-7", "pool")
        _leftover_secret(sim, "other-0", "other")  # another pool's: not ours to delete

        engine.up(token_and_pool(sim, new_token(sim), replicas=2))  # a rotation
        names = sorted(s["metadata"]["name"] for s in sim.kube.secrets(NAMESPACE))
        assert names == ["other-0-registration", "pool-0-registration", "pool-1-registration"]

        _leftover_secret(sim, "pool-9", "pool")
        engine.destroy()
    assert [s["metadata"]["name"] for s in sim.kube.secrets(NAMESPACE)] == ["other-0-registration"]


@pytest.mark.parametrize(
    ("program", "allowed"),
    [
        (lambda sim: runner_with_token(sim, new_token(sim), labels=[f"l{i}" for i in range(100)]), 99),
        (lambda sim: jit_runner(sim, labels=[f"l{i}" for i in range(99)]), 98),
    ],
)
def test_check_counts_the_labels_the_runner_will_really_carry(sim, program, allowed) -> None:
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.up(program(sim))

    failure = raised.value.errors[0]
    assert isinstance(failure, CheckFailed)
    reason = dict(failure.failures)["labels"]
    assert f"use at most {allowed} labels" in reason and "ownership label" in reason


def test_check_accepts_as_many_labels_as_github_allows(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(jit_runner(sim, labels=["self-hosted", *[f"l{i}" for i in range(98)]]))
        registered = sim.github.runners()
    # All custom: "self-hosted", 98 of the user's and the ownership label (GitHub adds no defaults to a JIT runner).
    assert sum(1 for label in registered[0]["labels"] if label["type"] == "custom") == 100
    assert [c["status"] for c in sim.github.calls("POST", "generate-jitconfig$")] == [201]
    assert outputs(engine, "runner")["runner_id"] == registered[0]["id"]


def _killed_in_create(sim, engine: MiniEngine, program) -> dict:
    """`up` whose provider is SIGKILLed once the Create has made its pod and the runner registered with it, as
    when the CI job running `pulumi up` is cancelled: the resource is not in the state; its runner is there."""

    def registered() -> bool:
        return any(r["status"] == "online" for r in sim.github.runners())

    up_killed_when(engine, program, registered, "the runner to register")
    assert not any(urn.endswith("::runner") for urn in engine.state), "the engine forgot the killed Create"
    [pod] = sim.kube.pods(NAMESPACE)
    return pod


def test_a_runner_left_by_a_killed_create_is_replaced_when_the_token_has_changed(sim) -> None:
    """Found by the soak: the next run, with a renewed token, failed on the leftover pod ("Choose another
    runner_name") on every run after, though the pod was this very resource's."""
    with MiniEngine(ROOT) as engine:
        leftover = _killed_in_create(sim, engine, runner_with_token(sim, new_token(sim)))
        [registration] = sim.github.runners()
        sim.github.start_job(registration["name"], None)  # the leftover takes a job: it is waited for, not killed

        def refused() -> list[dict]:
            return [c for c in sim.github.calls("DELETE", rf"/runners/{registration['id']}$") if c["status"] == 422]

        def release_once_refused() -> None:  # the job ends only once its runner was seen busy: no race
            wait_until(refused, "RemoveRunner to refuse the busy leftover", timeout=30)
            sim.github.finish_job(registration["name"])

        releaser = threading.Thread(target=release_once_refused)
        releaser.start()
        token = new_token(sim)
        engine.new_provider_process()
        engine.up(runner_with_token(sim, token))
        releaser.join()
        out = outputs(engine, "runner")

        [pod] = sim.kube.pods(NAMESPACE)
        assert pod["metadata"]["uid"] != leftover["metadata"]["uid"]
        assert pod["metadata"]["annotations"]["actions-runners.pulumi.io/token-hash"] == sha256(token)
        assert [r["id"] for r in sim.github.runners()] == [out["runner_id"]] != [registration["id"]]
        removals = [c["status"] for c in sim.github.calls("DELETE", rf"/runners/{registration['id']}$")]
        # Refused while busy; then gone (an ephemeral runner's registration goes with its job's end).
        assert removals[0] == 422 and removals[-1] in (204, 404), removals
    assert sim.runners.jobs_killed == []


def test_a_runner_left_by_a_killed_create_is_not_adopted_when_the_spec_has_changed(sim) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        leftover = _killed_in_create(sim, engine, runner_with_token(sim, token))

        engine.new_provider_process()
        engine.up(runner_with_token(sim, token, image="ghcr.io/actions/actions-runner:2.330.0"))

        [pod] = sim.kube.pods(NAMESPACE)
        assert pod["metadata"]["uid"] != leftover["metadata"]["uid"]
        assert pod["spec"]["containers"][0]["image"] == "ghcr.io/actions/actions-runner:2.330.0"
        assert [r["id"] for r in sim.github.runners()] == [outputs(engine, "runner")["runner_id"]]
