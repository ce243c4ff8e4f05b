"""The runner container's own command, run for real: bash as PID 1 of a PID namespace of its own (``unshare``),
as in a container, where the kernel drops a SIGTERM that PID 1 has no handler for. A pod deleted before its
shell execs run.sh must end at once, its runner never listening: in Docker mode while it waits for Docker (the
trap comes first), and while config.sh runs (the trap runs once config.sh returns, before run.sh)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from pulumi_actions_runners.github.releases import KNOWN_IMAGE
from pulumi_actions_runners.kube.manifests import DOCKER_HOST, RunnerSpec, pod_manifest

SOCKET = DOCKER_HOST.removeprefix("unix://")
STOP_SECONDS = 10.0  # far more than the Docker wait's 1 s sleep or the fake config.sh's 1 s


def _own_pid_namespace() -> bool:
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(
    not _own_pid_namespace(), reason="needs `unshare --pid --fork` (util-linux, as root) for a PID 1 of its own"
)


def _command(docker: bool, home: Path) -> str:
    spec = RunnerSpec("https://github.com/o", "ci", "runner-0", (), True, KNOWN_IMAGE, "h", docker=docker)
    runner = next(c for c in pod_manifest(spec)["spec"]["containers"] if c["name"] == "runner")
    assert runner["command"][:2] == ["/bin/bash", "-c"]
    # Only where it looks: a socket that never appears, and a runner folder with stand-ins for its scripts.
    return runner["command"][-1].replace(SOCKET, str(home / "docker.sock")).replace("/home/runner", str(home))


def _run_as_pid_1(script: str, home: Path) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "bash", "-c", script], cwd=home)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        if children:
            return process, int(children[0])
        time.sleep(0.01)
    process.kill()
    raise AssertionError("bash did not start under unshare")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "config.sh").write_text(f"#!/bin/sh\nsleep 1\necho registered > {tmp_path}/registered\n")
    (tmp_path / "run.sh").write_text(f"#!/bin/sh\necho listening > {tmp_path}/listening\nexec sleep 300\n")
    for script in ("config.sh", "run.sh"):
        (tmp_path / script).chmod(0o755)
    return tmp_path


def _terminated(process: subprocess.Popen, pid_1: int) -> int | None:
    """SIGTERM to the container's PID 1; its exit code, or None if it runs on (the signal dropped)."""
    subprocess.run(["kill", "-TERM", str(pid_1)], check=True)
    try:
        return process.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


def test_a_pod_deleted_while_its_runner_waits_for_docker_ends_at_once(home: Path) -> None:
    process, pid_1 = _run_as_pid_1(_command(docker=True, home=home), home)
    time.sleep(0.5)  # in the wait's loop: no socket yet
    assert _terminated(process, pid_1) == 143, "SIGTERM dropped while waiting for Docker: the pod takes its grace"
    assert not (home / "registered").exists() and not (home / "listening").exists()


@pytest.mark.parametrize("docker", [False, True], ids=["token runner", "docker mode"])
def test_a_pod_deleted_while_config_sh_runs_ends_once_it_returns_and_never_listens(home: Path, docker: bool) -> None:
    script = _command(docker=docker, home=home)
    with socket.socket(socket.AF_UNIX) as docker_socket:
        if docker:
            docker_socket.bind(str(home / "docker.sock"))  # Docker answers: the wait ends at once
        process, pid_1 = _run_as_pid_1(script, home)
        time.sleep(0.3)  # in config.sh (1 s)
        assert _terminated(process, pid_1) == 143
    assert (home / "registered").exists(), "config.sh ran to its end (its registration made, offline)"
    assert not (home / "listening").exists(), "run.sh never started: the runner never listened"
