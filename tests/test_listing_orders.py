"""GitHub documents no order for its runner listings, whose last pages the provider's waits read. Among other
teams' runners (three pages of them), registrations, busy waits and name checks hold whatever the order."""

from __future__ import annotations

import threading

import pytest

from actions_runners_simulator.engine import DeploymentFailed, MiniEngine
from tests.conftest import LISTED_IN_EVERY_ORDER, ROOT, wait_until
from tests.helpers import new_token, outputs
from tests.programs import runner_with_token, token_and_pool

OTHER_TEAM = 250


def release_once_refused(sim, name: str, runner_id: int) -> threading.Thread:
    """Ends the job of runner ``name`` a little after RemoveRunner was first refused for it: no race."""

    def release() -> None:
        wait_until(
            lambda: [c for c in sim.github.calls("DELETE", rf"/runners/{runner_id}$") if c["status"] == 422],
            f"RemoveRunner to refuse busy {name}",
            timeout=60,
        )
        threading.Event().wait(3.0)  # long enough for a wait that asks RemoveRunner twice a second to show
        sim.github.finish_job(name)

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def removals_of(sim, runner_id: int) -> list[int]:
    return [c["status"] for c in sim.github.calls("DELETE", rf"/runners/{runner_id}$")]


@LISTED_IN_EVERY_ORDER
def test_a_pool_among_other_teams_registers_rotates_and_waits_for_its_busy_runner(sim) -> None:
    sim.register_other_team(OTHER_TEAM)
    settings = {"replicas": 4, "max_unavailable": 2, "unregister_timeout_seconds": 90}
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, new_token(sim), **settings))
        busy = int(next(r["id"] for r in outputs(engine, "pool")["runners"] if r["name"] == "pool-1"))
        sim.github.start_job("pool-1", None)
        releaser = release_once_refused(sim, "pool-1", busy)

        engine.up(token_and_pool(sim, new_token(sim), **settings))
        releaser.join()

        pool = outputs(engine, "pool")
        assert pool["problems"] == [] and len(pool["runners"]) == 4
        online = {r["name"]: r["id"] for r in sim.github.runners() if r["status"] == "online"}
        assert all(online[r["name"]] == r["id"] for r in pool["runners"])
        assert removals_of(sim, busy)[0] == 422
        assert len(removals_of(sim, busy)) <= 3, "RemoveRunner was asked again and again while busy"
        assert sim.runners.jobs_killed == []


@LISTED_IN_EVERY_ORDER
def test_a_runner_among_other_teams_is_seen_online_and_its_busy_registration_waited_for(sim) -> None:
    sim.register_other_team(OTHER_TEAM)
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, new_token(sim), ephemeral=False))
        old = outputs(engine, "runner")
        sim.github.start_job(old["runner_name"], None)
        releaser = release_once_refused(sim, old["runner_name"], int(old["runner_id"]))

        engine.up(runner_with_token(sim, new_token(sim), ephemeral=False))
        releaser.join()

        assert removals_of(sim, int(old["runner_id"])) in ([422, 204], [422, 422, 204])
        assert sim.runners.jobs_killed == []


@LISTED_IN_EVERY_ORDER
def test_a_new_pool_among_other_teams_finds_a_name_another_team_holds(sim) -> None:
    """A name may be declared free only by a lookup that cannot skip it, whatever the listing's order."""
    sim.register_other_team(OTHER_TEAM)
    sim.register_other_team(1, prefix="pool")  # "pool-0", another team's
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as failed:
        engine.up(token_and_pool(sim, new_token(sim), replicas=6))
    assert "pool-0 (GitHub id" in str(failed.value) and "already registered" in str(failed.value)
    assert [r["name"] for r in sim.github.runners() if r["name"].startswith("pool-")] == ["pool-0"]
