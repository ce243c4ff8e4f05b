"""A RunnerScaleSet's create, update, delete and refresh: the scale set on GitHub, and its listener in the
namespace. Its runners are the listener's between updates (listener/loop.py); an update hands the listener new
bounds and a new runner spec through its ConfigMap, and rolls it only when what it is changes (its image, its
credential).

CREATE   A runner's pod of the spec is judged by the API server in a dry run. Then the set is registered with
         GitHub, unless one of its name exists: that one is adopted only if it is provably this resource's (the
         namespace holds this resource's listener ConfigMap naming that very set: an earlier create that failed
         after registering it); else the create fails, touching nothing. Then the listener's Secret, ConfigMap,
         ServiceAccount, Role, RoleBinding and Deployment, and a bounded wait until the listener runs. A failure
         after the set was registered takes the set and the objects back, so nothing is left that the state does
         not list.
UPDATE   The runner pod judged as at create; the set's labels and group brought to the inputs (made again if
         GitHub deleted it), the ConfigMap rewritten, the listener's objects applied (its Deployment rolls only if
         its pod template changed), and the listener waited for as at create.
DELETE   The listener stops first (its Deployment deleted; on SIGTERM it deletes its session), so nothing makes
         runners meanwhile; then each runner is retired the seed's way (lifecycle/scale_set_runners.py), busy
         ones waited for up to ``unregister_timeout_seconds``, then an error that keeps the resource; then the set
         deleted on GitHub, and the listener's objects.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..clock import Clock
from ..github.scale_sets import ActionsServiceClient, ScaleSet
from ..kube.client import KubeClient
from ..kube.manifests import OWNER_LABEL, TERMINATION_GRACE_SECONDS, RunnerSpec
from ..kube.pod_state import STUCK_REASONS, pod_phase
from ..kube.scale_set_manifests import (
    ListenerSpec,
    ScaleSetConfig,
    config_map,
    config_of,
    credential_secret,
    credential_secret_name,
    listener_deployment,
    listener_name,
    listener_rbac,
    listener_selector,
    runner_pod,
    runner_selector,
)
from ..kube.scale_set_objects import ScaleSetObjects
from .scale_set_runners import Retirement, SetRunner, clean_ended, retire_step, sweep_orphans

log = logging.getLogger(__name__)

LISTENER_STOP_SECONDS = 60.0  # its termination grace (30 s) and a margin
POLL_SECONDS = 0.5
BUSY_LOOK_SECONDS = 5.0  # a busy runner's removal is asked for again this often while the delete waits
POD_GONE_MARGIN_SECONDS = 60.0


class ScaleSetNameTaken(Exception):
    """A scale set of the name exists on GitHub that this resource did not make."""


class ListenerNotRunning(Exception):
    """The listener's pod does not run (its image cannot be pulled, it crash-loops, it is never scheduled)."""


class ScaleSetNotDrained(Exception):
    """Runners of the set still ran jobs when the delete's wait ended: the resource stays, to destroy again."""


@dataclass(frozen=True)
class ScaleSetBounds:
    """What the scale set is on GitHub, and what its runners are made of."""

    scale_set_name: str
    runner_group: str
    labels: tuple[str, ...]
    min_runners: int
    max_runners: int
    runner: RunnerSpec  # every runner's spec but its name


@dataclass(frozen=True)
class ScaleSetTimeouts:
    grace_period_seconds: float
    unregister_timeout_seconds: float
    register_timeout_seconds: float


@dataclass
class Observed:
    """The set as a refresh sees it."""

    scale_set_id: int | None
    statistics: dict[str, int] = field(default_factory=dict)
    runners: list[dict[str, Any]] = field(default_factory=list)
    listener_running: bool = False


def _config(bounds: ScaleSetBounds, timeouts: ScaleSetTimeouts, scale_set: ScaleSet) -> ScaleSetConfig:
    return ScaleSetConfig(
        scale_set_id=scale_set.id,
        scale_set_name=bounds.scale_set_name,
        runner_group_id=scale_set.runner_group_id,
        labels=bounds.labels,
        min_runners=bounds.min_runners,
        max_runners=bounds.max_runners,
        grace_period_seconds=timeouts.grace_period_seconds,
        register_timeout_seconds=timeouts.register_timeout_seconds,
        runner=bounds.runner,
    )


