"""Benchmark (not a test): rotating a fleet of N runners through the SDK's dynamic-provider server.

The grace period G is scaled down from 30 s, and GitHub's rate-limit minute and hour by the same factor (the
limits themselves stay GitHub's: 900 points a minute per endpoint with a write at 5, 80 content-creating
requests a minute and 500 an hour, 100 concurrent requests), so the budget binds where it would for a real fleet.
With ``--foreign N`` each scenario runs again with N other runners registered in the same scope first (another
team's, in the same organization): GitHub calls per runner must not grow with them.

For each scenario it prints the wall time of the rotating `up` over Floor(N), where
    Floor(N) = max(G + termination + start, the shortest time GitHub's budget allows for the rotation's calls)
(start: one runner created alone; termination: pod deletion to pod gone; both measured in this run), and the
ratio to the stricter floor in which the last call the budget admits still needs its G + termination + start.
Then GitHub calls per replaced runner and 403/429 answers. Only ratios within one run mean much.

    .venv/bin/python bench/rotation.py [--sizes 50 200 500] [--runner-sizes 50 200] [--grace 1.0] [--foreign 2000]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from replace import pod_termination_seconds  # bench/ is the script's folder, so its sibling imports

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool
from pulumi_actions_runners.github.budget import (
    CONTENT_CREATING_PER_HOUR,
    HOUR_WINDOWS,
    POINTS_PER_WINDOW,
    WRITE_POINTS,
    content_creating_seconds,
    endpoint_of,
)

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "actions-runners"
REAL_GRACE_SECONDS = 30.0
OTHER_IMAGE = "ghcr.io/actions/actions-runner:2.330.0"


@dataclass
class Rotation:
    label: str
    runners: int
    wall: float
    budget_seconds: float
    termination: float
    calls: int
    token_calls: int
    refusals: int
    killed: int
    start: float
    longest_job: float = 0.0
    foreign: int = 0


def fleet(
    sim: Simulator, kind: str, size: int, grace: float, *, renew: bool = False, image: str | None = None
) -> Callable:
    """A program: one RegistrationToken and a RunnerPool or ``size`` Runners; ``renew`` makes the token due."""

    def program() -> None:
        common = {
            "github_url": sim.repo_url,
            "namespace": NAMESPACE,
            "github_token": sim.credential,
            "kubeconfig": str(sim.kubeconfig),
            "grace_period_seconds": grace,
            **({"image": image} if image else {}),
        }
        if kind == "jit-pool":
            RunnerPool("pool", pool_name="pool", replicas=size, max_unavailable="100%", jit_config=True, **common)
            return
        token = RegistrationToken(
            "registration",
            github_url=sim.repo_url,
            github_token=sim.credential,
            refresh_before_seconds=3000 if renew else 0,  # the simulator's tokens live 2000 s
        )
        if kind == "pool":
            RunnerPool(
                "pool",
                pool_name="pool",
                replicas=size,
                max_unavailable="100%",
                registration_token=token.token,
                **common,
            )
        else:
            for index in range(size):
                Runner(f"runner-{index}", runner_name=f"runner-{index}", registration_token=token.token, **common)

    return program


def rotate(
    kind: str,
    size: int,
    grace: float,
    *,
    busy_fraction: float = 0.0,
    busy_seconds: float = 0.0,
    foreign: int = 0,
) -> Rotation:
    time_scale = REAL_GRACE_SECONDS / grace
    with Simulator(token_lifetime=2000, time_scale=time_scale, runner_speedup=time_scale, fault_proxy=False) as sim:
        sim.register_other_team(foreign)
        env = {**os.environ, **sim.provider_env}
        with MiniEngine(ROOT, env=env) as engine:
            engine.up(fleet(sim, kind, size, grace))
            window = 60.0 / time_scale
            # A fleet is rotated long after it was made: the budget's window is fresh, and so is its hour if the
            # just-in-time configs of making and rotating it would not both fit in one (500 content-creating calls).
            jit_hour = kind == "jit-pool" and 2 * size + 1 > CONTENT_CREATING_PER_HOUR
            time.sleep(window * (HOUR_WINDOWS if jit_hour else 1))

            prefix = "runner" if kind == "runners" else "pool"
            busy = [f"{prefix}-{i}" for i in range(0, size, round(1 / busy_fraction))] if busy_fraction else []
            for name in busy:
                sim.github.start_job(name, busy_seconds)
            calls_before, refusals_before = len(sim.github.calls()), sim.github.rate_limit_refusals()
            started = time.monotonic()
            if kind == "jit-pool":
                engine.up(fleet(sim, kind, size, grace, image=OTHER_IMAGE))
            else:
                engine.up(fleet(sim, kind, size, grace, renew=True))
            wall = time.monotonic() - started
            calls = sim.github.calls()[calls_before:]
            _check_rotated(sim, engine, kind, size, calls)
            termination = pod_termination_seconds(sim, started)

            added = time.monotonic()  # one more runner, started alone: the start part of the floor
            engine.up(fleet(sim, kind, size + 1, grace, image=OTHER_IMAGE if kind == "jit-pool" else None))
            start = time.monotonic() - added
        return Rotation(
            label=kind
            + (f", {len(busy)} busy {busy_seconds:.0f} s" if busy else "")
            + (f", {foreign} other" if foreign else ""),
            runners=size,
            wall=wall,
            budget_seconds=budget_seconds(calls, window),
            termination=termination,
            calls=len(calls),
            token_calls=sum(1 for c in calls if c["path"].endswith("/registration-token")),
            refusals=sim.github.rate_limit_refusals() - refusals_before,
            killed=len(sim.runners.jobs_killed),
            start=start,
            longest_job=busy_seconds if busy else 0.0,
            foreign=foreign,
        )


def _check_rotated(sim: Simulator, engine: MiniEngine, kind: str, size: int, calls: list[dict]) -> None:
    """Every runner was replaced: as many successful RemoveRunner calls as runners, and all online again."""
    removed = sum(1 for c in calls if c["method"] == "DELETE" and c["status"] in (204, 404))
    online = sum(1 for r in sim.github.runners() if r["status"] == "online" and not r["name"].startswith("other-team-"))
    if kind != "runners":
        pool = next(r.outputs for r in engine.state.values() if r.type.endswith(":RunnerPool"))
        assert pool["problems"] == [], pool["problems"]
    assert removed >= size and online == size, (removed, online, size)


def budget_seconds(calls: list[dict], window: float) -> float:
    """The earliest the last of these calls can be made within GitHub's sliding-window budgets."""
    points: Counter[str] = Counter()
    content_creating = 0
    for call in calls:
        points[endpoint_of(call["method"], call["path"])] += WRITE_POINTS if call["method"] != "GET" else 1
        content_creating += call["method"] in ("POST", "PATCH", "PUT")
    waits = [window * ((spent - 1) // POINTS_PER_WINDOW) for spent in points.values()]
    waits.append(content_creating_seconds(content_creating, window))
    return max(waits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 500])
    parser.add_argument("--runner-sizes", type=int, nargs="*", default=[50, 200])
    parser.add_argument("--grace", type=float, default=1.0)
    parser.add_argument("--busy-seconds", type=float, default=5.0)
    parser.add_argument("--busy-size", type=int, default=200, help="0: no busy scenario")
    parser.add_argument(
        "--foreign", type=int, nargs="+", default=[0], help="other runners in the scope; each count is a run"
    )
    args = parser.parse_args()

    grace = args.grace
    print(f"G = {grace:.2f} s; GitHub's minute scaled to {60.0 * grace / REAL_GRACE_SECONDS:.2f} s", flush=True)
    scenarios: list[tuple[str, int, float, int]] = []
    for foreign in args.foreign:
        for size in args.sizes:
            separate = [("runners", size, 0.0, foreign)] if size in args.runner_sizes else []
            scenarios += [("pool", size, 0.0, foreign), *separate, ("jit-pool", size, 0.0, foreign)]
        if args.busy_size:
            scenarios.append(("pool", args.busy_size, 0.1, foreign))

    results: list[Rotation] = []
    ratios: dict[tuple[str, int], float] = {}
    for kind, size, busy_fraction, foreign in scenarios:
        r = rotate(kind, size, grace, busy_fraction=busy_fraction, busy_seconds=args.busy_seconds, foreign=foreign)
        results.append(r)
        physical = grace + r.termination + r.start
        floor = max(physical, r.budget_seconds)
        ratios[(r.label, r.runners)] = r.wall / floor
        line = (
            f"rotation: {r.label:<32} N={r.runners:<4} wall={r.wall:7.2f} s  Floor={floor:5.2f} s "
            f"(G+term+start {grace:.2f}+{r.termination:.2f}+{r.start:.2f}, budget {r.budget_seconds:.2f})  "
            f"ratio={r.wall / floor:5.2f}  "
            f"ratio_to_budget_then_grace={r.wall / (r.budget_seconds + physical):5.2f}  "
            f"calls/runner={(r.calls - r.token_calls) / r.runners:.3f} (with token: {r.calls / r.runners:.3f})  "
            f"403/429={r.refusals}  busy_killed={r.killed}"
        )
        if r.longest_job:
            job_and_grace = r.longest_job + grace
            line += f"  longest job + G = {job_and_grace:.2f} s (wall / that = {r.wall / job_and_grace:.2f})"
        print(line, flush=True)

    size = 200 if 200 in args.sizes else args.sizes[-1]
    for foreign in args.foreign:
        other = f", {foreign} other" if foreign else ""
        pool = next(r for r in results if (r.label, r.runners) == ("pool" + other, size))
        print(
            f"rotation: N={size} foreign={foreign} pool_ratio={ratios[('pool' + other, size)]:.2f} "
            f"per_runner_ratio={ratios.get(('runners' + other, size), float('nan')):.2f} "
            f"calls_per_runner={pool.calls / pool.runners:.3f} busy_killed={sum(r.killed for r in results)}"
        )


if __name__ == "__main__":
    main()
