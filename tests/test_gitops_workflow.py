"""programs/gitops' workflows: valid for GitHub Actions (actionlint, built by tools/actionlint), on GitHub-hosted
runners only, updates of the stack that never race, and a pull request that cannot borrow their power: no write
credential where a branch's code runs, none at workflow level, environments for every secret, actions pinned by
commit, and a preview that its read-only credentials are enough for (through the real CLI)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.tools import tool_dirs
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners.report import render
from tests.conftest import ROOT, quick_simulator
from tests.helpers import calls_but_the_release_list
from tests.test_report import report

WORKFLOWS = ROOT / "programs" / "gitops" / ".github" / "workflows"
RUNNERS, REPORT = WORKFLOWS / "runners.yml", WORKFLOWS / "runners-report.yml"
# Secrets that can write: mint registration tokens or just-in-time configs, change runners, pods or the state.
WRITE_SECRETS = {
    "RUNNERS_GITHUB_TOKEN",
    "RUNNERS_GITHUB_APP_ID",
    "RUNNERS_GITHUB_APP_PRIVATE_KEY",
    "KUBECONFIG_DATA",
    "PULUMI_ACCESS_TOKEN",
}
# All that a job running a pull request's code may name: read-only credentials under names of their own, so that a
# name an environment lacks cannot fall back to a repository's or an organization's write secret of that name.
READ_ONLY_SECRETS = {"PULUMI_READ_TOKEN", "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "RUNNERS_GITHUB_READ_TOKEN"}
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def load(path: Path) -> dict[str, Any]:
    workflow = yaml.safe_load(path.read_text())
    workflow["on"] = workflow.pop(True)  # YAML 1.1 reads the key `on` as true
    return workflow


def secrets_in(value: Any) -> set[str]:
    return set(re.findall(r"secrets\.([A-Za-z0-9_]+)", json.dumps(value)))


def runs_on_pull_request(job: dict[str, Any]) -> bool:
    return "github.event_name != 'pull_request'" not in job.get("if", "")


@pytest.fixture(scope="session")
def actionlint() -> Path:
    return tool_dirs("actionlint")["actionlint"] / "actionlint"


def lint(actionlint: Path, *workflows: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(actionlint), "-no-color", *map(str, workflows)], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_workflows_pass_actionlint(actionlint: Path) -> None:
    result = lint(actionlint, RUNNERS, REPORT)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_actionlint_refuses_a_broken_copy(actionlint: Path, tmp_path: Path) -> None:
    """The check above can fail: a misspelt key and an unknown context are found."""
    text = RUNNERS.read_text()
    broken = tmp_path / ".github" / "workflows" / "runners.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        text.replace("cancel-in-progress: false", "cancel-in-progres: false").replace("${{ secrets.", "${{ secret.", 1)
    )
    result = lint(actionlint, broken)
    assert result.returncode == 1, result.stdout
    assert "cancel-in-progres" in result.stdout and '"secret"' in result.stdout, result.stdout


def test_jobs_run_on_github_hosted_runners_and_updates_never_race() -> None:
    workflow = load(RUNNERS)
    assert {"pull_request", "push", "schedule"} <= set(workflow["on"])
    jobs = {**workflow["jobs"], **load(REPORT)["jobs"]}
    assert {job["runs-on"] for job in jobs.values()} == {"ubuntu-latest"}  # not the runners being replaced
    up = workflow["jobs"]["up"]
    assert up["concurrency"] == {"group": "runners-up", "cancel-in-progress": False}
    assert "github.ref == 'refs/heads/main'" in up["if"]  # a dispatch from another branch applies nothing
    steps = "\n".join(step.get("run", "") for job in jobs.values() for step in job["steps"])
    assert "python -m pulumi_actions_runners.report" in steps and "--live" in steps and "--github-host" in steps
    assert "pulumi up --stack" in steps and "pulumi refresh --stack" in steps


@pytest.mark.parametrize("path", [RUNNERS, REPORT], ids=lambda p: p.name)
def test_a_pull_request_cannot_borrow_the_pipeline_s_power(path: Path) -> None:
    """No secret at workflow level; no write secret in a job a pull request runs; a secret only through an
    environment; no permissions but a job's own; credentials never left in git's config; actions by commit."""
    workflow = load(path)
    assert workflow.get("permissions") == {}
    assert secrets_in(workflow.get("env")) == set()
    for name, job in workflow["jobs"].items():
        if path == RUNNERS and runs_on_pull_request(job):
            assert secrets_in(job) <= READ_ONLY_SECRETS, name
            assert all(access == "read" for access in job["permissions"].values()), name
        if secrets_in(job):
            assert job.get("environment"), f"{name} holds secrets without an environment's protection rules"
        assert "permissions" in job, name
        for step in job["steps"]:
            uses = step.get("uses", "")
            assert not uses or PINNED.match(uses), f"{name}: {uses} is not pinned by a commit"
            if uses.startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name
                assert "ref" not in step["with"], name  # the event's own commit: the branch's, or main's
    jobs = workflow["jobs"]
    if path == RUNNERS:
        assert jobs["up"]["environment"] == "runners-up" and secrets_in(jobs["up"]) & WRITE_SECRETS
        assert jobs["preview"]["environment"] == "runners-preview"
        assert not any("pull-requests" in job["permissions"] for job in jobs.values())  # no comment from here


def test_the_comment_is_written_by_a_job_that_runs_no_code_from_main_s_workflow() -> None:
    workflow = load(REPORT)
    assert set(workflow["on"]) == {"workflow_run"}  # read from the default branch, never from the pull request's
    comment, report_job = workflow["jobs"]["comment"], workflow["jobs"]["report"]
    assert comment["permissions"] == {"pull-requests": "write"} and not secrets_in(comment)
    assert not any("run" in step or "checkout" in step.get("uses", "") for step in comment["steps"])
    assert "pull-requests" not in report_job["permissions"]
    first = report_job["steps"][0]  # before anything runs, the triggering run's approval is checked
    assert "/approvals" in first["run"] and 'index("runners-preview")' in first["run"]
    script = next(step for step in comment["steps"] if "github-script" in step.get("uses", ""))["with"]["script"]
    assert render.MARKDOWN_MARKER in script
    assert 'c.user.login === "github-actions[bot]"' in script  # only the workflow's own comment is updated
    assert "workflow_run.head_sha" in json.dumps(comment) and '"requested"' in script  # which commit; pending


def test_the_preview_job_s_credentials_are_enough_and_write_nothing(
    kube_api_server: KubeApiServer, cli_dir: Path
) -> None:
    """The stack made with write credentials from the environment (as the up job gives them); then, as the
    preview job has it, a read-only GitHub token and no kubeconfig at all: the preview plans the change, the
    live report lists the runners, and neither GitHub nor the cluster gets a write."""
    with quick_simulator(kube_api_server) as sim, PulumiWorkspace(ROOT, cli_dir) as stack:
        config = sim.stack_config(runners=2, grace_period_seconds=1, pool=True)
        kubeconfig = config.pop("kubeconfig")
        stack.new_stack(config=config, secrets={})
        write = {"GITHUB_TOKEN": sim.credential, "KUBECONFIG": kubeconfig}
        stack.env |= write
        stack.run("up", "--yes")
        stack.env = {k: v for k, v in stack.env.items() if k not in write} | {
            "GITHUB_TOKEN": sim.read_only_credential,
            "HOME": str(stack.root),  # no ~/.kube/config either
        }
        stack.run("config", "set", "image", "ghcr.io/actions/actions-runner:2.335.0")
        github_calls, kube_requests = len(sim.github.calls()), len(sim.kube.requests())
        preview = stack.run("preview", "--json", "--show-sames").stdout
        assert json.loads(preview)["changeSummary"] == {"same": 2, "update": 1}
        assert (calls_but_the_release_list(sim, github_calls), len(sim.kube.requests())) == ([], kube_requests)
        live = report(
            "-",
            "--live",
            "--github-host",
            sim.github.url,
            stdin=preview,
            env={"GITHUB_TOKEN": sim.read_only_credential},
        )
        assert live.returncode == 2 and "rotate 2 of 2 runners" in live.stdout, live.stderr
        made = sim.github.calls()[github_calls:]
        assert made and {c["method"] for c in made} == {"GET"} and {c["status"] for c in made} == {200}
        assert len(sim.kube.requests()) == kube_requests
