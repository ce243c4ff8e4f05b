"""Reconciling a refilling RunnerPool: its runners are the pods of a Job, which Kubernetes' Job controller
refills whenever a runner's one job ends (see refill_manifests.py); an update changes only what the Job is made
of, or how many pods it runs.

A generation is one Job, ``<pool>-j<n>``, with its Secret. What an update does, in order:

TOKEN      The Secret gets the token (one valid for at least ``REFILL_TOKEN_VALIDITY_SECONDS``, so that pods the
           controller starts until the next update can register). Registered runners never read it again; the
           pods of the Job that had not registered yet started with the old one, so they are recreated (torn
           down with no permit: they are in no one's service), and the controller starts their successors.
STUCK      Pods that will serve no job as they are (an image that cannot be pulled; running unregistered for
           longer than a registration takes) are torn down too, for the controller to start anew.
SCALE UP   the Job's parallelism rises.
ROLL       anything else makes a new generation: what the runners are made of (image, labels, pod template...),
           fewer replicas (a lower parallelism would let the Job controller choose which pods to delete, busy
           ones among them), a Job in failure back-off (its back-off lives in the controller: a new Job starts
           afresh), a Job gone, or a pool that did not refill before. The old Jobs are deleted with
           propagationPolicy Orphan, so nothing refills their pods, which are then drained:
             not in service (ended, not running, not registered): torn down; its slot goes to the new Job;
             busy and ephemeral (GitHub's listing, or RemoveRunner's 422): left to finish its job; its slot goes
               to the new Job at once, so the pool serves for a while with more runners than ``replicas``,
               never fewer;
             idle, or persistent (a pool's from before it refilled: it never ends by itself): in waves of
               ``max_unavailable``, torn down as a rotated runner is (RemoveRunner first, 422 waited on for a
               persistent one, the grace period, the pod deleted); the wave's slots go to the new Job, and the
               next wave waits until its runners are online.
CLEAN      Registrations of the pool's runners whose pod has ended are removed (busy guard and all), finished pods
           deleted (the Job controller has counted them), and Secrets no pod will read again deleted.

Then a bounded wait (``register_timeout_seconds``) until the Job's runners are online, one per slot. The result
says what exists and what did not converge. Nothing is touched before the Job is judged by a dry run; a failure
after that leaves nothing the next update cannot find, as it finds the pool's Jobs, pods and Secrets by their
labels.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from ..clock import Clock
from ..github.client import RemoveOutcome
from ..github.registration_tokens import MAX_VALIDITY_NEEDED_SECONDS
from ..github.registrations import by_preferred_name
from ..github.releases import version_of_image
from ..kube.client import PodAlreadyExists, SecretMetadata, describe, unusable_namespace
from ..kube.manifests import JOB_LABEL, POOL_LABEL, RUNNER_LABEL, SPEC_HASH_ANNOTATION, TOKEN_KEY, made_by
from ..kube.pod_state import (
    pod_finished,
    pod_live,
    pod_problem,
    pod_stuck,
    runner_exit_code,
    runner_image,
    runner_running,
    runner_status,
    runs_unregistered,
    why_not_running,
)
from ..kube.refill_manifests import (
    generation_of,
    job_manifest,
    job_name,
    refill_secret_manifest,
    secret_name,
)
from ..kube.runner_secret import SecretNotOurs
from .pool import PoolRunner, PoolSpec, PoolTimeouts, concurrently
from .teardown import (
    BUSY_POLL_MAX_SECONDS,
    NO_LIMIT,
    RunnerLocation,
    RunnerRegistry,
    RunnerStillBusy,
    owns,
    tear_down_runner,
)

log = logging.getLogger(__name__)

# A pod the Job controller starts until the next update registers with the Secret's token: at each update it
# gets one valid for at least this long, so an update at least this often keeps every new pod registering.
REFILL_TOKEN_VALIDITY_SECONDS = MAX_VALIDITY_NEEDED_SECONDS
JOB_GONE_TIMEOUT_SECONDS = 30.0  # the garbage collector takes an orphaned Job's ownerReferences off in moments
POLL_FIRST_SECONDS = 0.5
# Runners stopped from outside (SIGTERM 143, SIGKILL 137) are not the pool failing by itself.
_STOPPED_EXITS = (137, 143)


class RefillGitHub(RunnerRegistry, Protocol):
    def list_runners(self) -> Iterable[dict[str, Any]]: ...
    def registrations_of(self, names: list[str]) -> list[dict[str, Any]]: ...


class RefillKube(Protocol):
    def list_pods(self, namespace: str, label_selector: str) -> list[Any]: ...
    def read_pod(self, namespace: str, name: str) -> Any: ...
    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None: ...
    def release_from_job(self, namespace: str, name: str) -> None: ...
    def list_jobs(self, namespace: str, label_selector: str) -> list[Any]: ...
    def read_job(self, namespace: str, name: str) -> Any: ...
    def validate_job(self, manifest: dict[str, Any]) -> None: ...
    def create_job(self, manifest: dict[str, Any]) -> bool: ...
    def scale_job(self, namespace: str, name: str, parallelism: int) -> None: ...
    def orphan_job(self, namespace: str, name: str, uid: str) -> None: ...
    def create_secret(self, manifest: dict[str, Any]) -> bool: ...
    def set_secret_value(self, namespace: str, name: str, key: str, value: str) -> None: ...
    def read_secret_metadata(self, namespace: str, name: str) -> SecretMetadata | None: ...
    def list_secret_metadata(self, namespace: str, label_selector: str) -> list[SecretMetadata]: ...
    def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> bool: ...


class JobNotOurs(Exception):
    """A Job of the generation's name that this pool did not make."""


