"""``actions-runners-simulator runner``: a simulated runner as a plain local process, started as actions/runner's
``run.sh`` is started by an autoscaler that runs runners as processes (the scaleset crate's example autoscaler
runs ``RUNNER_COMMAND`` with ``ACTIONS_RUNNER_INPUT_JITCONFIG`` set).

What it does, as actions/runner v2.336.0 does (github.com/actions/runner at 258d6c8, paths below):

- It reads its just-in-time config from ``--jitconfig`` or ``ACTIONS_RUNNER_INPUT_JITCONFIG`` (any
  ``ACTIONS_RUNNER_INPUT_<ARG>`` stands for ``--<arg>``, and is erased once read: CommandSettings.cs), and
  connects to the server the config names: the simulator's Actions service (runner_service.py). It is
  ephemeral: one job, then it exits 0.
- Its session: a 409 "A session for this runner already exists." is retried every 30 s, 8 times, then the
  listener exits 5 (MessageListener.cs:52-53, 526-546); a registration gone ends it with "The runner no longer
  exists on the server." (Runner.cs:823-829). Both exit run.sh with 0 (run-helper.sh.template:36-81).
- While it runs a job it renews the job's lock every 60 s (JobDispatcher.cs:886); killed, it renews no more and
  GitHub abandons the job later (lost).
- SIGTERM or SIGINT: a running job is cancelled (lost, reported ``canceled``), the session deleted, and the
  process exits 143, as run.sh does with the runner image's ``RUNNER_MANUALLY_TRAP_SIG`` (run.sh:32-60).

Durations are actions/runner's, divided by ``ACTIONS_RUNNERS_SIMULATOR_SPEEDUP`` (default 1) as the simulated
runners in pods are (runner.py `RunnerTimings`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import MutableMapping
from types import FrameType
from typing import Any

import requests

from .actions_service import SERVICE_PREFIX
from .jit_config import decode as decode_jit_config
from .runner import SIGTERM_EXIT, RunnerTimings, run_sh_exit
from .runner_service import GONE, POOL_PATH

JIT_VARIABLE = "ACTIONS_RUNNER_INPUT_JITCONFIG"
SPEEDUP_VARIABLE = "ACTIONS_RUNNERS_SIMULATOR_SPEEDUP"
POLL_TIMEOUT_SECONDS = 120.0  # longer than the service's long poll (50 s)
SESSION_CONFLICT_EXIT = 5


class _Stop(Exception):
    """SIGTERM or SIGINT: run.sh forwards it to the listener, which cancels its job and exits."""


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def say(line: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())}: {line}", flush=True)


class _Runner:
    def __init__(self, config: dict[str, Any], timings: RunnerTimings) -> None:
        self._base = f"{config['server']}{SERVICE_PREFIX}/{POOL_PATH}"
        self._http = requests.Session()
        self._http.headers["Authorization"] = f"Bearer {config['secret']}"
        self._runner_id = int(config["runner_id"])
        self._timings = timings
        self.session_id: str | None = None
        self.job: dict[str, Any] | None = None

    def connect(self) -> int | None:
        """Open the session; None when open, else the listener's exit code."""
        for attempt in range(1, self._timings.session_attempts + 1):
            answer = self._http.post(
                f"{self._base}/sessions",
                json={"agent": {"id": self._runner_id}, "ownerName": os.uname().nodename},
                timeout=30,
            )
            if answer.status_code == 200:
                self.session_id = answer.json()["sessionId"]
                say("√ Connected to GitHub")
                say("Listening for Jobs")
                return None
            if answer.status_code != 409:
                say(f"An error occurred: {answer.json().get('message', answer.text)}")
                return 1
            say(f"A session for this runner already exists. (attempt {attempt})")
            if attempt < self._timings.session_attempts:
                time.sleep(self._timings.session_retry_seconds)
        say("Runner listener exit with Session Conflict error, stop the service, no retry needed.")
        return SESSION_CONFLICT_EXIT

    def listen(self) -> int:
        """Poll for the one job, run it, report it; the listener's exit code."""
        while True:
            answer = self._http.get(
                f"{self._base}/messages", params={"sessionId": self.session_id}, timeout=POLL_TIMEOUT_SECONDS
            )
            if answer.status_code == 202:
                continue
            if answer.status_code == 404:
                say(f"{GONE} Cleaning up local configuration.")
                return 0
            answer.raise_for_status()
            message = answer.json()
            self._http.delete(f"{self._base}/messages/{message['messageId']}", timeout=30)
            if message["messageType"] != "RunnerJobRequest":
                continue
            self.job = json.loads(message["body"])
            self._run(self.job)
            self.job = None
            self.end_session()
            return 0

    def _run(self, job: dict[str, Any]) -> None:
        """The job's steps take its duration (None: until it is finished elsewhere); its lock is renewed."""
        name, request_id = job["jobDisplayName"], job["runnerRequestId"]
        say(f"Running job: {name}")
        renew = self._timings.lock_renewal_seconds
        ends = None if job["durationSeconds"] is None else time.monotonic() + float(job["durationSeconds"])
        while ends is None or time.monotonic() < ends:
            time.sleep(renew if ends is None else max(0.0, min(renew, ends - time.monotonic())))
            if ends is not None and time.monotonic() >= ends:
                break
            renewed = self._http.patch(f"{self._base}/jobrequests/{request_id}", json={}, timeout=30)
            if renewed.status_code == 404:  # finished by name (a held job), or taken from it
                say(f"Job {name} completed with result: Succeeded")
                return
        self.report(job, "succeeded")
        say(f"Job {name} completed with result: Succeeded")

    def report(self, job: dict[str, Any], result: str) -> None:
        self._http.patch(f"{self._base}/jobrequests/{job['runnerRequestId']}", json={"result": result}, timeout=30)

    def end_session(self) -> None:
        if self.session_id is not None:
            self._http.delete(f"{self._base}/sessions/{self.session_id}", timeout=10)
            self.session_id = None


def run(jit_config: str | None, environ: MutableMapping[str, str] = os.environ) -> int:
    """run.sh with a JIT config (the argument, else the variable, which is erased): its exit code."""
    encoded = jit_config or environ.pop(JIT_VARIABLE, "")
    if not encoded:
        say(f"An error occurred: no JIT config: give --jitconfig or {JIT_VARIABLE}")
        return run_sh_exit(1, environ) or 0
    try:
        config = decode_jit_config(encoded)
        speedup = float(environ.get(SPEEDUP_VARIABLE, "1"))
        timings = RunnerTimings().faster(speedup)
    except ValueError as error:
        say(f"An error occurred: {error}")
        return run_sh_exit(1, environ) or 0
    runner = _Runner(config, timings)
    for each in (signal.SIGTERM, signal.SIGINT):
        signal.signal(each, _stop)
    try:
        code = runner.connect()
        if code is not None:
            return run_sh_exit(code, environ) or 0
        return run_sh_exit(runner.listen(), environ) or 0
    except _Stop:
        for each in (signal.SIGTERM, signal.SIGINT):
            signal.signal(each, signal.SIG_IGN)
        try:
            if runner.job is not None:
                say(f"Job {runner.job['jobDisplayName']} completed with result: Canceled")
                runner.report(runner.job, "canceled")
            runner.end_session()
        except requests.RequestException as error:  # the simulator gone meanwhile: the exit is the same
            say(f"An error occurred: {error}")
        return SIGTERM_EXIT
    except requests.RequestException as error:
        say(f"An error occurred: {error}")
        return run_sh_exit(1, environ) or 0


if __name__ == "__main__":
    sys.exit(run(None))
