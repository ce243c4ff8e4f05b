"""The provider plugin (pulumi-resource-actions-runners) through the real pulumi CLI, with programs in Pulumi YAML
(Pulumi's own language host, built from github.com/pulumi/pulumi-yaml): programs/yaml whole, `pulumi import`
of a pool and a runner, and a scale set."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiFailed, PulumiWorkspace, provider_plugin, yaml_host
from pulumi_actions_runners import __version__
from pulumi_actions_runners.inputs import names
from pulumi_actions_runners.kube.scale_set_manifests import listener_selector, runner_selector
from tests.conftest import ROOT, quick_simulator, wait_until
from tests.helpers import (
    NAMESPACE,
    calls_but_the_release_list,
    core_api,
    events_for,
    grace_after,
    new_token,
    secret_token,
    up_while_busy,
)

YAML_PROGRAM = ROOT / "programs" / "yaml"
IMPORTING_PROGRAM = ROOT / "tests" / "projects" / "yaml-import"
SCALE_SET_PROGRAM = ROOT / "tests" / "projects" / "yaml-scale-set"
POOL = "actions-runners:index:RunnerPool"
SCALE_SET = "actions-runners:index:RunnerScaleSet"


@pytest.fixture
def sim(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    with quick_simulator(kube_api_server) as simulator:
        yield simulator


def workspace(project: Path, cli_dir: Path, yaml_dir: Path, sim: Simulator, stack: str = "dev") -> PulumiWorkspace:
    """The YAML host and the plugin's source install (the package's console script) as installed plugins."""
    ws = PulumiWorkspace(project, cli_dir, stack=stack, plugins=yaml_host(yaml_dir) | provider_plugin())
    ws.env["KUBECONFIG"] = str(sim.kubeconfig)  # the cluster as a user's would be found: no input names it
    return ws


def resources(ws: PulumiWorkspace, type_: str) -> dict[str, dict]:
    state = json.loads(ws.run("stack", "export", "--show-secrets").stdout)
    return {r["urn"].rsplit("::", 1)[-1]: r for r in state["deployment"]["resources"] if r["type"] == type_}


def test_a_yaml_program_creates_rotates_with_a_busy_runner_waited_for_and_destroys(
    cli_dir: Path, yaml_dir: Path, sim: Simulator
) -> None:
    with workspace(YAML_PROGRAM, cli_dir, yaml_dir, sim) as ws:
        ws.new_stack(
            config={"githubUrl": sim.repo_url, "runners": "2", "gracePeriodSeconds": "1", "maxUnavailable": "1"},
            secrets={"githubToken": sim.credential},
        )
        preview = ws.run("preview").stdout
        assert f" +  {POOL} pool create" in preview and "warning" not in preview, preview

        up = ws.run("up", "--yes").stdout
        assert "3 created" in up, up  # the stack, the token, the pool
        online = [r for r in sim.github.runners() if r["status"] == "online"]
        assert len(online) == 2, sim.github.runners()
        pool = resources(ws, POOL)["pool"]
        assert pool["inputs"]["replicas"] == 2 and pool["inputs"]["labels"] == ["pulumi", "yaml"]
        runners = {r["name"]: r for r in pool["outputs"]["runners"]}
        assert len(runners) == 2 and all(r["tokenHash"] == pool["outputs"]["tokenHash"] for r in runners.values())
        # Secrets stay secret in the state, in the schema's names.
        exported = ws.run("stack", "export").stdout
        first = next(iter(runners.values()))
        token = secret_token(sim, f"{first['name']}-registration")
        assert token not in exported and sim.credential not in exported

        # The token falls due: preview shows the pool's update and why, and touches nothing.
        ws.run("config", "set", "tokenRefreshBeforeSeconds", "3000")
        calls = len(sim.github.calls())
        preview = ws.run("preview").stdout
        assert re.search(rf" ~  {POOL} pool update \[diff: .*~registrationToken", preview), preview
        assert calls_but_the_release_list(sim, calls) == []
        # The review report reads the plugin's resources as it reads the dynamic ones.
        report = subprocess.run(
            [sys.executable, "-m", "pulumi_actions_runners.report"],
            input=ws.run("preview", "--json").stdout,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        assert "rotate 2 of 2 runners, at most 1 at a time" in report, report
        assert "because: registration token renewed" in report and "(none)" not in report, report

        # up rotates them, one at a time; the busy runner keeps its pod until its job is done.
        busy = first
        up = up_while_busy(ws, sim, busy["name"], int(busy["id"]))
        removals = [c for c in sim.github.calls("DELETE") if c["path"].endswith(f"/{int(busy['id'])}")]
        assert removals[0]["status"] == 422 and removals[-1]["status"] in (204, 404), removals
        pod_events = events_for(sim, busy["pod"], "pod_terminating", "pod_removed")
        assert pod_events and all(e["at"] >= removals[-1]["at"] + grace_after(removals[-1]) for e in pod_events)
        assert sim.runners.jobs_killed == []
        # Progress is the pool's, on its own row: no stack-level wall of timestamps.
        assert re.search(rf"{POOL} pool .*is running a job \(RemoveRunner answered 422\)", up), up
        assert re.search(rf"{POOL} pool .*waiting on 1 busy runner \(RemoveRunner 422\), \d of 2 rotated", up), up
        assert re.search(rf"{POOL} pool .*: 2 of 2 rotated", up), up
        assert not re.search(r"pulumi:pulumi:Stack .* \d{4}-\d\d-\d\d.*INFO", up), up
        rotated = {r["name"]: r for r in resources(ws, POOL)["pool"]["outputs"]["runners"]}
        assert rotated.keys() == runners.keys()
        assert all(r["tokenHash"] != runners[name]["tokenHash"] for name, r in rotated.items())

        # A scale-up whose pod the API server refuses: up fails saying why, and the state keeps what exists.
        ws.run("config", "set", "tokenRefreshBeforeSeconds", "0")
        ws.run("config", "set", "runners", "3")
        sim.kube.fail_next("POST", r"/pods$", 500, count=5)  # the first try and the client's 4 retries
        failed = ws.run("up", "--yes", check=False)
        output = failed.stdout + failed.stderr
        assert failed.returncode != 0 and "did not converge" in output and "Traceback" not in output, output
        kept = resources(ws, POOL)["pool"]["outputs"]
        assert sorted(r["name"] for r in kept["runners"]) == sorted(rotated) and kept["problems"], kept
        ws.run("up", "--yes")
        assert len(resources(ws, POOL)["pool"]["outputs"]["runners"]) == 3

        ws.run("destroy", "--yes")
        assert sim.github.runners() == []
        assert [p for p in sim.kube.pods(NAMESPACE)] == []


def test_import_adopts_a_pool_and_a_runner_and_the_next_up_changes_nothing(
    cli_dir: Path, yaml_dir: Path, sim: Simulator
) -> None:
    """A stack that lost its state (or moves from the dynamic resources) adopts what it made, by id."""
    token = new_token(sim)
    config = {"githubUrl": sim.repo_url, "namespace": NAMESPACE}
    with workspace(IMPORTING_PROGRAM, cli_dir, yaml_dir, sim, stack="made") as made:
        made.new_stack(config=config, secrets={"githubToken": sim.credential, "registrationToken": token})
        made.run("up", "--yes")
        pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)}
        assert len(pods_before) == 3  # a pool of 2 and a runner

        # The state is lost: a new stack of the same project, with the same program, imports by id.
        with workspace(IMPORTING_PROGRAM, cli_dir, yaml_dir, sim, stack="made") as lost:
            lost.env["PULUMI_BACKEND_URL"] = f"file://{lost.root / 'other-state'}"
            lost.env["GITHUB_TOKEN"] = sim.credential  # an import has no inputs: it reads with the environment's
            (lost.root / "other-state").mkdir()
            lost.new_stack(config=config, secrets={"githubToken": sim.credential, "registrationToken": token})
            refused = lost.run("import", POOL, "pool", f"{NAMESPACE}/nothing@{sim.repo_url}", "--yes", check=False)
            assert refused.returncode != 0
            assert "there are no pods of pool nothing" in refused.stdout + refused.stderr, refused.stdout
            malformed = lost.run("import", POOL, "pool", "imported-pool", "--yes", check=False)
            assert "NAMESPACE/NAME@GITHUB_URL" in malformed.stdout + malformed.stderr

            lost.run("import", POOL, "pool", f"{NAMESPACE}/imported@{sim.repo_url}", "--yes")
            lost.run("import", "actions-runners:index:Runner", "lone", f"{NAMESPACE}/lone@{sim.repo_url}", "--yes")
            preview = json.loads(lost.run("preview", "--json").stdout)
            ops = {s["urn"].rsplit("::", 1)[-1]: s["op"] for s in preview["steps"]}
            # The spec and token the pods' hashes prove the program's; the settings (here a grace period) an
            # import cannot read back are the program's from now on: nothing to change.
            assert ops == {"actions-runners-yaml-import-made": "same", "pool": "same", "lone": "same"}, ops
            writes = len([c for c in sim.github.calls() if c["method"] != "GET"])
            assert "3 unchanged" in lost.run("up", "--yes").stdout
            assert len([c for c in sim.github.calls() if c["method"] != "GET"]) == writes
            assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)} == pods_before

            # What it adopted it takes down, the safe way, with the program's grace period (0.3 s, not 30 s).
            lone_id = next(r["id"] for r in sim.github.runners() if r["name"] == "lone")
            lost.run("destroy", "--yes")
            [removed] = [c["at"] for c in sim.github.calls("DELETE") if c["path"].endswith(f"/{lone_id}")]
            deleted = events_for(sim, "lone", "pod_terminating")[0]["at"]
            # Unregistered first; then at most the program's grace (its runner, told it is removed, may end sooner).
            assert removed <= deleted < removed + 10, (removed, deleted)  # not the default's 30 s
            assert sim.github.runners() == [] and sim.kube.pods(NAMESPACE) == []


def test_a_yaml_program_s_scale_set_serves_jobs_updates_in_place_and_is_taken_over_by_up_not_import(
    cli_dir: Path, yaml_dir: Path, sim: Simulator
) -> None:
    """The plugin names the set and its ownership id as the Python resource does; a lost state's stack gets it back
    by `up` (its create takes over what carries its ownership id), as the import's refusal says."""
    sim.github.service.long_poll_seconds = 1.0
    project, config = "actions-runners-yaml-scale-set", {"githubUrl": sim.repo_url, "namespace": NAMESPACE}
    name = names.default_name(project, "dev", "scale-set", 45)

    def pods(selector: str) -> list:
        listed = core_api(sim).list_namespaced_pod(NAMESPACE, label_selector=selector).items
        return [p for p in listed if p.metadata.deletion_timestamp is None]

    with workspace(SCALE_SET_PROGRAM, cli_dir, yaml_dir, sim) as ws:
        ws.new_stack(config=config, secrets={"githubToken": sim.credential})
        assert "2 created" in ws.run("up", "--yes").stdout  # the stack, the scale set
        made = resources(ws, SCALE_SET)["scale-set"]
        assert made["inputs"]["scaleSetName"] == name
        assert made["outputs"]["owner"] == names.ownership_id(project, "dev", "RunnerScaleSet", "scale-set")
        assert made["outputs"]["listener"] == f"{name}-listener" and made["outputs"]["updateKind"] == []
        [on_github] = sim.github.service.scale_sets()
        assert on_github["id"] == made["outputs"]["scaleSetId"]
        assert sim.credential not in ws.run("stack", "export").stdout
        wait_until(lambda: len(pods(runner_selector(name))) == 1, "the idle runner minRunners keeps", 30)
        sim.github.queue_jobs(sim.repo_url, [name], 1.0, count=3)
        served = lambda: [j for j in sim.github.jobs("completed") if j["conclusion"] == "success"]  # noqa: E731
        wait_until(lambda: len(served()) == 3, "the three jobs served", 60)

        ws.run("config", "set", "maxRunners", "3")
        preview = ws.run("preview").stdout
        assert re.search(rf" ~  {SCALE_SET} scale-set update \[diff: ~maxRunners\]", preview), preview
        report = subprocess.run(
            [sys.executable, "-m", "pulumi_actions_runners.report"],
            input=ws.run("preview", "--json").stdout,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        assert "capacity from min 1, max 2 to min 1, max 3" in report, report
        ws.run("up", "--yes")
        updated = resources(ws, SCALE_SET)["scale-set"]["outputs"]
        assert updated["updateKind"] == ["bounds"] and updated["scaleSetId"] == on_github["id"], updated
        ws.run("refresh", "--yes")
        seen = resources(ws, SCALE_SET)["scale-set"]["outputs"]
        assert seen["listenerRunning"] is True and "totalRegisteredRunners" in seen["statistics"], seen
        assert seen["runners"] and all({"specHash", "podPhase"} <= set(r) for r in seen["runners"]), seen

        with workspace(SCALE_SET_PROGRAM, cli_dir, yaml_dir, sim) as lost:
            lost.env["PULUMI_BACKEND_URL"] = f"file://{lost.root / 'other-state'}"
            (lost.root / "other-state").mkdir()
            lost.new_stack(config={**config, "maxRunners": "3"}, secrets={"githubToken": sim.credential})
            args = ("import", SCALE_SET, "scale-set", f"{NAMESPACE}/{name}@{sim.repo_url}", "--yes")
            refused = lost.run(*args, check=False)
            output = refused.stdout + refused.stderr
            assert refused.returncode != 0 and "a RunnerScaleSet cannot be imported" in output, output
            assert "Traceback" not in output

            assert "2 created" in lost.run("up", "--yes").stdout
            assert [s["id"] for s in sim.github.service.scale_sets()] == [on_github["id"]]
            assert resources(lost, SCALE_SET)["scale-set"]["outputs"]["scaleSetId"] == on_github["id"]
            lost.run("destroy", "--yes")
            assert sim.github.service.scale_sets() == []
            assert pods(listener_selector(name)) == [] and pods(runner_selector(name)) == []


def test_an_upgrade_of_the_plugin_with_the_program_unchanged_plans_no_change(
    cli_dir: Path, yaml_dir: Path, sim: Simulator
) -> None:
    """A stack made through an SDK of the previous release (its resources name the plugin's version, as a
    generated SDK does: the engine's default provider `default_0_1_0`), then the SDK upgraded: the engine swaps in
    this version's default provider, whose DiffConfig says nothing changed, and no runner is touched. Both versions
    are installed, as after `pulumi plugin install` of the new one; the old one is this same binary."""
    binary = next(iter(provider_plugin().values()))
    plugins = yaml_host(yaml_dir) | provider_plugin() | {"resource-actions-runners-v0.1.0": binary}
    with PulumiWorkspace(YAML_PROGRAM, cli_dir, plugins=plugins) as ws:
        ws.env["KUBECONFIG"] = str(sim.kubeconfig)

        def program_of_version(version: str) -> None:
            program = yaml.safe_load((YAML_PROGRAM / "Pulumi.yaml").read_text())
            for resource in program["resources"].values():
                resource["options"] = {"version": version}
            (ws.project / "Pulumi.yaml").write_text(yaml.safe_dump(program))

        program_of_version("0.1.0")
        ws.new_stack(config={"githubUrl": sim.repo_url, "runners": "2"}, secrets={"githubToken": sim.credential})
        ws.run("up", "--yes")
        assert "::default_0_1_0" in ws.run("stack", "export").stdout

        program_of_version(__version__)
        steps = json.loads(ws.run("preview", "--json").stdout)["steps"]
        ours = {step["urn"].rsplit("::", 1)[-1]: step["op"] for step in steps if ":index:" in step["urn"]}
        assert ours == {}, ours  # preview --json lists no step that stays the same
        writes = [call for call in sim.github.calls() if call["method"] != "GET"]
        pods = {pod.metadata.uid for pod in core_api(sim).list_namespaced_pod(NAMESPACE).items}
        up = ws.run("up", "--yes").stdout
        assert "3 unchanged" in up, up  # the stack, the token, the pool
        state = ws.run("stack", "export").stdout
        assert f"::default_{__version__.replace('.', '_')}" in state and "::default_0_1_0" not in state
        assert [call for call in sim.github.calls() if call["method"] != "GET"] == writes
        assert {pod.metadata.uid for pod in core_api(sim).list_namespaced_pod(NAMESPACE).items} == pods


def test_import_refuses_a_pod_it_did_not_make(cli_dir: Path, yaml_dir: Path, sim: Simulator) -> None:
    core_api(sim).create_namespaced_pod(
        NAMESPACE, {"metadata": {"name": "handmade"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    )
    with workspace(IMPORTING_PROGRAM, cli_dir, yaml_dir, sim) as ws:
        ws.new_stack(
            config={"githubUrl": sim.repo_url, "namespace": NAMESPACE},
            secrets={"githubToken": sim.credential, "registrationToken": new_token(sim)},
        )
        args = ("import", "actions-runners:index:Runner", "lone", f"{NAMESPACE}/handmade@{sim.repo_url}", "--yes")
        without_credential = ws.run(*args, check=False)
        assert "set GITHUB_TOKEN" in without_credential.stdout, without_credential.stdout
        ws.env["GITHUB_TOKEN"] = sim.credential
        with pytest.raises(PulumiFailed) as refused:
            ws.run(*args)
    output = str(refused.value)
    assert "was not made by pulumi-actions-runners" in output, output
    assert "Traceback" not in output and sim.credential not in output


@pytest.mark.alone  # it measures time
def test_lone_runners_start_as_many_at_once_as_the_engine_runs(cli_dir: Path, yaml_dir: Path, sim: Simulator) -> None:
    """Each pod's creation is held DELAY at the API server: six in flight at once end within DELAY of each other,
    where a cap of four calls (the SDK's dynamic provider server) would end them a DELAY apart."""
    delay = 4.0
    sim.kube.delay_next("POST", r"/namespaces/[^/]+/pods$", delay, count=6)
    with workspace(ROOT / "tests" / "projects" / "yaml-runners", cli_dir, yaml_dir, sim) as ws:
        ws.new_stack(
            config={"githubUrl": sim.repo_url, "namespace": NAMESPACE},
            secrets={"githubToken": sim.credential, "registrationToken": new_token(sim)},
        )
        ws.run("up", "--yes", "--parallel", "8")
        created = [r["at"] for r in sim.kube.proxy_timeline() if r["method"] == "POST" and r["path"].endswith("/pods")]
        assert len(created) == 6
        assert max(created) - min(created) < delay, created
        assert len([r for r in sim.github.runners() if r["status"] == "online"]) == 6
        ws.run("destroy", "--yes")


def test_check_failures_name_the_schema_property(cli_dir: Path, yaml_dir: Path, sim: Simulator) -> None:
    with workspace(YAML_PROGRAM, cli_dir, yaml_dir, sim) as ws:
        ws.new_stack(config={"githubUrl": sim.repo_url}, secrets={"githubToken": sim.credential})
        ws.run("config", "set", "gracePeriodSeconds", stdin="-5")  # on stdin: "-5" is no flag
        preview = ws.run("preview", check=False)
    output = preview.stdout + preview.stderr
    assert preview.returncode != 0
    assert "gracePeriodSeconds" in output and "from 0 to 3600" in output, output
    assert "Traceback" not in output


def test_the_plugin_archive_installs_with_pulumi_plugin_install(
    cli_dir: Path, yaml_dir: Path, sim: Simulator, tmp_path: Path
) -> None:
    """`make plugin`'s archive, installed as docs/how-to/other-languages.md says; its first start makes its own
    virtualenv from the wheels inside it (offline), so a program in any language finds a working plugin."""
    built = subprocess.run(
        [str(ROOT / "tools" / "plugin" / "build.sh"), str(tmp_path)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=True,
    )
    archive = built.stdout.strip().splitlines()[-1]
    assert archive.endswith(".tar.gz") and f"v{__version__}" in archive
    with PulumiWorkspace(YAML_PROGRAM, cli_dir, plugins=yaml_host(yaml_dir)) as ws:
        ws.env["KUBECONFIG"] = str(sim.kubeconfig)
        ws.env["PIP_FIND_LINKS"] = ""  # nothing from outside the archive
        ws.env["PIP_NO_COMPILE"] = "1"  # the first start's install without compiling every module ahead: CPU only
        ws.run("plugin", "install", "resource", "actions-runners", __version__, "--file", archive)
        ws.new_stack(config={"githubUrl": sim.repo_url, "runners": "1"}, secrets={"githubToken": sim.credential})
        up = ws.run("up", "--yes").stdout
        assert "3 created" in up and "warning" not in up, up
        assert len([r for r in sim.github.runners() if r["status"] == "online"]) == 1
        ws.run("destroy", "--yes")


def test_the_plugin_runs_from_source_as_a_programs_pulumi_yaml_names_it(
    cli_dir: Path, yaml_dir: Path, sim: Simulator
) -> None:
    """No archive and no install: the program's `plugins:` names tools/plugin/source (a PulumiPlugin.yaml), which
    the engine starts through the Python language host's RunPlugin, in the checkout's virtualenv."""
    plugins = {
        **yaml_host(yaml_dir),
        # The YAML host loads the schema itself: it finds the Python host installed, not beside the CLI.
        "language-python-v3.260.0": cli_dir / "pulumi-language-python",
    }
    with PulumiWorkspace(YAML_PROGRAM, cli_dir, plugins=plugins) as ws:
        ws.env["KUBECONFIG"] = str(sim.kubeconfig)
        source = ROOT / "tools" / "plugin" / "source"
        with (ws.project / "Pulumi.yaml").open("a") as project:
            project.write(f"plugins:\n  providers:\n    - name: actions-runners\n      path: {source}\n")
        ws.new_stack(config={"githubUrl": sim.repo_url, "runners": "1"}, secrets={"githubToken": sim.credential})
        up = ws.run("up", "--yes").stdout
        assert "3 created" in up and "warning" not in up, up
        assert len([r for r in sim.github.runners() if r["status"] == "online"]) == 1
        ws.run("destroy", "--yes")


def test_a_program_reads_the_newest_runner_release_and_a_pinned_version_s_deadline_through_the_function(
    cli_dir: Path, yaml_dir: Path, sim: Simulator
) -> None:
    """getRunnerRelease, invoked by Pulumi YAML through the engine: GitHub's newest release and 2.336.0's last day
    of jobs; an argument Check would refuse comes back as a failure naming it, as the engine shows it."""
    published = datetime.now(UTC) - timedelta(days=3)
    sim.github.releases.publish("2.337.0", published)
    with workspace(ROOT / "tests" / "projects" / "yaml-release", cli_dir, yaml_dir, sim) as ws:
        ws.new_stack(config={"githubUrl": sim.repo_url}, secrets={"githubToken": sim.credential})
        ws.run("up", "--yes")
        got = json.loads(ws.run("stack", "output", "--json", "--show-secrets").stdout)  # secret, as the token is
        deadline = (published + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert got == {
            "newest": "2.337.0",
            "publishedAt": published.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "image": "ghcr.io/actions/actions-runner:2.337.0",
            "pinnedDeadline": deadline,
            "pinnedReceivingJobs": True,
        }, got
        ws.run("config", "set", "pinned", "2.300.0")
        refused = ws.run("preview", check=False)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "runnerVersion" in output and "from 2.329.0 on" in output, output
    assert "Traceback" not in output and sim.credential not in output