class RefillNotConverged(Exception):
    """The Job's runners did not all come online in time."""


@dataclass
class RefillResult:
    job: str | None  # the generation that serves the pool
    parallelism: int
    runners: list[dict[str, Any]] = field(default_factory=list)  # the pool's live runner pods, as GitHub lists them
    problems: list[str] = field(default_factory=list)
    recreated: int = 0  # pods recreated for a new token (they had not registered)
    drained: int = 0  # runners of older generations torn down
    left_busy: int = 0  # runners of older generations left to finish their jobs


@dataclass
class _Refill:
    """One reconciliation's collaborators."""

    spec: PoolSpec
    recorded: dict[str, PoolRunner]  # runners a state of the pool before it refilled lists
    github: RefillGitHub
    kube: RefillKube
    clock: Clock
    timeouts: PoolTimeouts

    @property
    def namespace(self) -> str:
        return self.spec.template.namespace

    @property
    def selector(self) -> str:
        return f"{POOL_LABEL}={self.spec.name}"

    def pods(self, *, others_fail: bool = True) -> list[Any]:
        """The pool's pods; another stack's pool of the name in the namespace fails the call (nothing touched)."""
        pods = self.kube.list_pods(self.namespace, self.selector)
        theirs = sorted(p.metadata.name for p in pods if not made_by(self.spec.template, p.metadata.labels))
        if theirs and others_fail:
            raise PodAlreadyExists(
                f"pool_name {self.spec.name!r}: pods {', '.join(theirs)} in namespace {self.namespace} belong to "
                "another resource's pool of that name (another stack's); nothing was touched. Choose another "
                "pool_name."
            )
        return [p for p in pods if p.metadata.name not in theirs]

    def jobs(self) -> list[Any]:
        return [
            j
            for j in self.kube.list_jobs(self.namespace, self.selector)
            if made_by(self.spec.template, j.metadata.labels)
        ]

    def location(self, pod: Any, runner_id: int | None) -> RunnerLocation:
        """A Job's pod has no Secret of its own (its generation's is shared: it goes with the generation); a
        runner of the pool from before it refilled is taken down as its state recorded it."""
        name = pod.metadata.name
        recorded = self.recorded.get(name)
        if JOB_LABEL in (pod.metadata.labels or {}):
            location = RunnerLocation.of(self.spec.runner(name), runner_id, ephemeral=True)
            return replace(location, secret_name=f"{name}-no-secret")
        if recorded is not None and runner_id is None:
            runner_id = recorded.runner_id
        return RunnerLocation.of(self.spec.runner(name), runner_id, ephemeral=bool(recorded and recorded.ephemeral))


