"""GitHub's job queue in the GitHub double (job_queue.py): jobs queued by their runs-on labels go, in queue order,
to idle runners that have those labels; the rest wait; GitHub's REST API lists them as a queue-polling scaler
reads them (runs with status=queued, then each run's jobs)."""

from __future__ import annotations

import threading
import time
from typing import Any

import requests

from actions_runners_simulator.github_double import GitHubDouble
from tests.conftest import wait_until

REPO = "octo/app"
CREDENTIAL = "ghp_simulator"


class Runner:
    """A persistent runner process: it records the jobs it is given, one at a time."""

    def __init__(self) -> None:
        self.busy, self.jobs, self.overlaps = False, 0, 0
        self._lock = threading.Lock()

    def job_started(self) -> None:
        with self._lock:
            self.overlaps += self.busy
            self.busy = True

    def job_finished(self) -> None:
        with self._lock:
            self.busy, self.jobs = False, self.jobs + 1

    def removed(self) -> None: ...


def rest(double: GitHubDouble, path: str, **params: Any) -> dict[str, Any]:
    answer = requests.get(
        f"{double.api_url}/repos/{REPO}{path}",
        params=params,
        headers={"Authorization": f"Bearer {CREDENTIAL}", "Accept": "application/vnd.github+json"},
        timeout=5,
    )
    answer.raise_for_status()
    return answer.json()


def register(double: GitHubDouble, name: str, labels: list[str], *, scope_url: str | None = None) -> Runner:
    url = scope_url or f"{double.url}/{REPO}"
    path = "/repos/" + REPO if scope_url is None else "/orgs/" + url.rsplit("/", 1)[1]
    token = requests.post(
        f"{double.api_url}{path}/actions/runners/registration-token",
        headers={"Authorization": f"Bearer {CREDENTIAL}"},
        timeout=5,
    ).json()["token"]
    runner = Runner()
    double.register_runner(github_url=url, token=token, name=name, labels=labels, ephemeral=False, listener=runner)
    return runner


def test_ten_jobs_on_a_pool_of_three_run_once_each_in_queue_order_and_unmatched_ones_wait(github):
    queued = github.queue_jobs(f"{github.url}/{REPO}", ["self-hosted", "Linux", "Fleet"], 0.3, count=10)
    gpu = github.queue_jobs(f"{github.url}/{REPO}", ["self-hosted", "gpu"], 0.3)
    # Nothing runs them yet: GitHub lists one run of ten queued jobs, and the GPU job's run, newest first.
    runs = rest(github, "/actions/runs", status="queued")
    assert [run["id"] for run in runs["workflow_runs"]] == [gpu[0]["run_id"], queued[0]["run_id"]]
    assert runs["total_count"] == 2 and runs["workflow_runs"][1]["status"] == "queued"
    jobs = rest(github, f"/actions/runs/{queued[0]['run_id']}/jobs", per_page=100)["jobs"]
    assert [(job["status"], job["labels"], job["runner_name"]) for job in jobs] == [
        ("queued", ["self-hosted", "Linux", "Fleet"], None)
    ] * 10

    pool = {f"pool-{index}": register(github, f"pool-{index}", ["fleet"]) for index in range(3)}
    register(github, "other", ["other-fleet"])  # Linux (config.sh's default), but not the fleet's: it takes none
    wait_until(lambda: all(job["status"] == "completed" for job in github.jobs()[:10]), "the ten jobs", 20)

    records = github.jobs()
    ten, waiting = records[:10], records[10]
    assert [job["id"] for job in ten] == [job["id"] for job in queued]
    assert all(job["conclusion"] == "success" and not job["lost"] for job in ten)
    assert {job["runner_name"] for job in ten} == set(pool)  # only the pool's runners, every one of them
    assert sum(runner.jobs for runner in pool.values()) == 10 and not any(r.overlaps for r in pool.values())
    starts = [job["started_at"] for job in ten]
    assert starts == sorted(starts)  # in queue order
    waits = [job["wait_seconds"] for job in ten]
    assert all(wait >= 0 for wait in waits) and waits[-1] >= 0.9  # the last waited three jobs' turns
    assert waiting["status"] == "queued" and waiting["runner_name"] is None
    assert [run["id"] for run in rest(github, "/actions/runs", status="queued")["workflow_runs"]] == [gpu[0]["run_id"]]
    listed = rest(github, f"/actions/runs/{queued[0]['run_id']}/jobs", per_page=100)["jobs"]
    assert {job["runner_name"] for job in listed} == set(pool)
    assert all(job["status"] == "completed" and job["conclusion"] == "success" for job in listed)
    assert rest(github, "/actions/runs", status="completed")["workflow_runs"][0]["conclusion"] == "success"


def test_labels_match_case_insensitively_and_every_runner_is_self_hosted(github):
    org_url = f"{github.url}/octo"
    register(github, "org-gpu", ["GPU"], scope_url=org_url)  # the organization's runner serves its repositories
    github.queue_jobs(f"{github.url}/{REPO}", ["self-hosted", "gpu"], None)
    wait_until(lambda: github.jobs()[0]["status"] == "in_progress", "the GPU job to start")
    assert github.jobs()[0]["runner_name"] == "org-gpu"
    github.finish_job("org-gpu")
    assert github.jobs()[0]["conclusion"] == "success"


def test_a_job_waits_no_longer_than_the_queue_limit():
    double = GitHubDouble(queue_limit_seconds=0.2).start()
    try:
        double.queue_jobs(f"{double.url}/{REPO}", ["linux"], 1.0)
        wait_until(lambda: rest(double, "/actions/runs", status="failure")["total_count"] == 1, "the job to fail", 5)
        (job,) = double.jobs()
        assert (job["status"], job["conclusion"], job["runner_name"]) == ("completed", "failure", None)
        assert "24 hours" in job["failure"]
    finally:
        double.stop()


def test_a_job_whose_runner_stops_is_recorded_lost(github):
    register(github, "pool-0", ["linux"])
    github.queue_jobs(f"{github.url}/{REPO}", ["linux"], None)
    wait_until(lambda: github.jobs()[0]["status"] == "in_progress", "the job to start")
    github.runner_offline(github.runners()[0]["id"])  # the runner process stopped mid-job
    (job,) = github.jobs()
    assert (job["status"], job["conclusion"], job["lost"]) == ("completed", "failure", True)
    assert "stopped" in job["failure"]


def test_a_lost_jobs_end_does_not_end_the_next_job_of_its_runner(github):
    runner = register(github, "pool-0", ["fleet"])
    runner_id = github.runners()[0]["id"]
    github.queue_jobs(f"{github.url}/{REPO}", ["fleet"], 0.5)
    wait_until(lambda: runner.busy, "the first job to start")
    github.end_session(runner_id, gracefully=True)  # stopped mid-job: the job is lost
    assert github.open_session(f"{github.url}/{REPO}", runner_id, runner).value == "opened"
    github.queue_jobs(f"{github.url}/{REPO}", ["fleet"], 3.0)
    wait_until(lambda: github.jobs()[1]["status"] == "in_progress", "the second job to start")
    time.sleep(0.8)  # past the first job's end
    first, second = github.jobs()
    assert (first["conclusion"], first["lost"]) == ("failure", True)
    assert second["status"] == "in_progress"  # the first job's timer did not end it
