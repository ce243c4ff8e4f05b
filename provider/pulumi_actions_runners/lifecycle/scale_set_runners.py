"""A scale set's runners: each started with a just-in-time config of its own, and each retired the seed's way.
The listener runs these between updates; a RunnerScaleSet's delete runs them to drain the set.

START     an empty Secret under a fresh name (the trace of the start), GitHub makes the runner
          (``generatejitconfig``; 409: the name is another's, so another is drawn), its config goes into the
          Secret, the pod is made, and the Secret is made the pod's (ownerReference): the garbage collector
          deletes it with the pod, whoever deletes the pod. A pod that cannot be made takes its registration and
          Secret back with it; a start cut short by the process's death is finished or undone by the next sweep.
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
from ..github.client import GitHubError, RemoveOutcome
from ..github.scale_sets import ScaleSetRunner
from ..kube.client import SecretMetadata
from ..kube.manifests import JIT_CONFIG_KEY, RUNNER_LABEL, SPEC_HASH_ANNOTATION
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
ORPHAN_SECONDS = 30.0  # a start takes a second or two: a Secret with no pod this old is a start cut short
_POD_OWNER = {"apiVersion": "v1", "kind": "Pod"}
_SUFFIX = string.ascii_lowercase + string.digits


class RunnerApi(Protocol):
    """The scale set's calls (github/scale_sets.py's ActionsServiceClient)."""

    def generate_jit_config(self, scale_set_id: int, name: str) -> ScaleSetRunner | None: ...
    def runner(self, runner_id: int) -> dict[str, Any] | None: ...
    def runner_id_by_name(self, name: str) -> int | None: ...
    def remove_runner(self, runner_id: int) -> RemoveOutcome: ...


class PodApi(Protocol):
    def create_secret(self, manifest: dict[str, Any]) -> bool: ...
    def create_pod(self, manifest: dict[str, Any]) -> Any: ...
    def delete_pod(
        self, namespace: str, name: str, grace_seconds: int | None = None, *, once: bool = False
    ) -> None: ...
    def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> bool: ...
    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None: ...
    def set_secret_value(self, namespace: str, name: str, key: str, value: str) -> None: ...


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
    """One runner of the set, its pod made. Each step leaves a trace that `sweep_orphans` can follow should the
    process die before the next: the Secret first, empty, under the runner's name (before GitHub knows that name),
    then the runner made and its config written there, then the pod, then the pod made the Secret's owner. A pod
    that cannot be made takes its registration and Secret back with it (it never ran: it cannot be busy)."""
    namespace = config.runner.namespace
    for _ in range(NAME_ATTEMPTS):
        name = new_runner_name(config.scale_set_name)
        secret = runner_secret(config, name, "")
        if not pods.create_secret(secret):
            continue  # the name is taken in the namespace
        try:
            made = github.generate_jit_config(config.scale_set_id, name)
        except GitHubError as refused:
            if 400 <= refused.status < 500:  # refused: nothing was made (a lost answer or a 5xx is left to the sweep)
                pods.delete_secret(namespace, secret["metadata"]["name"])
            raise
        if made is not None:
            break
        pods.delete_secret(namespace, secret["metadata"]["name"])  # taken on GitHub: another's, left alone
    else:
        raise RuntimeError(f"{NAME_ATTEMPTS} fresh runner names in a row were taken")
    secret_name = secret["metadata"]["name"]
    pods.set_secret_value(namespace, secret_name, JIT_CONFIG_KEY, made.encoded_jit_config)
    try:
        pod = pods.create_pod(runner_pod(config, name, made.id))
    except Exception:
        github.remove_runner(made.id)
        pods.delete_secret(namespace, secret_name)
        raise
    owners.own_secret(namespace, secret_name, owned_by(pod))
    return SetRunner(name, namespace, made.id, config.runner.spec_hash, None, None, False, False)


def sweep_orphans(
    config: ScaleSetConfig,
    github: RunnerApi,
    pods: PodApi,
    owners: SecretOwnership,
    secrets: list[SecretMetadata],
    pod_uids: dict[str, str],
    now: datetime,
    *,
    min_age_seconds: float = ORPHAN_SECONDS,
) -> int:
    """What a start cut short left (see start_runner): a Secret its pod does not own yet is made the pod's; one
    with no pod, older than ``min_age_seconds``, has its runner removed (found by the name it holds) and goes. How
    many were taken care of. ``pod_uids``: the set's runner pods, by name."""
    handled = 0
    for secret in secrets:
        name = secret.labels.get(RUNNER_LABEL, "")
        if secret.owned or not name:
            continue
        if name in pod_uids:
            owners.own_secret(config.runner.namespace, secret.name, {**_POD_OWNER, "name": name, "uid": pod_uids[name]})
            handled += 1
            continue
        created = datetime.fromisoformat(secret.created.replace("Z", "+00:00")) if secret.created else now
        if (now - created).total_seconds() < min_age_seconds:
            continue
        runner_id = github.runner_id_by_name(name)
        if runner_id is not None and github.remove_runner(runner_id) is RemoveOutcome.BUSY:
            continue  # it runs a job with no pod of ours: not ours to judge; GitHub abandons it
        pods.delete_secret(config.runner.namespace, secret.name, secret.uid)
        log.info(
            "runner %s: a start cut short left its Secret%s; both gone", name, " and registration" * bool(runner_id)
        )
        handled += 1
    return handled


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
