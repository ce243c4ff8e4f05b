"""Soak (not a test): seeded rounds of changes, busy jobs, injected faults and killed provider processes.

Each round changes a stack of lone Runners, RunnerPools, one of them refilling (its runners the pods of a Job
that the real Job controller refills as jobs end; a spec change may turn a pool's refill on or off), and a
RunnerScaleSet whose listener (a real process, run by the test bed from its entry point) makes its runners between
updates (token rotation, spec change, scaling, max_unavailable, a lone runner added or removed, the scale set's
bounds, labels, image or pod changed, its name changed (a replacement), it removed or added again, destroy and
recreate, refresh then up), while jobs run on random runners (some longer than ``unregister_timeout_seconds``;
ephemeral runners exit after theirs) and jobs are queued for the scale set (``runs-on`` its name), with faults
injected in the GitHub double, in the fault proxy in front of the real API server, on the node, in the runners
(config.sh held, so that an update meets pods whose runners register, and are offered jobs, while it works) and
in the scale set (its listener SIGKILLed, the set deleted on GitHub's side, at a moment of the round), and
sometimes with the provider process SIGKILLed in the middle of a Create, Delete or Update. Every `up`, `refresh`
and `destroy` gets a provider process of its own, as `pulumi` starts one per run. After each round the faults are
cleared, the jobs are let finish, and at most two clean `refresh` + `up` runs (as the scheduled pipeline runs
`refresh`, then `up`) must bring the stack to where the invariants hold, checked against the doubles' own records:

1. no job lost (the simulated runners' ``jobs_killed`` stays empty, no job GitHub records as lost);
2. nothing leaked: every pod, Secret and registration of ours belongs to a runner in the state, and each runner
   in the state has them (after a destroy: nothing is left); nothing is left of a scale set destroyed or
   replaced (pods, Secrets, its listener's objects, its runners' registrations, the set on GitHub);
3. the state is true: ids, names, pods, token and spec hashes and images as GitHub and the API server hold them,
   and each pool converged; the scale set's id, bounds and spec as GitHub and its listener's ConfigMap hold
   them, its listener running, the jobs queued for it served, its runner pods at most ``max_runners`` (at least
   ``min_runners`` serving), each of its spec and registered to the set of the state's id;
4. every failure message is clear (the provider's own error, no Python error from a bug, no Kubernetes client
   dump) and holds no credential, nor do the provider's log, the listeners' logs and the state as exported.

A scale set's listener pod that met a node fault (never scheduled, its image not pulled) is deleted once the faults
are cleared, as a node that heals would schedule or pull it (its Deployment makes another). A violation prints
the seed, the round, what it changed, the faults, the kill, the timeline of the doubles' records and the last
lines of the listeners' logs, so that ``--seed`` replays the same choices. The last line, alone on it:

    soak: operations=N rounds=R faults=F kills=K violations=V jobs_killed=J leaked=L seed=S

operations: runner pods taken down (replacements, scale-downs, teardowns, a scale set's runners after their jobs),
each once, as the API server's watch saw them go;
faults: requests or pods that met an injected fault, listeners killed and scale sets deleted on GitHub's side;
kills: provider processes killed. The line before it: the jobs queued for the scale set, and how many of its
faults struck.

    .venv/bin/python bench/soak.py [--seed S] [--minutes M] [--operations N] [--rounds R] [--github-app]

With ``--github-app`` every resource authenticates as the simulated GitHub App, whose installation tokens live
``APP_TOKEN_LIFETIME_SECONDS``, so that a provider process working longer than half of that renews its token
in the middle of its work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client

from actions_runners_simulator.audit import (
    audit,
    refilling_pools,
    state_runners,
    state_scale_sets,
    unconverged_pools,
)
from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine, ProviderError
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool, RunnerScaleSet
from pulumi_actions_runners.kube.manifests import JOB_LABEL
from pulumi_actions_runners.kube.scale_set_manifests import COMPONENT_LABEL, SCALE_SET_LABEL

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "actions-runners"
TOKEN_LIFETIME_SECONDS = 3000  # the longest refresh_before_seconds: a token made due renews at once
TIME_SCALE = 60.0  # GitHub's minute and hour, shrunk: its limits apply as to a fleet 60 times as fast
APP_TOKEN_LIFETIME_SECONDS = 120.0  # renewed after 60 s (half its life): within a long rotation
GRACE_SECONDS = 0.2
UNREGISTER_TIMEOUT_SECONDS = 3.0  # some jobs run longer: their runner's replacement waits for the next run
REGISTER_TIMEOUT_SECONDS = 12.0  # a pod that is never scheduled or cannot pull fails its start after this
JOBS_END_TIMEOUT_SECONDS = 30.0
RUNNERS_EXIT_TIMEOUT_SECONDS = 5.0
SETTLE_RUNS = 2
FOREIGN_RUNNERS = 20
# The RunnerScaleSet: its names (a new name replaces it), the labels it may have beside its name, and the Actions
# service's timings shrunk as the soak's others are: a 1 s long poll, a dead listener's session refusing another
# for 3 s, a job offered and not acquired (its listener killed meanwhile) offered again after 5 s.
SCALE_SET_NAMES = ("soak-set", "soak-fleet")
SCALE_SET_LABELS: tuple[tuple[str, ...], ...] = ((), ("linux",), ("linux", "x64"))
LONG_POLL_SECONDS, SESSION_SILENCE_SECONDS, OFFER_SECONDS = 1.0, 3.0, 5.0
SCALE_SET_JOBS_END_TIMEOUT_SECONDS = 60.0
IMAGES = ("ghcr.io/actions/actions-runner:2.329.0", "ghcr.io/actions/actions-runner:2.330.0")
LABEL_SETS = (("soak",), ("soak", "linux"), ("soak", "large"))
# Pod shapes a spec change moves between: the provider's own pod, one sized and placed by a template, Docker mode.
SIZED = {
    "metadata": {"labels": {"team": "soak"}},
    "spec": {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "containers": [{"name": "runner", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}],
    },
}
DIND = {"spec": {"containers": [{"name": "dind", "resources": {"limits": {"memory": "1Gi"}}}]}}
POD_SHAPES: dict[str, dict[str, Any]] = {
    "plain": {},
    "sized": {"pod_template": SIZED},
    "docker": {"pod_template": DIND, "docker": True},
}
# A provider error of this type is a bug's, not a message meant for a user.
BUG_TYPES = (
    "KeyError", "TypeError", "AttributeError", "IndexError", "AssertionError", "NameError", "UnboundLocalError",
    "ZeroDivisionError", "RecursionError", "NotImplementedError", "JSONDecodeError", "StopIteration",
)  # fmt: skip
# What the engine sees of a provider it killed itself: no message of the provider's.
KILLED_PROVIDER = ("Socket closed", "Connection reset", "failed to connect", "Broken pipe", "UNAVAILABLE")


# --- the stack ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunnerShape:
    jit: bool
    labels: tuple[str, ...]
    image: str
    ephemeral: bool = True
    pod: str = "plain"  # one of POD_SHAPES


@dataclass(frozen=True)
class PoolShape(RunnerShape):
    replicas: int = 4
    max_unavailable: int | str = "50%"
    refill: bool = False  # its runners the pods of a Job, refilled between updates


@dataclass(frozen=True)
class ScaleSetShape:
    name: str  # its scale_set_name: another replaces the set
    min_runners: int
    max_runners: int
    labels: tuple[str, ...]
    image: str
    pod: str = "plain"  # one of POD_SHAPES

    def describe(self) -> str:
        return f"{self.name} {self.min_runners}..{self.max_runners}"


@dataclass
class StackShape:
    runners: dict[str, RunnerShape]
    pools: dict[str, PoolShape]
    token_due: bool = False  # the RegistrationToken is renewed by this run
    scale_set: ScaleSetShape | None = None  # the RunnerScaleSet "scale-set", when the stack has it

    def describe(self) -> str:
        pools = ", ".join(f"{n}x{p.replicas}" for n, p in self.pools.items())
        scale_set = f", scale set {self.scale_set.describe()}" if self.scale_set else ""
        return f"{len(self.runners)} Runners, pools {pools or 'none'}{scale_set}"


def program(sim: Simulator, shape: StackShape, *, github_app: bool = False) -> Callable[[], None]:
    credential = (
        {"github_app_id": sim.app_id, "github_app_private_key": sim.app_private_key}
        if github_app
        else {"github_token": sim.credential}
    )

    def declare() -> None:
        token = RegistrationToken(
            "registration",
            github_url=sim.repo_url,
            **credential,
            refresh_before_seconds=TOKEN_LIFETIME_SECONDS if shape.token_due else 0,
        )
        common = {
            "github_url": sim.repo_url,
            "namespace": NAMESPACE,
            **credential,
            "kubeconfig": str(sim.kubeconfig),
            "grace_period_seconds": GRACE_SECONDS,
            "unregister_timeout_seconds": UNREGISTER_TIMEOUT_SECONDS,
            "register_timeout_seconds": REGISTER_TIMEOUT_SECONDS,
        }
        for name, runner in shape.runners.items():
            Runner(name, **common, **_runner_args(runner, token))
        for name, pool in shape.pools.items():
            RunnerPool(
                name,
                pool_name=name,
                replicas=pool.replicas,
                max_unavailable=pool.max_unavailable,
                refill=pool.refill,
                **common,
                **_runner_args(pool, token),
            )
        if shape.scale_set is not None:
            scale_set = shape.scale_set
            RunnerScaleSet(
                "scale-set",
                scale_set_name=scale_set.name,
                min_runners=scale_set.min_runners,
                max_runners=scale_set.max_runners,
                labels=list(scale_set.labels),
                image=scale_set.image,
                **common,
                **POD_SHAPES[scale_set.pod],
            )

    return declare


def _runner_args(shape: RunnerShape, token: RegistrationToken) -> dict[str, Any]:
    return {
        "registration_token": None if shape.jit else token,
        "jit_config": shape.jit,
        "labels": list(shape.labels),
        "image": shape.image,
        "ephemeral": shape.ephemeral,
        **POD_SHAPES[shape.pod],
    }


def first_shape(rng: random.Random) -> StackShape:
    runners = {
        f"runner-{i}": RunnerShape(jit=i < 2, labels=rng.choice(LABEL_SETS), image=IMAGES[0], ephemeral=i != 5)
        for i in range(6)
    }
    pools = {
        "pool-a": PoolShape(jit=False, labels=("soak",), image=IMAGES[0], replicas=rng.randint(60, 80)),
        "pool-b": PoolShape(jit=True, labels=("soak",), image=IMAGES[0], replicas=rng.randint(30, 40)),
        "pool-c": PoolShape(jit=False, labels=("soak",), image=IMAGES[0], replicas=rng.randint(10, 20), refill=True),
    }
    scale_set = ScaleSetShape(SCALE_SET_NAMES[0], rng.randint(0, 1), rng.randint(2, 4), (), IMAGES[0])
    return StackShape(runners, pools, scale_set=scale_set)


# --- what a round changes -------------------------------------------------------------------------------------


def change_stack(rng: random.Random, shape: StackShape, *, in_place: bool = False) -> str:
    """Change ``shape`` in place; the change's description. "destroy" and "refresh" are done by the round;
    ``in_place``: only a change of the stack's resources (the next commit after a cancelled run)."""
    kinds = {"rotate": 4, "spec": 4, "scale": 2, "max_unavailable": 0.5, "add_remove": 0.7, "destroy": 0.5}
    kinds |= {"refresh": 0.5, "scale_set": 3}
    if in_place:
        kinds = {"rotate": 1, "spec": 1, "scale": 1} | ({"scale_set": 1} if shape.scale_set else {})
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    if kind == "scale_set":
        return change_scale_set(rng, shape, in_place=in_place)
    if kind == "rotate":
        shape.token_due = True
        return "rotate: the RegistrationToken is due"
    if kind in ("scale", "max_unavailable"):
        name = rng.choice(sorted(shape.pools))
        pool = shape.pools[name]
        if kind == "scale":
            replicas = max(10, min(90, pool.replicas + rng.choice([-15, -5, -2, 2, 5, 15])))
            shape.pools[name] = replace(pool, replicas=replicas)
            return f"scale: {name} {pool.replicas} -> {replicas}"
        value = rng.choice([5, 10, "25%", "50%", "100%"])
        shape.pools[name] = replace(pool, max_unavailable=value)
        return f"max_unavailable: {name} {pool.max_unavailable} -> {value}"
    if kind == "add_remove":
        free = [f"runner-{i}" for i in range(10) if f"runner-{i}" not in shape.runners]
        if shape.runners and (not free or rng.random() < 0.5):
            name = rng.choice(sorted(shape.runners))
            del shape.runners[name]
            return f"remove: {name}"
        name = rng.choice(free)
        shape.runners[name] = RunnerShape(jit=rng.random() < 0.4, labels=("soak",), image=IMAGES[0])
        return f"add: {name}"
    if kind == "spec":
        # A pool two times in three: a pool's spec change rotates all its runners.
        targets: dict[str, Any] = shape.pools if rng.random() < 2 / 3 or not shape.runners else shape.runners
        name = rng.choice(sorted(targets))
        target = targets[name]
        # A persistent runner stays one: GitHub makes just-in-time runners ephemeral (Check refuses the pair), and
        # a refilling pool's runners register with its token (Check refuses just-in-time configs there).
        refill = getattr(target, "refill", None)
        jit_weight = 1 if target.ephemeral and not refill else 0
        refill_weight = 1 if refill is not None and not target.jit else 0
        aspect = rng.choices(["labels", "image", "pod", "jit", "refill"], weights=[2, 2, 1, jit_weight, refill_weight])[
            0
        ]
        if aspect == "pod":
            changed = replace(target, pod=rng.choice([p for p in POD_SHAPES if p != target.pod]))
        elif aspect == "labels":
            changed = replace(target, labels=rng.choice([s for s in LABEL_SETS if s != target.labels]))
        elif aspect == "image":
            changed = replace(target, image=IMAGES[1] if target.image == IMAGES[0] else IMAGES[0])
        elif aspect == "refill":
            changed = replace(target, refill=not refill)
        else:
            changed = replace(target, jit=not target.jit)
        (shape.pools if name in shape.pools else shape.runners)[name] = changed
        return f"spec: {name} {aspect} -> {getattr(changed, aspect)}"
    return kind


