"""RunnerPool end to end: SDK dynamic-provider server ⇄ real clients ⇄ loopback doubles, through the engine
stand-in, so the provider sees what a real ``pulumi up`` sends it."""

from __future__ import annotations

import threading

import pytest

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine, ProviderError
from pulumi_actions_runners.github.releases import KNOWN_IMAGE
from pulumi_actions_runners.kube.client import KubeClient
from pulumi_actions_runners.kube.manifests import POOL_LABEL, RunnerSpec, pod_manifest, secret_manifest
from tests.conftest import ROOT, wait_until
from tests.helpers import NAMESPACE, new_token, outputs, owner_id, sha256, up_killed_when
from tests.programs import token_and_pool


def online(sim) -> dict[str, dict]:
    return {r["name"]: r for r in sim.github.runners() if r["status"] == "online"}


class OnlineSampler:
    """The fewest pool runners online at once, sampled every few milliseconds while an update runs."""

    def __init__(self, sim) -> None:
        self._sim, self._stop = sim, threading.Event()
        self.fewest = len(online(sim))
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.fewest = min(self.fewest, len(online(self._sim)))

    def __enter__(self) -> OnlineSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_a_pool_registers_its_runners_and_lists_each_with_id_pod_and_token_hash(sim) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, token))
        pool = outputs(engine, "pool")

        assert pool["problems"] == []
        assert [r["name"] for r in pool["runners"]] == ["pool-0", "pool-1", "pool-2"]
        registered = online(sim)
        for runner in pool["runners"]:
            assert registered[runner["name"]]["id"] == runner["id"]
            assert runner["token_hash"] == sha256(token)
            assert sim.kube.pod(NAMESPACE, runner["pod"])["metadata"]["labels"][POOL_LABEL] == "pool"
        calls = len(sim.github.calls())

        assert {s.op for s in engine.up(token_and_pool(sim, token))} == {"same"}
        assert len(sim.github.calls()) == calls


def test_a_new_token_rotates_the_pool_in_one_update_within_max_unavailable_and_waits_for_a_busy_runner(sim) -> None:
    old_token, new = new_token(sim), new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, old_token, replicas=4, max_unavailable=2))
        before = {r["name"]: r["id"] for r in outputs(engine, "pool")["runners"]}
        sim.github.start_job("pool-1", 1.5)

        preview = engine.preview(token_and_pool(sim, new, replicas=4, max_unavailable=2))
        assert [(s.op, "token_hash" in s.reasons) for s in preview] == [("update", True)]
        with OnlineSampler(sim) as sampler:
            steps = engine.up(token_and_pool(sim, new, replicas=4, max_unavailable=2))

        assert [s.op for s in steps] == ["update"]
        pool = outputs(engine, "pool")
        assert pool["problems"] == []
        assert sorted(r["name"] for r in pool["runners"]) == sorted(before)
        for runner in pool["runners"]:
            assert runner["token_hash"] == sha256(new)
            assert runner["id"] != before[runner["name"]]
            assert online(sim)[runner["name"]]["id"] == runner["id"]
        assert sim.runners.jobs_killed == []
        assert [c for c in sim.github.calls("DELETE") if c["status"] == 422], "the busy runner was asked first"
        assert sampler.fewest >= 2, f"only {sampler.fewest} of 4 runners were online at one point"

        # What the user reads: the busy runner, and one line for the pool, not each runner's routine steps.
        log = "\n".join(engine.provider.stderr_lines)
        assert "runner pool-1 is running a job" in log
        assert "4 rotated, 0 relabelled, 0 restarted, 0 removed, 0 added" in log
        assert "to come online" not in log and "grace period before deleting" not in log


def test_scaling_down_removes_idle_runners_and_never_a_busy_one_then_scaling_up_adds_names(sim) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, token, replicas=3))
        sim.github.start_job("pool-2", 3.0)  # the newest runner: the one removed first were it idle
        calls = len(sim.github.calls("DELETE"))

        engine.up(token_and_pool(sim, token, replicas=2))
        assert [c["status"] for c in sim.github.calls("DELETE")[calls:]] == [204], "one listing said who is busy"
        assert [r["name"] for r in outputs(engine, "pool")["runners"]] == ["pool-0", "pool-2"]
        assert online(sim)["pool-2"]["busy"] is True
        assert sim.kube.pod(NAMESPACE, "pool-1") is None

        engine.up(token_and_pool(sim, token, replicas=4))
        assert [r["name"] for r in outputs(engine, "pool")["runners"]] == ["pool-0", "pool-1", "pool-2", "pool-3"]
        assert set(online(sim)) == {"pool-0", "pool-1", "pool-2", "pool-3"}
        assert sim.runners.jobs_killed == []