def _recorded_config(objects: ScaleSetObjects, listener: ListenerSpec) -> ScaleSetConfig | None:
    """The ConfigMap's config, if the namespace holds this resource's."""
    found = objects.read("ConfigMap", listener.namespace, listener_name(listener.scale_set_name))
    if found is None or (found.metadata.labels or {}).get(OWNER_LABEL) != listener.owner:
        return None
    return config_of(found.data)


def _current_id(recorded: ScaleSetConfig | None, scale_set_id: int) -> int:
    """The set's id as the listener last wrote it (it makes the set again when GitHub deletes it), else the
    state's; 0 in the ConfigMap is a create's intent, no id."""
    return recorded.scale_set_id if recorded is not None and recorded.scale_set_id else scale_set_id


def create_scale_set(
    bounds: ScaleSetBounds,
    listener: ListenerSpec,
    timeouts: ScaleSetTimeouts,
    github: ActionsServiceClient,
    objects: ScaleSetObjects,
    kube: KubeClient,
    clock: Clock,
) -> int:
    """The set's id, once it is registered and its listener runs (`ListenerNotRunning` otherwise, the set and
    the listener's objects taken back)."""
    group_id = github.runner_group_id(bounds.runner_group)
    judge_runner_pod(bounds, timeouts, kube)
    existing = github.scale_set_by_name(bounds.scale_set_name, group_id)
    made = False
    if existing is not None:
        recorded = _recorded_config(objects, listener)
        if recorded is None or recorded.scale_set_id not in (existing.id, 0):
            raise ScaleSetNameTaken(
                f"a runner scale set named {bounds.scale_set_name!r} (id {existing.id}) exists in "
                f"{github.config_url} and is not this resource's (no listener of this resource in namespace "
                f"{listener.namespace} names it): choose another scale_set_name, or delete that scale set if it is "
                "a leftover of yours"
            )
        scale_set = github.update_scale_set(existing.id, bounds.labels, bounds.scale_set_name)
        log.info("scale set %s (id %d): this resource's, adopted", bounds.scale_set_name, existing.id)
    else:
        # The intent first: should the answer be lost, or this process die, the next create finds this resource's
        # ConfigMap naming no set yet, and adopts the set of the name it made.
        objects.apply(config_map(listener, _config(bounds, timeouts, ScaleSet(0, bounds.scale_set_name, group_id, ()))))
        scale_set = github.create_scale_set(bounds.scale_set_name, group_id, bounds.labels)
        made = True
        log.info("scale set %s registered with GitHub (id %d)", bounds.scale_set_name, scale_set.id)
    try:
        apply_listener(listener, _config(bounds, timeouts, scale_set), objects)
        wait_listener_running(listener, timeouts, kube, clock)
    except Exception:
        if made:
            objects.delete("Deployment", listener.namespace, listener_name(listener.scale_set_name))
            _wait_listener_gone(kube, listener.namespace, listener.scale_set_name, clock)
            _delete_listener_objects(listener, objects)
            github.delete_scale_set(scale_set.id)
            log.info("scale set %s: its create failed; the set and its listener were taken back", scale_set.name)
        raise
    return scale_set.id


def update_scale_set(
    bounds: ScaleSetBounds,
    listener: ListenerSpec,
    timeouts: ScaleSetTimeouts,
    scale_set_id: int,
    github: ActionsServiceClient,
    objects: ScaleSetObjects,
    kube: KubeClient,
    clock: Clock,
) -> int:
    """The set's id (another if GitHub had deleted it, or the listener made it again)."""
    judge_runner_pod(bounds, timeouts, kube)
    current = _current_id(_recorded_config(objects, listener), scale_set_id)
    group_id = github.runner_group_id(bounds.runner_group)
    scale_set = github.scale_set(current)
    if scale_set is None:
        scale_set = github.scale_set_by_name(bounds.scale_set_name, group_id) or github.create_scale_set(
            bounds.scale_set_name, group_id, bounds.labels
        )
        log.warning("scale set %s was gone on GitHub's side: it is id %d now", bounds.scale_set_name, scale_set.id)
    wanted = tuple(dict.fromkeys((bounds.scale_set_name, *bounds.labels)))
    if scale_set.labels != wanted or scale_set.runner_group_id != group_id:
        scale_set = github.update_scale_set(scale_set.id, bounds.labels, bounds.scale_set_name, group_id)
    apply_listener(listener, _config(bounds, timeouts, scale_set), objects)
    wait_listener_running(listener, timeouts, kube, clock)
    return scale_set.id


