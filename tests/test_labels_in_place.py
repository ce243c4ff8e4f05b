"""A change of labels alone is an update: GitHub relabels each registered runner (PUT .../labels), its pod and
any job stay, and a token runner's Secret carries the new labels for a container that restarts; a runner GitHub
will not relabel is replaced instead, the safe way, and the update says so."""

from __future__ import annotations

import base64

from actions_runners_simulator.engine import MiniEngine
from tests.conftest import ROOT, wait_until
from tests.helpers import NAMESPACE, new_token, outputs
from tests.programs import jit_runner, token_and_pool, token_and_runners

SPEC_HASH = "actions-runners.pulumi.io/spec-hash"


def custom_labels(sim, runner_id: int) -> list[str]:
    runner = next(r for r in sim.github.runners() if r["id"] == runner_id)
    return [label["name"] for label in runner["labels"] if label["type"] == "custom" and "owner" not in label["name"]]


def runs_on_labels(sim, runner_id: int) -> set[str]:
    """Every label a workflow's ``runs-on`` can match, read-only ones too (not the ownership label)."""
    runner = next(r for r in sim.github.runners() if r["id"] == runner_id)
    return {label["name"] for label in runner["labels"] if "owner" not in label["name"]}


def pod_uids(sim) -> dict[str, str]:
    return {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in sim.kube.pods(NAMESPACE)}


def test_a_persistent_runner_is_relabelled_in_place_and_keeps_its_labels_across_a_container_restart(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_runners(sim, 1, labels=["linux"], ephemeral=False))
        before = outputs(engine, "runner-0")
        uids = pod_uids(sim)
        old_hash = sim.kube.pod(NAMESPACE, before["pod_name"])["metadata"]["annotations"][SPEC_HASH]
        sim.github.start_job(before["runner_name"], None)  # busy: relabelling takes nothing out of service

        steps = {s.name: s for s in engine.preview(token_and_runners(sim, 1, labels=["gpu", "linux"], ephemeral=False))}
        assert (steps["runner-0"].op, steps["runner-0"].reasons) == ("update", ("labels",))
        engine.up(token_and_runners(sim, 1, labels=["gpu", "linux"], ephemeral=False))

        after = outputs(engine, "runner-0")
        assert after["labels_updated"] == "in place" and after["runner_id"] == before["runner_id"]
        assert pod_uids(sim) == uids and sim.github.calls("DELETE") == []
        assert custom_labels(sim, int(after["runner_id"])) == ["gpu", "linux"]
        secret = sim.kube.secret(NAMESPACE, after["secret_name"])
        assert base64.b64decode(secret["data"]["labels"]).decode().startswith("gpu,linux,")
        assert sim.kube.pod(NAMESPACE, after["pod_name"])["metadata"]["annotations"][SPEC_HASH] != old_hash
        sim.github.finish_job(before["runner_name"])
        assert sim.runners.jobs_killed == []

        # The container restarts (killed for memory, say) and registers again: with the labels of its Secret.
        sim.runners.crash(NAMESPACE, after["pod_name"])
        wait_until(
            lambda: (
                any(r["status"] == "online" and r["id"] == int(after["runner_id"]) for r in sim.github.runners())
                and sim.kube.pod(NAMESPACE, after["pod_name"])["status"]["containerStatuses"][0]["restartCount"] == 1
            ),
            "the runner to register again",
        )
        assert custom_labels(sim, int(after["runner_id"])) == ["gpu", "linux"]
        assert [s.op for s in engine.preview(token_and_runners(sim, 1, labels=["gpu", "linux"], ephemeral=False))] == [
            "same",
            "same",
        ]
        engine.destroy()


def test_a_pool_is_relabelled_in_one_update_with_no_runner_out_of_service(sim) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, token, labels=["linux"]))
        uids = pod_uids(sim)
        steps = {s.name: s for s in engine.preview(token_and_pool(sim, token, labels=["large", "linux"]))}
        # The pool's Check records the hashes it judges runners by: a relabel changes spec_hash, not shape_hash.
        assert (steps["pool"].op, set(steps["pool"].reasons)) == ("update", {"labels", "spec_hash"})

        engine.up(token_and_pool(sim, token, labels=["large", "linux"]))
        pool = outputs(engine, "pool")
        assert pool["problems"] == [] and {r["spec_hash"] for r in pool["runners"]} == {pool["spec_hash"]}
        assert pod_uids(sim) == uids and sim.github.calls("DELETE") == []
        assert {tuple(custom_labels(sim, int(r["id"]))) for r in pool["runners"]} == {("large", "linux")}
        annotations = {p["metadata"]["annotations"][SPEC_HASH] for p in sim.kube.pods(NAMESPACE)}
        assert annotations == {pool["spec_hash"]}
        assert [s.op for s in engine.preview(token_and_pool(sim, token, labels=["large", "linux"]))] == ["same"]
        engine.destroy()


def test_a_runner_github_will_not_relabel_is_replaced_and_the_update_says_so(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(jit_runner(sim, labels=["linux"]))
        before = outputs(engine, "runner")
        uids = pod_uids(sim)
        sim.github.fail_next(422, method="PUT", path_regex=r"/labels$")
        engine.up(jit_runner(sim, labels=["gpu"]))

        after = outputs(engine, "runner")
        assert after["labels_updated"] == "by replacement: GitHub refused to relabel it"
        assert after["runner_id"] != before["runner_id"] and pod_uids(sim) != uids
        assert runs_on_labels(sim, int(after["runner_id"])) == {"self-hosted", "gpu"}
        assert [r["id"] for r in sim.github.runners()] == [after["runner_id"]]

        # Without the refusal, a just-in-time runner is relabelled in place too.
        engine.up(jit_runner(sim, labels=["gpu", "large"]))
        assert outputs(engine, "runner")["labels_updated"] == "in place"
        assert runs_on_labels(sim, int(after["runner_id"])) == {"self-hosted", "gpu", "large"}
        engine.destroy()


def test_a_just_in_time_pool_relabelled_in_place_keeps_self_hosted_so_runs_on_still_matches(sim) -> None:
    """A just-in-time runner's labels are all custom (GitHub adds no defaults for it), and the labels PUT replaces
    every custom label: relabelled with the user's labels alone, ``runs-on: [self-hosted, linux]`` stops matching."""
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, None, jit_config=True, labels=["linux"], replicas=2))
        runners = outputs(engine, "pool")["runners"]
        assert {frozenset(runs_on_labels(sim, int(r["id"]))) for r in runners} == {frozenset({"self-hosted", "linux"})}
        uids = pod_uids(sim)

        engine.up(token_and_pool(sim, None, jit_config=True, labels=["gpu", "linux"], replicas=2))

        pool = outputs(engine, "pool")
        assert pool["problems"] == [] and pod_uids(sim) == uids and sim.github.calls("DELETE") == []
        expected = frozenset({"self-hosted", "gpu", "linux"})
        assert {frozenset(runs_on_labels(sim, int(r["id"]))) for r in pool["runners"]} == {expected}
        engine.destroy()
