"""Benchmark (not a test): a refilling RunnerPool (its runners the pods of a Job, refilled by the real
kube-controller-manager) under a queue of jobs, beside today's ephemeral pool, through the SDK's provider server.

Three phases, each on its own simulator:

latency    runners at actions/runner's own speed (config.sh 2 s, its session 1 s): a pool of 5 takes short jobs;
           each job's end to the next new runner of the pool seen idle and online is one refill latency.
refill     a pool of ``--replicas`` with ``refill``, its runners' clock ``--speedup`` times as fast (a job of
           ``--job-minutes`` lasts that many minutes / speedup), fed an endless queue for an hour (scaled). As the
           shipped pipeline does, a `refresh` then an `up` every 20 (scaled) minutes: the first renews the token,
           the second changes the labels (a rotation to a new Job); the last one ends the hour.
today      the same pool without ``refill``, fed the same way for 40 (scaled) minutes, a `refresh` and an `up` every 20.

The queue stands in for GitHub: a job goes to an idle online runner of the pool as soon as one is listed (polled
every 20 ms, so that is part of each latency). Finished pods are counted before each update and after the
last (an update deletes them once a refresh has counted as many as the pool's slots). Throughput is
runner-seconds busy / (replicas x the phase's time): 1.0 would be every slot busy all the time. Runners in
service (online, idle or busy) are sampled every 20 ms during the rotation, over replicas - max_unavailable; a
runner between its job's end and its successor's registration is not in service, so the natural churn of the
load counts against it too. Only ratios within one run mean much; the last line is for scripts.

    .venv/bin/python bench/refill.py [--replicas 20] [--speedup 20] [--job-minutes 5]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners import RunnerPool
from pulumi_actions_runners.github.client import GitHubClient
from pulumi_actions_runners.github.url import parse_github_url
from pulumi_actions_runners.kube.manifests import POOL_LABEL

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "actions-runners"
POLL_SECONDS = 0.02
UPDATE_EVERY_MINUTES = 20.0
MAX_UNAVAILABLE = "25%"


@dataclass
class Load:
    """GitHub's queue for one pool: every idle runner of it gets the next job at once."""

    sim: Simulator
    prefix: str
    job_seconds: Callable[[], float]
    started: float = field(default_factory=time.monotonic)
    jobs: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of each job handed out
    ended_unclaimed: list[float] = field(default_factory=list)  # job ends no new runner has answered yet
    latencies: list[float] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)  # registration ids: today's pool reuses its runners' names
    in_service: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            now = time.monotonic()
            ours = [r for r in self.sim.github.runners() if r["name"].startswith(self.prefix)]
            online = [r for r in ours if r["status"] == "online"]
            self.in_service.append((now, len(online)))
            self.ended_unclaimed += [end for _, end in self.jobs if self._just_ended(end, now)]
            for runner in online:
                if runner["id"] in self.seen or runner["busy"]:
                    continue
                self.seen.add(runner["id"])
                if self.ended_unclaimed:
                    self.latencies.append(now - self.ended_unclaimed.pop(0))
                seconds = self.job_seconds()
                try:
                    self.sim.github.start_job(runner["name"], seconds)
                except LookupError:
                    continue  # gone meanwhile (a rotation took it down)
                self.jobs.append((now, now + seconds))
            self._last = now

    def _just_ended(self, end: float, now: float) -> bool:
        return getattr(self, "_last", self.started) < end <= now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def busy_seconds(self, start: float, end: float) -> float:
        return sum(max(0.0, min(e, end) - max(s, start)) for s, e in self.jobs)

    def fewest_in_service(self, start: float, end: float) -> int:
        return min((count for when, count in self.in_service if start <= when <= end), default=0)


def pool_program(sim: Simulator, token: str, name: str, replicas: int, *, refill: bool, labels: list[str]) -> Callable:
    def program() -> None:
        RunnerPool(
            name,
            pool_name=name,
            github_url=sim.repo_url,
            namespace=NAMESPACE,
            registration_token=token,
            github_token=sim.credential,
            kubeconfig=str(sim.kubeconfig),
            replicas=replicas,
            max_unavailable=MAX_UNAVAILABLE,
            refill=refill,
            labels=labels,
            grace_period_seconds=0.5,
        )

    return program


def new_token(sim: Simulator) -> str:
    with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
        return github.create_registration_token().token


def finished_pods(sim: Simulator, pool: str) -> int:
    with sim.kube.api_server.admin_client() as admin:
        pods = client.CoreV1Api(admin).list_namespaced_pod(NAMESPACE, label_selector=f"{POOL_LABEL}={pool}").items
    return sum(1 for pod in pods if pod.status.phase in ("Succeeded", "Failed"))


def latency_phase(jobs: int) -> list[float]:
    """Refill latencies at actions/runner's own speed."""
    with Simulator(token_lifetime=3600, fault_proxy=False, schedule_delay=0.1) as sim:
        env = {**os.environ, **sim.provider_env}
        with MiniEngine(ROOT, env=env) as engine:
            engine.up(pool_program(sim, new_token(sim), "quick", 5, refill=True, labels=["pulumi"]))
            lengths = random.Random(7)  # so that jobs end, and slots refill, at different moments
            load = Load(sim, "quick-", job_seconds=lambda: lengths.uniform(0.5, 4.0))
            deadline = time.monotonic() + 300
            while len(load.latencies) < jobs and time.monotonic() < deadline:
                time.sleep(0.5)
            load.stop()
            return load.latencies


