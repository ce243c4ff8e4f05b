"""Our Python language host (tools/pulumi/language-python) runs programs as Pulumi's own does: a stack with no
configuration at all gets an empty one, so that a required value is asked for by name, not met with a traceback."""

from __future__ import annotations

from pathlib import Path

from actions_runners_simulator.workspace import PulumiWorkspace
from tests.conftest import ROOT

PROGRAM = ROOT / "tests" / "projects" / "python-config"


def test_a_stack_without_configuration_is_asked_for_the_missing_value(cli_dir: Path) -> None:
    with PulumiWorkspace(PROGRAM, cli_dir) as ws:
        ws.run("stack", "init", ws.stack)
        preview = ws.run("preview", check=False)
        output = preview.stdout + preview.stderr
        assert preview.returncode != 0
        assert "Missing required configuration variable 'python-config:githubUrl'" in output, output
        assert "Traceback" not in output and "AttributeError" not in output, output

        ws.run("config", "set", "githubUrl", "https://github.com/octo-org")
        assert ws.run("up", "--yes").returncode == 0
        assert ws.run("stack", "output", "github_url").stdout.strip() == "https://github.com/octo-org"