def reconcile_refill_pool(
    spec: PoolSpec,
    recorded: list[PoolRunner],
    token_changed: bool,
    github: RefillGitHub,
    kube: RefillKube,
    clock: Clock,
    timeouts: PoolTimeouts,
) -> RefillResult:
    """``recorded``: the runners a state of the pool from before it refilled lists (taken down as recorded);
    ``token_changed``: the pool's token differs from the one its state recorded."""
    started = clock.monotonic()
    refill = _Refill(spec, {r.name: r for r in recorded}, github, kube, clock, timeouts)
    try:
        pods = refill.pods()
    except Exception as error:  # its first call in the namespace, refused: nothing is touched, and no retry helps
        if (unusable := unusable_namespace(error, refill.namespace)) is not None:
            raise unusable from None
        raise
    jobs = refill.jobs()
    serving = _serving_job(refill, jobs, pods)
    assert spec.tokens is not None  # a refilling pool's runners register with tokens
    token = replace(spec.tokens, needed_seconds=REFILL_TOKEN_VALIDITY_SECONDS)  # more than any start needs

    if serving is None:
        generation = 1 + max(
            [generation_of(j.metadata.name) for j in jobs]
            + [generation_of((p.metadata.labels or {}).get(JOB_LABEL, "")) for p in pods],
            default=0,
        )
        job = job_name(spec.name, generation)
        kube.validate_job(job_manifest(spec.template, job, spec.replicas))  # PodRejected: nothing touched
        _write_secret(refill, job, token.for_start())
        _orphan(refill, jobs)
        parallelism = 0
        log.info("pool %s: Job %s serves it from now on (%d runners)", spec.name, job, spec.replicas)
    else:
        job, parallelism = serving.metadata.name, int(serving.spec.parallelism or 0)
        _write_secret(refill, job, token.for_start())
        _orphan(refill, [j for j in jobs if j.metadata.name != job])
    result = RefillResult(job=job, parallelism=parallelism)

    # Looked at again once the old Jobs are gone: a pod one of them started meanwhile is drained too. The
    # registrations first: a runner listed then had its pod by the time the pods are.
    listing = list(github.list_runners())
    pods = refill.pods()
    registered = _owned_registrations(refill, listing, pods)
    live = [p for p in pods if pod_live(p)]
    ours = [p for p in live if (p.metadata.labels or {}).get(JOB_LABEL) == job]
    older = [p for p in live if p not in ours]
    # Drained in waves: idle runners, and persistent ones busy or not (those never end by themselves).
    idle = [
        p
        for p in older
        if _in_service(registered.get(p.metadata.name)) == "idle"
        or (_in_service(registered.get(p.metadata.name)) and not refill.location(p, None).ephemeral)
    ]
    busy = [p for p in older if _in_service(registered.get(p.metadata.name)) == "busy" and p not in idle]
    out = [p for p in older if p not in idle and p not in busy]
    result.left_busy = len(busy)
    # Pods that will serve no job as they are (see _will_not_serve): the Job controller starts a successor for
    # each of its own once it is gone.
    now = datetime.fromtimestamp(clock.time(), UTC)
    after = timeouts.register_timeout_seconds
    out += [
        p
        for p in pods
        if p not in out
        and (p in ours or not pod_live(p))
        and _will_not_serve(p, registered.get(p.metadata.name), now, after)
    ]
    if token_changed and serving is not None:
        unregistered = [p for p in ours if p.metadata.name not in registered and p not in out]
        out += unregistered
        result.recreated = len(unregistered)

    problems = _tear_down(refill, out, registered, result)
    parallelism = max(parallelism, spec.replicas - len(idle))  # idle runners of older Jobs give theirs up later
    if serving is None:
        if not kube.create_job(job_manifest(spec.template, job, parallelism)):
            raise JobNotOurs(
                f"Job {refill.namespace}/{job} exists and is not pool {spec.name}'s (it carries no ownership label "
                "of this resource): left alone. Choose another pool_name, or delete that Job if it is a leftover."
            )
    elif parallelism != int(serving.spec.parallelism or 0):
        kube.scale_job(refill.namespace, job, parallelism)
    result.parallelism = parallelism
    if older or problems:
        log.info(
            "pool %s: %d runners of older generations to drain (%d idle, in waves of %d; %d busy, left to finish "
            "their jobs)",
            spec.name,
            len(idle) + len(busy),
            len(idle),
            spec.max_unavailable,
            len(busy),
        )
    try:
        for start in range(0, len(idle), spec.max_unavailable):
            wave = idle[start : start + spec.max_unavailable]
            freed, failed = _drain_wave(refill, wave, registered)
            problems += failed
            result.drained += freed
            result.parallelism = min(spec.replicas, result.parallelism + freed)
            kube.scale_job(refill.namespace, job, result.parallelism)
            if start + spec.max_unavailable < len(idle):
                _wait_filled(refill, job, result.parallelism)
        _wait_filled(refill, job, result.parallelism)
    except RefillNotConverged as error:
        problems.append(str(error))
    problems += _clean(refill, job)
    result.problems = problems
    result.runners = _runners(refill)
    log.info(
        "pool %s: Job %s runs %d; %d recreated for the token, %d drained, %d busy left to finish, in %.1f s; "
        "%d problems",
        spec.name,
        job,
        result.parallelism,
        result.recreated,
        result.drained,
        result.left_busy,
        clock.monotonic() - started,
        len(problems),
    )
    return result


