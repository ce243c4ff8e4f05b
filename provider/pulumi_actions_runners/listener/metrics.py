"""The listener's Prometheus metrics, through Prometheus' own Python client.

The ``gha_*`` metrics are actions-runner-controller's listener's, with its names, types, help, labels and
buckets (cmd/ghalistener/metrics/metrics.go at 2ee6b3b), so that dashboards and alerts made for it work
unchanged: the set's labels are ``enterprise``, ``organization`` and ``repository`` of its ``github_url`` (empty
where the URL does not say), its ``name`` and ``namespace``; a job's are its ``organization`` (ownerName),
``repository``, ``job_name`` (jobDisplayName), ``event_name`` and, once completed, ``job_result``. As there, a
job's startup is runnerAssignTime - scaleSetAssignTime and its execution finishTime - runnerAssignTime, each in
whole seconds (Go's ``Time.Unix()``), and a completed job that never reached a runner is not counted. One
difference: ARC observes a startup even when a time is missing (Go's zero time, decades of seconds); here such a
job is counted but not observed.

The ``actions_runners_*`` metrics are what only this listener knows: the runners it started, those it retired
and why (a rotation to a new spec, a scale-down, a runner never online), the removals GitHub refused because
the runner ran a job, and the busy runners of an earlier spec it waits on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..github.url import GitHubTarget
from .scaler import NOT_ONLINE, ROTATION, SCALE_DOWN

SET_LABELS = ("enterprise", "organization", "repository", "name", "namespace")
JOB_LABELS = ("enterprise", "organization", "repository", "job_name", "event_name")
# ARC's defaultRuntimeBuckets, seconds.
BUCKETS = (
    0.01, 0.05, 0.1, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100, 110,
    120, 150, 180, 210, 240, 300, 360, 420, 480, 540, 600, 900, 1200, 1800, 2400, 3000, 3600,
)  # fmt: skip
STATISTICS = {  # gauge -> the statistic it shows (ARC's RecordStatistics)
    "gha_assigned_jobs": "totalAssignedJobs",
    "gha_running_jobs": "totalRunningJobs",
    "gha_registered_runners": "totalRegisteredRunners",
    "gha_busy_runners": "totalBusyRunners",
    "gha_idle_runners": "totalIdleRunners",
}
_HELP = {
    "gha_assigned_jobs": "Number of jobs assigned to this scale set.",
    "gha_running_jobs": "Number of jobs running (or about to be run).",
    "gha_registered_runners": "Number of runners registered by the scale set.",
    "gha_busy_runners": "Number of registered runners running a job.",
    "gha_idle_runners": "Number of registered runners not running a job.",
}
RETIRE_REASONS = (ROTATION, SCALE_DOWN, NOT_ONLINE)  # the label of actions_runners_runners_retired_total


def scale_set_labels(target: GitHubTarget, name: str, namespace: str) -> dict[str, str]:
    """ARC's labels of a set, from its configuration URL's scope: an enterprise, an organization, or an
    organization and a repository."""
    kind, _, path = target.scope.partition("/")
    enterprise = path if kind == "enterprises" else ""
    organization, _, repository = path.partition("/") if kind == "repos" else (path if kind == "orgs" else "", "", "")
    return {
        "enterprise": enterprise,
        "organization": organization,
        "repository": repository,
        "name": name,
        "namespace": namespace,
    }


class ListenerMetrics:
    """Every metric of one listener, in a registry of its own (the server serves that registry only)."""

    def __init__(self, labels: Mapping[str, str], registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._set = {k: labels[k] for k in SET_LABELS}

        def gauge(name: str, documentation: str) -> Any:
            """The set's own series of a gauge labelled as the set is."""
            return Gauge(name, documentation, SET_LABELS, registry=self.registry).labels(**self._set)

        def counter(name: str, documentation: str) -> Any:
            return Counter(name, documentation, SET_LABELS, registry=self.registry).labels(**self._set)

        self._statistics = {name: gauge(name, _HELP[name]) for name in STATISTICS}
        self._min = gauge("gha_min_runners", "Minimum number of runners.")
        self._max = gauge("gha_max_runners", "Maximum number of runners.")
        self._desired = gauge("gha_desired_runners", "Number of runners desired by the scale set.")
        self._started = Counter("gha_started_jobs", "Total number of jobs started.", JOB_LABELS, registry=self.registry)
        self._completed = Counter(
            "gha_completed_jobs", "Total number of jobs completed.", (*JOB_LABELS, "job_result"), registry=self.registry
        )
        self._startup = Histogram(
            "gha_job_startup_duration_seconds",
            "Time spent waiting for workflow job to get started on the runner owned by the scale set (in seconds).",
            JOB_LABELS,
            buckets=BUCKETS,
            registry=self.registry,
        )
        self._execution = Histogram(
            "gha_job_execution_duration_seconds",
            "Time spent executing workflow jobs by the scale set (in seconds).",
            (*JOB_LABELS, "job_result"),
            buckets=BUCKETS,
            registry=self.registry,
        )
        # Ours.
        self._runners_started = counter(
            "actions_runners_runners_started", "Runners the listener started (a just-in-time config and a pod each)."
        )
        self._start_failures = counter(
            "actions_runners_runner_start_failures",
            "Runner starts that failed (and were taken back); the listener backs off.",
        )
        retired = Counter(
            "actions_runners_runners_retired",
            "Runners whose registration the listener removed, by why: rotation (an earlier spec), scale_down "
            "(more runners than wanted), not_online (never came online).",
            (*SET_LABELS, "reason"),
            registry=self.registry,
        )
        self._retired = {reason: retired.labels(**self._set, reason=reason) for reason in RETIRE_REASONS}
        self._refused = counter(
            "actions_runners_remove_refused",
            "Removals GitHub refused because the runner ran a job (RemoveRunner's busy answer): the runner stayed.",
        )
        self._waited = gauge(
            "actions_runners_busy_runners_waited",
            "Busy runners of an earlier spec, left to finish their job before they retire.",
        )
        self._queue_failures = counter(
            "actions_runners_message_queue_failures",
            "Calls of the message loop that failed and were retried after a back-off.",
        )

    # -- ARC's recorders ------------------------------------------------------------------------------------

    def record_static(self, min_runners: int, max_runners: int) -> None:
        self._min.set(min_runners)
        self._max.set(max_runners)

    def record_statistics(self, statistics: Mapping[str, Any]) -> None:
        for name, key in STATISTICS.items():
            self._statistics[name].set(_number(statistics.get(key)))

    def record_desired(self, count: int) -> None:
        self._desired.set(count)

    def record_job_started(self, job: Mapping[str, Any]) -> None:
        labels = self._job_labels(job)
        self._started.labels(**labels).inc()
        assigned, started = _unix(job.get("scaleSetAssignTime")), _unix(job.get("runnerAssignTime"))
        if assigned is not None and started is not None:
            self._startup.labels(**labels).observe(started - assigned)

    def record_job_completed(self, job: Mapping[str, Any]) -> None:
        started = _unix(job.get("runnerAssignTime"))
        if started is None:
            return  # never on a runner (canceled in the queue): ARC counts it nowhere
        labels = {**self._job_labels(job), "job_result": str(job.get("result") or "")}
        self._completed.labels(**labels).inc()
        finished = _unix(job.get("finishTime"))
        if finished is not None:
            self._execution.labels(**labels).observe(finished - started)

    # -- ours -----------------------------------------------------------------------------------------------

    def record_runner_started(self) -> None:
        self._runners_started.inc()

    def record_start_failure(self) -> None:
        self._start_failures.inc()

    def record_retired(self, reason: str) -> None:
        self._retired[reason].inc()

    def record_remove_refused(self) -> None:
        self._refused.inc()

    def record_busy_waited(self, count: int) -> None:
        self._waited.set(count)

    def record_queue_failure(self) -> None:
        self._queue_failures.inc()

    def _job_labels(self, job: Mapping[str, Any]) -> dict[str, str]:
        return {
            "enterprise": self._set["enterprise"],
            "organization": str(job.get("ownerName") or ""),
            "repository": str(job.get("repositoryName") or ""),
            "job_name": str(job.get("jobDisplayName") or ""),
            "event_name": str(job.get("eventName") or ""),
        }


_FRACTION = re.compile(r"\.(\d+)")


def _unix(value: object) -> int | None:
    """An RFC 3339 time of the Actions service in whole seconds since the epoch; None for none, for Go's zero
    time (year 1: the service's "not yet") and for one that does not parse."""
    if not isinstance(value, str) or not value or value.startswith("0001-01-01"):
        return None
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), value.replace("Z", "+00:00"), count=1)
    try:
        return int(datetime.fromisoformat(text).timestamp())
    except ValueError:
        return None


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
