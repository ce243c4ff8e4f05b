"""The listener's metrics (listener/metrics.py) are actions-runner-controller's listener's where ARC has them:
names, types, labels and buckets as cmd/ghalistener/metrics/metrics.go (at 2ee6b3b) registers them, so that
dashboards and alerts made for ARC work unchanged; and the Grafana dashboard in docs/ queries only what the
listener serves. A scrape of a running listener during a burst: test_scale_set_metrics.py."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pulumi_actions_runners.github.url import parse_github_url
from pulumi_actions_runners.listener.loop import STALLED_SECONDS, Listener, ListenerSettings
from pulumi_actions_runners.listener.metrics import ListenerMetrics, scale_set_labels
from pulumi_actions_runners.listener.server import ListenerServer, parse_address
from tests.fakes import FakeClock

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "docs" / "operations" / "dashboards" / "scale-sets.json"

# ARC's defaultMetrics: metric -> (type, labels).
SET = {"enterprise", "organization", "repository", "name", "namespace"}
JOB = {"enterprise", "organization", "repository", "job_name", "event_name"}
ARC = {
    **{
        name: ("gauge", SET)
        for name in (
            "gha_assigned_jobs",
            "gha_running_jobs",
            "gha_registered_runners",
            "gha_busy_runners",
            "gha_min_runners",
            "gha_max_runners",
            "gha_desired_runners",
            "gha_idle_runners",
        )
    },
    "gha_started_jobs": ("counter", JOB),
    "gha_completed_jobs": ("counter", JOB | {"job_result"}),
    "gha_job_startup_duration_seconds": ("histogram", JOB),
    "gha_job_execution_duration_seconds": ("histogram", JOB | {"job_result"}),
}
ARC_BUCKETS = [
    0.01, 0.05, 0.1, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100, 110,
    120, 150, 180, 210, 240, 300, 360, 420, 480, 540, 600, 900, 1200, 1800, 2400, 3000, 3600,
]  # fmt: skip
# Labels a scrape adds to every series (Prometheus' Kubernetes discovery, a PodMonitor), which queries may use.
TARGET_LABELS = {"namespace", "pod", "job", "instance"}


def job(kind: str, **overrides: Any) -> dict[str, Any]:
    """A job message as the Actions service sends it (SS types.go's JobMessageBase), times in RFC 3339."""
    return {
        "messageType": kind,
        "ownerName": "octo-org",
        "repositoryName": "app",
        "jobDisplayName": "build",
        "eventName": "push",
        "scaleSetAssignTime": "2026-12-07T10:00:00.250Z",
        "runnerAssignTime": "2026-12-07T10:00:07.9Z",
        "finishTime": "2026-12-07T10:01:10.1234567Z",
        **overrides,
    }


def recorded() -> ListenerMetrics:
    """Every metric with a sample: what a listener serves once a job has run and a runner retired."""
    labels = scale_set_labels(parse_github_url("https://github.com/octo-org"), "linux", "runners")
    metrics = ListenerMetrics(labels)
    metrics.record_static(1, 10)
    metrics.record_desired(3)
    metrics.record_statistics({"totalAssignedJobs": 2, "totalRunningJobs": 1, "totalRegisteredRunners": 3})
    metrics.record_job_started(job("JobStarted"))
    metrics.record_job_completed(job("JobCompleted", result="succeeded"))
    metrics.record_runner_started()
    metrics.record_start_failure()
    metrics.record_retired("rotation")
    metrics.record_remove_refused()
    metrics.record_busy_waited(1)
    metrics.record_queue_failure()
    return metrics


def families(metrics: ListenerMetrics) -> dict[str, Any]:
    text = generate_latest(metrics.registry).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_the_gha_metrics_are_arc_s_by_name_type_labels_and_buckets() -> None:
    served = families(recorded())
    for name, (kind, labels) in ARC.items():
        family = served[name]
        assert family.type == kind, name
        sample_labels = {key for sample in family.samples for key in sample.labels} - {"le"}
        assert sample_labels == labels, name
        if kind == "histogram":
            bounds = sorted({float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")})
            assert bounds == [*map(float, ARC_BUCKETS), float("inf")], name


def test_values_follow_the_messages_as_arc_computes_them() -> None:
    served = families(recorded())

    def value(family: str, sample: str | None = None, **labels: str) -> float:
        return next(
            s.value
            for s in served[family].samples
            if s.name == (sample or family) and all(s.labels.get(k) == v for k, v in labels.items())
        )

    assert value("gha_max_runners") == 10 and value("gha_min_runners") == 1 and value("gha_desired_runners") == 3
    assert value("gha_assigned_jobs", name="linux", namespace="runners", organization="octo-org") == 2
    assert value("gha_idle_runners") == 0  # a statistic the message did not carry: 0, as Go's zero value
    # Whole seconds (Go's Time.Unix()): 10:00:07 - 10:00:00 = 7 and 10:01:10 - 10:00:07 = 63.
    assert value("gha_job_startup_duration_seconds", "gha_job_startup_duration_seconds_sum") == 7
    assert value("gha_job_execution_duration_seconds", "gha_job_execution_duration_seconds_sum") == 63
    assert value("gha_completed_jobs", "gha_completed_jobs_total", job_result="succeeded", job_name="build") == 1
    assert value("actions_runners_runners_retired", "actions_runners_runners_retired_total", reason="rotation") == 1
    assert value("actions_runners_runners_retired", "actions_runners_runners_retired_total", reason="scale_down") == 0


def test_a_job_that_never_reached_a_runner_is_not_counted_complete() -> None:
    metrics = ListenerMetrics(scale_set_labels(parse_github_url("https://github.com/o/r"), "s", "n"))
    metrics.record_job_completed(job("JobCompleted", runnerAssignTime="0001-01-01T00:00:00Z", result="canceled"))
    metrics.record_job_started(job("JobStarted", scaleSetAssignTime="0001-01-01T00:00:00Z"))
    served = families(metrics)
    assert not [s for s in served["gha_completed_jobs"].samples if s.name.endswith("_total")]
    assert [s.value for s in served["gha_started_jobs"].samples if s.name.endswith("_total")] == [1]
    counts = [s.value for s in served["gha_job_startup_duration_seconds"].samples if s.name.endswith("_count")]
    assert counts == [0] or counts == []  # counted as started, its startup unknown: not observed


def test_the_set_s_labels_come_from_its_url_as_arc_parses_it() -> None:
    assert scale_set_labels(parse_github_url("https://github.com/o/r"), "s", "n") == {
        "enterprise": "",
        "organization": "o",
        "repository": "r",
        "name": "s",
        "namespace": "n",
    }
    assert scale_set_labels(parse_github_url("https://github.com/enterprises/e"), "s", "n")["enterprise"] == "e"
    assert scale_set_labels(parse_github_url("https://github.com/o"), "s", "n")["organization"] == "o"


# -- the dashboard ---------------------------------------------------------------------------------------------

_FUNCTIONS_AND_KEYWORDS = {
    "sum", "max", "min", "avg", "count", "rate", "increase", "irate", "histogram_quantile", "label_values", "by",
    "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "vector",
}  # fmt: skip


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression: the panels' targets and the variables' queries."""
    found = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found.append(variable["query"]["query"])
    return found


def names_and_labels(expression: str) -> list[tuple[str, set[str]]]:
    """The metrics an expression selects, each with the labels its matchers, ``by`` and ``label_values`` use."""
    text = re.sub(r'"[^"]*"', '""', expression)  # strings: no names in them
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    grouped = {label.strip() for group in re.findall(r"\bby\s*\(([^)]*)\)", text) for label in group.split(",")}
    text = re.sub(r"\bby\s*\([^)]*\)", "", text)
    if match := re.match(r"label_values\((.*),\s*(\w+)\)$", text.strip()):
        text, grouped = match.group(1), {match.group(2)}
    selected = []
    for name, matchers in re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?", text):
        if name in _FUNCTIONS_AND_KEYWORDS or re.fullmatch(r"[0-9.e]+", name) or name.startswith("__"):
            continue
        labels = set(re.findall(r"(\w+)\s*[=!]~?", matchers)) | grouped
        selected.append((name, labels - {"le"}))
    return selected


def served_series() -> dict[str, set[str]]:
    """Each series name a listener serves (histograms' _bucket, _sum, _count; counters' _total) and its labels."""
    served: dict[str, set[str]] = {}
    for family in families(recorded()).values():
        for sample in family.samples:
            served.setdefault(sample.name, set()).update(set(sample.labels) - {"le"})
    return served


def test_every_dashboard_query_names_a_metric_the_listener_serves_with_labels_it_has() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    served = served_series()
    checked = 0
    for expression in queries(dashboard):
        selected = names_and_labels(expression)
        assert selected, f"no metric in {expression!r}"
        for name, labels in selected:
            assert name in served, f"{name} (in {expression!r}) is not a metric the listener serves"
            unknown = labels - served[name] - TARGET_LABELS
            assert not unknown, f"{name} has no label {sorted(unknown)} (in {expression!r})"
            checked += 1
    assert checked >= 20
    # What the issue asks it to show: queue wait, desired vs running, idle vs busy, job durations.
    everything = " ".join(queries(dashboard))
    for wanted in ("gha_job_startup_duration_seconds_bucket", "gha_desired_runners", "gha_running_jobs"):
        assert wanted in everything
    for wanted in ("gha_idle_runners", "gha_busy_runners", "gha_job_execution_duration_seconds_bucket"):
        assert wanted in everything


@pytest.mark.parametrize(
    "expression",
    ['sum(gha_desired_runer{name=~"$scale_set"})', 'sum by (nam) (gha_desired_runners{name=~"$scale_set"})'],
)
def test_the_dashboard_check_catches_a_misspelt_metric_or_label(expression: str) -> None:
    served = served_series()
    wrong = [
        (name, labels)
        for name, labels in names_and_labels(expression)
        if name not in served or labels - served[name] - TARGET_LABELS
    ]
    assert wrong


def test_the_probes_and_metrics_are_served_over_http() -> None:
    import requests

    metrics = recorded()
    state = {"alive": (True, "both loops run"), "ready": (False, "no session open with the scale set")}
    server = ListenerServer("127.0.0.1:0", metrics.registry, lambda: state["alive"], lambda: state["ready"]).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        scraped = requests.get(f"{base}/metrics", timeout=5)
        assert scraped.status_code == 200 and "gha_desired_runners{" in scraped.text
        assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
        ready = requests.get(f"{base}/readyz", timeout=5)
        assert ready.status_code == 503 and "no session" in ready.text
        state["ready"] = (True, "serving")
        assert requests.get(f"{base}/readyz", timeout=5).status_code == 200
        assert requests.get(f"{base}/other", timeout=5).status_code == 404
    finally:
        server.close()
    assert parse_address(":8080") == ("", 8080) and parse_address("[::1]:0") == ("::1", 0)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address("8080")


def test_liveness_fails_only_when_the_runners_loop_makes_no_step_and_readiness_follows_the_session() -> None:
    """loop.Listener's probe answers on a fake clock: a loop between steps (a long rate-limit wait is one step)
    stays alive up to STALLED_SECONDS; ready needs the session and the first turn, and ends with a stop."""
    clock = FakeClock()
    settings = ListenerSettings(scale_set_name="s", namespace="n", config_map="s-listener", pod_name="s-listener-0")
    labels = scale_set_labels(parse_github_url("https://github.com/o"), "s", "n")
    kube = SimpleNamespace(api_client=None)  # nothing is called: the probes read the loop's own state
    listener = Listener(settings, None, kube, clock, ListenerMetrics(labels))  # type: ignore[arg-type]
    assert listener.alive()[0] and listener.ready() == (False, "no session open with the scale set")
    listener._progress()
    clock.now += STALLED_SECONDS - 1
    assert listener.alive()[0]
    clock.now += 2
    alive, why = listener.alive()
    assert not alive and f"no step for {STALLED_SECONDS + 1:.0f} s" in why
    listener._progress()
    assert listener.alive()[0]
    listener._hold.session = object()  # type: ignore[assignment]
    assert not listener.ready()[0]  # the runners' first turn is under way
    listener._first_turn_done = True
    assert listener.ready() == (True, "serving scale set s")
    listener.request_stop()
    assert listener.ready() == (False, "stopping")


def test_the_server_listens_on_both_families_for_every_interface() -> None:
    import requests

    server = ListenerServer(":0", recorded().registry, lambda: (True, "ok"), lambda: (True, "ok")).start()
    try:
        assert requests.get(f"http://127.0.0.1:{server.port}/healthz", timeout=5).status_code == 200
        if socket.has_ipv6:
            assert requests.get(f"http://[::1]:{server.port}/healthz", timeout=5).status_code == 200
    finally:
        server.close()
