"""Registration tokens live an hour (here: seconds); a rollout held up by a busy job, or a persistent runner
that restarts later, must not be left with a token that has expired."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from actions_runners_simulator.engine import DeploymentFailed, MiniEngine
from actions_runners_simulator.github_double import REGISTRATION_NOT_FOUND, RegistrationRefused
from actions_runners_simulator.simulator import Simulator
from tests.conftest import ROOT, RUNNER_SPEEDUP, wait_until
from tests.helpers import NAMESPACE, new_token, outputs, secret_token, sha256
from tests.programs import runner_with_token, token_and_pool

TOKEN_SECONDS = 3.0


@pytest.fixture
def short_lived(kube_api_server) -> Iterator[Simulator]:
    """GitHub's tokens live TOKEN_SECONDS here instead of an hour."""
    with Simulator(
        token_lifetime=TOKEN_SECONDS,
        schedule_delay=0.05,
        runner_speedup=RUNNER_SPEEDUP,
        api_server=kube_api_server,
    ) as sim:
        yield sim


def _crash_looping(sim: Simulator, pod_name: str) -> bool:
    pod = sim.kube.pod(NAMESPACE, pod_name) or {}
    waiting = pod.get("status", {}).get("containerStatuses", [{}])[0].get("state", {}).get("waiting") or {}
    return waiting.get("reason") == "CrashLoopBackOff"


def test_a_replacement_held_up_past_the_tokens_expiry_starts_with_a_fresh_token(short_lived) -> None:
    sim = short_lived
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, new_token(sim), register_timeout_seconds=10))
        old = outputs(engine, "runner")
        sim.github.start_job(old["runner_name"], TOKEN_SECONDS + 1)  # longer than the new token will live
        given = new_token(sim)

        engine.up(runner_with_token(sim, given, register_timeout_seconds=10))
        new = outputs(engine, "runner")

        # What the pod would have met with it:
        with pytest.raises(RegistrationRefused, match=re.escape(REGISTRATION_NOT_FOUND)):
            sim.github.register_runner(
                github_url=sim.repo_url, token=given, name="probe", labels=[], ephemeral=True, listener=None
            )
        assert {r["name"]: r["status"] for r in sim.github.runners()} == {new["runner_name"]: "online"}
        assert secret_token(sim, new["secret_name"]) != given, "started with a token fresh from GitHub"
        assert new["token_hash"] == sha256(given), "the state keeps the given token's hash"
        assert [s.op for s in engine.preview(runner_with_token(sim, given, register_timeout_seconds=10))] == ["same"]
    assert sim.runners.jobs_killed == []


def test_a_runner_told_its_token_is_fresh_when_it_expired_says_so_in_the_users_words(short_lived) -> None:
    sim = short_lived
    stale = new_token(sim)
    time.sleep(TOKEN_SECONDS + 0.2)
    lying = runner_with_token(sim, stale, registration_token_expires_at="2999-01-01T00:00:00Z")

    with (
        MiniEngine(ROOT) as engine,
        pytest.raises(DeploymentFailed, match="did not register: the registration token has expired or was used up"),
    ):
        engine.up(lying)


def test_a_persistent_runner_crash_looping_on_an_expired_token_is_found_by_refresh_and_restarted(short_lived) -> None:
    sim = short_lived
    token = new_token(sim)
    program = runner_with_token(sim, token, ephemeral=False, register_timeout_seconds=10)
    with MiniEngine(ROOT) as engine:
        engine.up(program)
        runner = outputs(engine, "runner")
        time.sleep(TOKEN_SECONDS + 0.2)  # every token it could have had has expired now
        sim.runners.crash(NAMESPACE, runner["pod_name"])  # restarted by the kubelet, config.sh fails: a crash loop
        wait_until(lambda: _crash_looping(sim, runner["pod_name"]), "the runner to crash-loop", timeout=15)

        engine.refresh()
        assert outputs(engine, "runner")["pod_phase"] == "CrashLoopBackOff"
        assert [(s.op, s.reasons) for s in engine.preview(program)] == [("replace", ("pod_phase",))]
        engine.up(program)

        again = outputs(engine, "runner")
        assert {r["name"]: r["status"] for r in sim.github.runners()} == {again["runner_name"]: "online"}
        assert sim.kube.pod(NAMESPACE, again["pod_name"])["status"]["phase"] == "Running"


def _retrying(sim: Simulator, pod_name: str) -> bool:
    """The container runs again after a failure (a crash loop's retry, in config.sh)."""
    pod = sim.kube.pod(NAMESPACE, pod_name) or {}
    status = (pod.get("status", {}).get("containerStatuses") or [{}])[0]
    return "running" in status.get("state", {}) and status.get("restartCount", 0) > 0


def test_a_pool_runner_crash_looping_on_an_expired_token_makes_the_pool_unconverged_until_up(short_lived) -> None:
    """Between back-offs the kubelet reports a crash-looping container as running, for as long as its retry's
    config.sh takes: one snapshot of the pod proves nothing. The update's listing is made to land inside a retry
    (config.sh held there until the update has deleted the pod, or has ended): the pool is not called converged
    while its runner stays broken."""
    sim = short_lived
    token = new_token(sim)
    program = token_and_pool(sim, token, replicas=2, ephemeral=False, register_timeout_seconds=10)
    with MiniEngine(ROOT) as engine:
        engine.up(program)
        time.sleep(TOKEN_SECONDS + 0.2)
        sim.runners.crash(NAMESPACE, "pool-1")
        wait_until(lambda: _crash_looping(sim, "pool-1"), "pool-1 to crash-loop", timeout=15)

        engine.refresh()
        phases = {r["name"]: r["pod_phase"] for r in outputs(engine, "pool")["runners"]}
        assert phases == {"pool-0": "Running", "pool-1": "CrashLoopBackOff"}
        assert [s.op for s in engine.preview(program)] == ["update"]
        hold = sim.runners.hold_config(NAMESPACE, "pool-1")
        hold.wait_entered(15)
        assert _retrying(sim, "pool-1")
        broken_pod = sim.kube.pod(NAMESPACE, "pool-1")["metadata"]["uid"]
        broken_id = {r["name"]: r["id"] for r in sim.github.runners()}["pool-1"]
        try:
            engine.up(program)
        finally:
            hold.release()

        assert outputs(engine, "pool")["problems"] == []
        # Restarted: a new pod, registered anew (the broken one's registration, which its stale session kept
        # online, removed); not the same pod between two retries.
        assert sim.kube.pod(NAMESPACE, "pool-1")["metadata"]["uid"] != broken_pod
        online = {r["name"]: r["id"] for r in sim.github.runners() if r["status"] == "online"}
        assert online.keys() == {"pool-0", "pool-1"} and online["pool-1"] != broken_id, online
        assert not _crash_looping(sim, "pool-1")
