"""A refilling RunnerPool end to end, on the real kube-controller-manager's Job controller: slots refilled between
updates with no `pulumi up`, token renewals that recreate only what had not registered, rotations and scale-downs
that never delete a busy runner's pod, failures a refresh reports in words."""

from __future__ import annotations

import contextlib
import time

import pytest
from kubernetes import client

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners.kube.manifests import JOB_LABEL, POOL_LABEL
from pulumi_actions_runners.kube.refill_manifests import JOB_FAILURE_BACKOFF_SECONDS
from tests.conftest import ROOT, quick_simulator, wait_until
from tests.helpers import NAMESPACE, Once, new_token, outputs
from tests.programs import token_and_pool
from tests.test_runner_pool import OnlineSampler


def refilling(sim: Simulator, token: str, **pool_args) -> object:
    return token_and_pool(sim, token, refill=True, **{"replicas": 3, "max_unavailable": 1, **pool_args})


def idle_online(sim: Simulator) -> set[str]:
    return {r["name"] for r in sim.github.runners() if r["status"] == "online" and not r["busy"]}


def online(sim: Simulator) -> dict[str, dict]:
    return {r["name"]: r for r in sim.github.runners() if r["status"] == "online"}


def job_pods(sim: Simulator, job: str) -> list[dict]:
    with sim.kube.api_server.admin_client() as admin:
        pods = client.CoreV1Api(admin).list_namespaced_pod(NAMESPACE, label_selector=f"{JOB_LABEL}={job}").items
        return [p.to_dict() for p in pods]


def failed_pods(sim: Simulator) -> list[dict]:
    return [p for p in job_pods(sim, "pool-j1") if p["status"]["phase"] == "Failed"]


def finished_pods(sim: Simulator) -> list[dict]:
    return [p for p in job_pods(sim, "pool-j1") if p["status"]["phase"] in ("Succeeded", "Failed")]


def jobs(sim: Simulator) -> dict[str, dict]:
    with sim.kube.api_server.admin_client() as admin:
        found = client.BatchV1Api(admin).list_namespaced_job(NAMESPACE, label_selector=f"{POOL_LABEL}=pool").items
        return {j.metadata.name: j.to_dict() for j in found}


def test_a_slot_whose_runner_took_its_job_is_refilled_with_no_update(sim: Simulator) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token))
        pool = outputs(engine, "pool")
        assert pool["problems"] == []
        assert (pool["job"], pool["parallelism"]) == ("pool-j1", 3)
        first = idle_online(sim)
        assert len(first) == 3 and all(name.startswith("pool-j1-") for name in first)
        assert {r["name"] for r in pool["runners"]} == first

        took_a_job = sorted(first)[0]
        sim.github.start_job(took_a_job, 0.3)
        wait_until(lambda: len(idle_online(sim) - first) == 1, "a fresh runner in the slot of the one that took a job")
        assert took_a_job not in online(sim), "an ephemeral runner is gone after its job"
        assert len(idle_online(sim)) == 3

        # Nothing to do: the Job keeps the slots, however its pods came and went.
        assert {s.op for s in engine.up(refilling(sim, token))} == {"same"}

        # Finished pods are deleted once a refresh finds as many as there are slots.
        for name in sorted(idle_online(sim))[:2]:
            sim.github.start_job(name, 0.1)
        wait_until(lambda: len(finished_pods(sim)) == 3, "3 finished pods")
        engine.refresh()
        assert outputs(engine, "pool")["finished_pods"] == 3
        assert [s.op for s in engine.up(refilling(sim, token))] == ["update"]
        assert finished_pods(sim) == [] and len(idle_online(sim)) == 3


def test_a_token_renewal_recreates_no_registered_runner_and_new_pods_read_the_new_token(sim: Simulator) -> None:
    old, new = new_token(sim), new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, old))
        before = {name: runner["id"] for name, runner in online(sim).items()}

        preview = engine.preview(refilling(sim, new))
        assert [(s.op, "token_hash" in s.reasons) for s in preview] == [("update", True)]
        engine.up(refilling(sim, new))
        assert {name: runner["id"] for name, runner in online(sim).items()} == before, "none recreated"
        assert outputs(engine, "pool")["job"] == "pool-j1"
        assert "0 recreated for the token" in "\n".join(engine.provider.stderr_lines)

        # The old token's hour is up: a pod the Job starts from now on registers only if it reads the new one.
        sim.github.expire_token(old)
        sim.github.start_job(sorted(before)[0], 0.2)
        wait_until(lambda: len(idle_online(sim) - set(before)) == 1, "a fresh runner registered with the new token")


