"""A running simulator, from another process: `serve` leaves its JSON line in a file of the user's own while it
runs (in a folder of its own that only the user may enter, `settings_folder`), so that
`actions-runners-simulator job start RUNNER` finds it with no address to copy; jobs are started and finished
through the GitHub double's control endpoint (``/_simulator/jobs``). One simulator is published at a time:
another `serve` meanwhile runs unpublished. A record counts only while the process that wrote it runs (`_alive`),
not another that has since been given its pid."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

REQUEST_SECONDS = 10
POLL_SECONDS = 0.5
# What a program and the provider read from the environment of pulumi, from `serve`'s settings.
ENVIRONMENT = {"GITHUB_URL": "github_url", "GITHUB_TOKEN": "github_token", "KUBECONFIG": "kubeconfig"}
FOLDER_NAME = "actions-runners-simulator"
RECORD_NAME = "simulator.json"
SERVE_COMMAND = "actions-runners-simulator serve"


class NoSimulator(Exception):
    pass


class UnsafeFolder(Exception):
    pass


def info_file() -> Path:
    """``$XDG_RUNTIME_DIR/actions-runners-simulator/simulator.json`` when that is set: the record of a running
    process is what the folder is for (the user's own, emptied at logout); else under ``$XDG_STATE_HOME``
    (``~/.local/state``), the user's own state. Never the binaries' cache (``~/.cache/pulumi-actions-runners``,
    0755). An XDG variable that is not an absolute path is ignored, as the XDG spec asks."""
    runtime, state = (os.environ.get(name, "") for name in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME"))
    if os.path.isabs(runtime):
        root = Path(runtime)
    else:
        root = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return root / FOLDER_NAME / RECORD_NAME


def settings_folder() -> Path:
    """The record's folder, made 0700, or tightened to 0700 when it is ours and wider: another user who may enter
    it could leave a record that sends `env` and `job` to a GitHub of theirs. UnsafeFolder, changing nothing,
    when it is not a folder or is another user's."""
    folder = info_file().parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    status = folder.lstat()
    if not stat.S_ISDIR(status.st_mode):
        raise UnsafeFolder(f"{folder} is not a folder: remove it, and `serve` makes one there")
    if status.st_uid != os.geteuid():
        raise UnsafeFolder(
            f"{folder} belongs to another user (uid {status.st_uid}), who could forge the simulator's settings "
            "there: remove it, or point XDG_RUNTIME_DIR or XDG_STATE_HOME at a folder of your own"
        )
    if stat.S_IMODE(status.st_mode) != 0o700:
        folder.chmod(0o700)
    return folder


def publish(info: dict[str, Any]) -> bool:
    """Write the JSON line `serve` prints with what identifies this process, readable by this user alone (it
    holds the simulator's credential); False, writing nothing, when another simulator that still runs is
    published. UnsafeFolder when the folder cannot be made the user's own."""
    path = settings_folder() / RECORD_NAME
    record = _record(path)
    if record is not None and _alive(record):
        return False
    descriptor, work = tempfile.mkstemp(prefix=f".{RECORD_NAME}.", dir=path.parent)  # 0600
    with os.fdopen(descriptor, "w") as out:
        json.dump({**info, "pid": os.getpid(), "process_start": _process_start(os.getpid())}, out)
    os.replace(work, path)
    return True


def withdraw() -> None:
    """Remove the file if it is this process's (a later `serve` may have published its own since)."""
    path = info_file()
    record = _record(path)
    if record is not None and record["pid"] == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()


def _record(path: Path) -> dict[str, Any] | None:
    """The record in ``path`` when there is one, written by this user (not a link, nor a file another user left
    while the folder was open to them); else None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(descriptor) as file:
        if os.fstat(descriptor).st_uid != os.geteuid():
            return None
        try:
            record = json.load(file)
        except (OSError, ValueError):
            return None
    return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None


def _process_start(pid: int) -> str | None:
    """What tells a process from a later one given the same pid: the boot's id and the process's start time
    (field 22 of /proc/PID/stat, clock ticks since boot). None when there is no such process, or no /proc."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()  # from field 3 on
    except OSError:
        return None
    return f"{boot}/{fields[19]}"


def _alive(record: dict[str, Any]) -> bool:
    """Whether the process that wrote the record still runs: its pid, started when it was recorded, so that a pid
    reused by another process is not taken for it. Without /proc (not Linux), whether the pid is in use."""
    started = _process_start(record["pid"])
    if started is not None or record.get("process_start") is not None:
        return started == record.get("process_start")
    try:
        os.kill(record["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, and another user's
    return True


def running(wait_seconds: float = 0.0) -> dict[str, Any]:
    """The running simulator's settings, once it answers (waiting up to ``wait_seconds`` for one starting). A
    record whose process has ended, its pid perhaps another process's now, is stale: no simulator runs."""
    deadline = time.monotonic() + wait_seconds
    while True:
        path = settings_folder() / RECORD_NAME
        record = _record(path)
        if record is None:
            why = f"no simulator is running: none is published in {path}. Start one with `{SERVE_COMMAND}`"
        elif not _alive(record):
            why = (
                f"no simulator is running: the one recorded in {path} (process {record['pid']}) has ended, and its "
                f"pid may be another process's now. Start one with `{SERVE_COMMAND}`, which replaces the record"
            )
        else:
            try:
                requests.get(control_url(record) + "/runners", timeout=REQUEST_SECONDS).raise_for_status()
                return record
            except (KeyError, requests.RequestException) as error:
                why = f"the simulator recorded in {path} (process {record['pid']}) does not answer: {error}"
        if time.monotonic() >= deadline:
            raise NoSimulator(f"{why} (waited {wait_seconds:g} s)")
        time.sleep(POLL_SECONDS)


def environment(wait_seconds: float) -> str:
    """Shell lines that put the running simulator's settings where a program and the provider read them."""
    info = running(wait_seconds)
    exports = " ".join(f"{name}={shlex.quote(str(info[key]))}" for name, key in ENVIRONMENT.items() if key in info)
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


def queue_jobs(labels: list[str], seconds: float, count: int, repository: str | None = None) -> str:
    """Queue ``count`` jobs with ``runs-on: labels`` in the simulated repository (or ``repository``, a config.sh
    --url of the same GitHub), each running ``seconds`` once a runner takes it; what was queued, in words."""
    info = running()
    payload = {"labels": labels, "duration_seconds": seconds, "count": count, "url": repository or info["github_url"]}
    queued = _post(info, "jobs/queue", payload)
    ids = ", ".join(str(job["id"]) for job in queued)
    return (
        f"{len(queued)} job(s) queued with runs-on [{', '.join(labels)}] for {seconds:g} s each (ids {ids}): GitHub "
        "hands each to an idle runner with those labels, or to the scale set they name; `job list` shows them"
    )


def list_jobs() -> str:
    """Every job of the running simulator, one JSON object per line: times, runner, and whether it was lost."""
    return "\n".join(json.dumps(job) for job in _get(running(), "jobs"))


def release(version: str, published_at: str | None) -> str:
    """Publish an actions/runner release on the running simulator's GitHub (``published_at`` RFC 3339, None: now);
    what it means for the runners, in words. NoSimulator when none runs or it refuses."""
    published = _post(running(), "releases", {"version": version, "published_at": published_at})
    return (
        f"actions/runner {published['version']} is published ({published['published_at']}): GitHub sends no jobs "
        f"to older runners after {published['older_runners_get_no_jobs_after']}"
    )


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


def _post(info: dict[str, Any], what: str, payload: dict[str, Any]) -> Any:
    """POST to the control endpoint: its JSON answer; NoSimulator if it does not answer or refuses."""
    try:
        answer = requests.post(f"{control_url(info)}/{what}", json=payload, timeout=REQUEST_SECONDS)
    except requests.RequestException as error:
        raise NoSimulator(f"the simulator at {control_url(info)} did not answer: {error}") from None
    if answer.status_code >= 400:
        raise NoSimulator(f"the simulator refused ({answer.status_code}): {answer.text.strip()}")
    return answer.json()


def _get(info: dict[str, Any], what: str) -> Any:
    try:
        answer = requests.get(f"{control_url(info)}/{what}", timeout=REQUEST_SECONDS)
        answer.raise_for_status()
        return answer.json()
    except (requests.RequestException, ValueError) as error:
        raise NoSimulator(f"the simulator did not answer {what}: {error}") from None
