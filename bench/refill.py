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

The jobs come from GitHub's queue (the double's, job_queue.py): the benchmark keeps one job queued per slot of the
pool, with runs-on the pool's label, topped up every 20 ms, and GitHub hands each to an idle online runner that
has the label, in queue order, the moment one is there. A job's queue wait is its start less its queueing: with
every slot busy a job waits about a job's length for its turn, and longer while slots are not refilled, so the
waits' tail shows what a rotation or a slow refill costs the queue. Finished pods are counted before each update
and after the last (an update deletes them once a refresh has counted as many as the pool's slots). Throughput
is runner-seconds busy / (replicas x the phase's time): 1.0 would be every slot busy all the time. Runners in
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
    """A workflow's jobs for one pool through GitHub's queue: one job kept queued per slot, runs-on its label."""

    sim: Simulator
    prefix: str
    replicas: int
    job_seconds: Callable[[], float]
    label: str = "pulumi"
    started: float = field(default_factory=time.monotonic)
    in_service: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            now = time.monotonic()
            ours = [r for r in self.sim.github.runners() if r["name"].startswith(self.prefix)]
            self.in_service.append((now, sum(1 for r in ours if r["status"] == "online")))
            for _ in range(self.replicas - len(self.sim.github.jobs(status="queued"))):
                self.sim.github.queue_jobs(self.sim.repo_url, ["self-hosted", self.label], self.job_seconds())

    def stop(self) -> list[dict]:
        """Stop queueing; every job so far, as GitHub recorded it."""
        self._stop.set()
        self._thread.join()
        return self.sim.github.jobs()

    def fewest_in_service(self, start: float, end: float) -> int:
        return min((count for when, count in self.in_service if start <= when <= end), default=0)


def busy_seconds(jobs: list[dict], start: float, end: float) -> float:
    return sum(
        max(0.0, min(job["finished_at"] or end, end) - max(job["started_at"], start))
        for job in jobs
        if job["started_at"]
    )


def refill_latencies(jobs: list[dict], replicas: int) -> list[float]:
    """Each job's end to the start of a job on a runner that had run none (a refill), paired in order."""
    ends = sorted(job["finished_at"] for job in jobs if job["finished_at"])
    seen: set[int] = set()
    latencies = []
    for job in sorted((j for j in jobs if j["started_at"]), key=lambda j: j["started_at"]):
        new_runner = job["runner_id"] not in seen
        seen.add(job["runner_id"])
        if len(seen) <= replicas or not new_runner:
            continue
        claimed = next((end for end in ends if end <= job["started_at"]), None)
        if claimed is not None:
            ends.remove(claimed)
            latencies.append(job["started_at"] - claimed)
    return latencies


def queue_waits(jobs: list[dict]) -> list[float]:
    return [job["wait_seconds"] for job in jobs if job["wait_seconds"] is not None]

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


def latency_phase(jobs: int) -> tuple[list[float], list[float]]:
    """Refill latencies, and the queue's waits, at actions/runner's own speed."""
    with Simulator(token_lifetime=3600, fault_proxy=False, schedule_delay=0.1) as sim:
        env = {**os.environ, **sim.provider_env}
        with MiniEngine(ROOT, env=env) as engine:
            engine.up(pool_program(sim, new_token(sim), "quick", 5, refill=True, labels=["pulumi"]))
            lengths = random.Random(7)  # so that jobs end, and slots refill, at different moments
            load = Load(sim, "quick-", 5, job_seconds=lambda: lengths.uniform(0.5, 4.0))
            deadline = time.monotonic() + 300
            while len(refill_latencies(sim.github.jobs(), 5)) < jobs and time.monotonic() < deadline:
                time.sleep(0.5)
            records = load.stop()
            return refill_latencies(records, 5), queue_waits(records)


@dataclass
class LoadResult:
    throughput: float
    served: int
    calls: int
    killed: int
    waits: list[float] = field(default_factory=list)
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
            load = Load(sim, f"{name}-", replicas, job_seconds=lambda: job_minutes * scaled)
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
            jobs = load.stop()
            result.throughput = busy_seconds(jobs, load.started, ended) / (replicas * (ended - load.started))
            result.served = sum(1 for job in jobs if job["finished_at"] and job["finished_at"] <= ended)
            result.waits = [wait / scaled * 60 for wait in queue_waits(jobs)]  # in scaled seconds
            result.calls = len(sim.github.calls()) - calls_before
            result.killed = len(sim.runners.jobs_killed)
            lost = sum(1 for job in jobs if job["lost"])
            if lost != result.killed:
                raise AssertionError(f"GitHub recorded {lost} jobs lost, the runners {result.killed}")
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

    latencies, waits = latency_phase(args.latency_jobs)
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    print(
        f"refill latency at actions/runner's speed: {len(latencies)} refills, p50={p50:.2f} s p95={p95:.2f} s; "
        f"queue wait of {len(waits)} jobs p50={percentile(waits, 0.5):.2f} s p95={percentile(waits, 0.95):.2f} s",
        flush=True,
    )

    refill = load_phase(args.replicas, args.speedup, args.job_minutes, refill=True, minutes=60)
    today = load_phase(args.replicas, args.speedup, args.job_minutes, refill=False, minutes=40)
    floor = args.replicas - max(1, args.replicas * 25 // 100)
    for label, r in (("refill", refill), ("today", today)):
        print(
            f"{label:<6} pool of {args.replicas}: throughput={r.throughput:.3f} of slots x time  "
            f"served={r.served} jobs  GitHub calls/served job={r.calls / max(r.served, 1):.3f}  jobs_lost={r.killed}  "
            f"finished pods before an update at most {r.finished_pods_most}, after the hour {r.finished_pods_left}  "
            f"queue wait p50={percentile(r.waits, 0.5):.0f} s p95={percentile(r.waits, 0.95):.0f} s (scaled)",
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
        f"refill: p50_s={p50:.2f} p95_s={p95:.2f} wait_p50_s={percentile(refill.waits, 0.5):.1f} "
        f"wait_p95_s={percentile(refill.waits, 0.95):.1f} today_wait_p95_s={percentile(today.waits, 0.95):.1f} "
        f"throughput={refill.throughput:.3f} "
        f"renewal_recreated={refill.renewal_recreated} rotation_jobs_lost={refill.killed} "
        f"min_in_service={refill.min_in_service / floor:.2f} finished_pods_left={refill.finished_pods_left}"
    )


if __name__ == "__main__":
    main()