def test_a_rotation_drains_the_old_job_within_max_unavailable_and_leaves_a_busy_runner_to_finish(
    sim: Simulator,
) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token, replicas=4))
        old = set(online(sim))
        busy = sorted(old)[0]
        sim.github.start_job(busy, None)
        with OnlineSampler(sim) as sampler:
            engine.up(refilling(sim, token, replicas=4, labels=["gpu"]))

        pool = outputs(engine, "pool")
        assert pool["problems"] == [] and (pool["job"], pool["parallelism"]) == ("pool-j2", 4)
        assert set(jobs(sim)) == {"pool-j2"}, "the old Job is deleted (its pods orphaned, then drained)"
        assert busy in online(sim) and online(sim)[busy]["busy"], "the busy runner runs on"
        assert sim.kube.pod(NAMESPACE, busy) is not None
        assert len([n for n in online(sim) if n.startswith("pool-j2-")]) == 4, "its slot went to the new Job at once"
        assert not (old - {busy}) & set(online(sim)), "every idle runner of the old Job was taken down"
        assert sampler.fewest >= 3, f"only {sampler.fewest} runners were online at one point (max_unavailable 1)"
        assert sim.runners.jobs_killed == []

        sim.github.finish_job(busy)
        wait_until(lambda: busy not in online(sim), "the busy runner to finish its job and go")
        engine.up(refilling(sim, token, replicas=5, labels=["gpu"]))
        assert sim.kube.pod(NAMESPACE, busy) is None, "its finished pod is deleted by the next update"
        assert sim.runners.jobs_killed == []


def test_a_scale_down_never_lets_the_job_controller_pick_a_busy_runner(sim: Simulator) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token, replicas=3))
        busy = sorted(online(sim))[1]
        sim.github.start_job(busy, None)
        engine.up(refilling(sim, token, replicas=2))
        pool = outputs(engine, "pool")
        assert (pool["job"], pool["parallelism"]) == ("pool-j2", 2)
        assert online(sim)[busy]["busy"] and sim.runners.jobs_killed == []
        sim.github.finish_job(busy)
        engine.up(refilling(sim, token, replicas=5))  # a scale-up only raises the Job's parallelism
        assert (outputs(engine, "pool")["job"], outputs(engine, "pool")["parallelism"]) == ("pool-j2", 5)
        assert len(idle_online(sim)) == 5


def test_a_lapsed_token_is_reported_by_refresh_in_words_without_a_crash_loop_and_the_next_update_restores(
    sim: Simulator,
) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token, replicas=2))
        sim.github.expire_token(token)
        for name in sorted(online(sim)):
            sim.github.start_job(name, 0.1)
        wait_until(lambda: not online(sim), "both runners to take their job and go")
        wait_until(lambda: len(failed_pods(sim)) >= 2, "the Job's next pods to fail to register")
        made = len(job_pods(sim, "pool-j1"))
        engine.refresh()
        problems = outputs(engine, "pool")["problems"]
        assert any("the registration token has expired or was used up" in p for p in problems), problems
        time.sleep(3)
        assert len(job_pods(sim, "pool-j1")) <= made + 2, "the Job controller backs off: no crash loop"

        steps = engine.up(refilling(sim, new_token(sim), replicas=2))
        assert [s.op for s in steps] == ["update"]
        pool = outputs(engine, "pool")
        assert pool["problems"] == [] and pool["job"] == "pool-j2"
        assert len(idle_online(sim)) == 2


def test_an_image_that_cannot_be_pulled_is_reported_with_its_reason_and_a_fixed_image_restores(sim: Simulator) -> None:
    token = new_token(sim)
    bad = {"image": "registry.invalid/actions-runner:2.336.0", "register_timeout_seconds": 2}
    with MiniEngine(ROOT) as engine:
        with pytest.raises(DeploymentFailed) as failed:
            engine.up(refilling(sim, token, **bad))
        assert "0 of 3 runners online" in str(failed.value) and "could not be pulled" in str(failed.value)
        engine.refresh()
        problems = outputs(engine, "pool")["problems"]
        assert any("registry.invalid" in p and "could not be pulled" in p for p in problems), problems

        engine.up(refilling(sim, token))
        assert outputs(engine, "pool")["problems"] == [] and len(idle_online(sim)) == 3