def change_scale_set(rng: random.Random, shape: StackShape, *, in_place: bool = False) -> str:
    """The RunnerScaleSet added if the stack has none; else its bounds, labels (both handed to its listener),
    image or pod (its idle runners replaced), or (not ``in_place``) its name (a replacement: the old set drained
    and deleted first) changed, or it removed."""
    current = shape.scale_set
    if current is None:
        shape.scale_set = ScaleSetShape(
            rng.choice(SCALE_SET_NAMES), rng.randint(0, 1), rng.randint(2, 4), rng.choice(SCALE_SET_LABELS), IMAGES[0]
        )
        return f"scale set: add {shape.scale_set.describe()}"
    aspects = {"bounds": 3.0, "labels": 1.0, "image": 1.0, "pod": 1.0}
    if not in_place:
        aspects |= {"name": 0.5, "remove": 0.7}
    aspect = rng.choices(list(aspects), weights=list(aspects.values()))[0]
    if aspect == "remove":
        shape.scale_set = None
        return f"scale set: remove {current.name}"
    if aspect == "bounds":
        bounds = [
            (low, high)
            for low in (0, 1)
            for high in (2, 3, 4)
            if (low, high) != (current.min_runners, current.max_runners)
        ]
        low, high = rng.choice(bounds)
        shape.scale_set = replace(current, min_runners=low, max_runners=high)
        return f"scale set: {current.name} bounds {current.min_runners}..{current.max_runners} -> {low}..{high}"
    if aspect == "labels":
        changed = replace(current, labels=rng.choice([s for s in SCALE_SET_LABELS if s != current.labels]))
    elif aspect == "image":
        changed = replace(current, image=IMAGES[1] if current.image == IMAGES[0] else IMAGES[0])
    elif aspect == "pod":
        changed = replace(current, pod=rng.choice([p for p in POD_SHAPES if p != current.pod]))
    else:
        changed = replace(current, name=next(n for n in SCALE_SET_NAMES if n != current.name))
    shape.scale_set = changed
    return f"scale set: {current.name} {aspect} -> {getattr(changed, aspect)}"


