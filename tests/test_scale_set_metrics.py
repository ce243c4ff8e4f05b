"""A RunnerScaleSet's listener, run by the test bed's node from its image, scraped as Prometheus would scrape it
(its pod's IP, port 8080, /metrics) during a burst: its gauges against the Actions service's own statistics at
that moment, its job counters and histograms against the double's record of each job, and its probes as the
kubelet stand-in runs them (the pod's Ready condition)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners.kube.scale_set_manifests import METRICS_PORT, listener_selector
from tests.conftest import ROOT, wait_until
from tests.programs import scale_set
from tests.test_scale_set import SET, leftovers, listener_log, pods, scale_set_simulator

MAX = 4
BURST = 6  # MAX run at once, held; the others wait in the queue until a runner is free


@pytest.fixture
def sim(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    with scale_set_simulator(kube_api_server) as simulator:
        yield simulator


def scrape(url: str) -> dict[str, list[Any]]:
    """Each series name and its samples, from the listener's text exposition."""
    text = requests.get(url, timeout=5).text
    series: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, []).append(sample)
    return series


def total(series: dict[str, list[Any]], metric: str, **labels: str) -> float:
    return sum(s.value for s in series.get(metric, []) if all(s.labels.get(k) == v for k, v in labels.items()))


def answered(url: str) -> int | None:
    """The status of a GET, or None while nothing listens there yet."""
    try:
        return requests.get(url, timeout=5).status_code
    except requests.ConnectionError:
        return None


def whole_seconds(at: str) -> int:
    return int(datetime.fromisoformat(at).timestamp())  # as the listener takes a message's time (Go's Unix())


def test_a_scrape_during_a_burst_agrees_with_github_s_own_counts(sim: Simulator) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(scale_set(sim, min_runners=0, max_runners=MAX))
        (listener,) = pods(sim, listener_selector(SET))
        url = f"http://{listener.status.pod_ip}:{METRICS_PORT}"
        try:
            wait_until(lambda: answered(f"{url}/readyz") == 200, "the listener ready", 30)
        except BaseException:
            print(listener_log(sim))
            raise
        wait_until(lambda: ready_condition(sim), "the listener pod's Ready condition (the kubelet's probe)", 30)
        (service_set,) = sim.github.service.scale_sets()
        set_id = service_set["id"]

        sim.github.queue_jobs(sim.repo_url, [SET], None, count=BURST)  # held: each runs until finished by name

        def agrees() -> dict[str, list[Any]] | None:
            """A scrape whose gauges are the service's statistics, read just before and after it unchanged."""
            before = sim.github.service.statistics(set_id)
            series = scrape(f"{url}/metrics")
            if sim.github.service.statistics(set_id) != before or before["totalBusyRunners"] < MAX:
                return None
            gauges = {
                "gha_assigned_jobs": before["totalAssignedJobs"],
                "gha_running_jobs": before["totalRunningJobs"],
                "gha_registered_runners": before["totalRegisteredRunners"],
                "gha_busy_runners": before["totalBusyRunners"],
                "gha_idle_runners": before["totalIdleRunners"],
            }
            return series if all(total(series, k, name=SET) == v for k, v in gauges.items()) else None

        series = wait_until(agrees, f"a scrape with {MAX} busy runners that agrees with the service", 60)
        assert total(series, "gha_busy_runners", name=SET) == MAX
        # The service assigns no more than the set's capacity (X-ScaleSetMaxCapacity = max_runners): MAX running,
        # the rest still available to it.
        assert total(series, "gha_assigned_jobs", name=SET) == MAX == total(series, "gha_running_jobs", name=SET)
        assert total(series, "gha_max_runners", name=SET) == MAX and total(series, "gha_min_runners") == 0
        assert total(series, "gha_desired_runners", name=SET) == min(MAX, 0 + BURST)  # ARC's count

        finished: set[str] = set()
        while len(finished) < BURST:
            busy = {j["runner_name"] for j in sim.github.jobs("in_progress")} - finished
            for runner in busy:
                sim.github.finish_job(runner)
                finished.add(runner)
            if len(finished) < BURST:
                wait_until(
                    lambda: {j["runner_name"] for j in sim.github.jobs("in_progress")} - finished,
                    "the jobs left to start on new runners",
                    60,
                )

        jobs = [j for j in sim.github.jobs("completed") if j["scale_set_id"] == set_id]
        assert len(jobs) == BURST and all(j["conclusion"] == "success" for j in jobs)
        startup = sum(whole_seconds(j["started_on"]) - whole_seconds(j["assigned_on"]) for j in jobs)
        execution = sum(whole_seconds(j["finished_on"]) - whole_seconds(j["started_on"]) for j in jobs)

        def counted() -> dict[str, list[Any]] | None:
            series = scrape(f"{url}/metrics")
            done = total(series, "gha_completed_jobs_total", job_result="succeeded") == BURST
            return series if done else None

        series = wait_until(counted, f"the listener to count {BURST} jobs completed", 30)
        assert total(series, "gha_started_jobs_total") == BURST
        assert total(series, "gha_job_startup_duration_seconds_count") == BURST
        assert total(series, "gha_job_startup_duration_seconds_sum") == startup
        assert total(series, "gha_job_execution_duration_seconds_count", job_result="succeeded") == BURST
        assert total(series, "gha_job_execution_duration_seconds_sum") == execution
        assert total(series, "actions_runners_runners_started_total", name=SET) >= BURST
        engine.destroy()
    assert not leftovers(sim), leftovers(sim)
    assert not [j for j in sim.github.jobs() if j["lost"]]


def ready_condition(sim: Simulator) -> bool:
    (listener,) = pods(sim, listener_selector(SET))
    conditions = {c.type: c.status for c in listener.status.conditions or []}
    return conditions.get("Ready") == "True"
