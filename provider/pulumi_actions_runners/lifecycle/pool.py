"""Reconciling a RunnerPool: its runners rotated, restarted, added and removed concurrently, in one call, each by
the same procedures as a lone Runner.

What each runner of the plan goes through:

REMOVE   scale-down, first: ended and idle runners first, as one listing says; a runner GitHub calls busy is
         passed over for another, and waited on only when no idle one is left. A surplus runner left busy is
         left alone: neither rotated nor restarted.
ROTATE   out of date (token or spec): torn down (RemoveRunner first; 422 keeps the pod and retries; grace; pod
         deleted), then started anew under its name. It is out of service from its successful RemoveRunner until
         its successor is online, and at most ``max_unavailable`` runners are out of service at once (runners
         that had ended already do not count).
RESTART  its pod ended or is gone (an ephemeral runner after its job): nothing in service to protect, so no
         permit; torn down (which is idempotent) and started anew.
ADD      scale-up: a new name, started — once every new name has been found free in GitHub, or registered by
         this pool (its ownership label): a name another runner holds fails the update before anything is
         touched.

A live pod of the pool that its state does not list, or lists as older than it is (made by an update cut short,
or known to a state file that was lost), is taken in first: as it is when this pool made it with the current
token and spec and its registration is the pool's own (so that a rotation killed half-way is not done twice);
otherwise a pod the state does not list is taken in as unknown, and then rotated.

A runner that fails to start halts the rollout, as a Deployment's would: runners not taken down yet stay as they
are, so a broken image or spec takes out at most ``max_unavailable`` of them.

The result lists exactly the runners that exist afterwards, and a problem for whatever did not converge, so
that the state stays true when part of the work fails and the next update picks up the rest.
"""

from __future__ import annotations

import contextvars
import enum
import logging
import math
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from ..clock import Clock
from ..github.budget import content_creating_seconds
from ..github.registration_tokens import StartTokens
from ..github.registrations import by_preferred_name
from ..kube.client import PodAlreadyExists, SecretMetadata, describe
from ..kube.manifests import JOB_LABEL, POOL_LABEL, RunnerSpec, made_by, pod_manifest
from ..kube.pod_state import ENDED_PHASES, crash_looping, pod_finished, pod_live, retrying
from ..logs import POOL_THREAD_PREFIX, STATUS
from ..wording import counted
from .relabel import PodRelabeler, Relabeler, relabel_runner
from .startup import JitRegistry, PodCreator, RunnerNameTaken, StartTimeouts, made_as_specified, start_runner
from .teardown import (
    BUSY_POLL_FIRST_SECONDS,
    BUSY_POLL_MAX_SECONDS,
    NO_LIMIT,
    Permits,
    RunnerLocation,
    RunnerStillBusy,
    TeardownTimeouts,
    owns,
    tear_down_runner,
)

log = logging.getLogger(__name__)

JIT_PACE_WORTH_SAYING_SECONDS = 300.0
MAX_PARALLEL_RUNNERS = 512  # threads mostly asleep (grace periods, polls); the API budget paces the calls


class Work(enum.Enum):
    ROTATE = "rotate"
    RELABEL = "relabel"
    RESTART = "restart"
    REMOVE = "remove"
    ADD = "add"


_STARTING = (Work.ROTATE, Work.RELABEL, Work.RESTART, Work.ADD)
_DONE = {
    Work.ROTATE: "rotated",
    Work.RELABEL: "relabelled",
    Work.RESTART: "restarted",
    Work.REMOVE: "removed",
    Work.ADD: "added",
}