# --- faults -----------------------------------------------------------------------------------------------------

RUNNER_ITEM, RUNNER_LIST = r"/actions/runners/\d+$", r"/actions/runners$"
JIT, REGISTRATION_TOKEN = r"/generate-jitconfig$", r"/registration-token$"
GITHUB_CALLS = [("DELETE", RUNNER_ITEM), ("GET", RUNNER_ITEM), ("GET", RUNNER_LIST), ("POST", JIT)]
GITHUB_CALLS += [("POST", REGISTRATION_TOKEN)]
PODS, POD = rf"/namespaces/{NAMESPACE}/pods$", rf"/namespaces/{NAMESPACE}/pods/[^/]+$"
SECRETS, SECRET = rf"/namespaces/{NAMESPACE}/secrets$", rf"/namespaces/{NAMESPACE}/secrets/[^/]+$"
KUBE_CALLS = [("POST", PODS), ("GET", POD), ("DELETE", POD), ("GET", PODS), ("POST", SECRETS)]
KUBE_CALLS += [("PUT", SECRET), ("DELETE", SECRET)]


def _kill_idle_runners(rng: random.Random, sim: Simulator, count: int, *, whole: bool) -> str:
    """Idle runners of ours killed now (a busy one's job would be lost by the world, not by the provider): the
    whole container (OOM), or the listener alone; their sessions are left behind."""
    names = sorted(r["name"] for r in sim.github.runners() if r["status"] == "online" and not r["busy"])
    kill = sim.runners.crash if whole else sim.runners.kill_listener
    killed = [name for name in rng.sample(names, min(count, len(names))) if kill(NAMESPACE, name, idle_only=True)]
    return f"{'containers' if whole else 'listeners'} of {len(killed)} idle runners killed ({', '.join(killed)})"


def _hold_in_config(rng: random.Random, sim: Simulator, count: int) -> str:
    """The next pods to start (a refill, a replacement) stay in config.sh, unregistered, for a while: an update
    that runs meanwhile finds them there, and their runners register (and take a job the feeder offers) as it
    works."""
    prefix = rng.choice(["", *sorted({f"{name}-" for name in ("pool-a", "pool-b", "pool-c")})])
    seconds = rng.choice([0.5, 2.0, 5.0])
    hold = sim.runners.hold_config(NAMESPACE, prefix, count)
    timer = threading.Timer(seconds, hold.release)
    timer.daemon = True
    timer.start()
    return f"{count} runners of pods {prefix or 'any'}* held in config.sh for {seconds:g} s"


