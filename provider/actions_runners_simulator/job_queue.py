"""GitHub's job queue for self-hosted runners, as the GitHub double keeps it: what a job is, which runner may
take it, and how GitHub's REST API lists the queue.

Facts:

- A workflow job is queued with its ``runs-on`` labels and goes to an idle online self-hosted runner that has
  every one of them; labels match case-insensitively, and ``self-hosted`` is a label of every self-hosted runner
  ("Using labels with self-hosted runners", GitHub Docs: "Self-hosted runner labels are case-insensitive"; a job
  that names a scale set in ``runs-on`` goes to that scale set instead, ../shared/reference/runner-scale-sets.md).
- A repository's job may run on the repository's runners and on its organization's ("About self-hosted
  runners": runners are added at the repository, organization or enterprise level; the double's groups are all
  visible to every repository).
- GitHub documents no order among several idle matching runners; the double takes the oldest registration.
  Jobs are served in the order they were queued.
- A job waits at most 24 hours for a runner, then fails ("Usage limits", GitHub Docs: "Job queue time - Each
  job for self-hosted runners can be queued for a maximum of 24 hours").
- The REST API lists a repository's workflow runs (``GET /repos/{owner}/{repo}/actions/runs``, filtered by
  ``status``) and a run's jobs (``GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs``), each job with its
  ``status`` (queued, in_progress, completed), ``conclusion``, ``labels`` and the runner that took it (REST
  reference, "Workflow runs" and "Workflow jobs"): what a scaler polling the queue reads (KEDA's github-runner
  scaler lists queued runs, then their jobs, and counts the queued ones whose labels its runners have).

Times are kept twice: monotonic for the waits a benchmark measures, wall clock (UTC) for what GitHub shows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

SELF_HOSTED = "self-hosted"
QUEUE_LIMIT_SECONDS = 24 * 3600.0
FAILED_IN_QUEUE = "queued for longer than GitHub's 24 hours without a runner"

JsonObject = dict[str, Any]


def wanted(runs_on: Iterable[str]) -> frozenset[str]:
    """The labels a runner must have for a job, compared case-insensitively; ``self-hosted`` every one has."""
    return frozenset(label.strip().lower() for label in runs_on if label.strip()) - {SELF_HOSTED}


def takes(runs_on: Iterable[str], runner_labels: Iterable[str]) -> bool:
    """Whether a runner with ``runner_labels`` may run a job with ``runs-on: runs_on``."""
    return wanted(runs_on) <= {label.lower() for label in runner_labels}


def scopes_for(job_scope: str) -> tuple[str, ...]:
    """The registration scopes whose runners a repository's job may use: the repository's and its owner's."""
    kind, _, rest = job_scope.partition("/")
    if kind != "repos":
        raise ValueError(f"jobs belong to a repository (repos/OWNER/REPO), not {job_scope!r}")
    return (job_scope, f"orgs/{rest.split('/')[0]}")