@dataclass(frozen=True)
class PoolRunner:
    """One runner as the pool's state records it; hashes of None mean "unknown": it gets rotated."""

    name: str
    runner_id: int | None
    token_hash: str | None
    spec_hash: str | None
    ephemeral: bool | None  # as it was made; None (unknown) is taken down as a persistent one, with the sweep
    shape_hash: str | None = None  # RunnerSpec.shape_hash; None (a state from before it): never relabelled
    # A refresh found its pod ended, stuck, or running with no registration (pod_state.ENDED_PHASES): its runner
    # takes no job, whatever the pod's next snapshot shows, until GitHub lists it online (see _not_serving).
    seen_ended: bool = False
    runner_version: str | None = None  # the actions/runner version it was made with, as its output recorded it

    def unknown(self) -> PoolRunner:
        return replace(self, token_hash=None, spec_hash=None, shape_hash=None, runner_version=None)

    @classmethod
    def of_output(cls, output: dict[str, Any]) -> PoolRunner:
        """As the pool's ``runners`` output records it."""
        runner_id = output.get("id")
        return cls(
            name=output["name"],
            runner_id=int(runner_id) if runner_id is not None else None,
            token_hash=output.get("token_hash"),
            spec_hash=output.get("spec_hash"),
            ephemeral=output.get("ephemeral"),
            shape_hash=output.get("shape_hash"),
            seen_ended=output.get("pod_phase") in ENDED_PHASES,
            runner_version=output.get("runner_version"),
        )


@dataclass(frozen=True)
class PoolSpec:
    name: str  # also the prefix of its runners' names
    template: RunnerSpec  # every runner's spec but its name
    replicas: int
    max_unavailable: int
    tokens: StartTokens | None  # None for just-in-time runners

    def runner(self, name: str) -> RunnerSpec:
        return replace(self.template, runner_name=name)

    def up_to_date(self, runner: PoolRunner) -> bool:
        return (runner.token_hash, runner.spec_hash) == (self.template.token_hash, self.template.spec_hash)

    def relabels(self, runner: PoolRunner) -> bool:
        """Whether the runner differs from the spec in labels alone."""
        template = self.template
        return (runner.token_hash, runner.shape_hash) == (template.token_hash, template.shape_hash)


@dataclass(frozen=True)
class PoolTimeouts:
    """A runner's or a pool's timeouts, from which each procedure takes its own."""

    grace_period_seconds: float
    unregister_timeout_seconds: float
    register_timeout_seconds: float
    pod_gone_timeout_seconds: float

    def teardown(self, unregister_timeout_seconds: float | None = None) -> TeardownTimeouts:
        """``unregister_timeout_seconds``: where a caller waits on busy runners otherwise (0: not at all)."""
        unregister = (
            self.unregister_timeout_seconds if unregister_timeout_seconds is None else unregister_timeout_seconds
        )
        return TeardownTimeouts(self.grace_period_seconds, unregister, self.pod_gone_timeout_seconds)

    def start(self) -> StartTimeouts:
        return StartTimeouts(
            self.register_timeout_seconds,
            self.unregister_timeout_seconds,
            self.pod_gone_timeout_seconds,
            self.grace_period_seconds,
        )


@dataclass
class PoolResult:
    runners: list[PoolRunner]
    problems: list[str] = field(default_factory=list)
    done: dict[Work, int] = field(default_factory=lambda: dict.fromkeys(Work, 0))


class PoolGitHub(JitRegistry, Relabeler, Protocol):
    def list_runners(self) -> Iterable[dict[str, Any]]: ...

    def registrations_of(self, names: list[str]) -> list[dict[str, Any]]:
        """Every registration of these names, by lookups that cannot skip one: a "none" lets a name be taken."""
        ...


class PoolPods(PodCreator, PodRelabeler, Protocol):
    def list_pods(self, namespace: str, label_selector: str) -> list[Any]: ...
    def list_secret_metadata(self, namespace: str, label_selector: str) -> list[SecretMetadata]: ...


class RolloutHalted(Exception):
    """A replacement failed to start, so no further runner is taken out of service in this update."""


class NoSlotInTime(Exception):
    """No runner being replaced came back within the time all of them together may take."""