def tear_down_refill_pool(
    spec: PoolSpec,
    recorded: list[PoolRunner],
    github: RefillGitHub,
    kube: RefillKube,
    clock: Clock,
    timeouts: PoolTimeouts,
) -> list[str]:
    """The Jobs deleted so that nothing refills, then every pod that has not finished taken down at once,
    whatever state it is in (live, stuck pulling its image or crash-looping, terminating: nothing owns it once
    its Job is gone), each with its busy guard (``unregister_timeout_seconds``); returns what failed."""
    refill = _Refill(spec, {r.name: r for r in recorded}, github, kube, clock, timeouts)
    _orphan(refill, refill.jobs())
    pods = refill.pods(others_fail=False)
    present = [p for p in pods if not pod_finished(p)]
    registered = _owned_registrations(refill, github.list_runners(), present)

    def run(pod: Any) -> str | None:
        registration = registered.get(pod.metadata.name)
        location = refill.location(pod, int(registration["id"]) if registration else None)
        tear_down_runner(location, github, kube, clock, refill.timeouts.teardown())
        return None

    problems = [p for p in concurrently(run, present, lambda pod, e: f"{pod.metadata.name}: {describe(e)}") if p]
    if not problems:
        problems += _clean(refill, job=None)
    return problems


@dataclass(frozen=True)
class RefillObserved:
    """What a refresh records of a refilling pool."""

    runners: list[dict[str, Any]]  # its runner pods, live or stuck, as GitHub lists them
    problems: list[str]  # what keeps its slots from being filled, in words
    finished_pods: int  # pods that have finished, which the next update deletes


def observe_refill_pool(
    spec: PoolSpec, job: str | None, github: RefillGitHub, kube: RefillKube, clock: Clock, timeouts: PoolTimeouts
) -> RefillObserved:
    """``job``: the generation that serves the pool, as the last update left it."""
    refill = _Refill(spec, {}, github, kube, clock, timeouts)
    listing = list(github.list_runners())  # before the pods: a runner listed then had its pod by then
    pods = refill.pods(others_fail=False)
    registered = _owned_registrations(refill, listing, pods)
    jobs = {j.metadata.name for j in refill.jobs()}
    problems = [
        f"runner {r['name']} (id {r['id']}, {r['status']}) is registered, but its pod has ended (its runner was "
        "killed, say): the next update removes the registration"
        for r in _stale_registrations(refill, listing, pods)
    ]
    if job is not None and job not in jobs:
        problems.append(f"Job {job} is gone: nothing refills the pool's slots; the next update makes a new one")
    mine = [p for p in pods if (p.metadata.labels or {}).get(JOB_LABEL) == job]
    if earlier := sum(1 for p in pods if pod_finished(p) and p not in mine):
        problems.append(
            f"{earlier} pods of runners that an earlier update left to finish their jobs have finished: the next "
            "update deletes them"
        )
    if failing := _failing(mine):
        problems.append(
            f"Job {job}: {failing}. The Job controller holds its next pods back (10 s, doubling to 10 min) and "
            "they will fail alike; the next update starts a new Job with a fresh token"
        )
    now = datetime.fromtimestamp(clock.time(), UTC)
    after = timeouts.register_timeout_seconds
    for pod in mine:
        ghost = runs_unregistered(pod, registered.get(pod.metadata.name), now, after)
        if (problem := pod_problem(pod, unregistered=ghost)) and not pod_finished(pod):
            problems.append(f"runner pod {pod.metadata.name}: {problem}")
        elif _not_started(pod, now, after):
            problems.append(
                f"runner pod {pod.metadata.name} has not started after {after:.0f} s (register_timeout_seconds): "
                f"{why_not_running(pod)}; the next update recreates it"
            )
    runners = []
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        if not pod_live(pod) and not pod_stuck(pod):
            continue
        registration = registered.get(pod.metadata.name)
        runners.append(_runner_of(pod, registration))
    return RefillObserved(runners, problems, sum(1 for pod in pods if pod_finished(pod)))


