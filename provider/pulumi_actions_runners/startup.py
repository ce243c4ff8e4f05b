"""Bringing a runner up: its credential in a Secret, its pod, then a bounded wait until GitHub lists it online.

The credential is the shared registration token, or a just-in-time config that GitHub makes for this one
runner (``generate-jitconfig``, which registers it at once). Create must leave nothing behind when it fails
(Pulumi forgets a resource whose Create raised), so whatever it made is taken down through the same
RemoveRunner-guarded teardown as any other runner.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .clock import Clock
from .github_client import JitConfig, RunnerNameTaken
from .kube_client import PodAlreadyExists, pod_finished
from .logs import ROUTINE
from .manifests import POOL_LABEL, RUNNER_LABEL, TOKEN_HASH_ANNOTATION, RunnerSpec, pod_manifest, secret_manifest
from .teardown import (
    PodApi,
    RunnerLocation,
    RunnerRegistry,
    TeardownTimeouts,
    tear_down_runner,
    unregister_by_name,
    wait_pod_gone,
)

log = logging.getLogger(__name__)

# A runner usually registers within a second of its container's start: polled often that long (a listing that
# waiters share costs little), then less and less often.
REGISTRATION_POLL_FIRST_SECONDS = 0.25
REGISTRATION_POLL_STEADY_FOR_SECONDS = 1.0
REGISTRATION_POLL_MAX_SECONDS = 5.0


class RunnerDidNotRegister(Exception):
    pass


class PodCreator(PodApi, Protocol):
    def apply_secret(self, manifest: dict[str, Any]) -> None: ...
    def create_pod(self, manifest: dict[str, Any]) -> None: ...


class JitRegistry(RunnerRegistry, Protocol):
    def generate_jitconfig(self, name: str, labels: Sequence[str]) -> JitConfig: ...


@dataclass(frozen=True)
class StartTimeouts:
    register_timeout_seconds: float
    unregister_timeout_seconds: float
    pod_gone_timeout_seconds: float


def start_runner(
    spec: RunnerSpec,
    registration_token: str | None,
    github: JitRegistry,
    pods: PodCreator,
    clock: Clock,
    timeouts: StartTimeouts,
    *,
    pod_known_gone: bool = False,
) -> int:
    """Returns the id GitHub gave the runner. ``registration_token`` is None for a just-in-time runner;
    ``pod_known_gone`` after a teardown has just seen the pod of this name go."""
    existing = None if pod_known_gone else pods.read_pod(spec.namespace, spec.pod_name)
    if _in_the_way(spec, existing):
        raise _pod_in_the_way(spec)  # checked before the Secret: it may be another resource's, running a job
    jit: JitConfig | None = None
    try:
        if existing is not None and _is_live(existing):
            # This very token (or a just-in-time pod of this name): adopted, as after a crash of an earlier Create.
            log.info("pod %s/%s already exists with this token; adopting it", spec.namespace, spec.pod_name)
            return _wait_registered(spec, None, github, pods, clock, timeouts.register_timeout_seconds)
        if existing is not None:
            log.info("pod %s/%s is finished or terminating; replacing it", spec.namespace, spec.pod_name)
            pods.delete_pod(spec.namespace, spec.pod_name)
            wait_pod_gone(pods, spec.namespace, spec.pod_name, clock, timeouts.pod_gone_timeout_seconds)
        jit = _jit_config(spec, github, clock, timeouts.unregister_timeout_seconds) if spec.jit_config else None
        credential = jit.encoded_jit_config if jit else registration_token
        if credential is None:
            raise ValueError(f"runner {spec.runner_name} has neither a registration token nor jit_config")
        pods.apply_secret(secret_manifest(spec, credential))
        pods.create_pod(pod_manifest(spec))
        expected_id = jit.runner_id if jit else None
        return _wait_registered(spec, expected_id, github, pods, clock, timeouts.register_timeout_seconds)
    except PodAlreadyExists:
        raise  # another create raced this one: its pod is not ours to clean up
    except Exception:
        cleanup = TeardownTimeouts(0, timeouts.unregister_timeout_seconds, timeouts.pod_gone_timeout_seconds)
        try:
            tear_down_runner(RunnerLocation.of(spec, jit.runner_id if jit else None), github, pods, clock, cleanup)
        except Exception as cleanup_error:
            log.error("could not clean up after the failed create of runner %s: %s", spec.runner_name, cleanup_error)
        raise


def _jit_config(spec: RunnerSpec, github: JitRegistry, clock: Clock, unregister_timeout: float) -> JitConfig:
    """GitHub answers 409 when the name is registered already: after a lost response to our own request, or a
    registration left by an earlier pod of this name (none runs: checked before). It is unregistered, with the
    same busy guard as any runner, and the config asked for once more."""
    # config.sh gives every runner "self-hosted"; a just-in-time runner has only the labels asked for (1 at least).
    labels = list(dict.fromkeys(("self-hosted", *spec.labels)))
    try:
        return github.generate_jitconfig(spec.runner_name, labels)
    except RunnerNameTaken:
        log.info("runner name %s is registered already; unregistering it and asking again", spec.runner_name)
    unregister_by_name(RunnerLocation.of(spec, None), github, clock, unregister_timeout)
    return github.generate_jitconfig(spec.runner_name, labels)


def _is_live(pod: Any) -> bool:
    return not pod_finished(pod) and pod.metadata.deletion_timestamp is None


def _in_the_way(spec: RunnerSpec, pod: Any) -> bool:
    """A live pod of the name that is not this runner's: another token, or another resource's (a pool's pods
    carry the pool's label, a lone runner's none)."""
    if pod is None or not _is_live(pod):
        return False
    labels = pod.metadata.labels or {}
    ours = labels.get(RUNNER_LABEL) == spec.runner_name and labels.get(POOL_LABEL, "") == spec.pool
    return not ours or (pod.metadata.annotations or {}).get(TOKEN_HASH_ANNOTATION) != spec.token_hash


def _pod_in_the_way(spec: RunnerSpec) -> PodAlreadyExists:
    return PodAlreadyExists(
        f"pod {spec.namespace}/{spec.pod_name} already exists and runs with another registration token or for "
        "another resource; it may be running a job, so it is left alone. Choose another runner_name (or pool_name)."
    )


def _wait_registered(
    spec: RunnerSpec,
    expected_id: int | None,
    github: RunnerRegistry,
    pods: PodApi,
    clock: Clock,
    timeout: float,
) -> int:
    log.info("waiting up to %.0f s for runner %s to come online", timeout, spec.runner_name, extra=ROUTINE)
    started = clock.monotonic()
    deadline = started + timeout
    delay = REGISTRATION_POLL_FIRST_SECONDS
    while True:
        clock.sleep(delay)
        found = github.find_runner(spec.runner_name, max_age=delay)  # a listing shared with other waiters
        # Online, and not an old offline registration of the same name (nor, for JIT, another one's).
        if found is not None and found.get("status") == "online" and expected_id in (None, found["id"]):
            return int(found["id"])
        if clock.monotonic() - started < REGISTRATION_POLL_STEADY_FOR_SECONDS:
            continue  # its pod is looked at from then on: a container that fails to start takes that long anyway
        pod = pods.read_pod(spec.namespace, spec.pod_name)
        if pod is None or pod_finished(pod):
            raise RunnerDidNotRegister(
                f"runner {spec.runner_name} did not register: its pod {spec.namespace}/{spec.pod_name} "
                f"{'is gone' if pod is None else 'ended ' + pod.status.phase} ({_pod_detail(pod)})"
            )
        if clock.monotonic() >= deadline:
            raise RunnerDidNotRegister(
                f"runner {spec.runner_name} was not listed online by GitHub within {timeout:.0f} s "
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