class Rollout:
    """``max_unavailable`` as permits, with a bounded wait for one, and a halt once a replacement fails."""

    def __init__(self, pool_name: str, limit: int, wait_bound: float, rotations: int = 0) -> None:
        self._pool_name, self._limit, self._wait_bound = pool_name, limit, wait_bound
        self._free = limit
        self._halted: str | None = None
        self._waiting_said = False
        self._changed = threading.Condition()
        self._rotations, self._rotated, self._busy = rotations, 0, set[str]()

    def waiting_on_job(self, runner_name: str, waiting: bool) -> None:
        with self._changed:
            (self._busy.add if waiting else self._busy.discard)(runner_name)
            self._say_progress()

    def rotated(self) -> None:
        """Said at each tenth of the rotation (a log of 500 lines would be the wall the status line replaces)."""
        with self._changed:
            self._rotated += 1
            if self._rotated == self._rotations or self._rotated % max(1, self._rotations // 10) == 0:
                self._say_progress()

    def _say_progress(self) -> None:
        """One line for the whole rotation, as it stands: what the plugin shows as the pool's status."""
        busy = f"waiting on {counted(len(self._busy), 'busy runner')} (RemoveRunner 422), " if self._busy else ""
        log.info("pool %s: %s%d of %d rotated", self._pool_name, busy, self._rotated, self._rotations, extra=STATUS)

    def acquire(self, runner_name: str) -> None:
        with self._changed:
            if self._free <= 0 and not self._halted and not self._waiting_said:
                self._waiting_said = True
                log.info(
                    "pool %s: %d runners out of service (max_unavailable); the others wait for them to come back, "
                    "at most %.0f s",
                    self._pool_name,
                    self._limit,
                    self._wait_bound,
                )
            if not self._changed.wait_for(lambda: self._halted or self._free > 0, self._wait_bound):
                raise NoSlotInTime(
                    f"runner {runner_name} was left running: no runner being replaced came back within "
                    f"{self._wait_bound:.0f} s (max_unavailable {self._limit})"
                )
            if self._halted:
                raise RolloutHalted(f"runner {runner_name} was left running: the rollout halted ({self._halted})")
            self._free -= 1

    def release(self) -> None:
        with self._changed:
            self._free += 1
            self._changed.notify()

    def halt(self, reason: str) -> None:
        with self._changed:
            self._halted = self._halted or reason
            self._changed.notify_all()


class _Held:
    """The permits one runner's work holds, so that they are given back whatever way the work ends."""

    def __init__(self, permits: Permits) -> None:
        self._permits = permits
        self.count = 0

    def acquire(self, runner_name: str) -> None:
        self._permits.acquire(runner_name)
        self.count += 1

    def release(self) -> None:
        self.count -= 1
        self._permits.release()

    def waiting_on_job(self, runner_name: str, waiting: bool) -> None:
        self._permits.waiting_on_job(runner_name, waiting)

    def release_all(self) -> None:
        while self.count:
            self.release()


@dataclass
class _Pool:
    """One reconciliation's collaborators."""

    spec: PoolSpec
    github: PoolGitHub
    pods: PoolPods
    clock: Clock
    timeouts: PoolTimeouts
    # Finished pods a Job made while the pool refilled (refill_pool.py), seen by the listing: they are deleted.
    finished_of_jobs: list[str] = field(default_factory=list)

    def location(self, runner: PoolRunner) -> RunnerLocation:
        # As it was made, which may differ from the spec now; unknown: swept as a persistent one could need.
        return RunnerLocation.of(self.spec.runner(runner.name), runner.runner_id, ephemeral=runner.ephemeral is True)


def reconcile_pool(
    spec: PoolSpec,
    current: list[PoolRunner],
    github: PoolGitHub,
    pods: PoolPods,
    clock: Clock,
    timeouts: PoolTimeouts,
) -> PoolResult:
    """Raises only before any runner is touched; afterwards every outcome is in the result."""
    started = clock.monotonic()
    pool = _Pool(spec, github, pods, clock, timeouts)
    live = _live_pods(pool)
    runners = {runner.name: runner for runner in current}
    for name in _not_serving(pool, runners, live):
        del live[name]  # its runner takes no job: restarted as an ended one is
    # Pods the state does not know, or knows as older than they are (a rotation whose provider was killed after
    # it made them): taken in as they are where they are the pool's own, so that nothing is rotated twice.
    unknown = {name: pod for name, pod in live.items() if name not in runners or _made_since(spec, runners[name], pod)}
    runners |= _take_in(pool, unknown, runners)
    ended = {name for name in runners if name not in live}
    result = PoolResult(runners=[])

    new_names = _new_names(spec, runners, spec.replicas - len(runners))
    ours = _check_names_ours(pool, new_names)
    if new_names or ended or not all(map(spec.up_to_date, runners.values())):
        # A pod of the spec judged by the API server, and the runner group looked up, once for all before any
        # runner is touched: PodRejected, RunnerGroupNotFound.
        first = min([*runners, *new_names], key=lambda n: runner_index(spec.name, n))
        pods.validate_pod(pod_manifest(spec.runner(first)))
        if spec.template.runner_group:
            github.runner_group_id(spec.template.runner_group)
    left_alone: set[str] = set()
    if len(runners) > spec.replicas:
        left_alone = _scale_down(pool, runners, ended, len(runners) - spec.replicas, result)

    work: list[tuple[Work, str, PoolRunner | None]] = []
    for name, runner in sorted(runners.items()):
        if name in left_alone:
            continue
        if name in ended:
            work.append((Work.RESTART, name, runner))
        elif not spec.up_to_date(runner):
            work.append((Work.RELABEL if spec.relabels(runner) else Work.ROTATE, name, runner))
    work += [(Work.ADD, name, None) for name in _new_names(spec, runners, spec.replicas - len(runners))]
    rotations = sum(1 for kind, _, _ in work if kind in (Work.ROTATE, Work.RELABEL))  # a relabel may fall back
    configs_seconds = _jit_configs_seconds(spec, len(work))
    # Each wave of replacements may take its grace period, pod deletion and registration, at most; and all of
    # them together as long as GitHub takes to hand out their just-in-time configs.
    per_wave = timeouts.grace_period_seconds + timeouts.pod_gone_timeout_seconds + timeouts.register_timeout_seconds
    wait_bound = math.ceil(rotations / spec.max_unavailable) * per_wave + configs_seconds
    rollout = Rollout(spec.name, spec.max_unavailable, wait_bound, rotations)
    if work:
        log.info(
            "pool %s: %s (max_unavailable %d)",
            spec.name,
            ", ".join(f"{sum(1 for w in work if w[0] is kind)} to {kind.value}" for kind in _STARTING),
            spec.max_unavailable,
        )

    def run(item: tuple[Work, str, PoolRunner | None]) -> tuple[PoolRunner | None, str | None]:
        kind, name, old = item
        if kind is Work.RELABEL and old is not None:
            done = _relabel(pool, name, old, live[name], rollout, ours=ours.get(name))
        else:
            done = _replace(pool, name, old, rollout, rotating=kind is Work.ROTATE, ours=ours.get(name))
        if kind in (Work.ROTATE, Work.RELABEL):
            rollout.rotated()
        return done

    def failed(item: tuple[Work, str, PoolRunner | None], error: Exception) -> tuple[PoolRunner | None, str]:
        _kind, name, old = item  # its work never ran to an end: whatever it had stays, to be looked at again
        return (old.unknown() if old else PoolRunner(name, None, None, None, None)), f"{name}: {describe(error)}"

    for (kind, name, _old), (now, problem) in zip(work, concurrently(run, work, failed), strict=True):
        if now is None:
            runners.pop(name, None)
        else:
            runners[name] = now
        if problem is None:
            result.done[kind] += 1
        else:
            result.problems.append(problem)
    result.runners = sorted(runners.values(), key=lambda r: runner_index(spec.name, r.name))
    try:
        _delete_orphan_secrets(pool, {spec.runner(name).secret_name for name in runners})
        _delete_finished_of_jobs(pool)
    except Exception as error:
        result.problems.append(f"pool {spec.name}: leftovers of removed runners not deleted: {describe(error)}")
    log.info(
        "pool %s: %s in %.1f s; %d runners, %d problems",
        spec.name,
        ", ".join(f"{count} {_DONE[kind]}" for kind, count in result.done.items()),
        clock.monotonic() - started,
        len(result.runners),
        len(result.problems),
    )
    return result


def _jit_configs_seconds(spec: PoolSpec, starts: int) -> float:
    """How long GitHub's content-creating limits (80 a minute, 500 an hour) make the configs of ``starts``
    just-in-time runners take at least; said at the start when it is more than a few minutes."""
    if not spec.template.jit_config or not starts:
        return 0.0
    seconds = content_creating_seconds(starts)
    if seconds > JIT_PACE_WORTH_SAYING_SECONDS:
        log.warning(
            "pool %s: %d just-in-time configs take at least %.0f min: GitHub lets one credential make 80 a minute "
            "and 500 an hour (content-creating requests); the update waits for them",
            spec.name,
            starts,
            seconds / 60,
        )
    return seconds


def tear_down_pool(
    spec: PoolSpec,
    current: list[PoolRunner],
    github: PoolGitHub,
    pods: PoolPods,
    clock: Clock,
    timeouts: PoolTimeouts,
) -> list[str]:
    """Every runner of the pool taken down at once, each with its busy guard, and every pod of it that has not
    finished, whatever state it is in (stuck, terminating: a stray the state does not list too); returns what
    failed."""
    pool = _Pool(spec, github, pods, clock, timeouts)
    runners = {runner.name: runner for runner in current}
    for name in _live_pods(pool, others_fail=False, of_jobs=True, present=True):
        runners.setdefault(name, PoolRunner(name, None, None, None, None))

    def run(runner: PoolRunner) -> str | None:
        location = pool.location(runner)
        tear_down_runner(location, github, pods, clock, pool.timeouts.teardown())
        return None

    def failed(runner: PoolRunner, error: Exception) -> str:
        return f"{runner.name}: {describe(error)}"

    problems = [problem for problem in concurrently(run, list(runners.values()), failed) if problem]
    if not problems:
        _delete_orphan_secrets(pool, set())
        _delete_finished_of_jobs(pool)
    return problems


def _delete_finished_of_jobs(pool: _Pool) -> None:
    """Pods a Job made while the pool refilled, left to finish their jobs when it stopped, once finished."""
    for name in pool.finished_of_jobs:
        pool.pods.delete_pod(pool.spec.template.namespace, name)


def _delete_orphan_secrets(pool: _Pool, keep: set[str]) -> None:
    """The pool's Secrets that no runner of it uses (a provider stopped between writing a Secret and creating its
    pod, a runner left out of the state): they hold a credential, so they go."""
    namespace = pool.spec.template.namespace
    for secret in pool.pods.list_secret_metadata(namespace, f"{POOL_LABEL}={pool.spec.name}"):
        if secret.name not in keep and made_by(pool.spec.template, secret.labels):
            log.info(
                "pool %s: deleting Secret %s/%s, which no runner of the pool uses",
                pool.spec.name,
                namespace,
                secret.name,
            )
            pool.pods.delete_secret(namespace, secret.name, uid=secret.uid)  # that one, not one made since


def _replace(
    pool: _Pool, name: str, old: PoolRunner | None, rollout: Rollout, *, rotating: bool, ours: dict[str, Any] | None
) -> tuple[PoolRunner | None, str | None]:
    """Take ``old`` down (if any) and start ``name``; returns what exists afterwards and what went wrong. Only a
    rotating runner (in service until unregistered) takes a permit; a start that fails halts the rollout.
    ``ours``: a new name's registration that the pool's check found to be its own."""
    held = _Held(rollout if rotating else NO_LIMIT)
    try:
        if old is not None:
            try:
                report = tear_down_runner(
                    pool.location(old),
                    pool.github,
                    pool.pods,
                    pool.clock,
                    pool.timeouts.teardown(),
                    held,
                    pod_running=rotating,
                )
            except Exception as error:  # busy all along, halted, or its pod would not go: it is still there
                return old if held.count == 0 else old.unknown(), f"{name}: not replaced: {describe(error)}"
            if report.foreign is not None:  # another runner took the name meanwhile: not to be taken over
                return None, f"{name}: not started again: {RunnerNameTaken(pool.spec.runner(name), [report.foreign])}"
        spec = pool.spec.runner(name)
        try:
            runner_id = start_runner(
                spec,
                pool.spec.tokens,
                pool.github,
                pool.pods,
                pool.clock,
                pool.timeouts.start(),
                pod_known_gone=old is not None,
                name_checked=True,  # a teardown removed its registration by the id in state, or the pool's check
                ours=ours,
                pod_validated=True,
            )
        except Exception as error:
            rollout.halt(f"{name} failed to start: {describe(error)}")
            # start_runner took down what it made; if its clean-up failed, the leftover stays in the state.
            leftover = PoolRunner(name, None, None, None, spec.ephemeral) if _pod_left(pool, spec) else None
            return leftover, f"{name}: not started: {describe(error)}"
        return PoolRunner(name, runner_id, spec.token_hash, spec.spec_hash, spec.ephemeral, spec.shape_hash), None
    finally:
        held.release_all()


def _relabel(
    pool: _Pool, name: str, old: PoolRunner, pod: Any, rollout: Rollout, *, ours: dict[str, Any] | None
) -> tuple[PoolRunner | None, str | None]:
    """New labels for a runner in service (``pod``: its pod, from the pool's one listing), which stays in
    service; replaced instead if it cannot be relabelled."""
    spec = pool.spec.runner(name)
    try:
        why = relabel_runner(spec, old.runner_id, pod, pool.github, pool.pods)
    except Exception as error:  # GitHub may have its new labels already: the next update relabels it again
        return old, f"{name}: not relabelled: {describe(error)}"
    if why is None:
        return replace(old, spec_hash=spec.spec_hash), None
    log.warning("pool %s: %s is replaced rather than relabelled: %s", pool.spec.name, name, why)
    return _replace(pool, name, old, rollout, rotating=True, ours=ours)


def _scale_down(
    pool: _Pool, runners: dict[str, PoolRunner], ended: set[str], surplus: int, result: PoolResult
) -> set[str]:
    """Remove ``surplus`` runners, ended and idle ones first, never a busy one: GitHub's 422 passes it over.
    Returns the surplus runners left as they are (busy to the end, or failed part-way: those are kept in the
    state as unknown, so that they are looked at again)."""
    busy = {r["name"] for r in pool.github.list_runners() if r.get("busy")}

    def removal_order(r: PoolRunner) -> tuple[bool, bool, bool, int]:
        return (r.name not in ended, r.name in busy, pool.spec.up_to_date(r), -runner_index(pool.spec.name, r.name))

    candidates = sorted(runners.values(), key=removal_order)
    removed: list[str] = []
    failed: list[str] = []
    deadline = pool.clock.monotonic() + pool.timeouts.unregister_timeout_seconds
    delay = BUSY_POLL_FIRST_SECONDS
    waiting: list[PoolRunner] = []  # busy when asked: asked again once the idle ones are used up

    def try_remove(runner: PoolRunner) -> str | None:
        """None when removed; "busy"; or what failed."""
        try:
            # An unregister timeout of 0: one RemoveRunner, and a 422 gives up at once instead of waiting.
            tear_down_runner(pool.location(runner), pool.github, pool.pods, pool.clock, pool.timeouts.teardown(0))
        except RunnerStillBusy:
            return "busy"
        return None

    def could_not(runner: PoolRunner, error: Exception) -> str:
        return f"{runner.name}: not removed: {describe(error)}"

    while len(removed) + len(failed) < surplus:
        if not candidates:
            if not waiting or pool.clock.monotonic() >= deadline:
                break
            log.info("pool %s: %s busy; asking again in %.0f s", pool.spec.name, counted(len(waiting), "runner"), delay)
            pool.clock.sleep(min(delay, max(deadline - pool.clock.monotonic(), 0.0)))
            delay = min(delay * 2, BUSY_POLL_MAX_SECONDS)
            candidates, waiting = waiting, []
        wanted = surplus - len(removed) - len(failed)
        batch, candidates = candidates[:wanted], candidates[wanted:]
        for runner, outcome in zip(batch, concurrently(try_remove, batch, could_not), strict=True):
            if outcome is None:
                removed.append(runner.name)
            elif outcome == "busy":
                waiting.append(runner)
            else:  # taken down part-way: it counts as removed, but stays in the state to be looked at again
                failed.append(runner.name)
                runners[runner.name] = runner.unknown()
                result.problems.append(outcome)
    short = surplus - len(removed) - len(failed)
    if short > 0:
        result.problems.append(
            f"scale-down removed {len(removed)} of {surplus} runners: {short} still running jobs after "
            f"{pool.timeouts.unregister_timeout_seconds:.0f} s (unregister_timeout_seconds) were left running"
        )
    for name in removed:
        del runners[name]
    result.done[Work.REMOVE] = len(removed)
    return set(failed) | {runner.name for runner in waiting[:short]}  # the other busy ones are not surplus


def _made_since(spec: PoolSpec, runner: PoolRunner, pod: Any) -> bool:
    """The state records the runner as out of date, but its pod was made as the pool is now specified."""
    return not spec.up_to_date(runner) and made_as_specified(spec.runner(runner.name), pod)


def _take_in(pool: _Pool, strays: dict[str, Any], known: dict[str, PoolRunner]) -> dict[str, PoolRunner]:
    """Live pods of this pool that its state does not list, or lists as older than they are (made by an update
    cut short, or known to a state file that was lost): one this pool made with its current token and spec,
    whose registration is the pool's own, is taken in as it is; any other stays as the state has it, or, if the
    state does not list it, is taken in as unknown, to be rotated the safe way."""
    matching = [name for name, pod in strays.items() if made_as_specified(pool.spec.runner(name), pod)]
    registered = by_preferred_name(pool.github.registrations_of(matching)) if matching else {}
    taken: dict[str, PoolRunner] = {}
    for name in sorted(strays):
        spec, registration = pool.spec.runner(name), registered.get(name)
        if registration is not None and owns(RunnerLocation.of(spec, None), registration):
            log.info("pool %s: %s taken over as it is (made by this pool with this token and spec)", spec.pool, name)
            taken[name] = PoolRunner(
                name, int(registration["id"]), spec.token_hash, spec.spec_hash, spec.ephemeral, spec.shape_hash
            )
        elif name not in known:
            log.info("pool %s: %s is this pool's but not as now specified, or not registered: rotated", spec.pool, name)
            taken[name] = PoolRunner(name, None, None, None, None)
    return taken


def _not_serving(pool: _Pool, runners: dict[str, PoolRunner], live: dict[str, Any]) -> list[str]:
    """Live pods whose runner takes no job though its container may show as running: one running again after
    its runner failed, and not running a job (pod_state.crash_looping: a crash loop shows its container running
    during each retry, so one snapshot of it proves nothing), and one a refresh found ended, stuck or
    unregistered (``seen_ended``) of which GitHub lists no online registration of this pool's now. Asked by
    name, and only for them; a wrong verdict costs a restart, which the teardown's busy guard makes safe."""
    now = datetime.fromtimestamp(pool.clock.time(), UTC)
    after = pool.timeouts.register_timeout_seconds
    seen = {name for name in live if name in runners and runners[name].seen_ended}
    # Only the state's runners: a pod it does not list is taken in (and rotated or scaled down) whatever it does.
    suspects = sorted(seen | {name for name, pod in live.items() if name in runners and retrying(pod, now, after)})
    registered = by_preferred_name(
        r
        for r in (pool.github.registrations_of(suspects) if suspects else [])
        if owns(RunnerLocation.of(pool.spec.runner(r["name"]), None), r)
    )
    not_serving = []
    for name in suspects:
        registration = registered.get(name)
        if crash_looping(live[name], registration, now, after):
            why = "restarting after a failure"
        elif name in seen and (registration is None or registration.get("status") != "online"):
            why = "seen by refresh"
        else:
            continue
        log.info("pool %s: %s takes no job (%s): restarted", pool.spec.name, name, why)
        not_serving.append(name)
    return not_serving


def _check_names_ours(pool: _Pool, names: list[str]) -> dict[str, dict[str, Any]]:
    """The registrations of the names that are this pool's own; RunnerNameTaken, before anything is touched, if
    a runner this pool does not own holds any of them."""
    registered = pool.github.registrations_of(names) if names else []
    foreign = [r for r in registered if not owns(RunnerLocation.of(pool.spec.runner(r["name"]), None), r)]
    if foreign:
        raise RunnerNameTaken(pool.spec.template, sorted(foreign, key=lambda r: r["name"]))
    return by_preferred_name(registered)


def _live_pods(
    pool: _Pool, *, others_fail: bool = True, of_jobs: bool = False, present: bool = False
) -> dict[str, Any]:
    """The pool's pods that run (or will): finished and terminating ones count as ended. Pods of another stack's
    pool of the same name in the namespace are never ours; with ``others_fail`` they fail the call before
    anything is touched. ``of_jobs``: with the pods a Job made while the pool refilled (refill_pool.py), which
    a pool that no longer refills leaves to finish their jobs, and its teardown takes down. ``present``: every
    pod that has not finished (stuck and terminating ones too), for a teardown that must leave none."""
    namespace, selector = pool.spec.template.namespace, f"{POOL_LABEL}={pool.spec.name}"
    pods = pool.pods.list_pods(namespace, selector)
    theirs = sorted(pod.metadata.name for pod in pods if not made_by(pool.spec.template, pod.metadata.labels))
    pods = [pod for pod in pods if pod.metadata.name not in theirs]
    pool.finished_of_jobs = [p.metadata.name for p in pods if _of_a_job(p) and pod_finished(p)]
    pods = [p for p in pods if of_jobs or not _of_a_job(p)]
    if theirs and others_fail:
        raise PodAlreadyExists(
            f"pool_name {pool.spec.name!r}: pods {', '.join(theirs)} in namespace {namespace} belong to another "
            "resource's pool of that name (another stack's); nothing was touched. Choose another pool_name."
        )
    return {pod.metadata.name: pod for pod in pods if (not pod_finished(pod) if present else pod_live(pod))}


def _of_a_job(pod: Any) -> bool:
    return JOB_LABEL in (pod.metadata.labels or {})


def _pod_left(pool: _Pool, spec: RunnerSpec) -> bool:
    """A pod of this pool under the name (another resource's pod of the name is not ours to record)."""
    try:
        pod = pool.pods.read_pod(spec.namespace, spec.pod_name)
    except Exception:
        return True  # cannot tell: keeping it in the state costs an idempotent teardown, forgetting it a leak
    return pod is not None and (pod.metadata.labels or {}).get(POOL_LABEL) == spec.pool


def _new_names(spec: PoolSpec, runners: dict[str, PoolRunner], count: int) -> list[str]:
    """The lowest free indices, so that names stay short and a pool scaled down and up again reuses them."""
    names: list[str] = []
    index = 0
    while len(names) < count:
        name = f"{spec.name}-{index}"
        if name not in runners:
            names.append(name)
        index += 1
    return names


def runner_index(pool_name: str, name: str) -> int:
    """The index in a pool runner's name ("pool-7": 7); -1 for a name not of the pool's form."""
    suffix = name.removeprefix(f"{pool_name}-")
    return int(suffix) if suffix.isdigit() else -1


def max_unavailable_count(value: int | str, replicas: int) -> int:
    """``max_unavailable`` as a number of runners: a count, or a percentage of ``replicas`` rounded down; 1 at
    least."""
    if isinstance(value, str):
        return max(1, math.floor(replicas * int(value.removesuffix("%")) / 100))
    return max(1, int(value))


def concurrently(action: Callable[[Any], Any], items: list[Any], failed: Callable[[Any, Exception], Any]) -> list[Any]:
    """``action`` on every item at once; an item whose action raised gets ``failed(item, error)`` instead, so that
    one failure never hides the outcome of the others."""

    def guarded(item: Any) -> Any:
        try:
            return action(item)
        except Exception as error:
            return failed(item, error)

    if not items:
        return []
    # Each item's thread runs in a copy of the caller's context: the plugin's log lines keep their resource.
    contexts = [contextvars.copy_context() for _ in items]
    with ThreadPoolExecutor(
        max_workers=min(len(items), MAX_PARALLEL_RUNNERS), thread_name_prefix=POOL_THREAD_PREFIX
    ) as threads:
        return list(threads.map(lambda context, item: context.run(guarded, item), contexts, items))
