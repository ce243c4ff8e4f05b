"""What a runner's pod says about its runner: ended, stuck, live, and why it does not run, in the user's words.

The runner is the container named ``runner``: a pod's other containers (a user's sidecars, Docker) may run on
after it has exited, or crash without touching it; init containers count only while they hold it back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .manifests import VERSION_DEPRECATED_EXIT_CODE

RUNNER_CONTAINER = "runner"
# Waiting reasons of a container that will not run by itself: it holds no job, and its runner will not register.
STUCK_REASONS = ("CrashLoopBackOff", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
PULL_REASONS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName")
# A runner that runs with no registration of it: removed in GitHub while its listener did not notice (the
# token-refresh path retries for about 11 minutes, or for ever: actions/runner#3328). It takes no job.
UNREGISTERED = "Unregistered"
# Recorded phases of a runner that will not run a job again by itself: the next update starts it anew.
ENDED_PHASES = ("Succeeded", "Failed", "Gone", UNREGISTERED, *STUCK_REASONS)
# What the runner prints when config.sh fails, in the user's words. A token expired or used up is a 404 of
# GitHub's runner-registration endpoint, in .NET's words ("Response status code does not indicate success: 404
# (Not Found)."): the runner never says "expired".
_RUNNER_ERRORS = (
    (("404 (not found)",), "the registration token has expired or was used up"),
    (("same name", "already exists"), "the runner name is taken in GitHub"),
)
# Exits of a runner stopped from outside, not failures of its own: run.sh exits 143 on SIGTERM; 137 is SIGKILL.
_STOPPED = {
    143: "the runner was stopped (SIGTERM, exit 143): its pod was deleted or evicted, or its node shut down",
    137: "the runner was killed (SIGKILL, exit 137): out of memory, or still running when its grace period ended",
}


def runner_status(pod: Any) -> Any | None:
    statuses = (pod.status.container_statuses or []) if pod.status is not None else []
    return next((status for status in statuses if status.name == RUNNER_CONTAINER), None)


def runner_exit_code(pod: Any) -> int | None:
    """The exit code of a runner container that will not start again (None while it runs or will restart)."""
    status = runner_status(pod)
    terminated = status.state.terminated if status is not None and status.state is not None else None
    if terminated is None:
        return None
    policy = pod.spec.restart_policy if pod.spec is not None else "Always"
    if policy == "Never" or (policy == "OnFailure" and terminated.exit_code == 0):
        return int(terminated.exit_code)
    return None


def runner_running(pod: Any) -> bool:
    """Whether the runner container runs now (not exited, restarting, waiting for its image or Secret)."""
    status = runner_status(pod)
    return status is not None and status.state is not None and status.state.running is not None


def pod_finished(pod: Any) -> bool:
    """A pod that will not run again, or whose runner will not: it holds no job."""
    if pod.status is None:
        return False
    return pod.status.phase in ("Succeeded", "Failed") or runner_exit_code(pod) is not None


def pod_stuck(pod: Any) -> str | None:
    """Why the runner cannot run (its crash loop, an image that cannot be pulled, an init container that holds it
    back), or None: a running runner is not stuck, whatever its pod's other containers do."""
    if pod.status is None:
        return None
    runner = runner_status(pod)
    if runner is not None and runner.state is not None and runner.state.running is not None:
        return None
    for status in [*([runner] if runner is not None else []), *(pod.status.init_container_statuses or [])]:
        waiting = status.state.waiting if status.state is not None else None
        if waiting is not None and waiting.reason in STUCK_REASONS:
            return str(waiting.reason)
    return None


def pod_live(pod: Any) -> bool:
    """A pod whose runner runs (or will): not ended, stuck or terminating."""
    return not pod_finished(pod) and not pod_stuck(pod) and pod.metadata.deletion_timestamp is None


def runs_unregistered(pod: Any | None, registration: dict[str, Any] | None, now: datetime, after: float) -> bool:
    """Whether the pod's runner has run for longer than ``after`` seconds (a registration takes seconds) while
    GitHub lists no registration of it: it takes no job, so replacing it loses none."""
    if pod is None or registration is not None or pod.metadata.deletion_timestamp is not None:
        return False
    status = runner_status(pod)
    running = status.state.running if status is not None and status.state is not None else None
    started = running.started_at if running is not None else None
    return isinstance(started, datetime) and (now - started).total_seconds() > after


def pod_phase(pod: Any | None, *, unregistered: bool = False) -> str:
    """What a refresh records of a runner's pod: its phase (its runner's outcome, if the runner has exited for
    good while other containers run on), "Gone", the reason it is stuck, or ``UNREGISTERED`` (see
    `runs_unregistered`)."""
    if pod is None:
        return "Gone"
    if unregistered:
        return UNREGISTERED
    if stuck := pod_stuck(pod):
        return stuck
    phase = pod.status.phase if pod.status is not None else "Pending"
    code = runner_exit_code(pod)
    if phase not in ("Succeeded", "Failed") and code is not None:
        return "Succeeded" if code == 0 else "Failed"
    return str(phase)


def pod_problem(pod: Any | None, *, unregistered: bool = False) -> str | None:
    """What a refresh reports of a runner that will not run a job again without an update, None if nothing."""
    if pod is not None and unregistered:
        return (
            "its runner runs, but GitHub lists no registration of it (removed in GitHub while its listener did "
            "not notice, as actions/runner may for 11 minutes or for ever), so it takes no job; the next update "
            "replaces it"
        )
    if pod is None or pod_phase(pod) in ("Succeeded", "Running", "Pending"):
        return None
    return why_not_running(pod)


def why_not_running(pod: Any) -> str:
    """The runner container's own account (its termination message: config.sh's error with
    FallbackToLogsOnError), else its state, else what holds it back, in the user's words."""
    if pod is None or pod.status is None:
        return "the pod has no status"
    runner = runner_status(pod)
    for status in [*([runner] if runner is not None else []), *(pod.status.init_container_statuses or [])]:
        state, last = status.state, status.last_state
        waiting = state.waiting if state is not None else None
        terminated = (state.terminated if state is not None else None) or (last.terminated if last else None)
        whose = "" if status is runner else f"container {status.name}: "
        if waiting is not None and waiting.reason in PULL_REASONS:
            return f"{whose}the image {status.image} could not be pulled ({waiting.reason}: {waiting.message or ''})"
        if terminated is not None and terminated.exit_code == VERSION_DEPRECATED_EXIT_CODE and status is runner:
            return (
                f"the runner's version ({status.image}) is deprecated: GitHub sends it no jobs (it exited with code "
                f"{VERSION_DEPRECATED_EXIT_CODE}); set image to a current ghcr.io/actions/actions-runner release"
            )
        if terminated is not None and status is runner and terminated.exit_code in _STOPPED:
            if terminated.reason == "OOMKilled":
                return f"the runner was killed for memory (OOMKilled, exit {terminated.exit_code})"
            return _STOPPED[terminated.exit_code]
        if terminated is not None and terminated.exit_code != 0:
            message = (terminated.message or "").strip()
            plain = next((words for keys, words in _RUNNER_ERRORS if any(k in message.lower() for k in keys)), None)
            said = f": {message.splitlines()[-1][:300]}" if message else ""
            exited = f"{'the runner' if status is runner else 'it'} exited with code {terminated.exit_code}"
            return f"{whose}{plain or exited}{said}"
    if runner is not None and runner.state is not None and runner.state.waiting is not None:
        return f"its container is waiting ({runner.state.waiting.reason})"
    return f"phase {pod.status.phase}"
