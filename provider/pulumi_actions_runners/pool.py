"""Reconciling a RunnerPool: its runners rotated, restarted, added and removed concurrently, in one call, each by
the same procedures as a lone Runner.

What each runner of the plan goes through:

ROTATE   out of date (token or spec): torn down (RemoveRunner first; 422 keeps the pod and retries; grace; pod
         deleted), then started anew under its name. It is out of service from its successful RemoveRunner until
         its successor is online, and at most ``max_unavailable`` runners are out of service at once.
RESTART  its pod ended or is gone (an ephemeral runner after its job): nothing in service to protect, so no
         permit; torn down (which is idempotent) and started anew.
REMOVE   scale-down: idle runners first, as one listing says; a runner GitHub calls busy is passed over for
         another, and waited on only when no idle one is left.
ADD      scale-up: a new name, started.

The result lists exactly the runners that exist afterwards, and a problem for whatever did not converge, so
that the state stays true when part of the work fails and the next update picks up the rest.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .clock import Clock
from .kube_client import describe, pod_finished
from .manifests import POOL_LABEL, RunnerSpec
from .startup import JitRegistry, PodCreator, StartTimeouts, start_runner
from .teardown import (
    BUSY_POLL_FIRST_SECONDS,
    BUSY_POLL_MAX_SECONDS,
    NO_LIMIT,
    Permits,
    RunnerLocation,
    RunnerStillBusy,
    TeardownTimeouts,
    tear_down_runner,
)

log = logging.getLogger(__name__)

MAX_PARALLEL_RUNNERS = 512  # threads mostly asleep (grace periods, polls); the API budget paces the calls


class Work(enum.Enum):
    ROTATE = "rotate"
    RESTART = "restart"
    REMOVE = "remove"
    ADD = "add"


_STARTING = (Work.ROTATE, Work.RESTART, Work.ADD)


@dataclass(frozen=True)
class PoolRunner:
    """One runner as the pool's state records it; hashes of None mean "unknown": it gets rotated."""

    name: str
    runner_id: int | None
    token_hash: str | None
    spec_hash: str | None


@dataclass(frozen=True)
class PoolSpec:
    name: str  # also the prefix of its runners' names
    template: RunnerSpec  # every runner's spec but its name
    replicas: int
    max_unavailable: int
    registration_token: str | None  # None for just-in-time runners

    def runner(self, name: str) -> RunnerSpec:
        return replace(self.template, runner_name=name)

    def up_to_date(self, runner: PoolRunner) -> bool:
        return (runner.token_hash, runner.spec_hash) == (self.template.token_hash, self.template.spec_hash)


@dataclass(frozen=True)
class PoolTimeouts:
    grace_period_seconds: float
    unregister_timeout_seconds: float
    register_timeout_seconds: float
    pod_gone_timeout_seconds: float


@dataclass
class PoolResult:
    runners: list[PoolRunner]
    problems: list[str] = field(default_factory=list)
    done: dict[Work, int] = field(default_factory=lambda: dict.fromkeys(Work, 0))


class PoolGitHub(JitRegistry, Protocol):
    def list_runners(self) -> Iterable[dict[str, Any]]: ...


class PoolPods(PodCreator, Protocol):
    def list_pods(self, namespace: str, label_selector: str) -> list[Any]: ...


class Unavailability:
    """``max_unavailable`` as permits; every wait for one is bounded by the caller."""

    def __init__(self, limit: int) -> None:
        self._slots = threading.BoundedSemaphore(limit)

    def acquire(self, timeout: float) -> bool:
        return self._slots.acquire(timeout=max(timeout, 0.0))

    def release(self) -> None:
        self._slots.release()


class _Held:
    """The permits one runner's work holds, so that they are given back whatever way the work ends."""

    def __init__(self, permits: Permits) -> None:
        self._permits = permits
        self.count = 0

    def acquire(self, timeout: float) -> bool:
        taken = self._permits.acquire(timeout)
        self.count += taken
        return taken

    def release(self) -> None:
        self.count -= 1
        self._permits.release()

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

    def location(self, runner: PoolRunner) -> RunnerLocation:
        spec = self.spec.runner(runner.name)
        return RunnerLocation(
            spec.namespace, spec.pod_name, spec.secret_name, spec.runner_name, runner.runner_id, spec.ephemeral
        )

    def teardown_timeouts(self, unregister_timeout: float) -> TeardownTimeouts:
        return TeardownTimeouts(
            self.timeouts.grace_period_seconds, unregister_timeout, self.timeouts.pod_gone_timeout_seconds
        )


