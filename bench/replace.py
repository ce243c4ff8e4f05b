"""Benchmark (not a test): rotating the registration token of N Runner resources through the SDK's server.

Prints, for each N, measured in this one run (the machine is noisy, so only ratios within a run mean much):
- wall time of the rotation ÷ Floor, where Floor = grace + pod termination + runner start, the time one runner's
  replacement needs at the least (start: one runner created alone; termination: pod deletion to pod gone);
- GitHub REST calls per replaced runner;
- Check+Diff latency of one Runner through the provider server.

    .venv/bin/python bench/replace.py [--runners 1 4 8 16] [--grace 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent


def rotate(runners: int, grace: float) -> dict[str, float]:
    with Simulator(token_lifetime=2000, fault_proxy=False) as sim:
        config = sim.stack_config(runners=runners, grace_period_seconds=grace)
        with MiniEngine(ROOT, config=config, secret_config={"githubToken": sim.credential}) as engine:
            engine.up()

            calls_before = len(sim.github.calls())
            rotation_started = time.monotonic()
            engine.config["tokenRefreshBeforeSeconds"] = "3000"  # the token is now due for renewal
            steps = engine.up()
            rotation = time.monotonic() - rotation_started
            calls = sim.github.calls()[calls_before:]

            replaced = sum(1 for s in steps if s.op == "replace" and s.type.endswith(":Runner"))
            assert replaced == runners, steps
            latencies = check_and_diff_latency(engine) if runners == 1 else []

            engine.config.update(runners=str(runners + 1), tokenRefreshBeforeSeconds="0")
            added = time.monotonic()
            steps = engine.up()  # one more runner, created alone
            one_runner_start = time.monotonic() - added
            assert [s.op for s in steps if s.type.endswith(":Runner")].count("create") == 1, steps
        termination = pod_termination_seconds(sim, rotation_started)
        token_calls = sum(1 for c in calls if c["path"].endswith("/registration-token"))
        return {
            "start": one_runner_start,
            "rotation": rotation,
            "termination": termination,
            "calls_per_runner": (len(calls) - token_calls) / runners,
            "calls_per_runner_with_token": len(calls) / runners,
            "killed": len(sim.runners.jobs_killed),
            "latencies": latencies,
        }


def pod_termination_seconds(sim: Simulator, since: float) -> float:
    """Mean time from a runner pod's deletion (seen by the kubelet stand-in) to its removal by the API server."""
    deleting: dict[str, float] = {}
    durations = []
    for event in sim.kube.events():
        if event["at"] < since:
            continue
        if event["type"] in ("pod_terminating",) and event["name"] not in deleting:
            deleting[event["name"]] = event["at"]
        elif event["type"] == "pod_removed":
            durations.append(event["at"] - deleting.pop(event["name"], event["at"]))
    return statistics.mean(durations) if durations else 0.0


def check_and_diff_latency(engine: MiniEngine, rounds: int = 200) -> list[float]:
    urn, resource = next((u, r) for u, r in engine.state.items() if r.type.endswith(":Runner"))
    news = {**resource.inputs}
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        inputs, failures = engine.provider.check(urn, resource.inputs, news)
        engine.provider.diff(resource.id, urn, resource.outputs, inputs)
        samples.append((time.perf_counter() - started) * 1000)
        assert not failures
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runners", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--grace", type=float, default=1.0)
    args = parser.parse_args()
    counts = sorted({1, *args.runners})

    results = {n: rotate(n, args.grace) for n in counts}
    # One runner added to a stack: program run, Check/Diff, pod scheduling, boot, registration, polling.
    start = statistics.median(r["start"] for r in results.values())
    print(f"grace G = {args.grace:.2f} s, runner start = {start:.2f} s (median `up` adding one runner)")
    for n, r in results.items():
        floor = args.grace + r["termination"] + start
        print(
            f"replace: N={n:<3} wall={r['rotation']:6.2f} s  floor={floor:5.2f} s  ratio={r['rotation'] / floor:5.2f}"
            f"  github_calls_per_runner={r['calls_per_runner']:.2f}"
            f" (with the token's own: {r['calls_per_runner_with_token']:.2f})  busy_killed={r['killed']}"
        )
    latencies = sorted(results[1]["latencies"])
    print(
        f"check+diff: median {statistics.median(latencies):.2f} ms, "
        f"p95 {latencies[int(len(latencies) * 0.95)]:.2f} ms over {len(latencies)} round trips"
    )


if __name__ == "__main__":
    main()