def _lose_assignments(rng: random.Random, sim: Simulator, count: int) -> str:
    """Idle ephemeral runners of ours lose a job GitHub assigned them, and their registrations with it, without
    noticing (actions/runner#4617): their pods run on, taking no job, until a refresh reports them."""
    ours = {pod["metadata"]["name"] for pod in sim.kube.pods(NAMESPACE)}
    names = sorted(
        r["name"] for r in sim.github.runners() if r["name"] in ours and r["ephemeral"] and r["status"] == "online"
    )
    lost = []
    for name in rng.sample(names, min(count, len(names))):
        try:
            sim.github.lose_job_assignment(name)
        except LookupError:
            continue  # busy, or not listening (yet, or any more)
        lost.append(name)
    return f"{len(lost)} idle ephemeral runners lost a job assignment and their registrations ({', '.join(lost)})"


class TimedFaults:
    """Faults that strike at a moment of the round rather than at a request: each a timer, waited for before the
    round's jobs stop and its faults are cleared; what each did, and how many struck."""

    def __init__(self) -> None:
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self.outcomes: list[str] = []
        self.struck = 0

    def after(self, seconds: float, action: Callable[[], str | None]) -> None:
        """``action`` after ``seconds``: what it did, or None if it found nothing to strike."""

        def strike() -> None:
            at = time.monotonic() - self._started
            try:
                outcome = action()
            except Exception as error:  # the soak's own fault, said rather than lost in a thread
                outcome, struck = f"failed to strike: {error!r}", False
            else:
                struck = outcome is not None
            with self._lock:
                self.struck += struck
                self.outcomes.append(f"+{at:.1f} s: {outcome or 'nothing to strike'}")

        timer = threading.Timer(seconds, strike)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def wait(self) -> None:
        for timer in self._timers:
            timer.join()


def _kill_scale_set_listener(rng: random.Random, sim: Simulator, name: str, timed: TimedFaults, count: int) -> str:
    """The scale set's listener process SIGKILLed from inside its node, ``count`` times a few seconds apart: its
    session is left behind (GitHub refuses another until it has gone unpolled for a while), its container
    restarts, and the new process carries on from its pods."""

    def kill() -> str | None:
        processes = sim.kube.processes
        assert processes is not None
        for pod in sim.kube.pods(NAMESPACE):
            labels = pod["metadata"].get("labels") or {}
            listener = labels.get(SCALE_SET_LABEL) == name and labels.get(COMPONENT_LABEL) == "listener"
            if listener and processes.crash(NAMESPACE, pod["metadata"]["name"]):
                return f"listener {pod['metadata']['name']} SIGKILLed"
        return None

    moments = sorted(rng.uniform(0.5, 8.0) for _ in range(count))
    for seconds in moments:
        timed.after(seconds, kill)
    return f"the listener of {name} SIGKILLed at {', '.join(f'+{m:.1f} s' for m in moments)}"


def _forget_scale_set(rng: random.Random, sim: Simulator, name: str, timed: TimedFaults) -> str:
    """GitHub deletes the scale set, as its cleanup of idle sets does: its idle runners' registrations go, its
    jobs wait in the queue, and its listener makes it again under its name (another id)."""

    def forget() -> str | None:
        for found in sim.github.service.scale_sets():
            if found["name"] == name and sim.github.service.forget_scale_set(found["id"]):
                return f"scale set {name} (id {found['id']}) deleted on GitHub's side"
        return None

    seconds = rng.uniform(0.5, 8.0)
    timed.after(seconds, forget)
    return f"scale set {name} deleted on GitHub's side at +{seconds:.1f} s"


