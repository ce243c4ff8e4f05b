"""Benchmark (not a test): a RunnerScaleSet beside a fixed RunnerPool and a refilling RunnerPool of the same size,
on the same load, through the SDK's provider server, each on a simulator of its own.

The load, in scenario minutes: a burst of ``--burst`` jobs arriving evenly over its first 10 minutes (a morning of
pull requests: at its peak as many run at once as the fleets have runners, so no job waits for capacity that no
fleet has), then a trickle of one job every 3 minutes for 20 more; every job lasts ``--job-minutes``. Runners start
and register at actions/runner's own speed (config.sh 2 s, its session 1 s; the simulator's runners unscaled);
the scenario's clock (job lengths and arrivals) runs ``--time-scale`` times as fast, so that an hour of load takes
minutes. That compression only flatters the pools: their idle runner-seconds shrink with the clock, while the
scale set's, spent starting runners and in grace periods, do not.

The fleets: the scale set (``min_runners`` 0, ``max_runners`` ``--runners``, runs-on its name), a fixed pool of
``--runners`` persistent runners, a refilling pool of ``--runners`` slots (runs-on their label). Per fleet:

wait                 each job's queueing to its start on a runner (GitHub's record), in real seconds
idle runner-seconds  runner pods running (or starting) and not running a job, sampled every 0.2 s, per job served
                     (what a fleet costs beyond the work it does)
jobs lost            jobs whose runner stopped under them (GitHub's record, checked against the runners')
session conflicts    the scale set's session creations GitHub refused with 409
calls per job        GitHub calls of the provider and the listener (REST and the Actions service; not the runners'
                     own connections, which any fleet's runners make) per job served

Only ratios within one run mean much; the last line is for scripts.

    .venv/bin/python bench/scaleset.py [--runners 20] [--burst 40] [--job-minutes 5] [--time-scale 10]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client
from refill import percentile  # bench/ is the script's folder, so its sibling imports

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.runner_service import POOL_PATH
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners import RunnerPool, RunnerScaleSet
from pulumi_actions_runners.github.client import GitHubClient
from pulumi_actions_runners.github.url import parse_github_url

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "actions-runners"
SAMPLE_SECONDS = 0.2
BURST_MINUTES, TRICKLE_MINUTES, TRICKLE_EVERY_MINUTES = 10.0, 20.0, 3.0
SET_NAME, POOL_LABEL = "linux", "pulumi"
DRAIN_SECONDS = 120.0  # after the last arrival, for the last jobs to end


@dataclass
class Fleet:
    name: str
    program: Callable[[Simulator], Callable[[], None]]
    runs_on: list[str]


@dataclass
class Result:
    waits: list[float] = field(default_factory=list)
    served: int = 0
    idle_runner_seconds: float = 0.0
    lost: int = 0
    session_conflicts: int = 0
    calls: int = 0
    peak_runners: int = 0

    @property
    def idle_per_job(self) -> float:
        return self.idle_runner_seconds / max(self.served, 1)


def arrivals(burst: int) -> list[float]:
    """When each job is queued, in scenario minutes."""
    burst_times = [BURST_MINUTES * index / burst for index in range(burst)]
    trickle = [
        BURST_MINUTES + TRICKLE_EVERY_MINUTES * (i + 1) for i in range(int(TRICKLE_MINUTES // TRICKLE_EVERY_MINUTES))
    ]
    return burst_times + trickle


def token(sim: Simulator) -> str:
    with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
        return github.create_registration_token().token


def scale_set(runners: int) -> Callable[[Simulator], Callable[[], None]]:
    def make(sim: Simulator) -> Callable[[], None]:
        def program() -> None:
            RunnerScaleSet(
                "scale-set",
                scale_set_name=SET_NAME,
                github_url=sim.repo_url,
                namespace=NAMESPACE,
                github_token=sim.credential,
                kubeconfig=str(sim.kubeconfig),
                min_runners=0,
                max_runners=runners,
                grace_period_seconds=1,
            )

        return program

    return make


def pool(runners: int, *, refill: bool) -> Callable[[Simulator], Callable[[], None]]:
    def make(sim: Simulator) -> Callable[[], None]:
        registration = token(sim)

        def program() -> None:
            RunnerPool(
                "pool",
                pool_name="refill" if refill else "fixed",
                github_url=sim.repo_url,
                namespace=NAMESPACE,
                registration_token=registration,
                github_token=sim.credential,
                kubeconfig=str(sim.kubeconfig),
                replicas=runners,
                refill=refill,
                ephemeral=refill,  # a fixed fleet's runners are persistent: they take job after job
                labels=[POOL_LABEL],
                grace_period_seconds=1,
            )

        return program

    return make


class Sampler:
    """Runner pods up and not running a job, integrated over time; the most pods up at once."""

    def __init__(self, sim: Simulator) -> None:
        self._sim = sim
        self._stop = threading.Event()
        self.idle_runner_seconds = 0.0
        self.peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with self._sim.kube.api_server.admin_client() as admin:
            core = client.CoreV1Api(admin)
            last = time.monotonic()
            while not self._stop.wait(SAMPLE_SECONDS):
                pods = core.list_namespaced_pod(NAMESPACE, label_selector="app.kubernetes.io/name").items
                runners = [
                    p
                    for p in pods
                    if p.metadata.labels.get("app.kubernetes.io/component") != "listener"
                    and p.status.phase in ("Pending", "Running")
                ]
                busy = len(self._sim.github.jobs("in_progress"))
                now = time.monotonic()
                self.idle_runner_seconds += max(0, len(runners) - busy) * (now - last)
                self.peak = max(self.peak, len(runners))
                last = now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_fleet(fleet: Fleet, times: list[float], job_seconds: float, scale: float) -> Result:
    with Simulator(token_lifetime=3600, fault_proxy=False, schedule_delay=0.1) as sim:
        sim.github.service.long_poll_seconds = 50.0  # the service's own (SS README.md)
        env = {**os.environ, **sim.provider_env}
        with MiniEngine(ROOT, env=env) as engine:
            engine.up(fleet.program(sim))
            time.sleep(5)  # the fleet settled: a pool's runners online, the listener's session open
            calls_before = len(sim.github.calls())
            sampler = Sampler(sim)
            started = time.monotonic()
            for at in times:
                time.sleep(max(0.0, started + at * 60 / scale - time.monotonic()))
                sim.github.queue_jobs(sim.repo_url, fleet.runs_on, job_seconds)
            deadline = time.monotonic() + DRAIN_SECONDS
            while len(sim.github.jobs("completed")) < len(times) and time.monotonic() < deadline:
                time.sleep(0.5)
            sampler.stop()
            jobs = sim.github.jobs()
            calls = sim.github.calls()[calls_before:]
            result = Result(
                waits=[j["wait_seconds"] for j in jobs if j["wait_seconds"] is not None],
                served=sum(1 for j in jobs if j["conclusion"] == "success"),
                idle_runner_seconds=sampler.idle_runner_seconds,
                lost=sum(1 for j in jobs if j["lost"]),
                session_conflicts=sum(
                    1 for c in calls if c["path"].endswith("/sessions") and c["method"] == "POST" and c["status"] == 409
                ),
                calls=sum(1 for c in calls if f"/{POOL_PATH}/" not in c["path"]),
                peak_runners=sampler.peak,
            )
            if result.lost != len(sim.runners.jobs_killed):
                raise AssertionError(
                    f"GitHub recorded {result.lost} jobs lost, the runners {len(sim.runners.jobs_killed)}"
                )
            engine.destroy()
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runners", type=int, default=20)
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--job-minutes", type=float, default=5.0)
    parser.add_argument("--time-scale", type=float, default=10.0, help="how much faster the scenario's clock runs")
    args = parser.parse_args()

    times = arrivals(args.burst)
    job_seconds = args.job_minutes * 60 / args.time_scale
    fleets = [
        Fleet("fixed", pool(args.runners, refill=False), ["self-hosted", POOL_LABEL]),
        Fleet("refill", pool(args.runners, refill=True), ["self-hosted", POOL_LABEL]),
        Fleet("scaleset", scale_set(args.runners), [SET_NAME]),
    ]
    results = {}
    for fleet in fleets:
        result = results[fleet.name] = run_fleet(fleet, times, job_seconds, args.time_scale)
        print(
            f"{fleet.name:<8} {args.runners} runners at most: served={result.served}/{len(times)} "
            f"wait p50={percentile(result.waits, 0.5):.2f} s p95={percentile(result.waits, 0.95):.2f} s  "
            f"idle runner-s per job={result.idle_per_job:.1f}  peak runners={result.peak_runners}  "
            f"jobs_lost={result.lost}  GitHub calls per job={result.calls / max(result.served, 1):.1f}",
            flush=True,
        )
    ours, fixed = results["scaleset"], results["fixed"]
    print(
        f"scaleset: p50_wait_s={percentile(ours.waits, 0.5):.2f} p95_wait_s={percentile(ours.waits, 0.95):.2f} "
        f"idle_runner_s_per_job={ours.idle_per_job:.1f} "
        f"idle_vs_fixed={ours.idle_per_job / max(fixed.idle_per_job, 1e-9):.3f} "
        f"jobs_lost={ours.lost} session_conflicts={ours.session_conflicts} "
        f"calls_per_job={ours.calls / max(ours.served, 1):.1f}"
    )


if __name__ == "__main__":
    main()