def reconcile_pool(
    spec: PoolSpec,
    current: list[PoolRunner],
    github: PoolGitHub,
    pods: PoolPods,
    clock: Clock,
    timeouts: PoolTimeouts,
) -> PoolResult:
    pool = _Pool(spec, github, pods, clock, timeouts)
    live = _live_pods(pool)
    runners = {runner.name: runner for runner in current}
    for name in live:
        if name not in runners:  # made by an update that was cut short: taken into the state, then rotated
            runners[name] = PoolRunner(name, None, None, None)
    ended = {name for name in runners if name not in live}
    result = PoolResult(runners=[])

    surplus = len(runners) - spec.replicas
    if surplus > 0:
        removed = _scale_down(pool, runners, ended, surplus, result)
        for name in removed:
            del runners[name]

    permits = Unavailability(spec.max_unavailable)
    work: list[tuple[Work, str, PoolRunner | None]] = []
    for name, runner in sorted(runners.items()):
        if name in ended:
            work.append((Work.RESTART, name, runner))
        elif not spec.up_to_date(runner):
            work.append((Work.ROTATE, name, runner))
    work += [(Work.ADD, name, None) for name in _new_names(spec, runners, spec.replicas - len(runners))]
    if work:
        log.info(
            "pool %s: %s (max_unavailable %d)",
            spec.name,
            ", ".join(f"{sum(1 for w in work if w[0] is kind)} to {kind.value}" for kind in _STARTING),
            spec.max_unavailable,
        )

    def run(item: tuple[Work, str, PoolRunner | None]) -> tuple[Work, str, PoolRunner | None, str | None]:
        kind, name, old = item
        rotating = kind is Work.ROTATE  # a live pod: out of service once unregistered; else already ended
        return (kind, name, *_replace(pool, name, old, permits if rotating else NO_LIMIT, pod_running=rotating))

    for kind, name, now, problem in _concurrently(run, work):
        if now is None:
            runners.pop(name, None)
        else:
            runners[name] = now
        if problem is None:
            result.done[kind] += 1
        else:
            result.problems.append(problem)
    result.runners = sorted(runners.values(), key=lambda r: _index(spec, r.name))
    return result


def tear_down_pool(
    spec: PoolSpec,
    current: list[PoolRunner],
    github: PoolGitHub,
    pods: PoolPods,
    clock: Clock,
    timeouts: PoolTimeouts,
) -> list[str]:
    """Every runner of the pool taken down at once, each with its busy guard; returns what failed."""
    pool = _Pool(spec, github, pods, clock, timeouts)
    names = {runner.name: runner for runner in current}
    for name in _live_pods(pool):
        names.setdefault(name, PoolRunner(name, None, None, None))

    def run(runner: PoolRunner) -> str | None:
        try:
            tear_down_runner(
                pool.location(runner), github, pods, clock, pool.teardown_timeouts(timeouts.unregister_timeout_seconds)
            )
        except Exception as error:
            return f"{runner.name}: {describe(error)}"
        return None

    return [problem for problem in _concurrently(run, list(names.values())) if problem]


def _replace(
    pool: _Pool, name: str, old: PoolRunner | None, permits: Permits, *, pod_running: bool
) -> tuple[PoolRunner | None, str | None]:
    """Take ``old`` down (if any) and start ``name``; returns what exists afterwards and what went wrong."""
    held = _Held(permits)
    try:
        if old is not None:
            try:
                tear_down_runner(
                    pool.location(old),
                    pool.github,
                    pool.pods,
                    pool.clock,
                    pool.teardown_timeouts(pool.timeouts.unregister_timeout_seconds),
                    held,
                    pod_running,
                )
            except Exception as error:  # busy all along, or its pod would not go: it is still there
                return old, f"{name}: not replaced: {describe(error)}"
        spec = pool.spec.runner(name)
        try:
            runner_id = start_runner(
                spec,
                pool.spec.registration_token,
                pool.github,
                pool.pods,
                pool.clock,
                StartTimeouts(
                    pool.timeouts.register_timeout_seconds,
                    pool.timeouts.unregister_timeout_seconds,
                    pool.timeouts.pod_gone_timeout_seconds,
                ),
                pod_known_gone=old is not None,
            )
        except Exception as error:
            # start_runner took down what it made; if its clean-up failed, the leftover stays in the state.
            leftover = _pod_left(pool, spec)
            return (PoolRunner(name, None, None, None) if leftover else None), f"{name}: not started: {describe(error)}"
        return PoolRunner(name, runner_id, spec.token_hash, spec.spec_hash), None
    finally:
        held.release_all()