def inject_fault(
    rng: random.Random, sim: Simulator, *, scale_set: str | None = None, timed: TimedFaults | None = None
) -> tuple[str, int]:
    """Stage one fault: its description, and how many requests or pods it is for. With ``scale_set`` (the
    stack's scale set's name) and ``timed``, its listener killed or the set deleted on GitHub's side too: a
    timed fault counts 0 here, and in ``timed.struck`` once it struck."""
    kinds = {"gh5xx": 3, "gh403": 2, "gh429": 2, "primary": 1, "gh_timeout": 0.5, "gh_reset": 2, "gh_lost": 2}
    kinds |= {"k5xx": 3, "k409": 1, "k_timeout": 0.3, "k_lost": 2, "stuck": 1.5, "unscheduled": 1, "unpullable": 1}
    kinds |= {"slow_removal": 1, "runner_crash": 1, "listener_killed": 0.5, "lost_assignment": 0.5}
    kinds |= {"slow_config": 1.5}
    if scale_set is not None and timed is not None:
        kinds |= {"scale_set_listener_killed": 3, "scale_set_forgotten": 0.8}
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    if kind == "scale_set_listener_killed":
        assert scale_set is not None and timed is not None
        return _kill_scale_set_listener(rng, sim, scale_set, timed, rng.choice([1, 1, 2])), 0
    if kind == "scale_set_forgotten":
        assert scale_set is not None and timed is not None
        return _forget_scale_set(rng, sim, scale_set, timed), 0
    method, path = rng.choice(GITHUB_CALLS)
    at = f"GitHub {method} {path}"
    count = rng.randint(1, 3)
    if kind in ("primary", "gh_timeout", "gh_lost", "k409", "k_timeout", "k_lost"):
        count = 1
    if kind == "gh5xx":
        status = rng.choice([500, 502])
        count = rng.choice([1, 2, 3, 6])  # 6: more than the client's retries
        sim.github.fail_next(status, count=count, method=method, path_regex=path)
        return f"{status} x{count} at {at}", count
    if kind in ("gh403", "gh429"):
        status = 403 if kind == "gh403" else 429
        retry_after = rng.choice([None, 1, 2])
        sim.github.fail_next(status, count=count, method=method, path_regex=path, retry_after=retry_after)
        return f"secondary limit {status} x{count} (retry-after {retry_after}) at {at}", count
    if kind == "primary":
        sim.github.fail_next(403, method=method, path_regex=path, rate_limit_reset_in=2)
        return f"primary limit exhausted (reset in 2 s) at {at}", count
    if kind == "gh_timeout":
        sim.github.delay_next(11.0, method=method, path_regex=path)  # the client's timeout is 10 s
        return f"timeout at {at}", count
    if kind == "gh_reset":
        sim.github.reset_next(count=count, method=method, path_regex=path)
        return f"connection reset x{count} at {at}", count
    if kind == "gh_lost":
        method, path = rng.choice([("DELETE", RUNNER_ITEM), ("POST", JIT), ("POST", REGISTRATION_TOKEN)])
        sim.github.lose_next_answer(method=method, path_regex=path)
        return f"answer lost at GitHub {method} {path}", count
    if kind == "slow_removal":
        forever = rng.random() < 0.3
        sim.runners.linger_after_removal(count, forever=forever)
        return f"{count} runners removed while idle linger {'for ever' if forever else 'the slow path'}", count
    if kind == "lost_assignment":
        return _lose_assignments(rng, sim, count), count
    if kind == "slow_config":
        return _hold_in_config(rng, sim, count), count
    if kind in ("runner_crash", "listener_killed"):
        return _kill_idle_runners(rng, sim, count, whole=kind == "runner_crash"), count
    method, path = rng.choice(KUBE_CALLS)
    at = f"Kubernetes {method} {path}"
    if kind == "k5xx":
        count = rng.choice([1, 2, 3, 5])  # 5: the first try and all 4 retries
        sim.kube.fail_next(method, path, 500, count=count)
        return f"500 x{count} at {at}", count
    if kind == "k409":
        method, path = rng.choice([("PUT", SECRET), ("DELETE", POD)])
        sim.kube.fail_next(method, path, 409)
        return f"409 at Kubernetes {method} {path}", count
    if kind == "k_timeout":
        sim.kube.delay_next(method, path, 31.0)  # the client's read timeout is 30 s
        return f"timeout at {at}", count
    if kind == "k_lost":
        method, path = rng.choice([("POST", PODS), ("DELETE", POD), ("POST", SECRETS), ("DELETE", SECRET)])
        sim.kube.lose_next_answer(method, path)
        return f"answer lost at Kubernetes {method} {path}", count
    if kind == "stuck":
        seconds = rng.choice([2.0, 5.0, 10.0])
        sim.kube.stall_terminations(seconds, count)
        return f"{count} pods stuck terminating for {seconds:g} s", count
    if kind == "unscheduled":
        sim.kube.leave_unscheduled(count)
        return f"{count} pods never scheduled", count
    sim.kube.fail_image_pulls(count)
    return f"{count} pods whose image cannot be pulled", count


# --- jobs and kills ---------------------------------------------------------------------------------------------


class JobFeeder:
    """Starts jobs on random idle runners of ours while a round runs, and queues jobs for the scale set (``runs-on``
    its name), which its listener serves: a few at a time, so that it is under load and yet its queue drains."""

    def __init__(
        self, sim: Simulator, rng: random.Random, others: set[int], scale_set: ScaleSetShape | None = None
    ) -> None:
        """``others``: the ids of the other team's runners, which never run a job of ours."""
        self._sim, self._rng, self._others = sim, rng, others
        self._scale_set = scale_set
        self._stop = threading.Event()
        self.started = 0
        self.queued = 0  # for the scale set
        self._thread = threading.Thread(target=self._feed, name="soak-jobs", daemon=True)

    def __enter__(self) -> JobFeeder:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _feed(self) -> None:
        while not self._stop.wait(0.2):
            if self._scale_set is not None and self._rng.random() < 0.3:
                self._queue_for_scale_set(self._scale_set)
            # A scale set's runners take the jobs GitHub hands their set, none started on them by name.
            idle = [
                r["name"]
                for r in self._sim.github.runners()
                if r["status"] == "online"
                and not r["busy"]
                and r["id"] not in self._others
                and not is_scale_set_runner(r["name"])
            ]
            if not idle or self._rng.random() < 0.4:
                continue
            try:
                self._sim.github.start_job(self._rng.choice(idle), self._duration())
                self.started += 1
            except LookupError:
                pass  # it went busy or offline meanwhile

    def _duration(self) -> float:
        kind = self._rng.random()
        if kind < 0.7:
            return self._rng.uniform(0.2, 2.0)
        if kind < 0.9:
            return self._rng.uniform(2.0, UNREGISTER_TIMEOUT_SECONDS)
        return self._rng.uniform(UNREGISTER_TIMEOUT_SECONDS + 1, UNREGISTER_TIMEOUT_SECONDS + 5)

    def _queue_for_scale_set(self, scale_set: ScaleSetShape) -> None:
        """One or two jobs queued, as long as fewer than ``max_runners`` of the set's wait."""
        waiting = [j for j in self._sim.github.jobs("queued") if scale_set.name in j["labels"]]
        if len(waiting) >= scale_set.max_runners:
            return
        count = self._rng.choice([1, 1, 2])
        self._sim.github.queue_jobs(self._sim.repo_url, [scale_set.name], self._duration(), count=count)
        self.queued += count


def is_scale_set_runner(name: str) -> bool:
    """A scale set's runner, by its name: the set's name and a 5-character suffix (scale_set_runners.py)."""
    return any(name.startswith(f"{set_name}-") and len(name) == len(set_name) + 6 for set_name in SCALE_SET_NAMES)


@dataclass
class KillPlan:
    methods: tuple[str, ...]
    after_seconds: float
    killed: str = ""  # what it killed, once it did


class Killer:
    """SIGKILLs the engine's provider process ``after_seconds`` into a call of one of ``methods``."""

    def __init__(self, engine: MiniEngine, plan: KillPlan | None) -> None:
        self._engine, self._plan = engine, plan
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="soak-killer", daemon=True)

    def __enter__(self) -> Killer:
        if self._plan is not None:
            self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._plan is not None:
            self._thread.join()

    def _watch(self) -> None:
        plan = self._plan
        assert plan is not None
        while not self._stop.wait(0.02):
            provider = self._engine.provider
            calls = [m for m in plan.methods if provider.in_flight(m)]
            if not calls or self._stop.wait(plan.after_seconds):
                continue
            if any(provider.in_flight(m) for m in calls):
                provider.kill()
                plan.killed = f"{'/'.join(calls)} killed {plan.after_seconds:.2f} s in"
                return


