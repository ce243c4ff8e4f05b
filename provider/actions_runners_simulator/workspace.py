"""The real ``pulumi`` CLI, run offline: a throwaway copy of the project, a local file backend and a temporary
``PULUMI_HOME``, so nothing is created or downloaded and nothing outside the copy is written."""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import yaml

from pulumi_actions_runners import __version__

from .tools import NODEJS_HOST_VERSION, YAML_HOST_VERSION

PASSPHRASE = "simulator-only-passphrase"
COMMAND_TIMEOUT_SECONDS = 600
STOP_SECONDS = 30
# With --yes, these preview first, then act: a second run of the program and a provider process of its own.
ACTING_COMMANDS = ("up", "destroy", "refresh")


class PulumiFailed(Exception):
    def __init__(self, args: list[str], result: subprocess.CompletedProcess[str]) -> None:
        super().__init__(f"pulumi {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        self.result = result


def _interruptible() -> None:
    """In the child: SIGINT as by default. A job a shell starts in the background (a CI step's `cmd &`) ignores
    it, and children inherit that, so stop()'s Ctrl-C would never reach pulumi."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class PulumiProcess:
    """A pulumi command running in the background. Its output goes to files, not pipes, so a chatty command
    never stalls on a full pipe while nobody reads it."""

    def __init__(self, args: list[str], command: list[str], env: Mapping[str, str], workdir: Path) -> None:
        self.args = args
        output = tempfile.mkdtemp(prefix="output-", dir=workdir)
        self._stdout = open(Path(output) / "stdout", "w+")  # noqa: SIM115 - closed by wait()
        self._stderr = open(Path(output) / "stderr", "w+")  # noqa: SIM115 - closed by wait()
        self._process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=self._stderr,
            preexec_fn=_interruptible,
        )

    def running(self) -> bool:
        return self._process.poll() is None

    def wait(self, *, timeout: float = COMMAND_TIMEOUT_SECONDS, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Its result once it exits (stopped if it runs past ``timeout``); PulumiFailed if it failed and ``check``."""
        try:
            returncode = self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            returncode = self._process.returncode
        result = subprocess.CompletedProcess(self.args, returncode, self._read(self._stdout), self._read(self._stderr))
        if check and returncode != 0:
            raise PulumiFailed(self.args, result)
        return result

    def stop(self) -> None:
        """Interrupt it as Ctrl-C would (pulumi then cancels its update), killing it if it does not end soon."""
        if not self.running():
            return
        self._process.send_signal(signal.SIGINT)
        try:
            self._process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    @staticmethod
    def _read(file: TextIO) -> str:
        with file:
            file.seek(0)
            return file.read()


def yaml_host(folder: Path) -> dict[str, Path]:
    """Pulumi's YAML language host (tools/pulumi-yaml's folder), as a workspace's ``plugins`` entry."""
    return {f"language-yaml-v{YAML_HOST_VERSION}": folder / "pulumi-language-yaml"}


def nodejs_host(folder: Path) -> dict[str, Path]:
    """Our Node.js language host (tools/pulumi-languages' folder), as a workspace's ``plugins`` entry."""
    return {f"language-nodejs-v{NODEJS_HOST_VERSION}": folder / "pulumi-language-nodejs"}


def provider_plugin() -> dict[str, Path]:
    """The provider plugin as this environment installs it (the package's console script), as a ``plugins``
    entry: what `pulumi plugin install` would place."""
    binary = Path(sys.executable).parent / "pulumi-resource-actions-runners"
    return {f"resource-actions-runners-v{__version__}": binary}


class PulumiWorkspace:
    def __init__(
        self,
        project_dir: Path,
        cli_dir: Path,
        *,
        stack: str = "dev",
        kubernetes_plugin_dir: Path | None = None,
        plugins: Mapping[str, Path] | None = None,
        skip_preview: bool = True,
    ) -> None:
        """``kubernetes_plugin_dir`` holds pulumi-resource-kubernetes (tools/pulumi-kubernetes), installed here
        as the version the pulumi_kubernetes SDK asks for, as `pulumi plugin install` would. ``plugins`` are
        more, installed the same way: ``{"language-yaml-v1.25.0": path of pulumi-language-yaml}``; with any,
        plugins on PATH are ignored, as the engine would otherwise take them first (and warn).
        ``skip_preview``: ``up``, ``destroy`` and ``refresh`` with --yes skip the preview they would make first
        (--skip-preview, as the GitOps workflow's `refresh` and `up --plan` do): what a preview shows, a test
        asks of `pulumi preview` itself. False for a tour that shows what a user's `up --yes` prints."""
        self.root = Path(tempfile.mkdtemp(prefix="pulumi-workspace-"))
        self.project = self.root / "project"
        self.stack = stack
        self.skip_preview = skip_preview
        self._copy_project(project_dir)
        # The CLI, then this interpreter's environment (the project's virtualenv, as if activated).
        # The provider plugin's source install (pulumi-resource-actions-runners) is on that PATH too.
        folders = [cli_dir, Path(sys.executable).parent]
        path = os.pathsep.join([*map(str, folders), os.environ.get("PATH", "")])
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
        if kubernetes_plugin_dir is not None:
            self._install_plugin("kubernetes", kubernetes_plugin_dir)
        for folder, binary in (plugins or {}).items():
            self.install_plugin(folder, binary)
        if plugins:
            self.env["PULUMI_IGNORE_AMBIENT_PLUGINS"] = "true"

    def _install_plugin(self, name: str, binary_dir: Path) -> None:
        """A link in PULUMI_HOME's plugin folder, named for the version the program's SDK asks for (its
        pulumi-plugin.json), so the engine finds it offline without copying 170 MB into every workspace."""
        wanted = json.loads((importlib.resources.files(f"pulumi_{name}") / "pulumi-plugin.json").read_text())
        folder = self.root / "home" / "plugins" / f"resource-{name}-v{wanted['version']}"
        folder.mkdir(parents=True)
        (folder / f"pulumi-resource-{name}").symlink_to(binary_dir / f"pulumi-resource-{name}")

    def install_plugin(self, folder: str, binary: Path) -> None:
        """A link to ``binary`` in PULUMI_HOME's plugin ``folder`` (KIND-NAME-vVERSION)."""
        target = self.root / "home" / "plugins" / folder
        target.mkdir(parents=True, exist_ok=True)
        (target / binary.name).symlink_to(binary)

    def _copy_project(self, project_dir: Path) -> None:
        """The project's own Pulumi.yaml, as shipped, and its program."""
        self.project.mkdir()
        shutil.copy(project_dir / "Pulumi.yaml", self.project / "Pulumi.yaml")
        main = yaml.safe_load((project_dir / "Pulumi.yaml").read_text()).get("main", ".")
        ignored = shutil.ignore_patterns("__pycache__", "node_modules", "Pulumi.*.yaml")
        shutil.copytree(project_dir / main, self.project / main, ignore=ignored, dirs_exist_ok=True)

    def run(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self._command(args),
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

    def start(self, *args: str) -> PulumiProcess:
        """The command without waiting for it, so that the caller can watch (and act) while, say, `up` runs."""
        return PulumiProcess(list(args), self._command(args), self.env, self.root)

    def _command(self, args: tuple[str, ...]) -> list[str]:
        acting = bool(args) and args[0] in ACTING_COMMANDS and "--yes" in args
        skip = ["--skip-preview"] if self.skip_preview and acting and "--skip-preview" not in args else []
        return ["pulumi", *args, *skip, "--non-interactive", "--cwd", str(self.project)]

    def new_stack(self, config: Mapping[str, str], secrets: Mapping[str, str]) -> None:
        self.run("stack", "init", self.stack)
        if config:  # one call for all (each call derives the passphrase's key anew: a tenth of a second of CPU)
            self.run("config", "set-all", *(f"--plaintext={key}={value}" for key, value in config.items()))
        for key, value in secrets.items():
            self.run("config", "set", "--secret", key, stdin=value)  # on stdin, not in the process list

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PulumiWorkspace:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