def _owned_registrations(refill: _Refill, listing: Iterable[dict[str, Any]], pods: list[Any]) -> dict[str, dict]:
    """The registrations of the pool's pods that are provably theirs (the pool's ownership label)."""
    names = {p.metadata.name: p for p in pods}
    found = by_preferred_name(r for r in listing if r.get("name") in names)
    return {
        name: registration
        for name, registration in found.items()
        if owns(refill.location(names[name], None), registration)
    }


def _will_not_serve(pod: Any, registration: dict[str, Any] | None, now: datetime, after: float) -> bool:
    """A pod that serves no job as it is, and will not by itself: stuck (an image that cannot be pulled, a
    crash loop), not started ``after`` seconds after it was made (never scheduled, say), or running with no
    registration for longer than that (see pod_state.runs_unregistered)."""
    if pod_finished(pod) or pod.metadata.deletion_timestamp is not None:
        return False
    return bool(pod_stuck(pod)) or _not_started(pod, now, after) or runs_unregistered(pod, registration, now, after)


def _not_started(pod: Any, now: datetime, after: float) -> bool:
    made = pod.metadata.creation_timestamp
    return (
        not pod_finished(pod)
        and not runner_running(pod)
        and isinstance(made, datetime)
        and (now - made).total_seconds() > after
    )


def _in_service(registration: dict[str, Any] | None) -> str | None:
    if registration is None or registration.get("status") != "online":
        return None
    return "busy" if registration.get("busy") else "idle"


def _serving_job(refill: _Refill, jobs: list[Any], pods: list[Any]) -> Any | None:
    """The newest Job made of this spec that may serve on: not being deleted, not running more pods than the
    pool wants, not in failure back-off."""
    for job in sorted(jobs, key=lambda j: generation_of(j.metadata.name), reverse=True):
        name = job.metadata.name
        if (job.metadata.annotations or {}).get(SPEC_HASH_ANNOTATION) != refill.spec.template.spec_hash:
            continue
        if job.metadata.deletion_timestamp is not None or int(job.spec.parallelism or 0) > refill.spec.replicas:
            continue
        if failing := _failing(p for p in pods if (p.metadata.labels or {}).get(JOB_LABEL) == name):
            log.info(
                "pool %s: Job %s is in failure back-off (%s): a new one replaces it", refill.spec.name, name, failing
            )
            continue
        return job
    return None


def _failing(pods: Iterable[Any]) -> str | None:
    """Why the Job's pods fail, if pods of it failed by themselves since the last one that succeeded (the Job
    controller then holds the next pods back, 10 s doubling to 10 min); None if none did."""
    finished = sorted((p for p in pods if pod_finished(p)), key=_finished_at)
    failures = []
    for pod in reversed(finished):
        code = runner_exit_code(pod)
        if pod.status.phase == "Succeeded" or code == 0:
            break
        if code not in _STOPPED_EXITS:
            failures.append(pod)
    if not failures:
        return None
    return (
        f"{len(failures)} runner pods failed since the last one that served a job; the latest: "
        f"{why_not_running(failures[0])}"
    )


def _finished_at(pod: Any) -> tuple[float, float, bool]:
    """When the runner exited; timestamps are whole seconds, so of pods finished in the same second the later
    made, then a failed one, counts as the later (a Job failing is said rather than missed)."""
    status = runner_status(pod)
    terminated = status.state.terminated if status is not None and status.state is not None else None
    when = terminated.finished_at if terminated is not None else None
    made = pod.metadata.creation_timestamp
    return ((when or made).timestamp(), made.timestamp(), pod.status.phase == "Failed")


def _write_secret(refill: _Refill, job: str, token: str) -> None:
    manifest = refill_secret_manifest(refill.spec.template, job, token)
    if refill.kube.create_secret(manifest):
        return
    existing = refill.kube.read_secret_metadata(refill.namespace, secret_name(job))
    labels = existing.labels if existing is not None else {}
    if existing is not None and not (made_by(refill.spec.template, labels) and labels.get(JOB_LABEL) == job):
        raise SecretNotOurs(refill.namespace, secret_name(job), labels)
    refill.kube.set_secret_value(refill.namespace, secret_name(job), TOKEN_KEY, token)


