"""programs/gitops' workflow: valid for GitHub Actions (actionlint, built by tools/actionlint), on GitHub-hosted
runners only, and with updates of the stack that never race."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from actions_runners_simulator.tools import tool_dirs
from pulumi_actions_runners.report import render
from tests.conftest import ROOT

WORKFLOW = ROOT / "programs" / "gitops" / ".github" / "workflows" / "runners.yml"


@pytest.fixture(scope="module")
def actionlint() -> Path:
    return tool_dirs("actionlint")["actionlint"] / "actionlint"


def lint(actionlint: Path, workflow: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(actionlint), "-no-color", str(workflow)], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_workflow_passes_actionlint(actionlint: Path) -> None:
    result = lint(actionlint, WORKFLOW)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_actionlint_refuses_a_broken_copy(actionlint: Path, tmp_path: Path) -> None:
    """The check above can fail: a misspelt key and an unknown context are found."""
    text = WORKFLOW.read_text()
    broken = tmp_path / ".github" / "workflows" / "runners.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        text.replace("cancel-in-progress: false", "cancel-in-progres: false").replace("secrets.", "secret.", 1)
    )
    result = lint(actionlint, broken)
    assert result.returncode == 1, result.stdout
    assert "cancel-in-progres" in result.stdout and '"secret"' in result.stdout, result.stdout


def test_jobs_run_on_github_hosted_runners_and_updates_never_race() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert {"pull_request", "push", "schedule"} <= set(triggers)
    jobs = workflow["jobs"]
    assert {job["runs-on"] for job in jobs.values()} == {"ubuntu-latest"}  # not the runners being replaced
    assert jobs["up"]["concurrency"] == {"group": "runners-up", "cancel-in-progress": False}
    assert "github.ref == 'refs/heads/main'" in jobs["up"]["if"]  # a dispatch from another branch applies nothing
    comment = next(step for step in jobs["preview"]["steps"] if "github-script" in step.get("uses", ""))
    assert render.MARKDOWN_MARKER in comment["with"]["script"] and "always()" in comment["if"]
    steps = "\n".join(step.get("run", "") for job in jobs.values() for step in job["steps"])
    assert "python -m pulumi_actions_runners.report" in steps and "--live --format markdown" in steps
    assert "pulumi up --stack" in steps and "--refresh" in steps