def wait_listener_running(listener: ListenerSpec, timeouts: ScaleSetTimeouts, kube: KubeClient, clock: Clock) -> None:
    """Until the listener's pod runs its container, for ``register_timeout_seconds`` at most; at once
    `ListenerNotRunning` when the container is stuck (an image that cannot be pulled, a crash loop), saying why."""
    deadline = clock.monotonic() + timeouts.register_timeout_seconds
    selector, namespace = listener_selector(listener.scale_set_name), listener.namespace
    while True:
        pods = [p for p in kube.list_pods(namespace, selector) if p.metadata.deletion_timestamp is None]
        statuses = [s for p in pods for s in (p.status.container_statuses or []) if p.status is not None]
        if any(s.state is not None and s.state.running is not None for s in statuses):
            return
        stuck = [s for s in statuses if s.state is not None and s.state.waiting is not None]
        stuck = [s for s in stuck if s.state.waiting.reason in STUCK_REASONS]
        if stuck or clock.monotonic() > deadline:
            why = (
                f"its container is {stuck[0].state.waiting.reason} ({stuck[0].state.waiting.message or ''}) with "
                f"image {stuck[0].image}"
                if stuck
                else f"it was not running {timeouts.register_timeout_seconds:.0f} s after its Deployment was applied"
            )
            raise ListenerNotRunning(
                f"the listener of scale set {listener.scale_set_name} does not run: {why}. Set listener_image to an "
                "image the cluster can pull (make listener-image builds one)"
            )
        clock.sleep(POLL_SECONDS)


def judge_runner_pod(bounds: ScaleSetBounds, timeouts: ScaleSetTimeouts, kube: KubeClient) -> None:
    """A runner's pod of the spec, judged by the API server in a dry run before anything is written: a pod
    template it refuses fails the call with its words (PodRejected), not every start of the listener."""
    probe = ScaleSet(0, bounds.scale_set_name, 0, bounds.labels)
    kube.validate_pod(runner_pod(_config(bounds, timeouts, probe), f"{bounds.scale_set_name}-dry-run", 0))


def apply_listener(listener: ListenerSpec, config: ScaleSetConfig, objects: ScaleSetObjects) -> None:
    """The listener's objects as the inputs make them: the Deployment last, once what it needs is there."""
    for manifest in (
        credential_secret(listener),
        config_map(listener, config),
        *listener_rbac(listener),
        listener_deployment(listener),
    ):
        objects.apply(manifest)


def delete_scale_set(
    listener: ListenerSpec,
    timeouts: ScaleSetTimeouts,
    scale_set_id: int,
    github: ActionsServiceClient,
    objects: ScaleSetObjects,
    kube: KubeClient,
    clock: Clock,
) -> None:
    """Nothing left of the set on GitHub or in the namespace; ScaleSetNotDrained (everything kept but the
    listener) while busy runners outlast the wait."""
    namespace, name = listener.namespace, listener.scale_set_name
    objects.delete("Deployment", namespace, listener_name(name))
    _wait_listener_gone(kube, namespace, name, clock)
    recorded = _recorded_config(objects, listener)  # read now: the listener may have made the set again till it went
    current = _current_id(recorded, scale_set_id)
    _drain(namespace, name, timeouts, github, kube, clock)
    if recorded is not None:
        _sweep(recorded, github, kube)
    github.delete_scale_set(current)
    log.info("scale set %s (id %d) deleted on GitHub", name, current)
    _delete_listener_objects(listener, objects)


def _wait_listener_gone(kube: KubeClient, namespace: str, name: str, clock: Clock) -> None:
    deadline = clock.monotonic() + LISTENER_STOP_SECONDS
    while kube.list_pods(namespace, listener_selector(name)):
        if clock.monotonic() > deadline:
            raise ScaleSetNotDrained(
                f"the listener of scale set {name} was still running {LISTENER_STOP_SECONDS:.0f} s after its "
                "Deployment was deleted: nothing else was touched; run destroy again"
            )
        clock.sleep(POLL_SECONDS)


