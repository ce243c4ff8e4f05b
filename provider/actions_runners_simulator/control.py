"""A running simulator, from another process: `serve` leaves its JSON line in a file of the user's own while it
runs (in a folder only the user may enter), so that `actions-runners-simulator job start RUNNER` finds it with no
address to copy; jobs are started and finished through the GitHub double's control endpoint (``/_simulator/jobs``).
One simulator is published at a time: another `serve` meanwhile runs unpublished."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

import requests

REQUEST_SECONDS = 10
POLL_SECONDS = 0.5
# What a program and the provider read from the environment of pulumi, from `serve`'s settings.
ENVIRONMENT = {"GITHUB_URL": "github_url", "GITHUB_TOKEN": "github_token", "KUBECONFIG": "kubeconfig"}


class NoSimulator(Exception):
    pass


def info_file() -> Path:
    """In ``$XDG_RUNTIME_DIR`` (the user's own), else under ``~/.cache``: never a folder other users may write."""
    root = Path(os.environ.get("XDG_RUNTIME_DIR") or Path.home() / ".cache")
    return root / "pulumi-actions-runners" / "simulator.json"


def publish(info: dict[str, Any]) -> bool:
    """Write the JSON line `serve` prints with this process's id, readable by this user alone (it holds the
    simulator's credential); False, writing nothing, when another simulator that still runs is published."""
    path = info_file()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError, ValueError, KeyError):
        if _alive(json.loads(path.read_text())["pid"]):
            return False
    work = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(work, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump({**info, "pid": os.getpid()}, out)
    work.replace(path)
    return True


def withdraw() -> None:
    """Remove the file if it is this process's (a later `serve` may have published its own since)."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        if json.loads(info_file().read_text())["pid"] == os.getpid():
            info_file().unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, and another user's
    return True


def running(wait_seconds: float = 0.0) -> dict[str, Any]:
    """The running simulator's settings, once it answers (waiting up to ``wait_seconds`` for one starting)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            info = json.loads(info_file().read_text())
            requests.get(control_url(info) + "/runners", timeout=REQUEST_SECONDS).raise_for_status()
            return info
        except (OSError, ValueError, KeyError, requests.RequestException):
            if time.monotonic() >= deadline:
                raise NoSimulator(
                    f"no simulator answers (waited {wait_seconds:g} s for {info_file()} and its GitHub): start one "
                    "with `actions-runners-simulator serve`"
                ) from None
        time.sleep(POLL_SECONDS)


def environment(wait_seconds: float) -> str:
    """Shell lines that put the running simulator's settings where a program and the provider read them."""
    info = running(wait_seconds)
    exports = " ".join(f"{name}={shlex.quote(str(info[key]))}" for name, key in ENVIRONMENT.items())
    return f"export {exports}"


def control_url(info: dict[str, Any]) -> str:
    """The GitHub double's control endpoint, from `serve`'s settings."""
    return info["github_api_url"].removesuffix("/api/v3") + "/_simulator"


def post_job(control: str, path: str, runner_name: str, seconds: float | None = None) -> requests.Response:
    """``jobs``: a job starts on the runner, held until finished (or for ``seconds``); ``jobs/finish``: it ends."""
    payload: dict[str, Any] = {"runner_name": runner_name}
    if path == "jobs":
        payload["duration_seconds"] = seconds
    return requests.post(f"{control}/{path}", json=payload, timeout=REQUEST_SECONDS)


def job(action: str, runner_name: str, seconds: float | None = None, *, after_refusal: float | None = None) -> str:
    """Start a job on an online, idle runner (held until finished, or for ``seconds``), or finish its job; what
    happened, in words. ``after_refusal``: finish it only once GitHub has refused the runner's RemoveRunner with
    422 (waiting up to that many seconds), so that an update is seen waiting on it. NoSimulator when none runs
    or it refuses (no such runner, busy already, none to finish)."""
    info = running()
    waited = "" if after_refusal is None else _refused(info, runner_name, after_refusal)
    try:
        answer = post_job(control_url(info), "jobs" if action == "start" else "jobs/finish", runner_name, seconds)
    except requests.RequestException as error:
        raise NoSimulator(f"the simulator at {control_url(info)} did not answer: {error}") from None
    if answer.status_code >= 400:
        raise NoSimulator(f"the simulator refused ({answer.status_code}): {answer.text.strip()}")
    if action == "finish":
        return f"{waited}the job on {runner_name} has finished"
    held = (
        f"for {seconds:g} s" if seconds is not None else f"until `actions-runners-simulator job finish {runner_name}`"
    )
    return f"a job runs on {runner_name} {held}: GitHub answers RemoveRunner with 422 until it ends"


def _refused(info: dict[str, Any], runner_name: str, wait_seconds: float) -> str:
    """Wait until a RemoveRunner of the runner was answered 422; say when, from the double's own call log."""
    started, deadline = time.monotonic(), time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        runners = _get(info, "runners")
        ids = {str(r["id"]) for r in runners if r["name"] == runner_name}
        refused = [
            call
            for call in _get(info, "calls")
            if call["method"] == "DELETE" and call["status"] == 422 and call["path"].rsplit("/", 1)[-1] in ids
        ]
        if refused:
            return f"RemoveRunner of {runner_name} was answered 422 (busy) after {time.monotonic() - started:.0f} s: "
        time.sleep(POLL_SECONDS)
    raise NoSimulator(f"no RemoveRunner of {runner_name} was answered 422 within {wait_seconds:g} s; its job runs on")


def _get(info: dict[str, Any], what: str) -> Any:
    try:
        answer = requests.get(f"{control_url(info)}/{what}", timeout=REQUEST_SECONDS)
        answer.raise_for_status()
        return answer.json()
    except (requests.RequestException, ValueError) as error:
        raise NoSimulator(f"the simulator did not answer {what}: {error}") from None