@dataclass
class LoadResult:
    throughput: float
    served: int
    calls: int
    killed: int
    finished_pods_left: int = 0
    finished_pods_most: int = 0  # the most seen, before each update
    renewal_recreated: int = 0
    min_in_service: int = 0
    rotation_seconds: float = 0.0


def load_phase(replicas: int, speedup: float, job_minutes: float, *, refill: bool, minutes: float) -> LoadResult:
    """A pool under an endless queue for ``minutes`` (scaled), a `refresh` then an `up` every 20 of them."""
    scaled = 60.0 / speedup  # real seconds of one scaled minute
    name = "refill" if refill else "today"
    with Simulator(token_lifetime=3600, fault_proxy=False, runner_speedup=speedup, schedule_delay=0.05) as sim:
        env = {**os.environ, **sim.provider_env}
        with MiniEngine(ROOT, env=env) as engine:
            token = new_token(sim)
            engine.up(pool_program(sim, token, name, replicas, refill=refill, labels=["pulumi"]))
            calls_before = len(sim.github.calls())
            load = Load(sim, f"{name}-", job_seconds=lambda: job_minutes * scaled)
            result = LoadResult(0.0, 0, 0, 0)
            updates = int(minutes // UPDATE_EVERY_MINUTES)
            labels = ["pulumi"]
            for update in range(1, updates + 1):
                time.sleep(max(0.0, load.started + update * UPDATE_EVERY_MINUTES * scaled - time.monotonic()))
                result.finished_pods_most = max(result.finished_pods_most, finished_pods(sim, name))
                engine.refresh()
                if refill and update == 1:  # a token renewal
                    token = new_token(sim)
                    registered = {r["id"] for r in sim.github.runners() if r["status"] == "online"}
                    deletes = len(sim.github.calls("DELETE"))
                    engine.up(pool_program(sim, token, name, replicas, refill=refill, labels=labels))
                    removed = {int(c["path"].rsplit("/", 1)[-1]) for c in sim.github.calls("DELETE")[deletes:]}
                    result.renewal_recreated = len(removed & registered)
                elif refill and update == 2:  # a rotation: new labels make a new Job
                    labels = ["pulumi", "rotated"]
                    started = time.monotonic()
                    engine.up(pool_program(sim, token, name, replicas, refill=refill, labels=labels))
                    result.rotation_seconds = time.monotonic() - started
                    result.min_in_service = load.fewest_in_service(started, time.monotonic())
                else:
                    engine.up(pool_program(sim, token, name, replicas, refill=refill, labels=labels))
            ended = time.monotonic()
            load.stop()
            result.throughput = load.busy_seconds(load.started, ended) / (replicas * (ended - load.started))
            result.served = sum(1 for _, end in load.jobs if end <= ended)
            result.calls = len(sim.github.calls()) - calls_before
            result.killed = len(sim.runners.jobs_killed)
            result.finished_pods_left = finished_pods(sim, name)
            return result


def percentile(values: list[float], fraction: float) -> float:
    """Nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered), math.ceil(fraction * len(ordered))) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=20)
    parser.add_argument("--speedup", type=float, default=20.0, help="the load phases' runner clock")
    parser.add_argument("--job-minutes", type=float, default=5.0)
    parser.add_argument("--latency-jobs", type=int, default=30)
    args = parser.parse_args()

    latencies = latency_phase(args.latency_jobs)
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    print(
        f"refill latency at actions/runner's speed: {len(latencies)} refills, p50={p50:.2f} s p95={p95:.2f} s",
        flush=True,
    )

    refill = load_phase(args.replicas, args.speedup, args.job_minutes, refill=True, minutes=60)
    today = load_phase(args.replicas, args.speedup, args.job_minutes, refill=False, minutes=40)
    floor = args.replicas - max(1, args.replicas * 25 // 100)
    for label, r in (("refill", refill), ("today", today)):
        print(
            f"{label:<6} pool of {args.replicas}: throughput={r.throughput:.3f} of slots x time  "
            f"served={r.served} jobs  GitHub calls/served job={r.calls / max(r.served, 1):.3f}  jobs_lost={r.killed}  "
            f"finished pods before an update at most {r.finished_pods_most}, after the hour {r.finished_pods_left}",
            flush=True,
        )
    print(
        f"refill: token renewal recreated {refill.renewal_recreated} registered runners; rotation in "
        f"{refill.rotation_seconds:.1f} s with at least {refill.min_in_service} of {args.replicas} in service "
        f"(replicas - max_unavailable = {floor}); throughput {refill.throughput / max(today.throughput, 1e-9):.2f}x "
        "today's pool",
        flush=True,
    )
    print(
        f"refill: p50_s={p50:.2f} p95_s={p95:.2f} throughput={refill.throughput:.3f} "
        f"renewal_recreated={refill.renewal_recreated} rotation_jobs_lost={refill.killed} "
        f"min_in_service={refill.min_in_service / floor:.2f} finished_pods_left={refill.finished_pods_left}"
    )


if __name__ == "__main__":
    main()