def _orphan(refill: _Refill, jobs: list[Any]) -> None:
    """Old Jobs deleted, their pods left to be drained; waits (bounded) until the Jobs are gone, so that none
    refills a pod the drain ends."""
    for job in jobs:
        refill.kube.orphan_job(refill.namespace, job.metadata.name, job.metadata.uid)
    deadline = refill.clock.monotonic() + JOB_GONE_TIMEOUT_SECONDS
    for job in jobs:
        while refill.kube.read_job(refill.namespace, job.metadata.name) is not None:
            if refill.clock.monotonic() >= deadline:
                raise TimeoutError(
                    f"Job {refill.namespace}/{job.metadata.name} was not gone {JOB_GONE_TIMEOUT_SECONDS:.0f} s after "
                    "its deletion (propagationPolicy Orphan): is the cluster's garbage collector running?"
                )
            refill.clock.sleep(0.1)


def _tear_down(refill: _Refill, pods: list[Any], registered: dict[str, dict], result: RefillResult) -> list[str]:
    """Runners in no one's service, torn down at once with no permit."""

    def run(pod: Any) -> str | None:
        registration = registered.get(pod.metadata.name)
        location = refill.location(pod, int(registration["id"]) if registration else None)
        tear_down_runner(location, refill.github, refill.kube, refill.clock, refill.timeouts.teardown(0))
        return None

    def failed(pod: Any, error: Exception) -> str | None:
        if isinstance(error, RunnerStillBusy):  # it took a job since the listing: left to finish it
            result.left_busy += 1
            return None
        return f"{pod.metadata.name}: not taken down: {describe(error)}"

    return [p for p in concurrently(run, pods, failed) if p]


def _drain_wave(refill: _Refill, wave: list[Any], registered: dict[str, dict]) -> tuple[int, list[str]]:
    """Runners of older generations torn down, RemoveRunner first: an ephemeral one that GitHub calls busy now
    is left to finish its job; a persistent one (from before the pool refilled) never ends by itself, so it is
    waited for, up to ``unregister_timeout_seconds``. Returns how many slots came free and what failed."""

    def run(pod: Any) -> str | None:
        registration = registered[pod.metadata.name]
        location = refill.location(pod, int(registration["id"]))
        wait = 0.0 if location.ephemeral else refill.timeouts.unregister_timeout_seconds
        try:
            tear_down_runner(
                location, refill.github, refill.kube, refill.clock, refill.timeouts.teardown(wait), NO_LIMIT, True
            )
        except RunnerStillBusy:
            if not location.ephemeral:
                raise
            log.info("pool %s: %s took a job meanwhile: left to finish it", refill.spec.name, pod.metadata.name)
        return None

    problems = [
        p for p in concurrently(run, wave, lambda pod, e: f"{pod.metadata.name}: not taken down: {describe(e)}") if p
    ]
    return len(wave) - len(problems), problems


def _wait_filled(refill: _Refill, job: str, slots: int) -> None:
    """Until ``slots`` runners of the Job are online (busy or idle), bounded by register_timeout_seconds."""
    timeout = refill.timeouts.register_timeout_seconds
    deadline = refill.clock.monotonic() + timeout
    delay = POLL_FIRST_SECONDS
    while True:
        refill.clock.sleep(delay)
        pods = [p for p in refill.kube.list_pods(refill.namespace, f"{JOB_LABEL}={job}") if pod_live(p)]
        names = [p.metadata.name for p in pods]
        online = (
            {r["name"] for r in refill.github.registrations_of(names) if r.get("status") == "online"}
            if names
            else set()
        )
        if len(online) >= slots:
            return
        if refill.clock.monotonic() >= deadline:
            waiting = [
                p
                for p in refill.kube.list_pods(refill.namespace, f"{JOB_LABEL}={job}")
                if p.metadata.name not in online
            ]
            reasons = sorted({why_not_running(p) for p in waiting})[:3]
            raise RefillNotConverged(
                f"Job {job}: {len(online)} of {slots} runners online after {timeout:.0f} s "
                f"(register_timeout_seconds); its other pods: {'; '.join(reasons) or 'none made yet'}"
            )
        delay = min(delay * 1.5, BUSY_POLL_MAX_SECONDS, max(deadline - refill.clock.monotonic(), 0.0))