# --- the soak ---------------------------------------------------------------------------------------------------


@dataclass
class Totals:
    rounds: int = 0
    faults: int = 0
    kills: int = 0
    violations: int = 0
    jobs_killed: int = 0
    leaked: int = 0
    jobs: int = 0
    scale_set_jobs: int = 0  # queued for the scale set
    scale_set_faults: int = 0  # its listener killed, or the set deleted on GitHub's side


@dataclass
class Round:
    number: int
    started: float
    change: str = ""
    faults: list[str] = field(default_factory=list)
    staged: int = 0  # requests or pods the faults are for
    kill: KillPlan | None = None
    runs: list[str] = field(default_factory=list)  # each run and how it ended
    errors: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


class Soak:
    def __init__(self, sim: Simulator, engine: MiniEngine, seed: int, *, github_app: bool = False) -> None:
        self.sim, self.engine, self.seed, self.github_app = sim, engine, seed, github_app
        self.rng = random.Random(seed)
        self.shape = first_shape(self.rng)
        self.totals = Totals()
        self.foreign_ids = set(sim.register_other_team(FOREIGN_RUNNERS))
        service = sim.github.service
        service.long_poll_seconds, service.session_silence_seconds = LONG_POLL_SECONDS, SESSION_SILENCE_SECONDS
        service.offer_seconds = OFFER_SECONDS
        self.lost_jobs_seen: set[int] = set()
        self.listener_logs_read: dict[str, int] = {}  # listener pod -> how much of its log was checked

    def operations(self) -> int:
        """Runner pods gone from the API server, as the kubelet stand-in's watch of it saw them go (a scale set's
        runners too; its listener's pods are no runners)."""
        events = self.sim.kube.events()
        return len(
            {
                e["uid"]
                for e in events
                if e["type"] == "pod_removed" and e["namespace"] == NAMESPACE and not is_listener_pod(e["name"])
            }
        )

    def run(self, minutes: float, operations: int, rounds: int | None) -> None:
        deadline = time.monotonic() + minutes * 60
        first = Round(0, time.monotonic(), change=f"create: {self.shape.describe()}")
        self.settle(first, "up")
        self.report(first)
        while self.operations() < operations and time.monotonic() < deadline:
            if rounds is not None and self.totals.rounds >= rounds:
                break
            self.round(self.totals.rounds + 1)

    def round(self, number: int) -> None:
        current = Round(number, time.monotonic())
        current.change = change_stack(self.rng, self.shape)
        timed = TimedFaults()
        scale_set = self.shape.scale_set.name if self.shape.scale_set else None
        for _ in range(self.rng.choice([0, 1, 2, 2, 3, 4])):
            description, applications = inject_fault(self.rng, self.sim, scale_set=scale_set, timed=timed)
            current.faults.append(description)
            current.staged += applications
        if self.rng.random() < 0.25:
            methods = self.rng.choice([("Create",), ("Delete",), ("Update",), ("Create", "Delete", "Update")])
            current.kill = KillPlan(methods, self.rng.uniform(0.0, 2.5))
        jobs = random.Random(self.rng.random())
        destroy = current.change == "destroy"
        with JobFeeder(self.sim, jobs, self.foreign_ids, self.shape.scale_set) as feeder:
            if destroy:
                self.execute(current, "destroy", kill=current.kill)
            else:
                self.execute(current, "refresh+up" if current.change == "refresh" else "up", kill=current.kill)
            self.shape.token_due = False
            if current.kill is not None and not destroy:
                # The next pipeline run after a cancelled one, with the next commit's change (made whether the
                # kill came or not, so that a seed makes the same choices however the timing falls). After a
                # destroy, the next run is the settling destroy.
                current.change += f"; then {change_stack(self.rng, self.shape, in_place=True)}"
                self.execute(current, "up")
                self.shape.token_due = False
            timed.wait()  # the round lasts until its timed faults have struck, its jobs coming meanwhile
        self.totals.jobs += feeder.started
        self.totals.scale_set_jobs += feeder.queued
        current.faults += [f"struck {outcome}" for outcome in timed.outcomes]
        unused = self.sim.github.clear_faults() + self.sim.kube.clear_faults()
        self.totals.faults += current.staged - unused + timed.struck
        self.totals.scale_set_faults += timed.struck
        if current.kill is not None and current.kill.killed:
            self.totals.kills += 1
        if destroy:
            self.settle(current, "destroy")
            self.settle(current, "up")
        else:
            self.settle(current, "up")
        self.totals.rounds += 1
        self.report(current)

    def execute(self, current: Round, operation: str, *, kill: KillPlan | None = None) -> bool:
        """One run of `pulumi` (up, refresh+up or destroy) with a provider process of its own."""
        provider = self.engine.new_provider_process()
        steps: list[Any] = []
        errors: list[str] = []
        ok = True
        with Killer(self.engine, kill):
            try:
                if operation == "destroy":
                    steps = self.engine.destroy()
                else:
                    if operation == "refresh+up":
                        steps = self.engine.refresh()
                    steps += self.engine.up(program(self.sim, self.shape, github_app=self.github_app))
            except (DeploymentFailed, ProviderError, CheckFailed) as failure:
                ok = False
                failed = failure.errors if isinstance(failure, DeploymentFailed) else [failure]
                killed = kill is not None and bool(kill.killed)
                for error in failed:
                    errors.append(str(error))
                    current.violations += unclear(error, killed)
        current.errors += errors
        counts: dict[str, int] = {}
        for step in steps:
            counts[step.op] = counts.get(step.op, 0) + 1
        changed = [f"{step.op}d {step.name}" for step in steps if step.op in ("update", "replace")]
        current.runs.append(
            f"{operation}: {'ok' if ok else 'failed'} {counts}" + (f" ({', '.join(changed)})" if changed else "")
        )
        provider.close()  # its log is whole once it has exited
        state = json.dumps(self.engine.export())
        current.violations += leaked_credentials(self.sim, [*provider.stderr_lines, *errors, state])
        return ok

    def settle(self, current: Round, operation: str) -> None:
        """Once the jobs have ended, at most two clean runs; then the invariants."""
        current.faults += heal_listener_pods(self.sim)
        wait_for_jobs_to_end(self.sim)
        wait_for_scale_set_jobs_to_end(self.sim, queued=operation != "destroy")
        wait_for_finished_runners_to_exit(self.sim)
        wait_for_ghosts_to_show(self.sim)
        for _ in range(SETTLE_RUNS):
            if self.execute(current, "destroy" if operation == "destroy" else "refresh+up"):
                break
        else:
            current.violations.append(f"{operation} did not succeed after {SETTLE_RUNS} clean runs")
        resources = [(r.type, r.urn.split("::")[-1], r.outputs) for r in self.engine.state.values()]
        expected = [] if operation == "destroy" else state_runners(resources)
        refilling = [] if operation == "destroy" else refilling_pools(resources)
        scale_sets = [] if operation == "destroy" else state_scale_sets(resources)
        audit_started = time.monotonic()
        findings = audit(
            self.sim,
            expected,
            namespace=NAMESPACE,
            foreign_ids=self.foreign_ids,
            refilling=refilling,
            scale_sets=scale_sets,
        )
        current.runs.append(f"invariants looked at for {time.monotonic() - audit_started:.1f} s")
        findings += unconverged_pools(resources)
        killed = self.sim.runners.jobs_killed
        lost = [j for j in self.sim.github.jobs() if j["lost"] and j["id"] not in self.lost_jobs_seen]
        if killed:
            current.violations.append(f"jobs lost on {', '.join(killed)}")
        for job in lost:
            self.lost_jobs_seen.add(job["id"])
            current.violations.append(
                f"job {job['id']} (runs-on {job['labels']}) lost on {job['runner_name']}: {job['failure']}"
            )
        self.totals.jobs_killed += len(killed) + sum(1 for j in lost if j["runner_name"] not in killed)
        killed.clear()
        self.totals.leaked += sum(1 for f in findings if f.kind == "leaked")
        current.violations += [f"after {operation}: {f}" for f in findings]
        current.violations += leaked_credentials(self.sim, self.new_listener_log_lines())

    def new_listener_log_lines(self) -> list[str]:
        """What the listeners' processes wrote since the last look."""
        processes = self.sim.kube.processes
        assert processes is not None
        lines = []
        for pod in dict.fromkeys(processes.started):
            text = processes.log_of(NAMESPACE, pod)
            lines += text[self.listener_logs_read.get(pod, 0) :].splitlines()
            self.listener_logs_read[pod] = len(text)
        return lines

    def report(self, current: Round) -> None:
        seconds = time.monotonic() - current.started
        kill = current.kill.killed if current.kill and current.kill.killed else "none"
        status = "ok" if not current.violations else f"{len(current.violations)} VIOLATIONS"
        print(
            f"round {current.number}: {current.change} | faults: {'; '.join(current.faults) or 'none'} | kill: {kill}"
            f" | {' / '.join(current.runs)} | operations {self.operations()} | {seconds:.1f} s | {status}",
            flush=True,
        )
        for error in current.errors[:3]:
            print(f"  failed as expected: {error[:300]}")
        if current.violations:
            self.totals.violations += len(current.violations)
            print_violation(self, current)