def test_a_pod_never_scheduled_is_reported_by_refresh_and_recreated_by_the_next_update(sim: Simulator) -> None:
    token = new_token(sim)
    quick = {"register_timeout_seconds": 12}
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token, **quick))
        sim.kube.leave_unscheduled(1)
        sim.github.start_job(sorted(online(sim))[0], 0.1)
        wait_until(lambda: any(p["status"]["phase"] == "Pending" for p in job_pods(sim, "pool-j1")), "a Pending pod")
        time.sleep(12.5)  # longer than register_timeout_seconds
        engine.refresh()
        problems = outputs(engine, "pool")["problems"]
        assert any("has not started after 12 s" in p for p in problems), problems
        engine.up(refilling(sim, token, **quick))
        assert outputs(engine, "pool")["problems"] == [] and len(idle_online(sim)) == 3


def test_a_pool_turns_refilling_in_a_previewed_rotation_that_waits_for_no_busy_runner(sim: Simulator) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, token, replicas=3, max_unavailable=1))
        sim.github.start_job("pool-1", None)
        preview = engine.preview(refilling(sim, token))
        assert [(s.op, s.reasons) for s in preview] == [("update", ("refill",))]
        engine.up(refilling(sim, token))
        assert online(sim)["pool-1"]["busy"] and sim.kube.pod(NAMESPACE, "pool-1") is not None
        assert {n for n in idle_online(sim)} == {n for n in idle_online(sim) if n.startswith("pool-j1-")}
        assert len(idle_online(sim)) == 3 and sim.runners.jobs_killed == []
        sim.github.finish_job("pool-1")
        assert {s.op for s in engine.up(refilling(sim, token))} == {"same"}


def test_a_pool_stops_refilling_its_job_deleted_first_and_a_busy_runner_left_to_finish(sim: Simulator) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token))
        busy = sorted(online(sim))[0]
        sim.github.start_job(busy, None)
        engine.up(token_and_pool(sim, token, replicas=3, max_unavailable=1))
        assert jobs(sim) == {} and outputs(engine, "pool").get("job") is None
        assert {"pool-0", "pool-1", "pool-2"} <= set(idle_online(sim))
        assert online(sim)[busy]["busy"] and sim.runners.jobs_killed == []

        sim.github.finish_job(busy)
        wait_until(lambda: finished_pods(sim), "the busy runner's pod to finish")
        engine.destroy()
        with sim.kube.api_server.admin_client() as admin:
            pods = client.CoreV1Api(admin).list_namespaced_pod(NAMESPACE, label_selector=f"{POOL_LABEL}=pool")
            assert pods.items == [], "nothing of the pool is left, the Job's finished pod included"


def test_a_killed_runner_s_registration_is_reported_by_refresh_and_removed_by_the_next_update(sim: Simulator) -> None:
    """A container killed whole (OOM) fails its pod, and the Job controller starts another; the dead runner's
    registration stays (its session, then offline) until an update removes it."""
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token))
        victim = sorted(online(sim))[0]
        dead_id = online(sim)[victim]["id"]
        assert sim.runners.crash(NAMESPACE, victim, idle_only=True)
        # A killed container fails its pod: the Job controller holds its successor back for its first back-off.
        wait_until(
            lambda: len(idle_online(sim) - {victim}) == 3,
            "a fresh runner in the killed one's slot",
            timeout=JOB_FAILURE_BACKOFF_SECONDS + 10,
        )
        assert any(r["id"] == dead_id for r in sim.github.runners()), "the dead runner's registration stays"

        engine.refresh()
        problems = outputs(engine, "pool")["problems"]
        assert any(f"runner {victim} (id {dead_id}" in p for p in problems), problems
        assert [s.op for s in engine.up(refilling(sim, token))] == ["update"]
        assert all(r["id"] != dead_id for r in sim.github.runners())
        assert outputs(engine, "pool")["problems"] == []


