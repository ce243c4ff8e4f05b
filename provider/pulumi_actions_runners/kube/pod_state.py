"""What a runner's pod says about its runner: ended, stuck, live, and why it does not run, in the user's words.

The runner is the container named ``runner``: a pod's other containers (a user's sidecars, Docker) may run on
after it has exited, or crash without touching it; init containers count only while they hold it back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .manifests import VERSION_DEPRECATED_EXIT_CODE

RUNNER_CONTAINER = "runner"
# The Job controller counts a pod of its Job that carries this finalizer once the pod has finished (or, without a
# podFailurePolicy, as soon as it is terminating), then takes the finalizer off. A pod it counts as failed feeds its
# back-off: 10 s doubling to 10 min before its next pods (k8s.io/kubernetes v1.37.2, pkg/controller/job:
# job_controller.go getNewFinishedPods and isPodFailed, backoff_utils.go). The controller's own deletions take the
# finalizer off first (deleteJobPods), so that a pod it deletes is never counted: so do the provider's.
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
# Waiting reasons of a container that will not run by itself: it holds no job, and its runner will not register.
STUCK_REASONS = ("CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
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


def held_by_job(pod: Any) -> bool:
    """Whether the Job controller has yet to count the pod (JOB_TRACKING_FINALIZER)."""
    return JOB_TRACKING_FINALIZER in (getattr(pod.metadata, "finalizers", None) or ())


def runner_status(pod: Any) -> Any | None:
    statuses = (pod.status.container_statuses or []) if pod.status is not None else []
    return next((status for status in statuses if status.name == RUNNER_CONTAINER), None)


def runner_image(pod: Any) -> str | None:
    """The image of the pod's runner container, as its spec names it."""
    containers = (pod.spec.containers or []) if pod.spec is not None else []
    return next((c.image for c in containers if c.name == RUNNER_CONTAINER), None)


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


def retrying(pod: Any, now: datetime, within: float) -> bool:
    """Whether the runner container runs again after it failed (restarted since a non-zero exit) and started less
    than ``within`` seconds ago: a crash loop's retry, which shows as running for as long as its config.sh takes.
    A container that restarted after exit 0 (run.sh's exit for a session conflict or a removal) is not one."""
    status = runner_status(pod)
    running = status.state.running if status is not None and status.state is not None else None
    last = status.last_state.terminated if status is not None and status.last_state is not None else None
    if running is None or last is None or not status.restart_count or last.exit_code == 0:
        return False
    started = running.started_at
    return isinstance(started, datetime) and (now - started).total_seconds() <= within


def crash_looping(pod: Any | None, registration: dict[str, Any] | None, now: datetime, after: float) -> bool:
    """A runner in a crash loop, caught between back-offs: its container runs again after a failure (`retrying`)
    and is not running a job. One snapshot of the pod would call it Running; and GitHub listing it online proves
    nothing for minutes after a crash (the dead process's session stays until it expires, and a runner that
    registered again meets 409 against it), so only a job proves it serves."""
    serving = registration is not None and registration.get("status") == "online" and bool(registration.get("busy"))
    return pod is not None and not serving and retrying(pod, now, after)


def runs_unregistered(pod: Any | None, registration: dict[str, Any] | None, now: datetime, after: float) -> bool:
    """Whether the pod's runner has run for longer than ``after`` seconds (a registration takes seconds) while
    GitHub lists no registration of it: it takes no job, so replacing it loses none."""
    if pod is None or registration is not None or pod.metadata.deletion_timestamp is not None:
        return False
    status = runner_status(pod)
    running = status.state.running if status is not None and status.state is not None else None
    started = running.started_at if running is not None else None
    return isinstance(started, datetime) and (now - started).total_seconds() > after


def pod_phase(pod: Any | None, *, unregistered: bool = False, looping: bool = False) -> str:
    """What a refresh records of a runner's pod: its phase (its runner's outcome, if the runner has exited for
    good while other containers run on), "Gone", the reason it is stuck, ``UNREGISTERED`` (see
    `runs_unregistered`), or CrashLoopBackOff for one ``looping`` (see `crash_looping`) though caught running."""
    if pod is None:
        return "Gone"
    if unregistered:
        return UNREGISTERED
    if looping:
        return "CrashLoopBackOff"
    if stuck := pod_stuck(pod):
        return stuck
    phase = pod.status.phase if pod.status is not None else "Pending"
    code = runner_exit_code(pod)
    if phase not in ("Succeeded", "Failed") and code is not None:
        return "Succeeded" if code == 0 else "Failed"
    return str(phase)


def pod_problem(pod: Any | None, *, unregistered: bool = False, looping: bool = False) -> str | None:
    """What a refresh reports of a runner that will not run a job again without an update, None if nothing."""
    if pod is not None and unregistered:
        return (
            "its runner runs, but GitHub lists no registration of it (removed in GitHub while its listener did "
            "not notice, as actions/runner may for 11 minutes or for ever), so it takes no job; the next update "
            "replaces it"
        )
    if pod is None or pod_phase(pod, looping=looping) in ("Succeeded", "Running", "Pending"):
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