def test_a_failure_part_way_leaves_the_state_listing_what_exists_and_the_next_up_converges(sim) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, token, replicas=2))
        sim.kube.fail_next("POST", r"/pods$", 500, count=5)  # the first try and the client's 4 retries

        with pytest.raises(DeploymentFailed, match="did not converge"):
            engine.up(token_and_pool(sim, token, replicas=3))
        pool = outputs(engine, "pool")
        assert [r["name"] for r in pool["runners"]] == ["pool-0", "pool-1"]
        assert "pool-2: not started" in pool["problems"][0]
        assert sim.kube.pod(NAMESPACE, "pool-2") is None and "pool-2" not in online(sim)

        assert [s.op for s in engine.preview(token_and_pool(sim, token, replicas=3))] == ["update"]
        engine.up(token_and_pool(sim, token, replicas=3))
        pool = outputs(engine, "pool")
        assert (pool["problems"], len(pool["runners"])) == ([], 3)
        assert set(online(sim)) == {"pool-0", "pool-1", "pool-2"}


def test_refresh_finds_a_runner_that_ended_after_its_job_and_the_next_up_restarts_it(sim) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, token, replicas=2))
        first_id = online(sim)["pool-0"]["id"]
        sim.github.start_job("pool-0", 0.05)
        wait_until(lambda: sim.kube.pod(NAMESPACE, "pool-0")["status"]["phase"] == "Succeeded", "the job to end")

        engine.refresh()
        assert [r.get("pod_phase") for r in outputs(engine, "pool")["runners"]] == ["Succeeded", "Running"]
        assert [s.op for s in engine.up(token_and_pool(sim, token, replicas=2))] == ["update"]

        assert online(sim)["pool-0"]["id"] != first_id
        assert sim.kube.pod(NAMESPACE, "pool-0")["status"]["phase"] == "Running"


def test_a_refresh_the_api_server_fails_says_its_status_and_message_not_the_clients_dump(sim) -> None:
    """Found by the soak: Read passed the Kubernetes client's exception on as it is, headers and body."""
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, new_token(sim), replicas=1))
        sim.kube.fail_next("GET", rf"/namespaces/{NAMESPACE}/pods$", 500, count=5)  # the first try and 4 retries
        with pytest.raises(ProviderError) as failed:
            engine.refresh()

    last_line = failed.value.details.strip().splitlines()[-1]
    assert last_line.endswith(
        "ProviderCallFailed: ServiceException: Kubernetes answered 500 Internal Server Error: "
        "injected by the simulator: InternalError"
    ), failed.value.details
    assert "HTTP response headers" not in failed.value.details


def test_destroy_takes_down_every_runner_of_the_pool(sim) -> None:
    with MiniEngine(ROOT) as engine:
        token = new_token(sim)
        engine.up(token_and_pool(sim, token, replicas=3))
        # A pod of the pool its state does not list (an update cut short made it), that cannot pull its image.
        stuck = RunnerSpec(
            sim.repo_url, NAMESPACE, "pool-3", (), True, "registry.invalid/actions-runner:2.336.0", sha256(token),
            pool="pool", owner=owner_id(engine, "RunnerPool", "pool"),
        )  # fmt: skip
        with KubeClient(str(sim.kubeconfig)) as kube:
            kube.create_secret(secret_manifest(stuck, token))
            kube.create_pod(pod_manifest(stuck))
        wait_until(lambda: "BackOff" in str(sim.kube.pod(NAMESPACE, "pool-3")["status"]), "pool-3 to be stuck pulling")
        engine.destroy()

    assert sim.kube.pods(NAMESPACE) == []
    assert sim.kube.secrets(NAMESPACE) == []
    assert sim.github.runners() == []


