"""Where `serve` leaves its settings for `env` and `job`, and when a record counts as the running simulator's: the
real entry point (`python -m actions_runners_simulator`) in processes of their own, with a home of their own."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actions_runners_simulator import control
from actions_runners_simulator.github_double import GitHubDouble
from actions_runners_simulator.tools import TOOLS, tool_dirs

COMMAND = [sys.executable, "-m", "actions_runners_simulator"]
SERVE_SECONDS = 120


def environment(tmp_path: Path, **xdg: str) -> dict[str, str]:
    """This machine's environment with a home of its own and only the XDG folders given."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith("XDG_")}
    return {**env, "HOME": str(home), **xdg, TOOLS["kube"].variable: str(tool_dirs("kube")["kube"])}


def record_file(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the entry point run with ``env`` keeps its record."""
    for name in ("HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME"):
        if name in env:
            monkeypatch.setenv(name, env[name])
        else:
            monkeypatch.delenv(name, raising=False)
    return control.info_file()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, *args], env=env, capture_output=True, text=True, timeout=60)


class Serve:
    """`serve` running, once it has printed its settings; `stop` ends it and returns what it said on stderr."""

    def __init__(self, env: dict[str, str], tmp_path: Path, *args: str) -> None:
        self._stderr = tmp_path / "serve.stderr"
        with self._stderr.open("w") as stderr:
            self.process = subprocess.Popen(
                [*COMMAND, "serve", "--no-namespace", *args],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        assert line, self._stderr.read_text()
        self.info = json.loads(line)

    def stop(self) -> str:
        self.process.terminate()
        self.process.communicate(timeout=SERVE_SECONDS)
        return self._stderr.read_text()


@contextlib.contextmanager
def stale_record(env: dict[str, str], path: Path, info: dict[str, Any]) -> Iterator[int]:
    """What a simulator that has since ended left behind, its pid now another process's: a record published by a
    process that exits without withdrawing it, then given the pid of a process started after it (a `sleep`, no
    simulator), as a pid reused would be. That pid, while the process lives."""
    publish = f"from actions_runners_simulator import control; assert control.publish({info!r})"
    subprocess.run([sys.executable, "-c", publish], env=env, check=True, timeout=60)
    sleep = subprocess.Popen(["sleep", "600"])
    try:
        path.write_text(json.dumps({**json.loads(path.read_text()), "pid": sleep.pid}))
        yield sleep.pid
    finally:
        sleep.kill()
        sleep.wait()


def exports(info: dict[str, str]) -> str:
    return f"export GITHUB_URL={info['github_url']} GITHUB_TOKEN={info['github_token']} KUBECONFIG={info['kubeconfig']}"


def test_a_wider_settings_folder_is_tightened_and_the_live_record_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = environment(tmp_path)  # no XDG folder: the default place
    path = record_file(env, monkeypatch)
    tool_cache = Path(env["HOME"]) / ".cache" / "pulumi-actions-runners"
    for folder in (tool_cache, path.parent):  # as `tools` makes its cache, and a folder made by hand
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
    serve = Serve(env, tmp_path)
    try:
        assert mode(path.parent) == 0o700
        assert mode(path) == 0o600
        assert mode(tool_cache) == 0o755  # the binaries' cache is not the settings' folder
        assert json.loads(path.read_text())["pid"] == serve.process.pid
        assert run(env, "env").stdout.strip() == exports(serve.info)
        refused = run(env, "job", "start", "nobody")  # reaches the simulator, which has no such runner
        assert refused.returncode == 1 and "the simulator refused (409)" in refused.stderr, refused.stderr
        assert not control.publish({"github_api_url": "http://127.0.0.1:9/api/v3"})  # another serve: unpublished
    finally:
        said = serve.stop()
    assert "Traceback" not in said, said
    assert not path.exists()  # withdrawn at exit


def test_serve_replaces_a_record_whose_pid_is_another_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run").mkdir(mode=0o700)
    env = environment(tmp_path, XDG_RUNTIME_DIR=str(tmp_path / "run"))
    path = record_file(env, monkeypatch)
    with stale_record(env, path, {"github_api_url": "http://127.0.0.1:9/api/v3"}):
        serve = Serve(env, tmp_path)
        try:
            assert json.loads(path.read_text())["pid"] == serve.process.pid
            assert run(env, "env").stdout.strip() == exports(serve.info)
        finally:
            said = serve.stop()
    assert "another simulator is published" not in said, said


def test_readers_ignore_a_record_whose_pid_is_another_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = environment(tmp_path, XDG_STATE_HOME=str(tmp_path / "state"))
    path = record_file(env, monkeypatch)
    github = GitHubDouble().start()  # another simulator's GitHub, unpublished, where the record points
    try:
        info = {
            "github_url": f"{github.url}/octo-org/octo-repo",
            "github_api_url": github.api_url,
            "github_token": "ghp_simulator",
            "kubeconfig": str(tmp_path / "gone" / "kubeconfig"),
        }
        with stale_record(env, path, info) as pid:
            for args in (("env",), ("job", "start", "runner-0")):
                answer = run(env, *args)
                assert answer.returncode == 1, answer.stdout
                assert "no simulator is running" in answer.stderr, answer.stderr
                assert f"(process {pid})" in answer.stderr, answer.stderr
    finally:
        github.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user's takes root")
def test_a_settings_folder_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = environment(tmp_path, XDG_STATE_HOME=str(tmp_path / "state"))
    path = record_file(env, monkeypatch)
    path.parent.mkdir(parents=True, mode=0o700)
    os.chown(path.parent, 65534, 65534)
    for args in (("env",), ("serve",)):
        answer = run(env, *args)
        assert answer.returncode == 2, answer.stdout
        assert f"{path.parent} belongs to another user" in answer.stderr, answer.stderr
    assert mode(path.parent) == 0o700 and path.parent.stat().st_uid == 65534  # left as it was