def _drain(
    namespace: str, name: str, timeouts: ScaleSetTimeouts, github: ActionsServiceClient, kube: KubeClient, clock: Clock
) -> None:
    """Every runner retired: busy ones waited for ``unregister_timeout_seconds`` at most, looked at again every
    `BUSY_LOOK_SECONDS`; pods still terminating (a node gone, a finalizer) for their termination grace and a
    margin. Then ScaleSetNotDrained names what is left."""
    started = clock.monotonic()
    busy_deadline = started + timeouts.unregister_timeout_seconds + timeouts.grace_period_seconds
    deadline = busy_deadline + TERMINATION_GRACE_SECONDS + POD_GONE_MARGIN_SECONDS
    next_look: dict[str, float] = {}
    while True:
        runners = [SetRunner.of_pod(pod) for pod in kube.list_pods(namespace, runner_selector(name))]
        if not runners:
            return
        now = clock.monotonic()
        busy = []
        for runner in runners:
            if runner.terminating:
                continue
            if runner.ended:
                clean_ended(runner, github, kube)
            elif next_look.get(runner.name, 0.0) > now:
                busy.append(runner.name)
            elif retire_step(runner, github, kube, clock, timeouts.grace_period_seconds) is Retirement.BUSY:
                if runner.name not in next_look:
                    log.info("runner %s runs a job: waiting for it to finish", runner.name)
                busy.append(runner.name)
                next_look[runner.name] = now + BUSY_LOOK_SECONDS
        if (busy and now > busy_deadline) or now > deadline:
            terminating = sorted(r.name for r in runners if r.terminating)
            raise ScaleSetNotDrained(
                f"scale set {name} was not drained after {now - started:.0f} s: "
                + "; ".join(
                    part
                    for part in (
                        busy and f"{len(busy)} runners still ran jobs ({', '.join(sorted(busy))})",
                        terminating and f"{len(terminating)} pods still terminating ({', '.join(terminating)})",
                    )
                    if part
                )
                + ". Their pods were left as they are, and so was the scale set on GitHub; its listener is stopped, "
                "so it takes no new job. Run destroy again once they are done"
            )
        clock.sleep(POLL_SECONDS)


def _sweep(config: ScaleSetConfig, github: ActionsServiceClient, kube: KubeClient) -> None:
    """What starts cut short left (their Secrets and registrations), now that no pod and no listener is left."""
    namespace, selector = config.runner.namespace, runner_selector(config.scale_set_name)
    secrets = kube.list_secret_metadata(namespace, selector)
    sweep_orphans(config, github, kube, ScaleSetObjects(kube), secrets, {}, datetime.now(UTC), min_age_seconds=0)


def _delete_listener_objects(listener: ListenerSpec, objects: ScaleSetObjects) -> None:
    namespace, name = listener.namespace, listener_name(listener.scale_set_name)
    objects.delete("Deployment", namespace, name)
    for kind in ("RoleBinding", "Role", "ServiceAccount", "ConfigMap"):
        objects.delete(kind, namespace, name)
    objects.delete("Secret", namespace, credential_secret_name(listener.scale_set_name))


def observe_scale_set(
    listener: ListenerSpec, scale_set_id: int, github: ActionsServiceClient, objects: ScaleSetObjects, kube: KubeClient
) -> Observed:
    """The set's statistics and runners as they are now (its id as the listener last wrote it)."""
    current = _current_id(_recorded_config(objects, listener), scale_set_id)
    found = github.scale_set(current)
    namespace, name = listener.namespace, listener.scale_set_name
    runners = []
    for pod in kube.list_pods(namespace, runner_selector(name)):
        runner = SetRunner.of_pod(pod)
        runners.append(
            {
                "name": runner.name,
                "id": runner.runner_id,
                "spec_hash": runner.spec_hash,
                "pod_phase": pod_phase(pod),
                "retiring": runner.removed_at is not None,
            }
        )
    listening = any(
        pod.status is not None and pod.status.phase == "Running"
        for pod in kube.list_pods(namespace, listener_selector(name))
    )
    return Observed(
        scale_set_id=current if found is not None else None,
        statistics=found.statistics if found is not None else {},
        runners=sorted(runners, key=lambda r: r["name"]),
        listener_running=listening,
    )