def test_a_just_in_time_pool_rotates_on_a_spec_change_with_one_config_and_one_removal_per_runner(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, None, jit_config=True))
        secret = sim.kube.secret(NAMESPACE, "pool-0-registration")
        assert list(secret["data"]) == ["jitconfig"]
        env = {e["name"]: e for e in sim.kube.pod(NAMESPACE, "pool-0")["spec"]["containers"][0]["env"]}
        assert env["ACTIONS_RUNNER_INPUT_JITCONFIG"]["valueFrom"]["secretKeyRef"] == {
            "name": "pool-0-registration",
            "key": "jitconfig",
        }
        assert "ACTIONS_RUNNER_INPUT_TOKEN" not in env
        calls = len(sim.github.calls())
        newer = token_and_pool(sim, None, jit_config=True, image="ghcr.io/actions/actions-runner:2.330.0")

        assert [(s.op, set(s.reasons)) for s in engine.preview(newer)] == [
            ("update", {"image", "runner_version", "runner_release", "spec_hash", "shape_hash"})
        ]
        engine.up(newer)

        rotation = sim.github.calls()[calls:]
        removals = [c for c in rotation if c["method"] == "DELETE"]
        configs = [c for c in rotation if c["path"].endswith("/generate-jitconfig")]
        assert (len(removals), len(configs)) == (3, 3)
        assert outputs(engine, "pool")["problems"] == []
        assert len(online(sim)) == 3


@pytest.mark.parametrize(
    ("args", "prop"),
    [
        ({"replicas": 2.5}, "replicas"),
        ({"max_unavailable": "0%"}, "max_unavailable"),
        ({"jit_config": True, "ephemeral": False, "token": None}, "ephemeral"),
        ({"jit_config": True}, "registration_token"),
        ({"pool_name": "p" * 58}, "pool_name"),
    ],
)
def test_bad_pool_inputs_fail_check_naming_the_property(sim, args, prop) -> None:
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as failed:
        engine.preview(token_and_pool(sim, **{"token": "A" * 29, **args}))
    (error,) = failed.value.errors
    assert isinstance(error, CheckFailed)
    assert [p for p, _ in error.failures] == [prop]


def test_pods_left_by_an_update_cut_short_are_taken_over_when_made_as_now_specified_and_rotated_if_not(sim) -> None:
    old_token, token = new_token(sim), new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, token, replicas=2))
        owner = owner_id(engine, "RunnerPool", "pool")
        strays = {}
        with KubeClient(str(sim.kubeconfig)) as kube:  # what a provider killed mid-scale-up would have left
            for name, made_with in (("pool-2", token), ("pool-3", old_token)):
                spec = RunnerSpec(
                    sim.repo_url, NAMESPACE, name, (), True, KNOWN_IMAGE, sha256(made_with), pool="pool", owner=owner
                )
                kube.create_secret(secret_manifest(spec, made_with))
                kube.create_pod(pod_manifest(spec))
        for name in ("pool-2", "pool-3"):
            strays[name] = wait_until(lambda n=name: online(sim).get(n), f"the stray runner {name} to register")
        uids = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in sim.kube.pods(NAMESPACE)}

        engine.up(token_and_pool(sim, token, replicas=4))

        pool = outputs(engine, "pool")
        assert [r["name"] for r in pool["runners"]] == ["pool-0", "pool-1", "pool-2", "pool-3"]
        taken_over, rotated = pool["runners"][2], pool["runners"][3]
        assert taken_over["id"] == strays["pool-2"]["id"] and taken_over["token_hash"] == sha256(token)
        assert sim.kube.pod(NAMESPACE, taken_over["pod"])["metadata"]["uid"] == uids[taken_over["pod"]]
        assert rotated["id"] == online(sim)["pool-3"]["id"] != strays["pool-3"]["id"]
        assert sim.kube.pod(NAMESPACE, rotated["pod"])["metadata"]["uid"] != uids[rotated["pod"]]
        assert len(sim.kube.pods(NAMESPACE)) == 4 and sim.runners.jobs_killed == []
        assert not sim.github.calls("DELETE", rf"/runners/{strays['pool-2']['id']}$")


