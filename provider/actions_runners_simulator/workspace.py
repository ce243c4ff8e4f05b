"""The real ``pulumi`` CLI, run offline: a throwaway copy of the project, a local file backend and a temporary
``PULUMI_HOME``, so nothing is created or downloaded and nothing outside the copy is written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import yaml

PASSPHRASE = "simulator-only-passphrase"
COMMAND_TIMEOUT_SECONDS = 600


class PulumiFailed(Exception):
    def __init__(self, args: list[str], result: subprocess.CompletedProcess[str]) -> None:
        super().__init__(f"pulumi {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        self.result = result


class PulumiWorkspace:
    def __init__(self, project_dir: Path, cli_dir: Path, *, stack: str = "dev") -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pulumi-workspace-"))
        self.project = self.root / "project"
        self.stack = stack
        self._copy_project(project_dir)
        # The CLI, then this interpreter's environment (the project's virtualenv, as if activated).
        path = os.pathsep.join([str(cli_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        self.env = {
            **os.environ,
            "PATH": path,
            "PULUMI_HOME": str(self.root / "home"),
            "PULUMI_BACKEND_URL": f"file://{self.root / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            "NO_COLOR": "1",
        }
        (self.root / "state").mkdir()

    def _copy_project(self, project_dir: Path) -> None:
        """The project's own Pulumi.yaml, as shipped, and its program."""
        self.project.mkdir()
        shutil.copy(project_dir / "Pulumi.yaml", self.project / "Pulumi.yaml")
        main = yaml.safe_load((project_dir / "Pulumi.yaml").read_text()).get("main", ".")
        shutil.copytree(project_dir / main, self.project / main, ignore=shutil.ignore_patterns("__pycache__"))

    def run(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        command = ["pulumi", *args, "--non-interactive", "--cwd", str(self.project)]
        result = subprocess.run(
            command,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
            check=False,
        )
        if check and result.returncode != 0:
            raise PulumiFailed(list(args), result)
        return result

    def new_stack(self, config: Mapping[str, str], secrets: Mapping[str, str]) -> None:
        self.run("stack", "init", self.stack)
        for key, value in config.items():
            self.run("config", "set", key, value)
        for key, value in secrets.items():
            self.run("config", "set", "--secret", key, stdin=value)  # on stdin, not in the process list

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PulumiWorkspace:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
