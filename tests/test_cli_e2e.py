"""The real pulumi CLI (built by tools/pulumi/build.sh) on the simulator, programs/runners whole: its Namespace
through pulumi_kubernetes' own plugin (tools/pulumi-kubernetes), then preview, up, refresh, destroy."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from tests.conftest import ROOT, quick_simulator, wait_until
from tests.helpers import (
    NAMESPACE,
    calls_but_the_release_list,
    core_api,
    events_for,
    grace_after,
    secret_token,
    up_while_busy,
)

RUNNERS = ("runner-0", "runner-1")


@pytest.fixture
def sim(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    """The program makes its namespace itself: the simulator makes none."""
    with quick_simulator(kube_api_server, namespaces=()) as simulator:
        yield simulator


@pytest.fixture
def stack(cli_dir: Path, plugin_dir: Path, sim: Simulator) -> Iterator[PulumiWorkspace]:
    with PulumiWorkspace(ROOT, cli_dir, kubernetes_plugin_dir=plugin_dir) as workspace:
        workspace.new_stack(
            config=sim.stack_config(runners=len(RUNNERS), grace_period_seconds=1, create_namespace=True),
            secrets={"githubToken": sim.credential},
        )
        yield workspace


def runner_names(state: dict) -> dict[str, dict]:
    return {
        r["urn"].rsplit("::", 1)[-1]: r["outputs"]
        for r in state["deployment"]["resources"]
        if r["type"].endswith(":Runner")
    }


def test_up_preview_replace_refresh_and_destroy_with_the_real_cli(stack: PulumiWorkspace, sim: Simulator) -> None:
    up = stack.run("up", "--yes")
    assert "6 created" in up.stdout, up.stdout  # the stack, the cluster's provider and namespace, the token, 2 runners
    assert "warning" not in up.stdout, up.stdout  # the plugin is the version the SDK asks for, not one from PATH
    online = [r for r in sim.github.runners() if r["status"] == "online"]
    assert len(online) == len(RUNNERS)
    outputs = runner_names(json.loads(stack.run("stack", "export").stdout))
    token = secret_token(sim, outputs["runner-0"]["secret_name"])

    # The token enters its renewal window: preview shows each runner's pending recreation and touches nothing.
    stack.run("config", "set", "tokenRefreshBeforeSeconds", "3000")
    github_calls, kube_requests = len(sim.github.calls()), len(sim.kube.requests())
    preview = stack.run("preview").stdout
    for name in RUNNERS:
        assert (
            f"+- pulumi-python:dynamic/actions-runners:Runner {name} replace "
            "[diff: ~registration_token,registration_token_expires_at,token_hash]" in (preview)
        ), preview
    detailed = stack.run("preview", "--diff").stdout
    assert detailed.count("~ token_hash") == len(RUNNERS), detailed
    assert len(re.findall(r"~ registration_token +: \[secret\] => \[unknown\]", detailed)) == len(RUNNERS), detailed
    steps = json.loads(stack.run("preview", "--json").stdout)["steps"]
    replaced = {s["urn"].rsplit("::", 1)[-1]: s for s in steps if s["op"] == "replace"}
    assert set(RUNNERS) <= set(replaced), steps
    for name in RUNNERS:
        assert "token_hash" in replaced[name].get("replaceReasons", []), replaced[name]
    assert calls_but_the_release_list(sim, github_calls) == []  # Check's one read of the release list, no more
    # pulumi_kubernetes' preview reads the API's discovery documents; nothing reads or writes a runner.
    runner_requests = [r for r in sim.kube.requests()[kube_requests:] if re.search(r"/(pods|secrets)\b", r[1])]
    assert runner_requests == [], sim.kube.requests()[kube_requests:]

    # up replaces them safely: the busy runner keeps its pod until its job is done, then the grace period.
    busy = outputs["runner-0"]
    up_while_busy(stack, sim, busy["runner_name"], int(busy["runner_id"]))
    removals = [c for c in sim.github.calls("DELETE") if c["path"].endswith(f"/{int(busy['runner_id'])}")]
    assert removals[0]["status"] == 422 and removals[-1]["status"] in (204, 404), removals
    pod_events = events_for(sim, busy["pod_name"], "pod_terminating", "pod_removed")
    assert pod_events and all(e["at"] >= removals[-1]["at"] + grace_after(removals[-1]) for e in pod_events)
    assert sim.runners.jobs_killed == []

    # The state the CLI wrote holds no token or credential in plain text.
    exported = stack.run("stack", "export").stdout
    new_token = secret_token(sim, busy["secret_name"])
    for secret in (token, new_token, sim.credential):
        assert secret not in exported
    assert "ciphertext" in exported

    # Drift: a pod deleted behind Pulumi's back is marked by refresh, shown by preview, and brought back by up.
    core_api(sim).delete_namespaced_pod(busy["pod_name"], NAMESPACE, grace_period_seconds=0)
    wait_until(lambda: sim.kube.pod(NAMESPACE, busy["pod_name"]) is None, "the pod to go")
    stack.run("refresh", "--yes")
    assert runner_names(json.loads(stack.run("stack", "export").stdout))["runner-0"]["pod_phase"] == "Gone"
    stack.run("config", "set", "tokenRefreshBeforeSeconds", "0")
    steps = json.loads(stack.run("preview", "--json").stdout)["steps"]
    replaced = {s["urn"].rsplit("::", 1)[-1]: s.get("replaceReasons") for s in steps if s["op"] == "replace"}
    assert replaced == {"runner-0": ["pod_phase"]}, steps
    up = stack.run("up", "--yes")
    assert "1 replaced" in up.stdout, up.stdout
    assert sim.kube.pod(NAMESPACE, busy["pod_name"]) is not None

    stack.run("destroy", "--yes")
    assert NAMESPACE not in [n["metadata"]["name"] for n in sim.kube.namespaces()]  # its pods and Secrets with it
    assert sim.github.runners() == []


def test_bad_config_is_a_check_failure_naming_the_property(stack: PulumiWorkspace, sim: Simulator) -> None:
    stack.run("config", "set", "gracePeriodSeconds", stdin="-5")  # on stdin: "-5" is no flag

    preview = stack.run("preview", check=False)

    assert preview.returncode != 0
    output = preview.stdout + preview.stderr
    assert "grace_period_seconds" in output and "from 0 to 3600" in output, output
    assert "Traceback" not in output
    assert sim.github.calls() == []


def test_a_pool_rotates_in_one_update_and_a_failed_update_fails_up_with_the_state_kept(
    cli_dir: Path, plugin_dir: Path, sim: Simulator
) -> None:
    with PulumiWorkspace(ROOT, cli_dir, kubernetes_plugin_dir=plugin_dir) as stack:
        config = sim.stack_config(runners=3, grace_period_seconds=1, pool=True, create_namespace=True)
        config |= {"maxUnavailable": "100%"}
        stack.new_stack(config=config, secrets={"githubToken": sim.credential})
        stack.run("up", "--yes")
        before = pool_outputs(stack)
        assert len(before["runners"]) == 3 and before["problems"] == []

        stack.run("config", "set", "tokenRefreshBeforeSeconds", "3000")
        preview = stack.run("preview").stdout
        assert (
            "~  pulumi-python:dynamic/actions-runners:RunnerPool pool update "
            "[diff: ~registration_token,registration_token_expires_at,token_hash]" in (preview)
        ), preview
        sim.github.start_job(before["runners"][0]["name"], 4.0)
        stack.run("up", "--yes")
        after = pool_outputs(stack)
        assert {r["token_hash"] for r in after["runners"]} == {after["token_hash"]} != {before["token_hash"]}
        assert sim.runners.jobs_killed == []

        stack.run("config", "set", "tokenRefreshBeforeSeconds", "0")
        stack.run("config", "set", "runners", "4")
        sim.kube.fail_next("POST", r"/pods$", 500, count=5)  # the first try and the client's 4 retries
        failed = stack.run("up", "--yes", check=False)
        output = failed.stdout + failed.stderr
        assert failed.returncode != 0 and "did not converge" in output and "pool-" in output, output
        assert "Traceback" not in output, output
        kept = pool_outputs(stack)
        assert [r["name"] for r in kept["runners"]] == [r["name"] for r in after["runners"]]
        assert kept["problems"], kept

        stack.run("up", "--yes")
        assert len(pool_outputs(stack)["runners"]) == 4
        stack.run("destroy", "--yes")
        assert sim.kube.pods(NAMESPACE) == [] and sim.github.runners() == []


def pool_outputs(stack: PulumiWorkspace) -> dict:
    state = json.loads(stack.run("stack", "export").stdout)
    return next(r["outputs"] for r in state["deployment"]["resources"] if r["type"].endswith(":RunnerPool"))


def test_a_pod_template_docker_a_github_app_and_new_labels_from_config_with_the_real_cli(
    cli_dir: Path, plugin_dir: Path, sim: Simulator
) -> None:
    """programs/runners builds a PodTemplateSpecArgs from config, and authenticates as the simulator's GitHub App:
    both reach GitHub and the pod through the real CLI; new labels update the runner in place, and a change of
    the template replaces it."""
    with PulumiWorkspace(ROOT, cli_dir, kubernetes_plugin_dir=plugin_dir) as stack:
        app_config, app_secrets = sim.credentials(github_app=True)
        config = sim.stack_config(runners=1, grace_period_seconds=1, create_namespace=True) | app_config
        config |= {"runnerCpu": "1", "runnerMemory": "2Gi", "docker": "true", "dockerMemory": "1Gi"}
        stack.new_stack(config=config, secrets=app_secrets)
        stack.run("config", "set", "--path", 'nodeSelector["kubernetes.io/os"]', "linux")
        stack.run("up", "--yes")

        outputs = runner_names(json.loads(stack.run("stack", "export").stdout))["runner-0"]
        pod = sim.kube.pod(NAMESPACE, outputs["pod_name"])
        containers = {c["name"]: c for c in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]]}
        assert containers["runner"]["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
        assert containers["dind"]["resources"]["limits"] == {"memory": "1Gi"}
        assert containers["dind"]["securityContext"]["privileged"] is True
        assert pod["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
        assert pod["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ci"
        assert pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
        assert [r["status"] for r in sim.github.runners()] == ["online"]

        # One installation token for the update's provider process, shared by the RegistrationToken, the Runner
        # and Check's read of the release list; no PAT. (The test bed's `up` makes no preview first.)
        assert [c["status"] for c in sim.github.calls(path_regex=r"/access_tokens$")] == [201]
        assert all("ghp_" not in c["headers"].get("Authorization", "") for c in sim.github.calls())
        exported = stack.run("stack", "export").stdout
        assert sim.app_private_key.splitlines()[1] not in exported
        assert all(token not in exported for token in sim.github.apps.issued)

        # New labels: an update in place, not a new runner.
        stack.run("config", "set", "labels", "pulumi,gpu")
        preview = stack.run("preview").stdout
        assert "Runner runner-0 update [diff: ~labels]" in preview, preview
        stack.run("up", "--yes")
        [registration] = sim.github.runners()
        assert {label["name"] for label in registration["labels"]} >= {"gpu", "pulumi"}
        assert sim.kube.pod(NAMESPACE, outputs["pod_name"])["metadata"]["uid"] == pod["metadata"]["uid"]

        stack.run("config", "set", "runnerMemory", "3Gi")
        preview = stack.run("preview").stdout
        assert "Runner runner-0 replace [diff: ~pod_template]" in preview, preview
        stack.run("destroy", "--yes")
        assert sim.github.runners() == []


def test_a_lost_state_file_costs_a_safe_rotation_and_import_fails_touching_nothing(
    cli_dir: Path, plugin_dir: Path, sim: Simulator
) -> None:
    """What docs/how-to/lost-state.md says: `pulumi import` of a pool fails in the SDK's provider server
    (pulumi/pulumi#16175) and changes nothing; `up` with the same names takes the pool's pods into its state and
    rotates them, a busy one waited for, never killed. When Pulumi lets a dynamic provider import, the first
    assertion fails: then import can be built."""
    with PulumiWorkspace(ROOT, cli_dir, kubernetes_plugin_dir=plugin_dir) as stack:
        config = sim.stack_config(runners=2, grace_period_seconds=1, pool=True, create_namespace=True)
        secrets = {"githubToken": sim.credential}
        stack.new_stack(config=config, secrets=secrets)
        stack.run("up", "--yes")
        state = json.loads(stack.run("stack", "export").stdout)
        pool_id = next(r["id"] for r in state["deployment"]["resources"] if r["type"].endswith(":RunnerPool"))
        before = pool_outputs(stack)
        busy = before["runners"][0]
        sim.github.start_job(busy["name"], None)  # held until its runner has been seen busy

        stack.run("stack", "rm", "--force", "--yes")  # the state is lost; the runners run on
        stack.new_stack(config=config | {"createNamespace": "false"}, secrets=secrets)  # it is there already
        calls = len(sim.github.calls())
        pods = {pod["metadata"]["uid"] for pod in sim.kube.pods(NAMESPACE)}
        pool_type = "pulumi-python:dynamic/actions-runners:RunnerPool"
        imported = stack.run("import", pool_type, "pool", pool_id, "--yes", check=False)
        assert imported.returncode != 0 and "__provider" in imported.stdout + imported.stderr, imported
        assert sim.github.calls()[calls:] == [] and {p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)} == pods

        def refused() -> list[dict]:
            return [c for c in sim.github.calls("DELETE", rf"/runners/{int(busy['id'])}$") if c["status"] == 422]

        up = stack.start("up", "--yes")
        wait_until(refused, "RemoveRunner to refuse the busy runner", timeout=60)
        sim.github.finish_job(busy["name"])
        up.wait()
        after = pool_outputs(stack)
        assert sorted(r["name"] for r in after["runners"]) == sorted(r["name"] for r in before["runners"])
        assert after["problems"] == [] and {r["token_hash"] for r in after["runners"]} == {after["token_hash"]}
        assert pods.isdisjoint(p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE))  # rotated, not adopted
        assert sim.runners.jobs_killed == []
        assert len(sim.github.runners()) == 2
        stack.run("destroy", "--yes")


def test_a_lost_state_file_of_a_just_in_time_pool_costs_nothing_its_runners_are_taken_over_as_they_are(
    cli_dir: Path, plugin_dir: Path, sim: Simulator
) -> None:
    """No token to renew, so after a lost state file the pods are as the program specifies them now: `up` with
    the same names takes them into the new state, pods, registrations and the job running on one untouched."""
    with PulumiWorkspace(ROOT, cli_dir, kubernetes_plugin_dir=plugin_dir) as stack:
        config = sim.stack_config(runners=2, grace_period_seconds=1, pool=True, create_namespace=True)
        config |= {"jitConfig": "true"}
        secrets = {"githubToken": sim.credential}
        stack.new_stack(config=config, secrets=secrets)
        stack.run("up", "--yes")
        before = pool_outputs(stack)
        sim.github.start_job(before["runners"][0]["name"], None)
        pods = {pod["metadata"]["uid"] for pod in sim.kube.pods(NAMESPACE)}
        writes = len(sim.github.calls("POST")) + len(sim.github.calls("DELETE"))

        stack.run("stack", "rm", "--force", "--yes")
        stack.new_stack(config=config | {"createNamespace": "false"}, secrets=secrets)
        stack.run("up", "--yes")

        after = pool_outputs(stack)
        assert [(r["name"], r["id"]) for r in after["runners"]] == [(r["name"], r["id"]) for r in before["runners"]]
        assert after["problems"] == [] and {p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)} == pods
        assert len(sim.github.calls("POST")) + len(sim.github.calls("DELETE")) == writes
        summary = json.loads(stack.run("preview", "--json").stdout)["changeSummary"]
        assert summary == {"same": 2}, summary  # the stack and the pool: nothing to do
        sim.github.finish_job(before["runners"][0]["name"])
        stack.run("destroy", "--yes")
        assert sim.github.runners() == []