def test_a_stack_of_the_same_name_elsewhere_keeps_its_runners_whose_ownership_label_is_the_same(
    sim: Simulator,
) -> None:
    """The ownership label is the resource's (project, stack, name): a stack of the same names deployed from
    another backend to another namespace carries the same one. A refilling pool removes only registrations of
    its own pods."""
    token = new_token(sim)
    with sim.kube.api_server.admin_client() as admin:
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": "elsewhere"}})
    with MiniEngine(ROOT) as here, MiniEngine(ROOT) as elsewhere:
        elsewhere.up(token_and_pool(sim, token, namespace="elsewhere"))
        theirs = {name: runner["id"] for name, runner in online(sim).items()}
        here.up(refilling(sim, token))
        sim.github.start_job(sorted(n for n in idle_online(sim) if n.startswith("pool-j1-"))[0], 0.1)
        wait_until(lambda: finished_pods(sim), "a finished pod")
        here.up(refilling(sim, token, replicas=4))  # an update, with its clean-up
        assert {name: online(sim)[name]["id"] for name in theirs} == theirs


def test_destroy_deletes_the_job_first_and_takes_every_runner_down(sim: Simulator) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token))
        engine.destroy()
        assert jobs(sim) == {}
        assert job_pods(sim, "pool-j1") == []
        assert online(sim) == {}
        with sim.kube.api_server.admin_client() as admin:
            secrets = client.CoreV1Api(admin).list_namespaced_secret(NAMESPACE, label_selector=f"{POOL_LABEL}=pool")
            assert secrets.items == []


@pytest.mark.parametrize(
    ("args", "prop"),
    [
        ({"jit_config": True, "token": None}, "refill"),
        ({"ephemeral": False}, "ephemeral"),
        ({"refill": "yes"}, "refill"),
    ],
)
def test_a_refill_pool_is_refused_with_jit_or_persistent_runners(sim: Simulator, args: dict, prop: str) -> None:
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as failed:
        engine.preview(token_and_pool(sim, **{"token": "A" * 29, "refill": True, **args}))
    (error,) = failed.value.errors
    assert isinstance(error, CheckFailed)
    assert [p for p, _ in error.failures] == [prop]


def looked_up_by_name(sim: Simulator, runner: str) -> bool:
    """Whether the provider has asked GitHub for the runner's registration by name."""
    return any(c["query"].get("name") == runner for c in sim.github.calls("GET", r"/actions/runners$"))


def test_a_token_renewal_never_kills_a_job_taken_by_a_pod_that_registers_while_it_is_torn_down(
    kube_api_server: KubeApiServer,
) -> None:
    """At half actions/runner's own speeds (config.sh 4 s, then 2 s to a session), the Job's newest pod is still in
    config.sh when the update lists the pool (held there until the update has looked its runner up by name and
    found none). Its runner registers with the old, still valid token, and GitHub offers it a job as it comes
    online. Nothing is decided on the strength of that first look: the pod is deleted at once after a second look
    just before it, so it never listens, and the registration its config.sh leaves is removed. (Before: the grace
    period was spent blind after the first look, the runner took the job meanwhile, and the deletion killed it.)"""
    with quick_simulator(kube_api_server, runner_speedup=0.5) as sim:
        old, new = new_token(sim), new_token(sim)
        with MiniEngine(ROOT) as engine:
            engine.up(refilling(sim, old, replicas=2, grace_period_seconds=12))
            first = set(online(sim))
            hold = sim.runners.hold_config(NAMESPACE, "pool-j1-")
            sim.github.start_job(sorted(first)[0], 0.1)  # its runner ends; the Job starts a pod in its slot
            registering = hold.wait_entered(30)

            def offer_a_job() -> None:  # GitHub's queue, as it meets a runner the moment it listens
                with contextlib.suppress(LookupError):  # gone or taken meanwhile
                    sim.github.start_job(registering, 60)

            with (
                Once(lambda: registering in idle_online(sim), offer_a_job) as offer,
                Once(lambda: looked_up_by_name(sim, registering), hold.release),
            ):
                try:
                    engine.up(refilling(sim, new, replicas=2, grace_period_seconds=12))
                finally:
                    hold.release()

            assert sim.runners.jobs_killed == [], f"a job was offered to it: {offer.done}"
            assert "1 recreated for the token" in "\n".join(engine.provider.stderr_lines)
            assert registering not in {r["name"] for r in sim.github.runners()}, "its registration was removed"
            wait_until(lambda: sim.kube.pod(NAMESPACE, registering) is None, "the recreated pod to be gone")
            assert len(idle_online(sim)) == 2 and outputs(engine, "pool")["problems"] == []