def unclear(error: Exception, killed: bool) -> list[str]:
    """Why a failure's message is not one a user should see, if it is not."""
    if isinstance(error, ProviderError):
        # The SDK's server sends a traceback; the provider's own message follows its last line's type.
        message = error.details.partition("ProviderCallFailed: ")[2]
        if not message and killed and any(sign in error.details for sign in KILLED_PROVIDER):
            return []  # the engine's word for a provider it lost, not the provider's
        if not message:
            return [f"a provider error that is not the provider's own message: {error}"]
        if message.split(":", 1)[0] in BUG_TYPES:
            return [f"a bug's error reached the CLI: {message}"]
        text = message
    else:
        text = str(error)
        if "Traceback (most recent call last)" in text or any(f"{t}:" in text for t in BUG_TYPES):
            return [f"an unclear failure: {text}"]
    if "HTTP response headers" in text:
        return [f"a Kubernetes client's dump instead of a message: {text[:300]}"]
    return []


def leaked_credentials(sim: Simulator, texts: list[str]) -> list[str]:
    key = sim.app_private_key.splitlines()[1]  # a line of the App's key
    secrets = [sim.credential, key, *sim.github.issued_credentials()]
    found = []
    for text in texts:
        if any(secret in text for secret in secrets):
            found.append(f"a credential in a message or log line: {text[:200]}…")
    return found


def wait_for_jobs_to_end(sim: Simulator) -> None:
    """The jobs the feeder started on runners by name end within their durations (a scale set's runners take
    the jobs queued for their set: see `wait_for_scale_set_jobs_to_end`)."""
    deadline = time.monotonic() + JOBS_END_TIMEOUT_SECONDS
    while any(r["busy"] and not is_scale_set_runner(r["name"]) for r in sim.github.runners()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"jobs still running after {JOBS_END_TIMEOUT_SECONDS:.0f} s: the job feeder is wrong")
        time.sleep(0.1)


def wait_for_scale_set_jobs_to_end(sim: Simulator, *, queued: bool) -> None:
    """The jobs a scale set's runners run end; with ``queued``, those queued for a set GitHub has are served too,
    as far as its listener does within SCALE_SET_JOBS_END_TIMEOUT_SECONDS (what is left the invariants judge).
    Those queued for a set not there wait for it, and so do they before a destroy (its listener may be stopped
    already, by a delete that waited for a busy runner in vain)."""
    deadline = time.monotonic() + SCALE_SET_JOBS_END_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        jobs = [
            j
            for j in sim.github.jobs()
            if j["scale_set_id"] is not None and (j["status"] == "in_progress" or (queued and j["status"] == "queued"))
        ]
        if not jobs:
            return
        time.sleep(0.2)


