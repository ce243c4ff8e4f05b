"""The Runner resource end to end: SDK dynamic-provider server ⇄ real clients ⇄ loopback doubles.

Every scenario runs a program through the engine stand-in (Check, Diff, then create/update/replace/delete as
the engine decides), so the provider sees exactly what a real ``pulumi up`` would send it.
"""

from __future__ import annotations

import base64
import json

import pytest

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine
from pulumi_actions_runners.github.client import GitHubClient
from pulumi_actions_runners.github.url import parse_github_url
from tests.conftest import ROOT, wait_until
from tests.helpers import NAMESPACE, core_api, events_for, new_token, outputs, owner_label, secret_token, sha256
from tests.programs import credentials_from_environment, jit_runner, runner_with_token, token_and_runners


def test_up_creates_runners_registered_with_github_whose_pods_read_the_token_from_a_secret(sim, engine) -> None:
    steps = engine.up()

    assert sorted((s.op, s.name) for s in steps) == [
        ("create", "registration"),
        ("create", "runner-0"),
        ("create", "runner-1"),
    ]
    registered = {r["name"]: r for r in sim.github.runners()}
    token = outputs(engine, "registration")
    for name in ("runner-0", "runner-1"):
        out = outputs(engine, name)
        assert registered[out["runner_name"]]["id"] == out["runner_id"]
        assert registered[out["runner_name"]]["status"] == "online"
        assert out["token_hash"] == token["token_hash"] == sha256(secret_token(sim, out["secret_name"]))
        pod = sim.kube.pod(NAMESPACE, out["pod_name"])
        assert pod["status"]["phase"] == "Running"
        assert pod["spec"]["restartPolicy"] == "Never"
        container = pod["spec"]["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        # The runner image's own convention: config.sh reads its arguments from the environment, so the token
        # is on no command line.
        assert env["ACTIONS_RUNNER_INPUT_TOKEN"] == {
            "name": "ACTIONS_RUNNER_INPUT_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": out["secret_name"], "key": "token"}},
        }
        assert "--token" not in " ".join(container["command"])
        assert env["ACTIONS_RUNNER_INPUT_NAME"]["value"] == out["runner_name"]
        # The labels come from the Secret too: an update may change them without a new pod (see relabel.py).
        assert env["ACTIONS_RUNNER_INPUT_LABELS"]["valueFrom"]["secretKeyRef"]["key"] == "labels"
        labels = base64.b64decode(sim.kube.secret(NAMESPACE, out["secret_name"])["data"]["labels"]).decode()
        assert labels == f"pulumi,pulumi-owner-{out['owner']}"
        assert env["ACTIONS_RUNNER_INPUT_EPHEMERAL"]["value"] == "true"
        assert env["ACTIONS_RUNNER_INPUT_URL"]["value"] == sim.repo_url
        assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
        custom = [label["name"] for label in registered[out["runner_name"]]["labels"] if label["type"] == "custom"]
        assert custom == ["pulumi", f"pulumi-owner-{out['owner']}"]


def test_an_ordinary_up_changes_nothing(sim, engine) -> None:
    engine.up()
    calls = len(sim.github.calls())

    steps = engine.up()

    assert {s.op for s in steps} == {"same"}
    assert len(sim.github.calls()) == calls


def test_preview_after_a_token_rotation_shows_pending_replacements_and_changes_nothing(sim, engine) -> None:
    engine.up()
    github_calls, kube_requests = len(sim.github.calls()), len(sim.kube.requests())
    pods_before = sim.kube.pods(NAMESPACE)

    engine.config["tokenRefreshBeforeSeconds"] = "3000"  # the 2000 s token is now inside its refresh window
    steps = {s.name: s for s in engine.preview()}

    assert (steps["registration"].op, steps["registration"].reasons) == ("replace", ("expires_at",))
    for name in ("runner-0", "runner-1"):
        assert steps[name].op == "replace"
        assert steps[name].reasons[0] == "token_hash"
    assert len(sim.github.calls()) == github_calls
    assert len(sim.kube.requests()) == kube_requests
    assert sim.kube.pods(NAMESPACE) == pods_before