def _rfc3339(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Job:
    """One workflow job, from queued to completed. ``duration`` None: it runs until it is finished by name."""

    id: int
    run_id: int
    request_id: int  # the runnerRequestId that scale set messages and acquirejobs name it by
    scope: str  # repos/OWNER/REPO
    runs_on: tuple[str, ...]
    duration: float | None
    name: str
    queued_at: float  # monotonic
    queued_on: datetime = field(default_factory=lambda: datetime.now(UTC))
    scale_set_id: int | None = None  # the scale set whose name or labels its runs-on names
    offers: int = 0  # how many times it was offered to that scale set (JobAvailable)
    offered_at: float | None = None  # monotonic, the last offer
    acquired_at: float | None = None  # monotonic, by a scale set's listener (acquirejobs)
    assigned_on: datetime | None = None  # bound to a scale set (scaleSetAssignTime)
    started_at: float | None = None  # monotonic, on a runner
    started_on: datetime | None = None
    finished_at: float | None = None  # monotonic
    finished_on: datetime | None = None
    runner_id: int | None = None
    runner_name: str | None = None
    runner_group_id: int | None = None
    conclusion: str | None = None  # success, failure, cancelled
    lost: bool = False  # its runner stopped, died or was taken over while it ran
    failure: str | None = None  # why it ended without success

    @property
    def status(self) -> str:
        if self.finished_at is not None:
            return "completed"
        return "queued" if self.started_at is None else "in_progress"

    def start(self, runner_id: int, runner_name: str, runner_group_id: int, now: float) -> None:
        self.started_at, self.started_on = now, datetime.now(UTC)
        self.runner_id, self.runner_name, self.runner_group_id = runner_id, runner_name, runner_group_id

    def finish(self, now: float, *, conclusion: str = "success", lost: bool = False, why: str | None = None) -> None:
        if self.finished_at is None:
            self.finished_at, self.finished_on = now, datetime.now(UTC)
            self.conclusion, self.lost, self.failure = conclusion, lost, why

    def unassign(self) -> None:
        """Back to the queue, as a job a scale set acquired but no runner took is (its JobCompleted "canceled")."""
        self.acquired_at, self.assigned_on = None, None

    def record(self) -> JsonObject:
        """What the simulator reports of a job: its times (monotonic seconds), its runner, and its fate."""
        wait = None if self.started_at is None else self.started_at - self.queued_at
        return {
            "id": self.id,
            "run_id": self.run_id,
            "runner_request_id": self.request_id,
            "scope": self.scope,
            "labels": list(self.runs_on),
            "duration_seconds": self.duration,
            "status": self.status,
            "conclusion": self.conclusion,
            "queued_at": self.queued_at,
            "assigned_at": self.acquired_at if self.scale_set_id is not None else self.started_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "wait_seconds": wait,
            "runner_id": self.runner_id,
            "runner_name": self.runner_name,
            "scale_set_id": self.scale_set_id,
            # The wall-clock times its scale set's messages carry (scaleSetAssignTime, runnerAssignTime, finishTime).
            "assigned_on": _iso(self.assigned_on),
            "started_on": _iso(self.started_on),
            "finished_on": _iso(self.finished_on),
            "offers": self.offers,
            "lost": self.lost,
            "failure": self.failure,
        }

    def rest_json(self, api_url: str, group_name: str | None) -> JsonObject:
        """The job as ``GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs`` lists it."""
        repo_url = f"{api_url}/{self.scope}"
        html = api_url.rsplit("/api/v3", 1)[0] + "/" + self.scope.removeprefix("repos/")
        return {
            "id": self.id,
            "run_id": self.run_id,
            "run_url": f"{repo_url}/actions/runs/{self.run_id}",
            "node_id": f"CR_{self.id}",
            "head_sha": "0" * 40,
            "head_branch": "main",
            "url": f"{repo_url}/actions/jobs/{self.id}",
            "html_url": f"{html}/actions/runs/{self.run_id}/job/{self.id}",
            "status": self.status,
            "conclusion": self.conclusion,
            "created_at": _rfc3339(self.queued_on),
            "started_at": _rfc3339(self.started_on or self.queued_on),
            "completed_at": _rfc3339(self.finished_on),
            "name": self.name,
            "steps": [],
            "check_run_url": f"{repo_url}/check-runs/{self.id}",
            "labels": list(self.runs_on),
            "runner_id": self.runner_id,
            "runner_name": self.runner_name,
            "runner_group_id": self.runner_group_id,
            "runner_group_name": group_name,
            "run_attempt": 1,
            "workflow_name": "CI",
        }


def run_status(jobs: Iterable[Job]) -> tuple[str, str | None]:
    """A workflow run's (status, conclusion) from its jobs: queued until one starts, completed when all are."""
    statuses = [job.status for job in jobs]
    if all(status == "completed" for status in statuses):
        failed = [job for job in jobs if job.conclusion != "success"]
        return "completed", "failure" if failed else "success"
    return ("queued" if all(status == "queued" for status in statuses) else "in_progress"), None


def run_json(api_url: str, run_id: int, jobs: list[Job]) -> JsonObject:
    """A workflow run as ``GET /repos/{owner}/{repo}/actions/runs`` lists it (the fields scalers read)."""
    first = jobs[0]
    status, conclusion = run_status(jobs)
    repo_url = f"{api_url}/{first.scope}"
    started = min((job.started_on for job in jobs if job.started_on), default=first.queued_on)
    return {
        "id": run_id,
        "name": "CI",
        "node_id": f"WFR_{run_id}",
        "head_branch": "main",
        "head_sha": "0" * 40,
        "run_number": run_id,
        "run_attempt": 1,
        "event": "push",
        "status": status,
        "conclusion": conclusion,
        "workflow_id": 1,
        "url": f"{repo_url}/actions/runs/{run_id}",
        "jobs_url": f"{repo_url}/actions/runs/{run_id}/jobs",
        "created_at": _rfc3339(first.queued_on),
        "updated_at": _rfc3339(datetime.now(UTC)),
        "run_started_at": _rfc3339(started),
    }


class JobBook:
    """Every job so far, by id, and the queued ones in queue order. The caller holds the double's lock."""

    def __init__(self) -> None:
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._run_ids = itertools.count(1)

    def add_run(
        self, scope: str, runs_on: Iterable[str], duration: float | None, count: int, now: float, name: str = "build"
    ) -> list[Job]:
        """One workflow run of ``count`` jobs (a matrix), queued now."""
        scopes_for(scope)
        run_id, labels = next(self._run_ids), tuple(runs_on)
        jobs = []
        for index in range(count):
            job_id = next(self._ids)
            job_name = name if count == 1 else f"{name} ({index + 1})"
            jobs.append(Job(job_id, run_id, job_id, scope, labels, duration, job_name, now))
        for job in jobs:
            self._jobs[job.id] = job
        return jobs

    def queued(self) -> list[Job]:
        """Jobs no runner has started, oldest first."""
        return [job for job in self._jobs.values() if job.started_at is None and job.finished_at is None]

    def get(self, job_id: int) -> Job | None:
        return self._jobs.get(job_id)

    def all(self) -> list[Job]:
        return list(self._jobs.values())

    def runs(self, scope: str) -> dict[int, list[Job]]:
        """The scope's workflow runs, newest first (as GitHub lists them), each with its jobs."""
        runs: dict[int, list[Job]] = {}
        for job in self._jobs.values():
            if job.scope == scope:
                runs.setdefault(job.run_id, []).append(job)
        return dict(sorted(runs.items(), reverse=True))


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()