def wait_for_finished_runners_to_exit(sim: Simulator) -> None:
    """An ephemeral runner's registration goes as its job ends; its pod ends a moment later. Until then a refresh
    would see a running pod without a registration."""
    deadline = time.monotonic() + RUNNERS_EXIT_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        registered = {r["name"] for r in sim.github.runners()}
        running = [
            p
            for p in sim.kube.pods(NAMESPACE)
            if p.get("status", {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and (p["metadata"].get("labels") or {}).get(COMPONENT_LABEL) != "listener"
        ]
        if all(p["metadata"]["name"] in registered for p in running):
            return
        time.sleep(0.1)
    # Not an error here: what is left is for the invariants to judge.


def wait_for_ghosts_to_show(sim: Simulator) -> None:
    """A runner that runs with no registration (one that lost its job assignment), and a refilling pool's pod that
    has not started (one never scheduled, which its Job started after a job ended), are reported by refresh once
    they are older than a registration takes (``register_timeout_seconds``), as a scheduled refresh would find
    them: the clean runs wait until each such pod is, bounded by that time."""
    registered = {r["name"] for r in sim.github.runners()}
    since = []
    for pod in sim.kube.pods(NAMESPACE):
        if pod["metadata"]["name"] in registered or pod["metadata"].get("deletionTimestamp"):
            continue
        runner = [s for s in pod.get("status", {}).get("containerStatuses", []) if s["name"] == "runner"]
        running = (runner[0].get("state") or {}).get("running") if runner else None
        if running:
            since.append(datetime.fromisoformat(running["startedAt"]))
        elif pod.get("status", {}).get("phase") == "Pending" and JOB_LABEL in pod["metadata"].get("labels", {}):
            since.append(datetime.fromisoformat(pod["metadata"]["creationTimestamp"]))
    if since:
        shows_at = max(since) + timedelta(seconds=REGISTER_TIMEOUT_SECONDS + 0.5)
        time.sleep(min(max((shows_at - datetime.now(UTC)).total_seconds(), 0), REGISTER_TIMEOUT_SECONDS + 0.5))


def heal_listener_pods(sim: Simulator) -> list[str]:
    """A scale set's listener pod that met a node fault (never scheduled, its image not pulled) keeps it in the
    test bed, where a cluster would schedule or pull it once the node has room or the registry answers again:
    deleted, so that its Deployment makes another, as the node heals with the faults cleared. What was healed."""
    healed = []
    with sim.kube.api_server.admin_client() as admin:
        core = client.CoreV1Api(admin)
        for pod in sim.kube.pods(NAMESPACE):
            labels = pod["metadata"].get("labels") or {}
            if labels.get(COMPONENT_LABEL) != "listener" or SCALE_SET_LABEL not in labels:
                continue
            why = _node_fault(pod)
            if why is not None and not pod["metadata"].get("deletionTimestamp"):
                core.delete_namespaced_pod(pod["metadata"]["name"], NAMESPACE)
                healed.append(f"healed: listener pod {pod['metadata']['name']} ({why}) deleted")
    return healed


def _node_fault(pod: dict[str, Any]) -> str | None:
    status = pod.get("status", {})
    for condition in status.get("conditions", []):
        if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return "unschedulable"
    for container in status.get("containerStatuses", []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff"):
            return str(waiting["reason"])
    return None


def is_listener_pod(name: str) -> bool:
    return any(name.startswith(f"{set_name}-listener-") for set_name in SCALE_SET_NAMES)


def print_violation(soak: Soak, current: Round) -> None:
    print(f"VIOLATION seed={soak.seed} round={current.number}", flush=True)
    print(f"  change: {current.change}; stack: {soak.shape.describe()}")
    print(f"  faults: {'; '.join(current.faults) or 'none'}")
    print(f"  kill: {current.kill.killed if current.kill and current.kill.killed else 'none'}")
    for run in current.runs:
        print(f"  run: {run}")
    for error in current.errors:
        print(f"  error: {error}")
    for violation in current.violations:
        print(f"  violated: {violation}")
    print("  timeline (GitHub double, fault proxy, node), last 120 entries:")
    events = [
        (c["at"], f"github {c['method']} {c['path']} -> {c['status']}")
        for c in soak.sim.github.calls()
        if c["at"] >= current.started and "/message-queues/" not in c["path"]  # a listener's long polls
    ]
    events += [
        (r["at"], f"kube {r['method']} {r['path']} -> {r['status']}")
        for r in soak.sim.kube.proxy_timeline()
        if r["at"] >= current.started and "watch" not in r["path"]
    ]
    events += [(e["at"], f"node {e['type']} {e['name']}") for e in soak.sim.kube.events() if e["at"] >= current.started]
    for at, line in sorted(events)[-120:]:
        print(f"    +{at - current.started:7.2f} s {line}")
    processes = soak.sim.kube.processes
    for pod in list(dict.fromkeys(processes.started if processes is not None else []))[-3:]:
        assert processes is not None
        lines = processes.log_of(NAMESPACE, pod).splitlines()[-30:]
        print(f"  listener {pod}, last {len(lines)} lines of its log:")
        for line in lines:
            print(f"    {line}")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=None, help="the seed to replay (default: a new one)")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--operations", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many rounds (a smoke run)")
    parser.add_argument("--github-app", action="store_true", help="authenticate as the simulated GitHub App")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    auth = "as the GitHub App" if args.github_app else "with a token"
    print(f"soak: seed {seed}, until {args.operations} operations or {args.minutes:g} minutes, {auth}", flush=True)
    started = time.monotonic()
    with (
        Simulator(
            token_lifetime=TOKEN_LIFETIME_SECONDS,
            time_scale=TIME_SCALE,
            runner_speedup=TIME_SCALE,
            schedule_delay=0.05,
            app_token_lifetime=APP_TOKEN_LIFETIME_SECONDS,
        ) as sim,
        MiniEngine(ROOT, env={**os.environ, **sim.provider_env}) as engine,
    ):
        soak = Soak(sim, engine, seed, github_app=args.github_app)
        soak.run(args.minutes, args.operations, args.rounds)
        totals, operations = soak.totals, soak.operations()
    minutes = (time.monotonic() - started) / 60
    print(f"soak: {operations} operations in {minutes:.1f} minutes, {totals.jobs} jobs started")
    print(
        f"soak: scale set: {totals.scale_set_jobs} jobs queued for it, {totals.scale_set_faults} listener kills and "
        "deletions on GitHub's side struck"
    )
    print(
        f"soak: operations={operations} rounds={totals.rounds} faults={totals.faults} kills={totals.kills} "
        f"violations={totals.violations} jobs_killed={totals.jobs_killed} leaked={totals.leaked} seed={seed}"
    )
    return 1 if totals.violations else 0


if __name__ == "__main__":
    sys.exit(main())