@pytest.mark.parametrize(
    ("ephemeral", "final_answer"),
    [(False, 204), (True, 404)],  # GitHub itself removes an ephemeral runner once its one job is done
)
def test_replacing_a_busy_runner_waits_for_its_job_then_the_grace_period(sim, ephemeral, final_answer) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, new_token(sim), grace_period_seconds=1, ephemeral=ephemeral))
        old = outputs(engine, "runner")
        sim.github.start_job(old["runner_name"], 2.0)
        new = new_token(sim)

        steps = engine.up(runner_with_token(sim, new, grace_period_seconds=1, ephemeral=ephemeral))

    assert [(s.op, s.reasons) for s in steps] == [("replace", ("token_hash",))]
    removals = [c for c in sim.github.calls("DELETE") if c["path"].endswith(f"/{int(old['runner_id'])}")]
    assert [c["status"] for c in removals[:-1]] == [422] * (len(removals) - 1) and len(removals) >= 2
    assert removals[-1]["status"] == final_answer
    unregistered_at = removals[-1]["at"]
    first_busy_at = removals[0]["at"]
    pod_events = events_for(sim, old["pod_name"], "pod_terminating", "pod_removed")
    assert pod_events, "the old pod was never deleted"
    # The grace follows a removal that succeeded; GitHub's own removal of an ephemeral runner after its job (404)
    # leaves nothing to be graceful to, and nothing is waited blind.
    grace = 1.0 if final_answer == 204 else 0.0
    assert all(e["at"] >= unregistered_at + grace for e in pod_events), "pod touched before the job (+ grace) ended"
    assert unregistered_at - first_busy_at >= 1.5, "RemoveRunner succeeded before the job could have ended"
    assert sim.runners.jobs_killed == []
    current = outputs(engine, "runner")
    assert current["token_hash"] == sha256(new) != old["token_hash"]
    assert secret_token(sim, current["secret_name"]) == new
    registered = {r["name"]: r for r in sim.github.runners()}
    assert registered[current["runner_name"]]["id"] == current["runner_id"] != old["runner_id"]
    assert registered[current["runner_name"]]["status"] == "online"


def test_a_runner_busy_past_the_timeout_fails_cleanly_and_the_next_up_converges(sim) -> None:
    first, second = new_token(sim), new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, first, unregister_timeout_seconds=1))
        old = outputs(engine, "runner")
        sim.github.start_job(old["runner_name"], 3.0)

        with pytest.raises(DeploymentFailed, match=r"still running a job after 1 s"):
            engine.up(runner_with_token(sim, second, unregister_timeout_seconds=1))

        assert outputs(engine, "runner") == old, "the resource must stay in state as it was"
        pod = sim.kube.pod(NAMESPACE, old["pod_name"])
        assert pod["status"]["phase"] == "Running" and "deletionTimestamp" not in pod["metadata"]
        assert sim.runners.jobs_killed == []

        wait_until(lambda: not any(r["busy"] for r in sim.github.runners()), "the job to finish")
        steps = engine.up(runner_with_token(sim, second, unregister_timeout_seconds=1))
        assert [s.op for s in steps] == ["replace"]
        assert outputs(engine, "runner")["token_hash"] == sha256(second)
    assert sim.runners.jobs_killed == []


def test_github_and_kubernetes_faults_are_retried(sim) -> None:
    sim.github.fail_next(502, count=2, path_regex=r"registration-token$")
    sim.github.fail_next(429, count=1, path_regex=r"/actions/runners$", retry_after=1)
    sim.github.fail_next(403, count=1, method="DELETE", rate_limit_reset_in=1)
    sim.kube.fail_next("POST", r"/pods$", 503)

    with MiniEngine(ROOT) as engine:
        engine.up(token_and_runners(sim))
        engine.destroy()

    token_calls = [c["status"] for c in sim.github.calls("POST", r"registration-token$")]
    assert token_calls == [502, 502, 201]
    assert sim.github.calls("GET", r"/actions/runners$")[0]["status"] == 429
    deletes = sim.github.calls("DELETE")
    assert [c["status"] for c in deletes] == [403, 204]
    assert deletes[1]["at"] - deletes[0]["at"] >= 0.9, "the primary rate limit's reset was not waited for"
    assert ("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", 503) in sim.kube.requests()
    assert sim.kube.pods(NAMESPACE) == [] and sim.github.runners() == []