def _scale_down(
    pool: _Pool, runners: dict[str, PoolRunner], ended: set[str], surplus: int, result: PoolResult
) -> list[str]:
    """Remove ``surplus`` runners, ended and idle ones first, never a busy one: GitHub's 422 passes it over."""
    busy = {r["name"] for r in pool.github.list_runners() if r.get("busy")}
    candidates = sorted(
        runners.values(),
        key=lambda r: (r.name not in ended, r.name in busy, pool.spec.up_to_date(r), -_index(pool.spec, r.name)),
    )
    removed: list[str] = []
    deadline = pool.clock.monotonic() + pool.timeouts.unregister_timeout_seconds
    delay = BUSY_POLL_FIRST_SECONDS
    waiting: list[PoolRunner] = []  # busy when asked: asked again once the idle ones are used up

    def try_remove(runner: PoolRunner) -> str | None:
        """None when removed; "busy"; or what failed."""
        try:
            # An unregister timeout of 0: one RemoveRunner, and a 422 gives up at once instead of waiting.
            tear_down_runner(pool.location(runner), pool.github, pool.pods, pool.clock, pool.teardown_timeouts(0))
        except RunnerStillBusy:
            return "busy"
        except Exception as error:
            return f"{runner.name}: not removed: {describe(error)}"
        return None

    while len(removed) < surplus:
        if not candidates:
            if not waiting or pool.clock.monotonic() >= deadline:
                break
            log.info("pool %s: %d runners busy; asking again in %.0f s", pool.spec.name, len(waiting), delay)
            pool.clock.sleep(min(delay, max(deadline - pool.clock.monotonic(), 0.0)))
            delay = min(delay * 2, BUSY_POLL_MAX_SECONDS)
            candidates, waiting = waiting, []
        batch, candidates = candidates[: surplus - len(removed)], candidates[surplus - len(removed) :]
        for runner, outcome in zip(batch, _concurrently(try_remove, batch), strict=True):
            if outcome is None:
                removed.append(runner.name)
            elif outcome == "busy":
                waiting.append(runner)
            else:
                result.problems.append(outcome)
    if len(removed) < surplus:
        result.problems.append(
            f"scale-down removed {len(removed)} of {surplus} runners: {len(waiting)} still running jobs after "
            f"{pool.timeouts.unregister_timeout_seconds:.0f} s (unregister_timeout_seconds) were left running"
        )
    result.done[Work.REMOVE] = len(removed)
    return removed


def _live_pods(pool: _Pool) -> dict[str, Any]:
    """The pool's pods that run (or will): finished and terminating ones count as ended."""
    selector = f"{POOL_LABEL}={pool.spec.name}"
    return {
        pod.metadata.name: pod
        for pod in pool.pods.list_pods(pool.spec.template.namespace, selector)
        if not pod_finished(pod) and pod.metadata.deletion_timestamp is None
    }


def _pod_left(pool: _Pool, spec: RunnerSpec) -> bool:
    try:
        return pool.pods.read_pod(spec.namespace, spec.pod_name) is not None
    except Exception:
        return True  # cannot tell: keeping it in the state costs an idempotent teardown, forgetting it a leak


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


def _index(spec: PoolSpec, name: str) -> int:
    suffix = name.removeprefix(f"{spec.name}-")
    return int(suffix) if suffix.isdigit() else -1


def _concurrently(action: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(len(items), MAX_PARALLEL_RUNNERS), thread_name_prefix="pool") as threads:
        return list(threads.map(action, items))
