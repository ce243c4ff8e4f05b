"""A scale set's runners: each started with a just-in-time config of its own, and each retired the seed's way.
The listener runs these between updates; a RunnerScaleSet's delete runs them to drain the set.

START     GitHub makes the runner (``generatejitconfig``, a fresh name: 409 means taken, so another is drawn),
          its config goes into a Secret, the pod is made, and the Secret is made the pod's (ownerReference):
          the garbage collector deletes it with the pod, whoever deletes the pod. A pod that cannot be made
          takes its registration and Secret back with it.
RETIRE    one step at a time (`retire_step`), so that a loop serving a whole scale set never waits on one runner:
  REMOVE    the registration is removed (the agent delete): refused while the runner runs a job
            (``JobStillRunning``: BUSY, the runner stays in service), else the time is written on the pod;
  GRACE     then the runner has ``grace_period_seconds`` to see its registration gone and exit by itself;
  DELETE    then the registration is looked up again, just before the pod is deleted: still there (a removal
            that did not hold) starts the procedure over; gone, the pod is deleted.
CLEAN     a pod that ended (its runner's one job done, or it failed) is deleted, its registration removed if
          GitHub still has it and it is not busy.
"""

from __future__ import annotations

import enum
import logging
import secrets
import string
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..clock import Clock
from ..github.client import RemoveOutcome
from ..github.scale_sets import ScaleSetRunner
from ..kube.manifests import SPEC_HASH_ANNOTATION
from ..kube.pod_state import pod_finished, pod_stuck, runner_running
from ..kube.scale_set_manifests import (
    REMOVED_AT_ANNOTATION,
    RUNNER_ID_ANNOTATION,
    ScaleSetConfig,
    owned_by,
    runner_pod,
    runner_secret,
)

log = logging.getLogger(__name__)

NAME_ATTEMPTS = 3  # a random 5-letter suffix taken three times in a row is no coincidence
_SUFFIX = string.ascii_lowercase + string.digits


class RunnerApi(Protocol):
    """The scale set's calls (github/scale_sets.py's ActionsServiceClient)."""

    def generate_jit_config(self, scale_set_id: int, name: str) -> ScaleSetRunner | None: ...
    def runner(self, runner_id: int) -> dict[str, Any] | None: ...
    def remove_runner(self, runner_id: int) -> RemoveOutcome: ...


class PodApi(Protocol):
    def create_secret(self, manifest: dict[str, Any]) -> bool: ...
    def create_pod(self, manifest: dict[str, Any]) -> Any: ...
    def delete_pod(
        self, namespace: str, name: str, grace_seconds: int | None = None, *, once: bool = False
    ) -> None: ...
    def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> bool: ...
    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None: ...


class SecretOwnership(Protocol):
    def own_secret(self, namespace: str, name: str, owner: dict[str, Any]) -> None: ...


@dataclass
class SetRunner:
    """One runner as its pod says: the listener keeps nothing else, so a restarted one knows what the last knew."""

    name: str
    namespace: str
    runner_id: int | None
    spec_hash: str
    created: datetime | None
    removed_at: float | None  # epoch seconds: its registration was removed then
    running: bool  # the runner's container runs
    ended: bool  # the pod finished: its runner will take no job
    terminating: bool = False  # its pod is being deleted
    stuck: str | None = None  # why its runner cannot run (an image not pulled...), if it cannot

    @classmethod
    def of_pod(cls, pod: Any) -> SetRunner:
        metadata = pod.metadata
        annotations = metadata.annotations or {}
        runner_id = annotations.get(RUNNER_ID_ANNOTATION)
        removed_at = annotations.get(REMOVED_AT_ANNOTATION)
        return cls(
            name=metadata.name,
            namespace=metadata.namespace,
            runner_id=int(runner_id) if runner_id and runner_id.isdigit() else None,
            spec_hash=annotations.get(SPEC_HASH_ANNOTATION, ""),
            created=metadata.creation_timestamp,
            removed_at=float(removed_at) if removed_at else None,
            running=runner_running(pod),
            ended=pod_finished(pod),
            terminating=metadata.deletion_timestamp is not None,
            stuck=pod_stuck(pod),
        )


class Retirement(enum.Enum):
    BUSY = "busy"  # GitHub refused the removal: the runner runs a job, and stays in service
    GRACE = "grace"  # its registration is removed; its grace period runs
    DELETED = "deleted"  # its pod is deleted


def new_runner_name(scale_set_name: str) -> str:
    return f"{scale_set_name}-{''.join(secrets.choice(_SUFFIX) for _ in range(5))}"


def start_runner(config: ScaleSetConfig, github: RunnerApi, pods: PodApi, owners: SecretOwnership) -> SetRunner:
    """One runner of the set, its pod made; raises what stopped it, having taken back what it made."""
    for _ in range(NAME_ATTEMPTS):
        name = new_runner_name(config.scale_set_name)
        made = github.generate_jit_config(config.scale_set_id, name)
        if made is not None:
            break
    else:
        raise RuntimeError(f"GitHub said {NAME_ATTEMPTS} fresh runner names in a row were taken")
    namespace = config.runner.namespace
    secret = runner_secret(config, name, made.encoded_jit_config)
    try:
        if not pods.create_secret(secret):
            raise RuntimeError(f"Secret {namespace}/{secret['metadata']['name']} exists already: left alone")
        pod = pods.create_pod(runner_pod(config, name, made.id))
        owners.own_secret(namespace, secret["metadata"]["name"], owned_by(pod))
    except Exception:
        github.remove_runner(made.id)  # never online, so never busy: it goes
        pods.delete_pod(namespace, name, 0)
        pods.delete_secret(namespace, secret["metadata"]["name"])
        raise
    return SetRunner(name, namespace, made.id, config.runner.spec_hash, None, None, False, False)


def retire_step(runner: SetRunner, github: RunnerApi, pods: PodApi, clock: Clock, grace_seconds: float) -> Retirement:
    """The next step of the runner's retirement (see the module's docstring); called again until DELETED."""
    if runner.removed_at is None:
        if runner.runner_id is not None and github.remove_runner(runner.runner_id) is RemoveOutcome.BUSY:
            return Retirement.BUSY
        runner.removed_at = clock.time()
        pods.annotate_pod(runner.namespace, runner.name, {REMOVED_AT_ANNOTATION: f"{runner.removed_at:.3f}"})
        log.info("runner %s: its registration is removed; its pod goes after %.0f s", runner.name, grace_seconds)
    if clock.time() < runner.removed_at + grace_seconds:
        return Retirement.GRACE
    if runner.runner_id is not None and github.runner(runner.runner_id) is not None:
        # The removal did not hold: judge again, as if never removed.
        runner.removed_at = None
        pods.annotate_pod(runner.namespace, runner.name, {REMOVED_AT_ANNOTATION: None})
        log.warning("runner %s: registered again after its removal; its retirement starts over", runner.name)
        return retire_step(runner, github, pods, clock, grace_seconds)
    pods.delete_pod(runner.namespace, runner.name)
    log.info("runner %s: pod deleted", runner.name)
    return Retirement.DELETED


def clean_ended(runner: SetRunner, github: RunnerApi, pods: PodApi) -> None:
    """An ended pod deleted (its container runs nothing), its registration removed if GitHub still has it (an
    ephemeral runner's went with its job): a runner that died mid-job is refused as busy, and left to GitHub,
    which abandons its job."""
    if runner.runner_id is not None:
        github.remove_runner(runner.runner_id)
    pods.delete_pod(runner.namespace, runner.name)