def test_refresh_marks_runners_whose_pod_is_gone_or_finished_and_up_recreates_them(sim) -> None:
    with MiniEngine(ROOT) as engine:
        program = token_and_runners(sim, count=2)
        engine.up(program)
        gone, finished = outputs(engine, "runner-0"), outputs(engine, "runner-1")
        core_api(sim).delete_namespaced_pod(gone["pod_name"], NAMESPACE, grace_period_seconds=0)
        sim.github.start_job(finished["runner_name"], 0.1)  # an ephemeral runner takes one job and exits
        wait_until(
            lambda: (sim.kube.pod(NAMESPACE, finished["pod_name"]) or {}).get("status", {}).get("phase") == "Succeeded",
            "the ephemeral runner's pod to complete",
        )

        engine.refresh()
        # Kept in state (so that a destroy still takes down their Secrets), marked for the next up.
        assert outputs(engine, "runner-0")["pod_phase"] == "Gone"
        assert outputs(engine, "runner-1")["pod_phase"] == "Succeeded"
        preview = {s.name: (s.op, s.reasons) for s in engine.preview(program)}
        assert preview["runner-0"] == preview["runner-1"] == ("replace", ("pod_phase",))

        steps = {s.name: s.op for s in engine.up(program)}
        assert steps == {"registration": "same", "runner-0": "replace", "runner-1": "replace"}
        online = {r["name"] for r in sim.github.runners() if r["status"] == "online"}
        assert {outputs(engine, "runner-0")["runner_name"], outputs(engine, "runner-1")["runner_name"]} <= online
        assert sim.kube.pod(NAMESPACE, finished["pod_name"])["status"]["phase"] == "Running"


def test_a_runner_dropped_out_of_the_program_after_its_pod_ended_leaves_no_secret(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_runners(sim, count=1))
        out = outputs(engine, "runner-0")
        core_api(sim).delete_namespaced_pod(out["pod_name"], NAMESPACE, grace_period_seconds=0)
        engine.refresh()

        engine.up(token_and_runners(sim, count=0))

    assert sim.kube.secrets(NAMESPACE) == []
    assert sim.github.runners() == []


def test_refresh_reports_the_runner_and_pod_as_they_are(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_runners(sim))
        before = outputs(engine, "runner-0")
        sim.github.start_job(before["runner_name"], 30.0)

        assert [s.op for s in engine.refresh()] == ["refresh", "refresh"]
        busy = outputs(engine, "runner-0")
        sim.github.runner_offline(int(before["runner_id"]))
        engine.refresh()
        offline = outputs(engine, "runner-0")

    assert (busy["runner_status"], busy["runner_busy"], busy["pod_phase"]) == ("online", True, "Running")
    assert busy["runner_id"] == before["runner_id"]
    assert offline["runner_status"] == "offline"


def test_destroy_leaves_no_pod_secret_or_registration(sim, engine) -> None:
    engine.up()

    engine.destroy()

    assert sim.kube.pods(NAMESPACE) == []
    assert sim.kube.secrets(NAMESPACE) == []
    assert sim.github.runners() == []
    assert engine.state == {}


def test_destroy_after_everything_is_already_gone(sim, engine) -> None:
    engine.up()
    api = core_api(sim)
    for pod in sim.kube.pods(NAMESPACE):
        api.delete_namespaced_pod(pod["metadata"]["name"], NAMESPACE, grace_period_seconds=0)
    for secret in sim.kube.secrets(NAMESPACE):
        api.delete_namespaced_secret(secret["metadata"]["name"], NAMESPACE)
    wait_until(lambda: not sim.kube.pods(NAMESPACE), "pods to go")
    wait_until(lambda: all(r["status"] == "offline" or r["ephemeral"] for r in sim.github.runners()), "runners")
    for runner in sim.github.runners():
        _remove_registration(sim, runner["id"])

    engine.destroy()

    assert engine.state == {}
    assert sim.github.runners() == [] and sim.kube.pods(NAMESPACE) == []


def test_github_token_from_the_environment_when_no_input_is_given(sim) -> None:
    import os

    program = credentials_from_environment(sim)
    with MiniEngine(ROOT, env={**os.environ, "GITHUB_TOKEN": sim.credential}) as engine:
        engine.up(program)
        assert sim.github.runners()[0]["status"] == "online"
        engine.destroy()
    without = {k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}
    with MiniEngine(ROOT, env=without) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.up(program)
    assert isinstance(raised.value.errors[0], CheckFailed)
    reason = dict(raised.value.errors[0].failures)["github_token"]
    assert reason.endswith("give a GitHub token, or a GitHub App (github_app_id and github_app_private_key)"), reason


