"""The runner scale set protocol of the simulator's Actions service (actions_service.py): its calls and their
unkind answers over HTTP, as a listener meets them (the shapes and sources are in that module's docstring)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from actions_runners_simulator.github_double import GitHubDouble
from actions_runners_simulator.runner import RunnerTimings, SimulatedRunners
from tests.conftest import wait_until
from tests.fakes import FakePodProcess

REPO = "octo/app"
CREDENTIAL = "ghp_simulator"


@dataclass
class Listener:
    """A listener's view of the service: the admin token's base and headers, its scale set and session."""

    double: GitHubDouble
    base: str
    admin: dict[str, str]
    scale_set: dict[str, Any]
    session: dict[str, Any]

    @property
    def queue(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.session['messageQueueAccessToken']}"}

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return requests.request(method, f"{self.base}{path}", headers=self.admin, timeout=10, **kwargs)

    def poll(self, last: int = 0, capacity: int = 10) -> requests.Response:
        return requests.get(
            self.session["messageQueueUrl"],
            params={"lastMessageId": last} if last else {},
            headers=self.queue | {"X-ScaleSetMaxCapacity": str(capacity)},
            timeout=10,
        )

    def next_message(self, last: int = 0, capacity: int = 10) -> dict[str, Any]:
        """The next message, acknowledged: its id, its job messages decoded, its statistics."""
        answer = self.poll(last, capacity)
        assert answer.status_code == 200, answer.text
        message = answer.json()
        assert message["messageType"] == "RunnerScaleSetJobMessages"
        assert requests.delete(f"{self.session['messageQueueUrl']}/{message['messageId']}", headers=self.queue).ok
        return message | {"jobs": json.loads(message["body"])}

    def acquire(self, request_ids: list[int]) -> requests.Response:
        return requests.post(
            f"{self.base}_apis/runtime/runnerscalesets/{self.scale_set['id']}/acquirejobs",
            json=request_ids,
            headers=self.queue,
            timeout=10,
        )


def admin_connection(double: GitHubDouble) -> tuple[str, dict[str, str]]:
    """The auth chain: a registration token, then runner-registration with it (RemoteAuth)."""
    token = requests.post(
        f"{double.api_url}/repos/{REPO}/actions/runners/registration-token",
        headers={"Authorization": f"Bearer {CREDENTIAL}"},
        timeout=10,
    ).json()["token"]
    answer = requests.post(
        f"{double.api_url}/actions/runner-registration",
        headers={"Authorization": f"RemoteAuth {token}"},
        json={"url": f"{double.url}/{REPO}", "runner_event": "register"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["url"], {"Authorization": f"Bearer {answer.json()['token']}"}


def open_listener(double: GitHubDouble, name: str = "linux-set") -> Listener:
    base, admin = admin_connection(double)
    scale_set = requests.post(
        f"{base}_apis/runtime/runnerscalesets?api-version=6.0-preview",
        headers=admin,
        json={"name": name, "runnerGroupId": 1, "labels": [{"name": name, "type": "System"}]},
        timeout=10,
    ).json()
    session = requests.post(
        f"{base}_apis/runtime/runnerscalesets/{scale_set['id']}/sessions",
        headers=admin,
        json={"ownerName": "listener-0"},
        timeout=10,
    ).json()
    return Listener(double, base, admin, scale_set, session)


@pytest.fixture
def double() -> Iterator[GitHubDouble]:
    double = GitHubDouble().start()
    double.service.long_poll_seconds = 0.5
    yield double
    double.stop()


class Runner:
    def __init__(self) -> None:
        self.events: list[str] = []

    def job_started(self) -> None:
        self.events.append("job_started")

    def job_finished(self) -> None:
        self.events.append("job_finished")

    def removed(self) -> None:
        self.events.append("removed")


def start_runner(listener: Listener, name: str) -> tuple[int, Runner]:
    """A runner of the scale set from its JIT config, connected as run.sh connects."""
    jit = listener.call(
        "POST", f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}/generatejitconfig", json={"name": name}
    )
    assert jit.status_code == 200, jit.text
    runner = Runner()
    listener.double.connect_jit_runner(
        github_url=None, encoded_jit_config=jit.json()["encodedJITConfig"], listener=runner
    )
    return jit.json()["runner"]["id"], runner


def test_a_job_goes_through_offer_acquisition_assignment_and_a_runner_of_the_set(double):
    listener = open_listener(double)
    empty = listener.poll()
    assert (empty.status_code, empty.content) == (202, b"")  # nothing came within the long poll
    (job,) = double.queue_jobs(f"{double.url}/{REPO}", ["linux-set"], 0.2)
    offered = listener.next_message()
    assert [(m["messageType"], m["runnerRequestId"]) for m in offered["jobs"]] == [("JobAvailable", job["id"])]
    assert offered["statistics"]["totalAvailableJobs"] == 1 and offered["statistics"]["totalAssignedJobs"] == 0
    assert listener.acquire([job["id"], 999]).json() == {"count": 1, "value": [job["id"]]}
    assigned = listener.next_message(offered["messageId"])
    assert [m["messageType"] for m in assigned["jobs"]] == ["JobAssigned"]
    assert assigned["statistics"]["totalAssignedJobs"] == 1
    runner_id, runner = start_runner(listener, "linux-set-runner-0")
    started = listener.next_message(assigned["messageId"])
    kinds = [(m["messageType"], m.get("runnerId"), m.get("result")) for m in started["jobs"]]
    if len(kinds) == 1:  # the job's end may come in a message of its own
        kinds += [(m["messageType"], m.get("runnerId"), m.get("result")) for m in listener.next_message()["jobs"]]
    assert kinds == [("JobStarted", runner_id, None), ("JobCompleted", runner_id, "succeeded")]
    wait_until(lambda: runner.events == ["job_started", "job_finished", "removed"], "the ephemeral runner's end")
    assert double.jobs()[0]["conclusion"] == "success" and double.jobs()[0]["runner_name"] == "linux-set-runner-0"


def test_a_second_session_is_refused_with_githubs_conflict_while_the_first_lives(double):
    listener = open_listener(double)
    path = f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}/sessions"
    second = listener.call("POST", path, json={"ownerName": "listener-1"})
    assert second.status_code == 409
    assert second.json()["typeName"] == "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException"
    assert "already has an active session for owner listener-0" in second.json()["message"]
    assert listener.call("DELETE", f"{path}/{listener.session['sessionId']}").status_code == 204
    assert listener.call("POST", path, json={"ownerName": "listener-1"}).status_code == 200


def test_expired_tokens_are_refused_until_renewed(double):
    listener = open_listener(double)
    double.queue_jobs(f"{double.url}/{REPO}", ["linux-set"], 0.2)
    double.service.expire_queue_tokens()
    assert listener.poll().status_code == 401
    assert listener.acquire([1]).status_code == 401
    path = f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}/sessions/{listener.session['sessionId']}"
    refreshed = listener.call("PATCH", path)
    assert refreshed.status_code == 200
    assert refreshed.json()["messageQueueAccessToken"] != listener.session["messageQueueAccessToken"]
    listener.session = refreshed.json()
    assert [m["messageType"] for m in listener.next_message()["jobs"]] == ["JobAvailable"]

    double.service.expire_admin_tokens()
    assert listener.call("GET", f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}").status_code == 401
    _, listener.admin = admin_connection(double)  # the chain again: a registration token, runner-registration
    assert listener.call("GET", f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}").status_code == 200


def test_a_busy_runner_cannot_be_deleted_it_is_job_still_running(double):
    listener = open_listener(double)
    runner_id, _ = start_runner(listener, "linux-set-runner-0")
    idle_id, _ = start_runner(listener, "linux-set-runner-1")
    double.start_job("linux-set-runner-0", None)
    agent = f"_apis/distributedtask/pools/0/agents/{runner_id}"
    refused = listener.call("DELETE", agent)
    assert refused.status_code == 400
    assert refused.json()["typeName"] == "GitHub.DistributedTask.WebApi.JobStillRunningException"
    assert listener.call("GET", agent).json()["busy"] is True
    assert listener.call("DELETE", f"_apis/distributedtask/pools/0/agents/{idle_id}").status_code == 204
    double.finish_job("linux-set-runner-0")  # an ephemeral runner is gone after its job
    assert listener.call("DELETE", agent).status_code == 204  # also when gone
    missing = listener.call("GET", agent)
    assert missing.status_code == 404
    assert missing.json()["typeName"] == "GitHub.DistributedTask.WebApi.AgentNotFoundException"


def test_a_scale_set_deleted_on_githubs_side_is_unknown_and_its_jobs_wait_for_another(double):
    listener = open_listener(double)
    (job,) = double.queue_jobs(f"{double.url}/{REPO}", ["linux-set"], 0.2)
    offered = listener.next_message()
    assert double.service.forget_scale_set(listener.scale_set["id"])
    set_path = f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}"
    for method, path in [("GET", set_path), ("POST", f"{set_path}/sessions")]:
        gone = listener.call(method, path, json={"ownerName": "listener-0"})
        assert gone.status_code == 404
        assert gone.json()["typeName"] == "GitHub.Actions.Runtime.WebApi.RunnerScaleSetNotFoundException"
    assert listener.poll(offered["messageId"]).status_code == 404
    assert double.jobs()[0]["status"] == "queued" and double.jobs()[0]["scale_set_id"] is None
    again = open_listener(double)  # re-registered under its name, as ARC's listener does since #4571
    assert again.scale_set["id"] != listener.scale_set["id"]
    message = again.next_message()
    assert message["messageId"] == 1  # message ids start anew on a new set (cloudbase/garm #506)
    assert [(m["messageType"], m["runnerRequestId"]) for m in message["jobs"]] == [("JobAvailable", job["id"])]


def test_a_job_not_acquired_is_offered_again_up_to_githubs_limit(double):
    double.service.offer_seconds = 0.3
    listener = open_listener(double)
    (job,) = double.queue_jobs(f"{double.url}/{REPO}", ["linux-set"], 0.2)
    last, offers = 0, []
    for _ in range(4):  # the first offer and three more, each ignored
        message = listener.next_message(last)
        last = message["messageId"]
        offers += [m["runnerRequestId"] for m in message["jobs"] if m["messageType"] == "JobAvailable"]
    assert offers == [job["id"]] * 4
    assert listener.poll(last).status_code == 202  # no fifth offer
    assert double.jobs()[0]["offers"] == 4 and double.jobs()[0]["status"] == "queued"
    assert listener.acquire([job["id"]]).json()["value"] == [job["id"]]  # it can still be acquired
    start_runner(listener, "linux-set-runner-0")
    wait_until(lambda: double.jobs()[0]["status"] == "completed", "the job to run")


def test_a_session_github_drops_is_gone_and_a_new_one_may_be_made(double):
    listener = open_listener(double)
    assert double.service.drop_session(listener.scale_set["id"])
    assert listener.poll().status_code == 404
    path = f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}/sessions"
    refresh = listener.call("PATCH", f"{path}/{listener.session['sessionId']}")
    assert refresh.status_code == 404 and refresh.json()["typeName"].endswith("RunnerAdminException")
    assert listener.call("POST", path, json={"ownerName": "listener-0"}).status_code == 200


def test_capacity_caps_the_jobs_offered_and_rate_limits_say_when_to_retry(double):
    listener = open_listener(double)
    listener.poll(capacity=2)
    double.queue_jobs(f"{double.url}/{REPO}", ["linux-set"], 0.2, count=5)
    first = listener.next_message(capacity=2)
    assert len(first["jobs"]) == 2 and first["statistics"]["totalAvailableJobs"] == 2
    assert listener.poll(first["messageId"], capacity=2).status_code == 202  # no more while two are in hand
    assert len(listener.next_message(first["messageId"], capacity=5)["jobs"]) == 3  # a larger capacity: the rest
    double.fail_next(429, retry_after=7, path_regex="runnerscalesets")
    limited = listener.call("GET", f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}")
    assert (limited.status_code, limited.headers["Retry-After"]) == (429, "7")
    assert listener.call("GET", f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}").status_code == 200


def jit_config_for_a_queued_job(double: GitHubDouble, seconds: float, runner_name: str) -> str:
    """A job queued for a scale set and acquired by its listener, and the JIT config of a runner for it."""
    listener = open_listener(double)
    double.queue_jobs(f"{double.url}/{REPO}", ["linux-set"], seconds)
    listener.acquire([m["runnerRequestId"] for m in listener.next_message()["jobs"]])
    path = f"_apis/runtime/runnerscalesets/{listener.scale_set['id']}/generatejitconfig"
    return listener.call("POST", path, json={"name": runner_name}).json()["encodedJITConfig"]


def test_a_runner_pod_given_only_a_scale_set_jit_config_takes_its_job_and_exits_as_an_ephemeral_runner(double):
    runners = SimulatedRunners(double, timings=RunnerTimings().faster(200))
    config = jit_config_for_a_queued_job(double, 0.1, "pod-0")
    pod = FakePodProcess("pod-0", {"ACTIONS_RUNNER_INPUT_JITCONFIG": config})  # as ARC's runner pods get it
    runners.start(pod)
    wait_until(lambda: pod.exit_codes == [0], "the runner to exit after its job")
    (record,) = double.jobs()
    assert (record["runner_name"], record["conclusion"], record["lost"]) == ("pod-0", "success", False)
    assert double.runners() == [] and runners.jobs_killed == []


def test_a_runner_process_stopped_mid_job_cancels_it_and_exits_as_run_sh_does(double):
    config = jit_config_for_a_queued_job(double, 60.0, "proc-0")
    env = {**os.environ, "ACTIONS_RUNNER_INPUT_JITCONFIG": config}
    process = subprocess.Popen(
        [sys.executable, "-m", "actions_runners_simulator", "runner"], env=env, stdout=subprocess.PIPE, text=True
    )
    guard = threading.Timer(30, process.kill)  # bounds the reads below
    guard.start()
    try:
        said = ""
        while "Running job" not in said and process.poll() is None:  # GitHub assigns it first; then the runner polls
            said += process.stdout.readline()  # type: ignore[union-attr]
        process.send_signal(signal.SIGTERM)
        output = said + process.communicate(timeout=30)[0]
    finally:
        guard.cancel()
        process.kill()
    assert process.returncode == 143, output  # run.sh's, with the runner image's RUNNER_MANUALLY_TRAP_SIG
    assert "Running job: build" in output and "completed with result: Canceled" in output
    (job,) = double.jobs()
    assert (job["status"], job["conclusion"], job["lost"], job["runner_name"]) == (
        "completed",
        "cancelled",
        True,
        "proc-0",
    )
    assert config not in output


def test_the_jobs_of_a_deleted_scale_set_go_to_another_that_its_runs_on_names(double):
    blue = open_listener(double, "blue")
    (job,) = double.queue_jobs(f"{double.url}/{REPO}", ["blue"], 0.2)
    assert [m["runnerRequestId"] for m in blue.next_message()["jobs"]] == [job["id"]]
    green = blue.call(
        "POST", "_apis/runtime/runnerscalesets", json={"name": "green", "labels": [{"name": "green"}, {"name": "blue"}]}
    ).json()
    assert blue.call("DELETE", f"_apis/runtime/runnerscalesets/{blue.scale_set['id']}").status_code == 204
    assert double.jobs()[0]["scale_set_id"] == green["id"]
    session = blue.call("POST", f"_apis/runtime/runnerscalesets/{green['id']}/sessions", json={"ownerName": "g"})
    green_listener = Listener(double, blue.base, blue.admin, green, session.json())
    offered = green_listener.next_message()
    assert [(m["messageType"], m["runnerRequestId"]) for m in offered["jobs"]] == [("JobAvailable", job["id"])]