def test_a_rotation_whose_provider_was_killed_half_way_does_not_rotate_again_what_it_had_rotated(sim) -> None:
    """After the kill the state still holds the old hashes of the runners already rotated: taken in as they are
    (their pods were made with the current spec, their registrations are the pool's), not rotated a second time
    with a second just-in-time config and a second runner out of service each."""
    newer_image = "ghcr.io/actions/actions-runner:2.330.0"
    settings = {"jit_config": True, "replicas": 4, "max_unavailable": 1}
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, None, **settings))
        newer = token_and_pool(sim, None, **settings, image=newer_image)

        def new_pods() -> dict[str, str]:
            pods = [p for p in sim.kube.pods(NAMESPACE) if not p["metadata"].get("deletionTimestamp")]
            return {
                p["metadata"]["name"]: p["metadata"]["uid"]
                for p in pods
                if p["spec"]["containers"][0]["image"] == newer_image
            }

        def two_rotated() -> bool:
            return len(set(new_pods()) & set(online(sim))) >= 2

        up_killed_when(engine, newer, two_rotated, "two runners rotated", timeout=60)
        rotated = new_pods()
        assert 2 <= len(rotated) < 4, rotated
        calls = len(sim.github.calls())

        engine.new_provider_process()
        engine.up(newer)

        again = sim.github.calls()[calls:]
        configs = [c for c in again if c["path"].endswith("/generate-jitconfig")]
        assert len(configs) == 4 - len(rotated), "a runner rotated before the kill got a second config"
        assert {name: uid for name, uid in new_pods().items() if name in rotated} == rotated
        pool = outputs(engine, "pool")
        assert pool["problems"] == [] and {r["spec_hash"] for r in pool["runners"]} == {pool["spec_hash"]}
        assert len(online(sim)) == 4 and sim.runners.jobs_killed == []
        assert [s.op for s in engine.preview(newer)] == ["same"]


def test_a_replacement_that_fails_to_start_halts_the_rollout_and_leaves_the_others_running(sim) -> None:
    old_token, new = new_token(sim), new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, old_token, replicas=4, max_unavailable=1))
        before = {r["name"]: r["id"] for r in outputs(engine, "pool")["runners"]}
        sim.kube.fail_next("POST", r"/pods$", 500, count=5)  # the first replacement's pod, all of its tries

        with pytest.raises(DeploymentFailed, match="rollout halted"):
            engine.up(token_and_pool(sim, new, replicas=4, max_unavailable=1))

        pool = outputs(engine, "pool")
        assert len(pool["runners"]) == 3 and {r["token_hash"] for r in pool["runners"]} == {sha256(old_token)}
        assert {r["name"]: r["id"] for r in pool["runners"]}.items() <= before.items()
        assert {name for name, r in online(sim).items()} == {r["name"] for r in pool["runners"]}

        engine.up(token_and_pool(sim, new, replicas=4, max_unavailable=1))
        pool = outputs(engine, "pool")
        assert (pool["problems"], {r["token_hash"] for r in pool["runners"]}) == ([], {sha256(new)})
        assert len(online(sim)) == 4


def test_persistent_runners_are_swept_when_the_pool_turns_just_in_time(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, new_token(sim), replicas=2, ephemeral=False))
        calls = len(sim.github.calls())

        engine.up(token_and_pool(sim, None, replicas=2, jit_config=True))

        switch = sim.github.calls()[calls:]
        first_config = next(i for i, c in enumerate(switch) if c["path"].endswith("/generate-jitconfig"))
        # The sweep asks by name before the runner's start; waiting for a runner to come online may ask by name
        # too (whichever costs fewer calls), but only after a config was made.
        swept = [c["query"]["name"] for c in switch[:first_config] if "name" in c["query"]]
        lookups = {c["query"]["name"] for c in switch if c["method"] == "GET" and "name" in c["query"]}
        assert swept and lookups == {"pool-0", "pool-1"}, "each persistent runner swept as such after its removal"
        assert outputs(engine, "pool")["problems"] == [] and len(online(sim)) == 2


def test_a_just_in_time_pool_larger_than_an_hour_allows_says_how_long_it_takes(caplog, monkeypatch) -> None:
    from pulumi_actions_runners.lifecycle import pool

    monkeypatch.delenv("ACTIONS_RUNNERS_GITHUB_RATE_WINDOW_SECONDS", raising=False)  # GitHub's own minute
    template = RunnerSpec("https://github.com/o/r", NAMESPACE, "", (), True, KNOWN_IMAGE, "jit", jit_config=True)
    spec = pool.PoolSpec("big", template, replicas=600, max_unavailable=600, tokens=None)

    with caplog.at_level("WARNING", logger="pulumi_actions_runners"):
        seconds = pool._jit_configs_seconds(spec, 600)

    assert seconds >= 3600, "100 of the 600 configs wait for the hour's first 500 to age out"
    assert f"600 just-in-time configs take at least {seconds / 60:.0f} min" in caplog.text
    assert pool._jit_configs_seconds(spec, 50) < 60