def _clean(refill: _Refill, job: str | None) -> list[str]:
    """What no runner needs any more: registrations of the pool's runners whose pod has ended (a runner killed
    leaves one, offline or with a stale session), unregistered with the busy guard (a 422 is a runner that died
    mid-job: GitHub abandons its job, and a later update removes it); finished pods (the Job controller has
    counted them, or will as they go); the Secrets of other generations than ``job`` (their Jobs are gone, and
    their pods read the token when their container started)."""
    problems = []
    listing = list(refill.github.list_runners())  # before the pods: a runner listed then had its pod by then
    pods = refill.pods(others_fail=False)
    for registration in _stale_registrations(refill, listing, pods):
        if refill.github.remove_runner(int(registration["id"])) is RemoveOutcome.BUSY:
            log.info(
                "pool %s: runner %s died mid-job: its registration waits for GitHub",
                refill.spec.name,
                registration["name"],
            )
    for pod in pods:
        if pod_finished(pod) and pod.metadata.deletion_timestamp is None:
            try:
                refill.kube.delete_pod(refill.namespace, pod.metadata.name)
            except Exception as error:
                problems.append(f"finished pod {pod.metadata.name} not deleted: {describe(error)}")
    # A persistent runner's container that restarts reads its Secret again; an ephemeral one's never does.
    persistent = {p.metadata.name for p in pods if pod_live(p) and p.spec.restart_policy != "Never"}
    for secret in refill.kube.list_secret_metadata(refill.namespace, refill.selector):
        generation, runner = secret.labels.get(JOB_LABEL), secret.labels.get(RUNNER_LABEL)
        stale = generation != job if generation else runner not in persistent
        if stale and made_by(refill.spec.template, secret.labels):
            refill.kube.delete_secret(refill.namespace, secret.name, uid=secret.uid)
    return problems


def _stale_registrations(refill: _Refill, listing: list[dict[str, Any]], pods: list[Any]) -> list[dict[str, Any]]:
    """The pool's own registrations (its ownership label) of runners whose pod it can see ended or ending, or
    that its state recorded and no pod of it runs any more. Only names of this pool's pods: the ownership label
    is the resource's, and a stack of the same project and name elsewhere (another cluster, another backend)
    carries the same one."""
    live = {p.metadata.name for p in pods if pod_live(p)}
    ended = {p.metadata.name for p in pods if not pod_live(p)} | (refill.recorded.keys() - live)
    return [
        r for r in listing if r.get("name") in ended and owns(RunnerLocation.of(refill.spec.runner(r["name"]), None), r)
    ]


def _runners(refill: _Refill) -> list[dict[str, Any]]:
    pods = [p for p in refill.pods(others_fail=False) if pod_live(p)]
    names = [p.metadata.name for p in pods]
    registered = by_preferred_name(refill.github.registrations_of(names)) if names else {}
    return [_runner_of(p, registered.get(p.metadata.name)) for p in sorted(pods, key=lambda p: p.metadata.name)]


def _runner_of(pod: Any, registration: dict[str, Any] | None) -> dict[str, Any]:
    """A runner as the pool's ``runners`` output lists it."""
    return {
        "name": pod.metadata.name,
        "pod": pod.metadata.name,
        "job": (pod.metadata.labels or {}).get(JOB_LABEL),
        "id": registration["id"] if registration else None,
        "status": registration["status"] if registration else None,
        "busy": registration["busy"] if registration else None,
        "runner_version": version_of_image(runner_image(pod) or ""),  # None for a private build's tag
    }


def retire_jobs(
    spec: PoolSpec, github: RefillGitHub, kube: RefillKube, clock: Clock, timeouts: PoolTimeouts
) -> list[str]:
    """A pool that refilled, and no longer does: its Jobs deleted so that nothing refills, their pods that are in
    no one's service (stuck ones among them: nothing owns them once their Job is gone) or idle torn down
    (RemoveRunner first), busy ones left to finish their jobs; a pool reconciled afterwards starts runners of its
    own in their place. Returns what failed."""
    refill = _Refill(spec, {}, github, kube, clock, timeouts)
    _orphan(refill, refill.jobs())
    pods = [p for p in refill.pods() if not pod_finished(p) and JOB_LABEL in (p.metadata.labels or {})]
    registered = _owned_registrations(refill, github.list_runners(), pods)
    result = RefillResult(job=None, parallelism=0)
    problems = _tear_down(refill, pods, registered, result)
    return problems + _clean(refill, job=None)
