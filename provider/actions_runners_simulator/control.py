"""A running simulator, from another process: `serve` leaves its JSON line in a file of the user's own while it
runs, so that `actions-runners-simulator job start RUNNER` finds it with no address to copy; jobs are started and
finished through the GitHub double's control endpoint (``/_simulator/jobs``)."""

from __future__ import annotations

import json
import os
import shlex
import tempfile
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
    return Path(tempfile.gettempdir()) / f"actions-runners-simulator-{os.getuid()}.json"


def publish(info: dict[str, Any]) -> Path:
    """Write the JSON line `serve` prints, readable by this user alone (it holds the simulator's credential)."""
    path = info_file()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(info, out)
    return path


def withdraw() -> None:
    info_file().unlink(missing_ok=True)


def running(wait_seconds: float = 0.0) -> dict[str, Any]:
    """The running simulator's settings, once it answers (waiting up to ``wait_seconds`` for one starting)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            info = json.loads(info_file().read_text())
            requests.get(_control(info) + "/runners", timeout=REQUEST_SECONDS).raise_for_status()
            return info
        except (OSError, ValueError, requests.RequestException):
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


def _control(info: dict[str, Any]) -> str:
    return info["github_api_url"].removesuffix("/api/v3") + "/_simulator"


def job(action: str, runner_name: str, seconds: float | None = None, *, after_refusal: float | None = None) -> str:
    """Start a job on an online, idle runner (held until finished, or for ``seconds``), or finish its job; what
    happened, in words. ``after_refusal``: finish it only once GitHub has refused the runner's RemoveRunner with
    422 (waiting up to that many seconds), so that an update is seen waiting on it. NoSimulator when none runs
    or it refuses (no such runner, busy already, none to finish)."""
    info = running()
    control = _control(info) + "/jobs"
    waited = "" if after_refusal is None else _refused(info, runner_name, after_refusal)
    if action == "start":
        url, payload = control, {"runner_name": runner_name, "duration_seconds": seconds}
    else:
        url, payload = f"{control}/finish", {"runner_name": runner_name}
    try:
        answer = requests.post(url, json=payload, timeout=REQUEST_SECONDS)
    except requests.RequestException as error:
        raise NoSimulator(f"the simulator at {control} did not answer: {error}") from None
    if answer.status_code >= 400:
        raise NoSimulator(f"the simulator refused: {answer.json().get('message', answer.text)}")
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
    answer = requests.get(f"{_control(info)}/{what}", timeout=REQUEST_SECONDS)
    answer.raise_for_status()
    return answer.json()
