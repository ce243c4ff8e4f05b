"""Bringing a runner up: Secret, pod, then a bounded wait until GitHub lists the runner.

Create must leave nothing behind when it fails (Pulumi forgets a resource whose Create raised), so whatever it
made is taken down through the same RemoveRunner-guarded teardown as any other runner.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from .clock import Clock
from .kube_client import PodAlreadyExists, pod_finished
from .manifests import TOKEN_HASH_ANNOTATION, RunnerSpec, pod_manifest, secret_manifest
from .teardown import PodApi, RunnerLocation, RunnerRegistry, TeardownTimeouts, tear_down_runner, wait_pod_gone

log = logging.getLogger(__name__)

REGISTRATION_POLL_FIRST_SECONDS = 0.25
REGISTRATION_POLL_MAX_SECONDS = 5.0


class RunnerDidNotRegister(Exception):
    pass


class PodCreator(PodApi, Protocol):
    def apply_secret(self, manifest: dict[str, Any]) -> None: ...
    def create_pod(self, manifest: dict[str, Any]) -> None: ...


def start_runner(
    spec: RunnerSpec,
    registration_token: str,
    github: RunnerRegistry,
    pods: PodCreator,
    clock: Clock,
    *,
    register_timeout_seconds: float,
    unregister_timeout_seconds: float,
    pod_gone_timeout_seconds: float,
) -> int:
    """Returns the id GitHub gave the runner."""
    existing = pods.read_pod(spec.namespace, spec.pod_name)
    if _live_with_another_token(spec, existing):
        raise _pod_in_the_way(spec)  # checked before the Secret: it may be another resource's, running a job
    try:
        pods.apply_secret(secret_manifest(spec, registration_token))
        _place_pod(spec, existing, pods, clock, pod_gone_timeout_seconds)
        return _wait_registered(spec, github, pods, clock, register_timeout_seconds)
    except PodAlreadyExists:
        raise  # another create raced this one: its pod is not ours to clean up
    except Exception:
        location = RunnerLocation(
            spec.namespace, spec.pod_name, spec.secret_name, spec.runner_name, None, spec.ephemeral
        )
        timeouts = TeardownTimeouts(0, unregister_timeout_seconds, pod_gone_timeout_seconds)
        try:
            tear_down_runner(location, github, pods, clock, timeouts)
        except Exception as cleanup_error:
            log.error("could not clean up after the failed create of runner %s: %s", spec.runner_name, cleanup_error)
        raise


def _place_pod(
    spec: RunnerSpec, existing: Any, pods: PodCreator, clock: Clock, pod_gone_timeout_seconds: float
) -> None:
    """Create the pod. A live one of the same name has this very token (checked before): it is adopted, as after
    a crash of an earlier Create; a finished or terminating one is replaced."""
    if existing is not None and _is_live(existing):
        log.info("pod %s/%s already exists with this token; adopting it", spec.namespace, spec.pod_name)
        return
    if existing is not None:
        log.info("pod %s/%s is finished or terminating; replacing it", spec.namespace, spec.pod_name)
        pods.delete_pod(spec.namespace, spec.pod_name)
        wait_pod_gone(pods, spec.namespace, spec.pod_name, clock, pod_gone_timeout_seconds)
    pods.create_pod(pod_manifest(spec))


def _is_live(pod: Any) -> bool:
    return not pod_finished(pod) and pod.metadata.deletion_timestamp is None


def _live_with_another_token(spec: RunnerSpec, pod: Any) -> bool:
    if pod is None or not _is_live(pod):
        return False
    return (pod.metadata.annotations or {}).get(TOKEN_HASH_ANNOTATION) != spec.token_hash


def _pod_in_the_way(spec: RunnerSpec) -> PodAlreadyExists:
    return PodAlreadyExists(
        f"pod {spec.namespace}/{spec.pod_name} already exists and is running with another registration "
        "token; it may be running a job, so it is left alone. Import it, or choose another runner_name."
    )


def _wait_registered(spec: RunnerSpec, github: RunnerRegistry, pods: PodApi, clock: Clock, timeout: float) -> int:
    log.info("waiting up to %.0f s for runner %s to register with GitHub", timeout, spec.runner_name)
    deadline = clock.monotonic() + timeout
    delay = REGISTRATION_POLL_FIRST_SECONDS
    while True:
        clock.sleep(delay)
        found = github.find_runner(spec.runner_name)
        if found is not None and found.get("status") == "online":  # not an old, offline one of the same name
            return int(found["id"])
        pod = pods.read_pod(spec.namespace, spec.pod_name)
        if pod is None or pod_finished(pod):
            raise RunnerDidNotRegister(
                f"runner {spec.runner_name} did not register: its pod {spec.namespace}/{spec.pod_name} "
                f"{'is gone' if pod is None else 'ended ' + pod.status.phase} ({_pod_detail(pod)})"
            )
        if clock.monotonic() >= deadline:
            raise RunnerDidNotRegister(
                f"runner {spec.runner_name} was not listed by GitHub within {timeout:.0f} s "
                f"(register_timeout_seconds); pod {spec.namespace}/{spec.pod_name}: {_pod_detail(pod)}"
            )
        delay = min(delay * 1.5, REGISTRATION_POLL_MAX_SECONDS, max(deadline - clock.monotonic(), 0.0))


def _pod_detail(pod: Any) -> str:
    if pod is None or pod.status is None:
        return "no status"
    states = [
        state.waiting.reason if state.waiting else f"exit code {state.terminated.exit_code}"
        for status in pod.status.container_statuses or []
        if (state := status.state) and (state.waiting or state.terminated)
    ]
    return f"phase {pod.status.phase}" + (f", {', '.join(states)}" if states else "")