def _stuck_reason(sim: Simulator) -> set[str]:
    reasons = set()
    for pod in job_pods(sim, "pool-j1"):
        for status in (pod["status"].get("init_container_statuses") or []) + (
            pod["status"].get("container_statuses") or []
        ):
            if status["state"].get("waiting"):
                reasons.add(status["state"]["waiting"]["reason"])
    return reasons


STUCK = {
    "ImagePullBackOff": {"image": "registry.invalid/actions-runner:2.336.0"},
    # The API server takes any image; the kubelet cannot parse this one (a user's init container, say).
    "InvalidImageName": {
        "pod_template": {"spec": {"initContainers": [{"name": "setup", "image": "ghcr.io/Acme/Setup:1"}]}}
    },
}


@pytest.mark.parametrize("reason", sorted(STUCK))
def test_destroy_leaves_nothing_of_a_pool_whose_pods_are_stuck(sim: Simulator, reason: str) -> None:
    """Pods that will never run (their image cannot be pulled or parsed) are neither live nor finished: once the
    Job is deleted, nothing owns them, and a destroy must take them down too."""
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        with pytest.raises(DeploymentFailed):
            engine.up(refilling(sim, token, replicas=2, register_timeout_seconds=2, **STUCK[reason]))
        assert reason in _stuck_reason(sim), _stuck_reason(sim)
        engine.destroy()
    assert jobs(sim) == {} and job_pods(sim, "pool-j1") == []
    assert sim.kube.secrets(NAMESPACE) == [] and sim.github.runners() == []


def test_a_pool_that_stops_refilling_leaves_none_of_its_jobs_stuck_pods(sim: Simulator) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        with pytest.raises(DeploymentFailed):
            engine.up(refilling(sim, token, replicas=2, register_timeout_seconds=2, **STUCK["ImagePullBackOff"]))
        wait_until(lambda: "ImagePullBackOff" in _stuck_reason(sim), "the Job's pods to be stuck pulling")
        engine.up(token_and_pool(sim, token, replicas=2))
        assert jobs(sim) == {} and job_pods(sim, "pool-j1") == []
        assert set(idle_online(sim)) == {"pool-0", "pool-1"}


def test_pods_the_provider_deletes_are_no_failures_of_the_job(sim: Simulator) -> None:
    """The Job controller counts a pod deleted with its tracking finalizer as failed, and holds the next pods
    back (10 s, doubling) for each: recreating the Job's pods for a new token, twice, would push its refills past
    a minute. Released from the Job before its deletion, a pod counts as nothing."""
    with MiniEngine(ROOT) as engine:
        hold = sim.runners.hold_config(NAMESPACE, "pool-j1-", count=9)  # every pod the Job starts till released
        with pytest.raises(DeploymentFailed):
            engine.up(refilling(sim, new_token(sim), register_timeout_seconds=1))
        for _ in range(2):  # each up recreates the three pods still in config.sh
            with pytest.raises(DeploymentFailed):
                engine.up(refilling(sim, new_token(sim), register_timeout_seconds=1))
        hold.release()
        # A pod with the tracking finalizer is gone only once the controller has counted it (uncounted first).
        wait_until(
            lambda: not any(p["metadata"]["deletion_timestamp"] for p in job_pods(sim, "pool-j1")),
            "the deleted pods to be gone",
        )
        status = jobs(sim)["pool-j1"]["status"]
        uncounted = (status.get("uncounted_terminated_pods") or {}).get("failed") or []
        assert (status.get("failed") or 0) + len(uncounted) == 0, status
        engine.up(refilling(sim, new_token(sim)))
        assert len(idle_online(sim)) == 3


def test_a_pool_that_stops_refilling_and_then_fails_records_that_its_jobs_are_gone(sim: Simulator) -> None:
    """The switch retires the Jobs first; a failure after that (a name another runner holds) is no longer a
    failure before anything was touched: the state records the pool as it now is, and says what happened."""
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(refilling(sim, token, replicas=2))
        sim.github.register_runner(
            github_url=sim.repo_url, token=new_token(sim), name="pool-0", labels=["someone-else"], ephemeral=False
        )
        with pytest.raises(DeploymentFailed):
            engine.up(token_and_pool(sim, token, replicas=2))
        pool = outputs(engine, "pool")
        assert jobs(sim) == {} and not pool.get("refill") and pool.get("job") is None
        assert any("Jobs were retired" in p and "already registered" in p for p in pool["problems"]), pool["problems"]
        assert [s.op for s in engine.preview(token_and_pool(sim, token, replicas=2))] == ["update"]