def test_a_runner_that_cannot_register_fails_create_and_leaves_nothing_behind(sim) -> None:
    # A token GitHub never issued (said to be fresh): config.sh fails with the 404 (as for a token expired or used
    # up), the container exits 1, the pod ends Failed, and the runner's own error reaches the message through the
    # pod's termination message, with what it means.
    bogus = runner_with_token(
        sim,
        "AUNKNOWNTOKEN0000000000000000",
        register_timeout_seconds=30,
        registration_token_expires_at="2999-01-01T00:00:00+00:00",
    )
    with (
        MiniEngine(ROOT) as engine,
        pytest.raises(
            DeploymentFailed,
            match=r"did not register: the registration token has expired or was used up: .*404 \(Not Found\)",
        ),
    ):
        engine.up(bogus)
    wait_until(lambda: not sim.kube.pods(NAMESPACE), "the failed runner's pod to be removed")
    assert sim.kube.secrets(NAMESPACE) == []
    assert sim.runners.registrations_refused, "the simulated runner should have been refused"


def _remove_registration(sim, runner_id: int) -> None:
    from pulumi_actions_runners.github.client import GitHubClient
    from pulumi_actions_runners.github.url import parse_github_url

    with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
        github.remove_runner(runner_id)


def test_a_create_that_fails_half_way_leaves_no_secret_or_pod_behind(sim) -> None:
    sim.kube.fail_next("POST", r"/pods$", 403)  # e.g. a quota or an admission webhook says no

    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed, match="403"):
        engine.up(runner_with_token(sim, new_token(sim)))

    assert sim.kube.secrets(NAMESPACE) == [], "the Secret holding the token was left behind"
    assert sim.kube.pods(NAMESPACE) == []


def test_a_runner_whose_name_is_taken_by_a_live_pod_leaves_that_pod_and_its_secret_alone(sim) -> None:
    first, second = new_token(sim), new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, first, runner_name="shared-name"))
    another_stack = MiniEngine(ROOT, stack="other")  # its ownership id differs: project, stack, type and name
    with another_stack, pytest.raises(DeploymentFailed, match="already exists and runs with another"):
        another_stack.up(runner_with_token(sim, second, runner_name="shared-name"))

    assert secret_token(sim, "shared-name-registration") == first
    pod = sim.kube.pod(NAMESPACE, "shared-name")
    assert pod["status"]["phase"] == "Running" and "deletionTimestamp" not in pod["metadata"]


def test_a_just_in_time_runner_gets_its_own_config_through_a_secret_even_after_a_lost_response(sim) -> None:
    name = "jit-runner"
    with MiniEngine(ROOT) as engine:
        ours = owner_label(engine, "Runner", "runner")
        with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
            lost = github.generate_jitconfig(name, ["self-hosted", ours])  # registered; the answer never came back

        engine.up(jit_runner(sim, runner_name=name))
        out = outputs(engine, "runner")

        registered = {r["name"]: r for r in sim.github.runners()}
        assert registered[name]["id"] == out["runner_id"] != lost.runner_id
        assert registered[name]["status"] == "online"
        jit_calls = sim.github.calls("POST", "/generate-jitconfig$")
        assert [c["status"] for c in jit_calls] == [201, 409, 201]
        secret = sim.kube.secret(NAMESPACE, out["secret_name"])
        config = base64.b64decode(secret["data"]["jitconfig"]).decode()
        env = {e["name"]: e for e in sim.kube.pod(NAMESPACE, out["pod_name"])["spec"]["containers"][0]["env"]}
        assert env["ACTIONS_RUNNER_INPUT_JITCONFIG"]["valueFrom"]["secretKeyRef"]["name"] == out["secret_name"]
        assert "ACTIONS_RUNNER_INPUT_TOKEN" not in env
        assert config not in json.dumps(engine.export())
        assert config not in json.dumps(sim.kube.pod(NAMESPACE, out["pod_name"]))

        engine.destroy()
    assert sim.github.runners() == [] and sim.kube.pods(NAMESPACE) == []
