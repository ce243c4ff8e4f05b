"""Contract and behaviour tests for the loopback GitHub double (actions_runners_simulator.github_double).

Every REST response exercised here is checked against GitHub's own OpenAPI description (tests/contracts/).
That description documents few error statuses: for the runner operations it has 201/200/204, 422 for
RemoveRunner and 404/409/422 for generate-jitconfig, but no 401, no 404 on get/delete runner, no 403/429
rate limits and no 5xx. Those are checked to be undescribed (so this test notices when a newer contract adds
them) and their bodies are validated against the contract's ``basic-error`` schema instead.
"""

from __future__ import annotations

import base64
import concurrent.futures
import functools
import json
import logging
import pathlib
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime

import jwt
import pytest
import requests
from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest, RequestsOpenAPIResponse
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_core.validation.response.exceptions import InvalidData
from openapi_schema_validator import OAS30Validator

from actions_runners_simulator.github_apps import new_private_key
from actions_runners_simulator.github_double import REGISTRATION_NOT_FOUND, GitHubDouble, RegistrationRefused
from actions_runners_simulator.runner import RunnerTimings, SimulatedRunners
from tests.fakes import FakePodProcess

CONTRACTS = pathlib.Path(__file__).parent / "contracts"
CREDENTIAL = "ghp_simulator"
RUNNER_DOCS = "https://docs.github.com/rest/actions/self-hosted-runners"
SECONDARY_LIMIT = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."


# --- contract checking ------------------------------------------------------------------------------------


@functools.cache
def contract(name: str) -> tuple[OpenAPI, dict]:
    """The parsed contract and its raw JSON; loaded once, as parsing takes about a second."""
    path = CONTRACTS / f"github-runners.{name}.openapi.json"
    return OpenAPI.from_file_path(str(path)), json.loads(path.read_text())


def assert_matches_contract(response: requests.Response, *, described: bool = True) -> None:
    """Validate as if the request had gone to https://api.github.com, the contract's only server.

    With ``described=False`` the contract must have no response for this status (so the test notices when it
    gains one); the body is then validated as GitHub's ``basic-error``, the shape of its error answers.
    """
    sent = response.request
    path_and_query = sent.url.split("/api/v3", 1)[1]
    openapi, raw = contract("ghec" if path_and_query.startswith("/enterprises/") else "api.github.com")
    as_sent_to_github = requests.Request(
        sent.method, "https://api.github.com" + path_and_query, headers=dict(sent.headers), data=sent.body
    ).prepare()
    check = functools.partial(
        openapi.validate_response,
        RequestsOpenAPIRequest(as_sent_to_github),
        RequestsOpenAPIResponse(response),
    )
    if described:
        check()
        return
    with pytest.raises(ResponseNotFound):
        check()
    OAS30Validator(raw["components"]["schemas"]["basic-error"]).validate(response.json())


# --- helpers ----------------------------------------------------------------------------------------------


class RecordingListener:
    """A simulated runner process that records what the double tells it."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._changed = threading.Condition()

    def _record(self, event: str) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def job_started(self) -> None:
        self._record("job_started")

    def job_finished(self) -> None:
        self._record("job_finished")

    def removed(self) -> None:
        self._record("removed")

    def wait_for(self, event: str, timeout: float = 3.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: event in self.events, timeout)


def wait_for(condition: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def call(double: GitHubDouble, method: str, path: str, *, credential: str = CREDENTIAL, **kwargs) -> requests.Response:
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    if credential:
        headers["Authorization"] = f"Bearer {credential}"
    return requests.request(method, double.api_url + path, headers=headers, timeout=5, **kwargs)


def config_url(double: GitHubDouble, scope: str) -> str:
    """The config.sh --url for a scope: URL/OWNER/REPO, URL/ORG or URL/enterprises/ENT."""
    kind, _, rest = scope.partition("/")
    return f"{double.url}/{'enterprises/' if kind == 'enterprises' else ''}{rest}"


def registration_token(double: GitHubDouble, scope: str) -> str:
    response = call(double, "POST", f"/{scope}/actions/runners/registration-token")
    assert response.status_code == 201
    return response.json()["token"]


def register(
    double: GitHubDouble,
    scope: str,
    name: str,
    *,
    ephemeral: bool = False,
    labels: tuple[str, ...] = (),
    token: str | None = None,
) -> tuple[int, RecordingListener]:
    """Register as config.sh would, with a fresh registration token unless one is given."""
    listener = RecordingListener()
    runner_id = double.register_runner(
        github_url=config_url(double, scope),
        token=token or registration_token(double, scope),
        name=name,
        labels=labels,
        ephemeral=ephemeral,
        listener=listener,
    )
    return runner_id, listener


# --- tokens and registration ------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["repos/octo/app", "orgs/octo", "enterprises/megacorp"])
def test_registration_and_remove_tokens_are_fresh_and_match_the_contract(github, scope):
    before = time.time()
    responses = [
        call(github, "POST", f"/{scope}/actions/runners/{kind}")
        for kind in ("registration-token", "registration-token", "remove-token")
    ]
    tokens = set()
    for response in responses:
        assert response.status_code == 201
        assert_matches_contract(response)
        body = response.json()
        assert re.fullmatch(r"[A-Z0-9]{29}", body["token"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", body["expires_at"])
        expires = datetime.fromisoformat(body["expires_at"]).timestamp()
        assert before + 3600 - 2 <= expires <= time.time() + 3600 + 2
        tokens.add(body["token"])
    assert len(tokens) == 3


def test_registered_runner_is_served_in_its_scope_only(github):
    repo_runner, _ = register(github, "repos/octo/app", "runner-a", labels=("gpu", "self-hosted"))
    org_runner, _ = register(github, "orgs/octo", "runner-b")

    response = call(github, "GET", f"/repos/octo/app/actions/runners/{repo_runner}")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert_matches_contract(response)
    assert response.json() == {
        "id": 1,
        "name": "runner-a",
        "os": "Linux",
        "status": "online",
        "busy": False,
        "ephemeral": False,
        "runner_group_id": 1,
        "labels": [
            {"id": 1, "name": "self-hosted", "type": "read-only"},
            {"id": 2, "name": "Linux", "type": "read-only"},
            {"id": 3, "name": "X64", "type": "read-only"},
            {"id": 4, "name": "gpu", "type": "custom"},
        ],
    }
    assert (repo_runner, org_runner) == (1, 2)

    org_list = call(github, "GET", "/orgs/octo/actions/runners")
    assert_matches_contract(org_list)
    assert [runner["id"] for runner in org_list.json()["runners"]] == [org_runner]

    elsewhere = call(github, "GET", f"/orgs/octo/actions/runners/{repo_runner}")
    assert elsewhere.status_code == 404
    assert elsewhere.json() == {
        "message": "Not Found",
        "documentation_url": f"{RUNNER_DOCS}#get-a-self-hosted-runner-for-an-organization",
        "status": "404",
    }
    assert_matches_contract(elsewhere, described=False)
    assert call(github, "DELETE", f"/orgs/octo/actions/runners/{repo_runner}").status_code == 404
    assert [(runner["id"], runner["scope"]) for runner in github.runners()] == [
        (1, "repos/octo/app"),
        (2, "orgs/octo"),
    ]


def test_expired_registration_token_is_refused():
    double = GitHubDouble(token_lifetime=0.2).start()
    try:
        token = registration_token(double, "repos/octo/app")
        listener = RecordingListener()
        runner = dict(github_url=config_url(double, "repos/octo/app"), token=token, labels=(), ephemeral=False)
        assert double.register_runner(name="early", listener=listener, **runner) == 1
        time.sleep(0.3)
        with pytest.raises(RegistrationRefused, match=re.escape(REGISTRATION_NOT_FOUND)):
            double.register_runner(name="late", listener=listener, **runner)
        assert [runner["name"] for runner in double.runners()] == ["early"]
    finally:
        double.stop()


@pytest.mark.parametrize(
    ("url_suffix", "token_kind", "problem"),
    [
        ("/octo/other", "repo", "issued for repos/octo/app"),
        ("/octo", "repo", "issued for repos/octo/app"),
        ("/enterprises/octo", "repo", "issued for repos/octo/app"),
        ("/octo/app", "unknown", re.escape(REGISTRATION_NOT_FOUND)),
        ("/octo/app", "remove", re.escape(REGISTRATION_NOT_FOUND)),
        ("/octo/app/extra", "repo", "names no repository"),
    ],
)
def test_registration_needs_a_registration_token_of_the_same_scope(github, url_suffix, token_kind, problem):
    remove_token = call(github, "POST", "/repos/octo/app/actions/runners/remove-token").json()["token"]
    tokens = {
        "repo": registration_token(github, "repos/octo/app"),
        "unknown": "A" * 29,
        "remove": remove_token,
    }
    with pytest.raises(RegistrationRefused, match=problem):
        github.register_runner(
            github_url=github.url + url_suffix,
            token=tokens[token_kind],
            name="r",
            labels=(),
            ephemeral=False,
            listener=RecordingListener(),
        )
    assert github.runners() == []


def test_registration_url_of_another_server_is_refused(github):
    with pytest.raises(RegistrationRefused, match="not served by this double"):
        github.register_runner(
            github_url="https://github.com/octo/app",
            token=registration_token(github, "repos/octo/app"),
            name="r",
            labels=(),
            ephemeral=False,
            listener=RecordingListener(),
        )


def test_registering_an_existing_name_replaces_that_runner_keeping_its_id(github):
    """config.sh --replace updates the existing registration (actions/runner's ReplaceAgentAsync): same id, the
    old runner's session ended."""
    old_id, old_listener = register(github, "repos/octo/app", "pod-0")
    other_scope_id, other_scope_listener = register(github, "orgs/octo", "pod-0")
    later_id, _ = register(github, "repos/octo/app", "pod-1")
    new_id, new_listener = register(github, "repos/octo/app", "pod-0")

    assert old_listener.events == ["removed"]
    assert other_scope_listener.events == new_listener.events == []
    assert new_id == old_id < other_scope_id
    listed = call(github, "GET", "/repos/octo/app/actions/runners").json()
    assert [runner["id"] for runner in listed["runners"]] == [new_id, later_id], "still in id order"


# --- jobs, RemoveRunner, ephemeral and offline runners ----------------------------------------------------


def test_remove_runner_is_refused_while_busy_and_succeeds_once_idle(github):
    runner_id, listener = register(github, "repos/octo/app", "busy-bee")
    github.start_job("busy-bee", None)  # held until finished below, however slow the machine

    refused = call(github, "DELETE", f"/repos/octo/app/actions/runners/{runner_id}")
    assert refused.status_code == 422
    assert refused.json() == {
        "message": 'Bad request - Runner "busy-bee" is still running a job"',
        "documentation_url": f"{RUNNER_DOCS}#delete-a-self-hosted-runner-from-a-repository",
        "status": "422",
    }
    assert_matches_contract(refused)
    assert call(github, "GET", f"/repos/octo/app/actions/runners/{runner_id}").json()["busy"] is True

    github.finish_job("busy-bee")
    assert listener.wait_for("job_finished")
    removed = call(github, "DELETE", f"/repos/octo/app/actions/runners/{runner_id}")
    assert removed.status_code == 204
    assert removed.content == b""
    assert "Content-Length" not in removed.headers
    assert_matches_contract(removed)
    assert listener.events == ["job_started", "job_finished", "removed"]

    again = call(github, "DELETE", f"/repos/octo/app/actions/runners/{runner_id}")
    assert again.status_code == 404
    assert again.json()["documentation_url"] == f"{RUNNER_DOCS}#delete-a-self-hosted-runner-from-a-repository"
    assert_matches_contract(again, described=False)


def test_ephemeral_runner_is_removed_after_its_job(github):
    ephemeral_id, ephemeral = register(github, "orgs/octo", "once", ephemeral=True)
    lasting_id, lasting = register(github, "orgs/octo", "again")
    github.start_job("once", 0.05)
    github.start_job("again", 0.05)

    assert ephemeral.wait_for("removed")
    assert lasting.wait_for("job_finished")
    assert ephemeral.events == ["job_started", "job_finished", "removed"]
    assert lasting.events == ["job_started", "job_finished"]
    assert call(github, "GET", f"/orgs/octo/actions/runners/{ephemeral_id}").status_code == 404
    assert [runner["id"] for runner in github.runners("orgs/octo")] == [lasting_id]


def test_an_ephemeral_runner_that_loses_its_job_assignment_loses_its_registration_without_a_word(github):
    """actions/runner#4617: the registration is consumed by the assignment; the listener is never told."""
    once_id, once = register(github, "orgs/octo", "once", ephemeral=True)
    register(github, "orgs/octo", "lasting")
    register(github, "orgs/octo", "busy", ephemeral=True)
    github.start_job("busy", None)

    assert github.lose_job_assignment("once") == once_id
    assert call(github, "GET", f"/orgs/octo/actions/runners/{once_id}").status_code == 404
    assert sorted(runner["name"] for runner in github.runners("orgs/octo")) == ["busy", "lasting"]
    time.sleep(0.1)
    assert once.events == []
    with pytest.raises(LookupError):
        github.lose_job_assignment("lasting")  # a persistent runner's registration outlives its jobs
    with pytest.raises(LookupError):
        github.lose_job_assignment("busy")  # it acquired its job


def test_offline_runner_keeps_its_registration_loses_its_job_and_takes_no_new_one(github):
    runner_id, listener = register(github, "repos/octo/app", "gone")
    github.start_job("gone", 0.1)
    github.runner_offline(runner_id)

    runner = call(github, "GET", f"/repos/octo/app/actions/runners/{runner_id}").json()
    assert (runner["status"], runner["busy"]) == ("offline", False)
    with pytest.raises(LookupError):
        github.start_job("gone", 0.1)
    time.sleep(0.2)
    assert listener.events == ["job_started"]
    github.runner_offline(999)  # an unknown id: a runner whose registration is already gone


def test_start_job_needs_an_online_idle_runner_of_that_name(github):
    register(github, "repos/octo/app", "worker")
    with pytest.raises(LookupError):
        github.start_job("nobody", 1)
    with pytest.raises(LookupError):
        github.start_job("worker", 1, scope="orgs/octo")
    github.start_job("worker", 0.2, scope="repos/octo/app")
    with pytest.raises(LookupError):
        github.start_job("worker", 1)


def test_hundreds_of_jobs_end_without_a_thread_each(github):
    token = registration_token(github, "orgs/octo")
    listeners = [register(github, "orgs/octo", f"runner-{index}", token=token)[1] for index in range(200)]
    threads_before = threading.active_count()
    for index in range(200):
        github.start_job(f"runner-{index}", 0.2)
    assert threading.active_count() <= threads_before + 1
    assert all(listener.wait_for("job_finished") for listener in listeners)
    assert not any(runner["busy"] for runner in github.runners())


# --- just-in-time runners ---------------------------------------------------------------------------------


def generate_jitconfig(
    double: GitHubDouble, scope: str, name: str, *, credential: str = CREDENTIAL, **body: object
) -> requests.Response:
    """POST generate-jitconfig with a valid body, which ``body`` amends."""
    payload = {"name": name, "runner_group_id": 1, "labels": ["self-hosted", "gpu"]} | body
    path = f"/{scope}/actions/runners/generate-jitconfig"
    return call(double, "POST", path, credential=credential, json=payload)


def jit_runner(double: GitHubDouble, scope: str, name: str) -> tuple[int, str]:
    """A just-in-time registration: its runner id and its encoded config."""
    response = generate_jitconfig(double, scope, name)
    assert response.status_code == 201
    return response.json()["runner"]["id"], response.json()["encoded_jit_config"]


def connect(double: GitHubDouble, scope: str, config: str) -> tuple[int, RecordingListener]:
    """What ./run.sh --jitconfig does in a pod whose GITHUB_URL names ``scope``."""
    listener = RecordingListener()
    runner_id = double.connect_jit_runner(
        github_url=config_url(double, scope), encoded_jit_config=config, listener=listener
    )
    return runner_id, listener


def assert_connect_refused(double: GitHubDouble, github_url: str, config: str, problem: str) -> None:
    """run.sh is refused, and the refusal (which gets recorded and logged) does not quote the config."""
    with pytest.raises(RegistrationRefused, match=problem) as refused:
        double.connect_jit_runner(github_url=github_url, encoded_jit_config=config, listener=RecordingListener())
    assert config not in str(refused.value)


@pytest.mark.parametrize("scope", ["repos/octo/app", "orgs/octo", "enterprises/megacorp"])
def test_generate_jitconfig_creates_an_offline_ephemeral_registration(github, scope, caplog):
    caplog.set_level(logging.DEBUG)
    register(github, scope, "classic")
    response = generate_jitconfig(github, scope, "jit-0", work_folder="_work")
    assert response.status_code == 201
    assert_matches_contract(response)
    runner = {
        "id": 2,
        "name": "jit-0",
        "os": "Linux",
        "status": "offline",
        "busy": False,
        "ephemeral": True,
        "runner_group_id": 1,
        # Only what generate-jitconfig was given: no defaults added (see _RunnerRegistry._labels).
        "labels": [{"id": 1, "name": "self-hosted", "type": "custom"}, {"id": 4, "name": "gpu", "type": "custom"}],
    }
    config = response.json()["encoded_jit_config"]
    assert response.json() == {"runner": runner, "encoded_jit_config": config}
    assert call(github, "GET", f"/{scope}/actions/runners/2").json() == runner
    assert [(listed["name"], listed["status"]) for listed in github.runners(scope)] == [
        ("classic", "online"),
        ("jit-0", "offline"),
    ]
    # Opaque and secret: no name or scope in clear, one per runner, in no log and not in the call log.
    assert len(config) >= 40 and "jit-0" not in config and scope not in config
    assert generate_jitconfig(github, scope, "jit-1").json()["encoded_jit_config"] != config
    assert config not in caplog.text
    assert config not in json.dumps(github.calls())


def test_generate_jitconfig_refuses_a_name_that_exists_in_the_scope(github):
    assert generate_jitconfig(github, "orgs/octo", "jit-0").status_code == 201
    register(github, "orgs/octo", "classic")
    for name in ["jit-0", "jit-0", "classic"]:  # a repeat, again, and a runner that config.sh registered
        conflict = generate_jitconfig(github, "orgs/octo", name, labels=["other"])
        assert conflict.status_code == 409
        assert_matches_contract(conflict)
        assert conflict.json() == {
            "message": f"Already exists - A runner with the name {name} already exists.",
            "documentation_url": f"{RUNNER_DOCS}#create-configuration-for-a-just-in-time-runner-for-an-organization",
            "status": "409",
        }
    assert generate_jitconfig(github, "repos/octo/app", "jit-0").status_code == 201  # another scope
    org_runners = github.runners("orgs/octo")
    assert [(runner["id"], runner["name"]) for runner in org_runners] == [(1, "jit-0"), (2, "classic")]
    assert [label["name"] for label in org_runners[0]["labels"]][-1] == "gpu"  # the 409s changed nothing


def test_generate_jitconfig_retried_after_a_lost_response_gets_409(github):
    github.delay_next(0.4, path_regex="/generate-jitconfig$")
    with pytest.raises(requests.ReadTimeout):
        requests.post(
            f"{github.api_url}/repos/octo/app/actions/runners/generate-jitconfig",
            headers={"Authorization": f"Bearer {CREDENTIAL}"},
            json={"name": "jit-0", "runner_group_id": 1, "labels": ["gpu"]},
            timeout=(1, 0.1),
        )
    deadline = time.monotonic() + 3
    while github.calls()[0]["status"] is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert github.calls()[0]["status"] == 201  # served, but the client never saw its config
    retry = generate_jitconfig(github, "repos/octo/app", "jit-0")
    assert retry.status_code == 409
    assert_matches_contract(retry)
    assert [runner["name"] for runner in github.runners()] == ["jit-0"]


_LABELS_PROBLEM = '"labels" must be 1 to 100 non-empty strings.'


@pytest.mark.parametrize(
    ("amend", "problem"),
    [
        ({"name": None}, '"name" wasn\'t supplied.'),
        ({"runner_group_id": None}, '"runner_group_id" wasn\'t supplied.'),
        ({"labels": None}, '"labels" wasn\'t supplied.'),
        ({"name": ""}, '"name" must be a non-empty string.'),
        ({"name": 7}, '"name" must be a non-empty string.'),
        ({"runner_group_id": "1"}, '"runner_group_id" must be an integer.'),
        ({"runner_group_id": True}, '"runner_group_id" must be an integer.'),
        ({"labels": []}, _LABELS_PROBLEM),
        ({"labels": [f"label-{n}" for n in range(101)]}, _LABELS_PROBLEM),
        ({"labels": ["gpu", 3]}, _LABELS_PROBLEM),
        ({"labels": ["gpu", ""]}, _LABELS_PROBLEM),
        ({"labels": "gpu"}, _LABELS_PROBLEM),
        ({"work_folder": 5}, '"work_folder" must be a string.'),
        (None, "The request body must be a JSON object."),
    ],
)
def test_generate_jitconfig_answers_an_invalid_body_with_422(github, amend, problem):
    valid = {"name": "jit-0", "runner_group_id": 1, "labels": ["gpu"]}
    body = ["jit-0"] if amend is None else {key: value for key, value in (valid | amend).items() if value is not None}
    response = call(github, "POST", "/repos/octo/app/actions/runners/generate-jitconfig", json=body)
    assert response.status_code == 422
    assert_matches_contract(response)
    assert response.json() == {
        "message": "Validation Failed",
        "documentation_url": f"{RUNNER_DOCS}#create-configuration-for-a-just-in-time-runner-for-a-repository",
        "status": "422",
        "errors": [problem],
    }
    assert github.runners() == []


def test_generate_jitconfig_takes_up_to_100_labels_but_needs_json_and_a_known_runner_group(github):
    hundred = generate_jitconfig(github, "orgs/octo", "many", labels=[f"label-{n}" for n in range(100)])
    assert hundred.status_code == 201
    assert len(hundred.json()["runner"]["labels"]) == 100, "no defaults added to a just-in-time runner"
    path = "/orgs/octo/actions/runners/generate-jitconfig"
    unparsable = call(github, "POST", path, data="{name")
    assert (unparsable.status_code, unparsable.json()["message"]) == (400, "Problems parsing JSON")
    assert_matches_contract(unparsable, described=False)
    empty = call(github, "POST", path)
    assert (empty.status_code, empty.json()["errors"]) == (422, ["The request body must be a JSON object."])
    assert_matches_contract(empty)
    unknown_group = generate_jitconfig(github, "orgs/octo", "jit-0", runner_group_id=2)
    assert unknown_group.status_code == 404
    assert_matches_contract(unknown_group)
    assert [runner["name"] for runner in github.runners()] == ["many"]


def test_jit_runner_connects_once_and_is_removed_after_its_one_job(github):
    runner_id, config = jit_runner(github, "repos/octo/app", "jit-0")
    connected_id, listener = connect(github, "repos/octo/app", config)
    assert connected_id == runner_id
    online = call(github, "GET", f"/repos/octo/app/actions/runners/{runner_id}")
    assert_matches_contract(online)
    assert (online.json()["status"], online.json()["busy"], online.json()["ephemeral"]) == ("online", False, True)
    assert_connect_refused(github, config_url(github, "repos/octo/app"), config, "used already")

    github.start_job("jit-0", 0.3)
    busy = call(github, "DELETE", f"/repos/octo/app/actions/runners/{runner_id}")
    assert busy.status_code == 422
    assert_matches_contract(busy)
    assert busy.json()["message"] == 'Bad request - Runner "jit-0" is still running a job"'
    assert listener.wait_for("removed")
    assert listener.events == ["job_started", "job_finished", "removed"]
    assert call(github, "GET", f"/repos/octo/app/actions/runners/{runner_id}").status_code == 404
    assert github.runners() == []
    assert_connect_refused(github, config_url(github, "repos/octo/app"), config, "gone")


def test_jit_connect_is_refused_once_the_registration_is_removed(github):
    scope, url = "orgs/octo", config_url(github, "orgs/octo")
    removed_id, removed_config = jit_runner(github, scope, "never-connected")
    deleted = call(github, "DELETE", f"/{scope}/actions/runners/{removed_id}")
    assert deleted.status_code == 204
    assert_matches_contract(deleted)
    assert_connect_refused(github, url, removed_config, "gone")

    idle_id, idle_config = jit_runner(github, scope, "idle")
    _, listener = connect(github, scope, idle_config)
    assert call(github, "DELETE", f"/{scope}/actions/runners/{idle_id}").status_code == 204
    assert listener.events == ["removed"]
    assert_connect_refused(github, url, idle_config, "gone")

    _, replaced_config = jit_runner(github, scope, "replaced")
    register(github, scope, "replaced")  # config.sh --replace takes the name over
    assert_connect_refused(github, url, replaced_config, "gone")
    assert [runner["name"] for runner in github.runners()] == ["replaced"]


def test_jit_config_of_another_scope_or_server_or_forged_is_refused(github):
    runner_id, config = jit_runner(github, "orgs/octo", "jit-0")
    other = GitHubDouble().start()
    try:
        _, foreign_config = jit_runner(other, "orgs/octo", "jit-0")
    finally:
        other.stop()
    fields = json.loads(base64.b64decode(config))
    forged = base64.b64encode(json.dumps(fields | {"secret": "guessed"}).encode()).decode()
    url = config_url(github, "orgs/octo")
    for github_url, candidate, problem in [
        (config_url(github, "repos/octo/app"), config, "for orgs/octo, not .* for repos/octo/app"),
        ("https://github.com/octo", config, "not served by this double"),
        (url, foreign_config, f"issued by {other.url}"),
        (url, forged, "gone"),
        (url, "not base64!", "malformed"),
        (url, base64.b64encode(b'{"runner_id": "1"}').decode(), "malformed"),
    ]:
        assert_connect_refused(github, github_url, candidate, problem)
    assert github.runners()[0]["status"] == "offline"
    assert connect(github, "orgs/octo", config)[0] == runner_id  # the refusals did not use the config up


def test_simulated_runner_boots_from_a_jit_config_once(github):
    runners = SimulatedRunners(github, timings=RunnerTimings().faster(200))
    runner_id, config = jit_runner(github, "orgs/octo", "jit-pod")
    url = config_url(github, "orgs/octo")
    env = {
        "ACTIONS_RUNNER_INPUT_NAME": "jit-pod",
        "ACTIONS_RUNNER_INPUT_URL": url,
        "ACTIONS_RUNNER_INPUT_JITCONFIG": config,
    }
    pod = FakePodProcess("jit-pod", env)
    runners.start(pod)
    assert wait_for(lambda: github.runners()[0]["status"] == "online")

    again = FakePodProcess("jit-pod-again", dict(env))  # a second pod with the same Secret
    runners.start(again)
    assert wait_for(lambda: again.exit_codes == [0])  # the listener's 1, which run.sh turns into 0
    assert [(name, "used already" in problem) for name, problem in runners.registrations_refused] == [("jit-pod", True)]
    assert config not in str(runners.registrations_refused)

    github.start_job("jit-pod", 0.05)
    assert wait_for(lambda: pod.exit_codes == [0])  # the ephemeral runner exits after its one job
    assert github.runners() == []
    assert runners.jobs_killed == []

    token_pod = FakePodProcess(
        "classic",
        {
            "ACTIONS_RUNNER_INPUT_NAME": "classic",
            "ACTIONS_RUNNER_INPUT_URL": url,
            "ACTIONS_RUNNER_INPUT_TOKEN": registration_token(github, "orgs/octo"),
        },
    )
    runners.start(token_pod)  # the registration-token path is unchanged
    assert wait_for(lambda: [runner["name"] for runner in github.runners()] == ["classic"])
    assert github.runners()[0]["id"] == runner_id + 1


# --- listing and pagination -------------------------------------------------------------------------------


def test_pagination_walk_follows_github_link_headers(github):
    for index in range(7):
        register(github, "repos/octo/app", f"runner-{index}")
    base = f"{github.api_url}/repos/octo/app/actions/runners?per_page=3"
    expected_links = [
        f'<{base}&page=2>; rel="next", <{base}&page=3>; rel="last"',
        f'<{base}&page=1>; rel="prev", <{base}&page=3>; rel="next", <{base}&page=3>; rel="last", '
        f'<{base}&page=1>; rel="first"',
        f'<{base}&page=2>; rel="prev", <{base}&page=1>; rel="first"',
    ]

    seen_ids, links = [], []
    response = call(github, "GET", "/repos/octo/app/actions/runners", params={"per_page": 3})
    while True:
        assert response.status_code == 200
        assert_matches_contract(response)
        assert response.json()["total_count"] == 7
        seen_ids += [runner["id"] for runner in response.json()["runners"]]
        links.append(response.headers["Link"])
        if "next" not in response.links:
            break
        response = requests.get(
            response.links["next"]["url"], headers={"Authorization": f"token {CREDENTIAL}"}, timeout=5
        )
    assert links == expected_links
    assert seen_ids == list(range(1, 8))


def test_list_defaults_to_30_caps_at_100_and_filters_by_exact_name(github):
    token = registration_token(github, "orgs/octo")
    for index in range(150):
        register(github, "orgs/octo", f"runner-{index}", token=token)

    default = call(github, "GET", "/orgs/octo/actions/runners")
    assert (default.json()["total_count"], len(default.json()["runners"])) == (150, 30)
    assert default.headers["Link"].endswith(f'<{github.api_url}/orgs/octo/actions/runners?page=5>; rel="last"')
    capped = call(github, "GET", "/orgs/octo/actions/runners", params={"per_page": 500})
    assert len(capped.json()["runners"]) == 100

    named = call(github, "GET", "/orgs/octo/actions/runners", params={"name": "runner-1"})
    assert_matches_contract(named)
    assert [runner["name"] for runner in named.json()["runners"]] == ["runner-1"]
    assert named.json()["total_count"] == 1
    assert "Link" not in named.headers
    nobody = call(github, "GET", "/orgs/octo/actions/runners", params={"name": "runner-"})
    assert nobody.json() == {"total_count": 0, "runners": []}


@pytest.mark.parametrize("scope", ["repos/octo/app", "orgs/octo", "enterprises/megacorp"])
def test_the_name_filter_answers_that_name_only_in_every_scope_as_the_contract_describes(github, scope):
    token = registration_token(github, scope)
    for index in range(120):
        register(github, scope, f"runner-{index}", token=token)
    register(github, "orgs/elsewhere", "runner-7")  # the same name in another scope is not this scope's

    named = call(github, "GET", f"/{scope}/actions/runners", params={"name": "runner-7", "per_page": 100})
    assert_matches_contract(named)
    assert named.json()["total_count"] == 1
    assert [runner["name"] for runner in named.json()["runners"]] == ["runner-7"]
    assert "Link" not in named.headers, "one page, whatever the size of the scope"
    past_the_end = call(github, "GET", f"/{scope}/actions/runners", params={"name": "runner-7", "page": 2})
    assert_matches_contract(past_the_end)
    assert past_the_end.json() == {"total_count": 1, "runners": []}

    # Unfiltered, the same scope pages as before, in id order, the filter kept out of its links.
    last = call(github, "GET", f"/{scope}/actions/runners", params={"per_page": 100, "page": 2})
    assert_matches_contract(last)
    assert last.json()["total_count"] == 120
    assert [runner["name"] for runner in last.json()["runners"]] == [f"runner-{i}" for i in range(100, 120)]
    assert "name=" not in last.headers["Link"]


# --- authentication, faults and rate limits ---------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "Bearer ghp_wrong", "Basic ghp_simulator", "ghp_simulator"])
def test_requests_without_a_known_credential_get_401(github, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    response = requests.get(f"{github.api_url}/repos/octo/app/actions/runners", headers=headers, timeout=5)
    assert response.status_code == 401
    assert response.json() == {
        "message": "Bad credentials",
        "documentation_url": "https://docs.github.com/rest",
        "status": "401",
    }
    assert (response.headers["x-ratelimit-limit"], response.headers["x-ratelimit-used"]) == ("60", "1")
    assert_matches_contract(response, described=False)


def test_a_read_only_token_lists_runners_and_every_write_is_refused_as_github_refuses_it():
    """A fine-grained token with the runners' read permission only (what a pipeline's preview job holds)."""
    double = GitHubDouble(read_only_credentials=["github_pat_read_only"]).start()
    try:
        scope = "orgs/octo-org"
        register(double, scope, "runner-1")
        listed = call(double, "GET", f"/{scope}/actions/runners", credential="github_pat_read_only")
        assert_matches_contract(listed)
        assert [r["name"] for r in listed.json()["runners"]] == ["runner-1"]
        [runner_id] = [r["id"] for r in listed.json()["runners"]]
        for method, path in (
            ("POST", f"/{scope}/actions/runners/registration-token"),
            ("POST", f"/{scope}/actions/runners/generate-jitconfig"),
            ("DELETE", f"/{scope}/actions/runners/{runner_id}"),
            ("PUT", f"/{scope}/actions/runners/{runner_id}/labels"),
        ):
            refused = call(double, method, path, credential="github_pat_read_only", json={"labels": ["x"]})
            assert refused.status_code == 403, (method, path)
            assert refused.json()["message"] == "Resource not accessible by personal access token"
            assert_matches_contract(refused, described=False)
        assert [r["id"] for r in double.runners(scope)] == [runner_id]
    finally:
        double.stop()


@pytest.mark.parametrize("scheme", ["Bearer", "token"])
def test_both_authorization_schemes_are_accepted(github, scheme):
    headers = {"Authorization": f"{scheme} {CREDENTIAL}"}
    response = requests.get(f"{github.api_url}/repos/octo/app/actions/runners", headers=headers, timeout=5)
    assert response.status_code == 200


def test_injected_server_errors_hit_only_matching_requests_then_stop(github):
    github.fail_next(502, count=2, method="POST", path_regex="/registration-token$")
    assert call(github, "GET", "/repos/octo/app/actions/runners/registration-token").status_code == 404
    assert call(github, "POST", "/repos/octo/app/actions/runners/remove-token").status_code == 201

    for _ in range(2):
        failed = call(github, "POST", "/repos/octo/app/actions/runners/registration-token")
        assert failed.status_code == 502
        assert failed.json() == {"message": "Server Error"}
        assert failed.headers["x-ratelimit-used"] == "2"  # a failed request costs no budget
        assert_matches_contract(failed, described=False)
    assert call(github, "POST", "/repos/octo/app/actions/runners/registration-token").status_code == 201
    with pytest.raises(ValueError):
        github.fail_next(500, count=0)


@pytest.mark.parametrize("status", [403, 429])
def test_secondary_rate_limit_fault_carries_retry_after(github, status):
    github.fail_next(status, retry_after=7)
    limited = call(github, "GET", "/orgs/octo/actions/runners")
    assert limited.status_code == status
    assert limited.headers["retry-after"] == "7"
    body = limited.json()
    assert body["message"].startswith(SECONDARY_LIMIT)
    assert body["message"].endswith(f"include the request ID {limited.headers['x-github-request-id']}.")
    assert body["documentation_url"] == (
        "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
    )
    assert int(limited.headers["x-ratelimit-remaining"]) > 0
    assert_matches_contract(limited, described=False)
    assert call(github, "GET", "/orgs/octo/actions/runners").status_code == 200


@pytest.mark.parametrize("status", [403, 429])
def test_primary_rate_limit_fault_reports_exhaustion_and_reset(github, status):
    github.fail_next(status, rate_limit_reset_in=120, method="DELETE")
    limited = call(github, "DELETE", "/repos/octo/app/actions/runners/1")
    assert limited.status_code == status
    assert limited.json() == {
        "message": "API rate limit exceeded for user ID 1.",
        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
        "#about-the-primary-rate-limit",
    }
    assert (limited.headers["x-ratelimit-remaining"], limited.headers["x-ratelimit-used"]) == ("0", "5000")
    assert abs(int(limited.headers["x-ratelimit-reset"]) - (time.time() + 120)) <= 2
    assert "retry-after" not in limited.headers
    assert_matches_contract(limited, described=False)


def test_primary_budget_is_per_credential_and_rate_limit_endpoint_is_free():
    double = GitHubDouble(credentials=("ghp_first", "ghp_second"), rate_limit_per_hour=3).start()
    try:
        remaining = [
            call(double, "GET", "/orgs/octo/actions/runners", credential="ghp_first").headers["x-ratelimit-remaining"]
            for _ in range(3)
        ]
        assert remaining == ["2", "1", "0"]
        exhausted = call(double, "GET", "/orgs/octo/actions/runners", credential="ghp_first")
        assert exhausted.status_code == 403
        assert exhausted.json()["message"] == "API rate limit exceeded for user ID 1."
        assert exhausted.headers["x-ratelimit-remaining"] == "0"
        assert int(exhausted.headers["x-ratelimit-reset"]) > time.time() + 3500
        assert exhausted.headers["x-ratelimit-resource"] == "core"

        second = call(double, "GET", "/orgs/octo/actions/runners", credential="ghp_second")
        assert (second.status_code, second.headers["x-ratelimit-remaining"]) == (200, "2")

        overview = call(double, "GET", "/rate_limit", credential="ghp_first")
        assert overview.status_code == 200
        assert_matches_contract(overview)
        assert overview.json()["resources"]["core"]["remaining"] == 0
        assert call(double, "GET", "/rate_limit", credential="ghp_first").json()["rate"]["used"] == 3
    finally:
        double.stop()


@pytest.mark.alone  # it measures time
def test_delay_next_lets_a_client_read_timeout_fire(github):
    github.delay_next(0.6, path_regex="/actions/runners$")
    started = time.monotonic()
    assert call(github, "POST", "/orgs/octo/actions/runners/registration-token").status_code == 201
    with pytest.raises(requests.ReadTimeout):
        requests.get(
            f"{github.api_url}/orgs/octo/actions/runners",
            headers={"Authorization": f"Bearer {CREDENTIAL}"},
            timeout=(1, 0.2),
        )
    assert call(github, "GET", "/orgs/octo/actions/runners").status_code == 200
    assert time.monotonic() - started < 0.5
    held, served = github.calls(method="GET")
    assert (held["status"], served["status"]) == (None, 200)  # the held request is still being answered


def test_a_reset_closes_the_connection_before_the_request_is_served_and_a_lost_answer_after(github):
    token_path = "/orgs/octo/actions/runners/registration-token"
    github.reset_next(method="POST", path_regex="/registration-token$")
    with pytest.raises(requests.ConnectionError):
        call(github, "POST", token_path)
    assert github.issued_credentials() == []  # nothing was done

    github.lose_next_answer(method="POST", path_regex="/registration-token$")
    with pytest.raises(requests.ConnectionError):
        call(github, "POST", token_path)
    assert len(github.issued_credentials()) == 1  # done, and the answer lost

    assert call(github, "POST", token_path).status_code == 201
    assert [c["status"] for c in github.calls(method="POST")] == [0, 0, 201]
    github.reset_next(count=2)
    assert github.clear_faults() == 2


# --- request log, control endpoints, routing and load -----------------------------------------------------


def test_call_log_records_rest_requests_without_the_api_prefix(github):
    started = time.monotonic()
    call(github, "GET", "/repos/octo/app/actions/runners", params={"per_page": 5, "name": "x"})
    call(github, "GET", "/repos/octo/app/actions/runners", credential="")
    requests.get(f"{github.url}/_simulator/runners", timeout=5)

    logged = github.calls(method="get", path_regex="/actions/runners$")
    assert [(entry["path"], entry["query"], entry["status"]) for entry in logged] == [
        ("/repos/octo/app/actions/runners", {"per_page": "5", "name": "x"}, 200),
        ("/repos/octo/app/actions/runners", {}, 401),
    ]
    assert logged[0]["headers"]["Authorization"] == f"Bearer {CREDENTIAL}"
    assert started <= logged[0]["at"] <= logged[1]["at"] <= time.monotonic()
    assert github.calls(method="POST") == []
    assert len(github.calls()) == 2


def test_control_endpoints_drive_the_double_from_another_process(github):
    _, listener = register(github, "repos/octo/app", "remote")
    control = f"{github.url}/_simulator"

    assert requests.post(f"{control}/jobs", json={"runner_name": "remote", "duration_seconds": 5}).status_code == 201
    assert listener.events == ["job_started"]
    busy = requests.post(f"{control}/jobs", json={"runner_name": "remote", "duration_seconds": 5})
    assert busy.status_code == 409
    assert requests.post(f"{control}/jobs", json={"duration_seconds": 5}).status_code == 400
    runners = requests.get(f"{control}/runners").json()
    assert [(runner["name"], runner["busy"], runner["scope"]) for runner in runners] == [
        ("remote", True, "repos/octo/app")
    ]

    fault = {
        "status": 503,
        "count": 1,
        "method": "GET",
        "path_regex": "/actions/runners$",
        "retry_after": None,
    }
    assert requests.post(f"{control}/faults", json=fault).status_code == 201
    assert call(github, "GET", "/repos/octo/app/actions/runners").status_code == 503
    assert call(github, "GET", "/repos/octo/app/actions/runners").status_code == 200

    logged = requests.get(f"{control}/calls").json()
    assert [(entry["method"], entry["path"], entry["status"]) for entry in logged][-2:] == [
        ("GET", "/repos/octo/app/actions/runners", 503),
        ("GET", "/repos/octo/app/actions/runners", 200),
    ]
    assert all("headers" not in entry and not entry["path"].startswith("/_simulator") for entry in logged)


def test_unknown_routes_and_methods_get_404(github):
    for method, path in [
        ("GET", "/repos/octo/app/actions/secrets"),
        ("POST", "/repos/octo/app/actions/runners"),
        ("PUT", "/orgs/octo/actions/runners/1"),
        ("GET", "/orgs/octo/actions/runners/not-a-number"),
    ]:
        response = call(github, method, path)
        assert response.status_code == 404, (method, path)
        assert response.json()["message"] == "Not Found"
        assert "x-ratelimit-remaining" in response.headers
    outside_api = requests.get(f"{github.url}/repos/octo/app/actions/runners", timeout=5)
    assert outside_api.status_code == 404


@pytest.mark.alone  # it measures time: a loaded machine (a fresh-clone run met 1.38 s) is not a small backlog
def test_a_hundred_concurrent_clients_are_all_served(github):
    token = registration_token(github, "enterprises/megacorp")
    for index in range(300):
        register(github, "enterprises/megacorp", f"runner-{index}", token=token)

    def list_page(page: int) -> tuple[int, int, float]:
        started = time.monotonic()
        response = call(github, "GET", "/enterprises/megacorp/actions/runners", params={"per_page": 3, "page": page})
        return response.status_code, response.json()["runners"][0]["id"], time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(max_workers=100) as pool:
        answers = list(pool.map(list_page, range(1, 101)))
    assert [(status, first_id) for status, first_id, _ in answers] == [(200, 3 * page - 2) for page in range(1, 101)]
    # A listen backlog too small for 100 clients shows up as connections retried after a 1 s SYN timeout.
    assert max(seconds for _, _, seconds in answers) < 0.9


@pytest.mark.parametrize(
    ("path", "tamper"),
    [
        ("/repos/octo/app/actions/runners/1", lambda body: body | {"busy": "no"}),
        ("/repos/octo/app/actions/runners/1", lambda body: {k: v for k, v in body.items() if k != "labels"}),
        ("/repos/octo/app/actions/runners", lambda body: body | {"runners": [{"id": 1}]}),
        ("/orgs/octo/actions/runners/registration-token", lambda body: body | {"expires_at": "in an hour"}),
    ],
)
def test_contract_check_rejects_a_response_that_breaks_the_schema(github, path, tamper):
    register(github, "repos/octo/app", "checked")
    response = call(github, "POST" if path.endswith("token") else "GET", path)
    assert_matches_contract(response)
    response._content = json.dumps(tamper(response.json())).encode()
    with pytest.raises(InvalidData):
        assert_matches_contract(response)


def test_start_once_and_stop_twice_even_for_pooled_connections():
    double = GitHubDouble().start()
    with pytest.raises(RuntimeError):
        double.start()
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {CREDENTIAL}"
    assert session.get(double.api_url + "/rate_limit", timeout=1).status_code == 200
    double.stop()
    double.stop()
    with pytest.raises(requests.ConnectionError):
        session.get(double.api_url + "/rate_limit", timeout=1)
    with pytest.raises(requests.ConnectionError):
        requests.get(double.api_url + "/rate_limit", timeout=1)


# --- secondary rate limits --------------------------------------------------------------------------------


def assert_secondary_limit(response: requests.Response) -> None:
    """GitHub's secondary-limit refusal: 403, its message and a whole-second retry-after of at least 1."""
    assert response.status_code == 403
    assert response.json()["message"].startswith(SECONDARY_LIMIT)
    assert int(response.headers["retry-after"]) >= 1
    assert_matches_contract(response, described=False)


@pytest.fixture
def with_limits():
    """Start doubles with the given secondary limits, over two credentials; stopped after the test."""
    doubles: list[GitHubDouble] = []

    def start(**limits: float) -> GitHubDouble:
        doubles.append(GitHubDouble(credentials=("ghp_first", "ghp_second"), **limits).start())
        return doubles[-1]

    yield start
    for double in doubles:
        double.stop()


def test_points_per_endpoint_charge_writes_five_and_refusals_spend_nothing(with_limits):
    limited = with_limits(points_per_minute=10, window_seconds=1.0)
    # Two RemoveRunner calls spend the 10 points of that endpoint, whatever the repository and runner.
    assert call(limited, "DELETE", "/repos/octo/app/actions/runners/1", credential="ghp_first").status_code == 404
    assert call(limited, "DELETE", "/repos/octo/lib/actions/runners/2", credential="ghp_first").status_code == 404
    refused = call(limited, "DELETE", "/repos/other/x/actions/runners/3", credential="ghp_first")
    assert_secondary_limit(refused)
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["x-ratelimit-used"] == "2"  # no primary budget spent either

    # GetRunner is another endpoint, and a read costs 1 point: ten pass, the eleventh does not.
    reads = [call(limited, "GET", f"/orgs/octo/actions/runners/{n}", credential="ghp_first") for n in range(11)]
    assert [read.status_code for read in reads] == [404] * 10 + [403]
    assert_secondary_limit(reads[-1])
    # Budgets are per credential.
    assert call(limited, "DELETE", "/repos/octo/app/actions/runners/1", credential="ghp_second").status_code == 404
    assert limited.secondary_limit_hits() == 2

    time.sleep(int(refused.headers["retry-after"]))
    assert call(limited, "DELETE", "/repos/other/x/actions/runners/3", credential="ghp_first").status_code == 404
    assert limited.secondary_limit_hits() == 2


def test_content_creating_requests_share_one_budget_across_endpoints(with_limits):
    limited = with_limits(content_creating_per_minute=3, window_seconds=1.0)
    path = "/orgs/octo/actions/runners/registration-token"
    for created in [path, "/orgs/octo/actions/runners/remove-token", "/repos/octo/app/actions/runners/remove-token"]:
        assert call(limited, "POST", created, credential="ghp_first").status_code == 201
    response = call(limited, "POST", path, credential="ghp_first")
    assert_secondary_limit(response)  # though the endpoint has points left
    assert limited.secondary_limit_hits() == 1
    # A DELETE writes but creates no content; reads and other credentials are not limited either.
    assert call(limited, "DELETE", "/orgs/octo/actions/runners/1", credential="ghp_first").status_code == 404
    assert call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first").status_code == 200
    assert call(limited, "POST", path, credential="ghp_second").status_code == 201

    time.sleep(int(response.headers["retry-after"]))
    assert call(limited, "POST", path, credential="ghp_first").status_code == 201
    assert limited.secondary_limit_hits() == 1


def test_concurrent_requests_beyond_the_limit_are_refused(with_limits):
    limited = with_limits(max_concurrent_requests=2)
    limited.delay_next(0.5, count=2, method="GET")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        held = [
            pool.submit(call, limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first") for _ in range(2)
        ]
        deadline = time.monotonic() + 2
        while len(limited.calls()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        third = call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first")
        other_credential = call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_second")
        assert [entry["status"] for entry in limited.calls()[:2]] == [None, None]  # still held
        assert [future.result().status_code for future in held] == [200, 200]
    assert_secondary_limit(third)
    assert third.headers["retry-after"] == "1"
    assert other_credential.status_code == 200
    assert call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first").status_code == 200
    assert (limited.secondary_limit_hits(), limited.rate_limit_refusals()) == (1, 1)


def test_rate_limit_and_control_endpoints_are_exempt(with_limits):
    limited = with_limits(max_concurrent_requests=1, points_per_minute=2, content_creating_per_minute=1)
    limited.delay_next(0.3, method="GET", path_regex="/actions/runners$")
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        held = pool.submit(call, limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first")
        while not limited.calls():
            time.sleep(0.01)
        overviews = [call(limited, "GET", "/rate_limit", credential="ghp_first").status_code for _ in range(5)]
        assert held.result().status_code == 200
    assert overviews == [200] * 5
    control = f"{limited.url}/_simulator"
    assert [requests.get(f"{control}/runners", timeout=5).status_code for _ in range(5)] == [200] * 5
    job = {"runner_name": "none", "duration_seconds": 1}
    assert [requests.post(f"{control}/jobs", json=job, timeout=5).status_code for _ in range(3)] == [409] * 3
    # An injected 403 is a fault, not a secondary limit that the double enforced.
    limited.fail_next(403, retry_after=7)
    assert call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first").status_code == 403
    assert limited.secondary_limit_hits() == 0


def test_generate_jitconfig_has_its_own_points_budget(with_limits):
    limited = with_limits(points_per_minute=10, window_seconds=1.0)
    # A write costs 5 points, and every repository's generate-jitconfig is one endpoint.
    for repo, name in [("repos/octo/app", "a"), ("repos/octo/lib", "b")]:
        assert generate_jitconfig(limited, repo, name, credential="ghp_first").status_code == 201
    refused = generate_jitconfig(limited, "repos/other/x", "c", credential="ghp_first")
    assert_secondary_limit(refused)
    # Not the budget of registration-token, nor of the organization form of generate-jitconfig.
    token = call(limited, "POST", "/repos/octo/app/actions/runners/registration-token", credential="ghp_first")
    assert token.status_code == 201
    assert generate_jitconfig(limited, "orgs/octo", "d", credential="ghp_first").status_code == 201
    assert (limited.secondary_limit_hits(), limited.rate_limit_refusals()) == (1, 1)
    assert [runner["name"] for runner in limited.runners()] == ["a", "b", "d"]  # a refusal creates nothing

    time.sleep(int(refused.headers["retry-after"]))
    assert generate_jitconfig(limited, "repos/other/x", "c", credential="ghp_first").status_code == 201


def test_generate_jitconfig_is_content_creating(with_limits):
    limited = with_limits(content_creating_per_minute=2, window_seconds=1.0)
    assert generate_jitconfig(limited, "orgs/octo", "a", credential="ghp_first").status_code == 201
    assert call(limited, "POST", "/orgs/octo/actions/runners/remove-token", credential="ghp_first").status_code == 201
    refused = generate_jitconfig(limited, "repos/octo/app", "b", credential="ghp_first")
    assert_secondary_limit(refused)  # though its endpoint has points left
    assert generate_jitconfig(limited, "repos/octo/app", "b", credential="ghp_second").status_code == 201
    assert limited.rate_limit_refusals() == 1

    time.sleep(int(refused.headers["retry-after"]))
    assert generate_jitconfig(limited, "repos/octo/app", "c", credential="ghp_first").status_code == 201


def test_content_creating_requests_are_limited_per_hour_too(with_limits):
    # The hour is scaled with rate_limit_window_seconds, as Simulator(time_scale=...) scales it.
    limited = with_limits(content_creating_per_minute=80, content_creating_per_hour=3, rate_limit_window_seconds=1.0)
    path = "/orgs/octo/actions/runners/registration-token"
    for created in [
        path,
        "/orgs/octo/actions/runners/remove-token",
        "/repos/octo/app/actions/runners/registration-token",
    ]:
        assert call(limited, "POST", created, credential="ghp_first").status_code == 201
    refused = generate_jitconfig(limited, "orgs/octo", "a", credential="ghp_first")
    assert_secondary_limit(refused)  # though the minute has 77 left
    assert refused.headers["retry-after"] == "1"
    assert limited.runners() == [], "a refusal creates nothing"
    assert call(limited, "DELETE", "/orgs/octo/actions/runners/1", credential="ghp_first").status_code == 404
    assert call(limited, "POST", path, credential="ghp_second").status_code == 201, "per credential"
    assert (limited.secondary_limit_hits(), limited.rate_limit_refusals()) == (1, 1)

    time.sleep(int(refused.headers["retry-after"]))
    assert generate_jitconfig(limited, "orgs/octo", "a", credential="ghp_first").status_code == 201


def test_the_simulator_scales_the_content_creating_hour_with_its_time_scale():
    from actions_runners_simulator.simulator import Simulator

    sim = Simulator(time_scale=30.0)
    try:
        limits = sim.github._traffic._secondary[sim.credential].limits
        assert (limits.content_creating, limits.window) == (80, 2.0)
        assert (limits.content_creating_hourly, limits.hour) == (500, 120.0)
    finally:
        sim.stop()


@pytest.mark.alone  # two calls within a one-second window
def test_primary_window_scales_down_with_rate_limit_window_seconds(with_limits):
    limited = with_limits(rate_limit_per_hour=2, rate_limit_window_seconds=1.0)
    first = call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first")
    reset = int(first.headers["x-ratelimit-reset"])
    assert time.time() < reset <= time.time() + 2
    assert call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first").status_code == 200
    exhausted = call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first")
    assert exhausted.status_code == 403
    assert exhausted.json()["message"] == "API rate limit exceeded for user ID 1."
    assert (exhausted.headers["x-ratelimit-remaining"], exhausted.headers["x-ratelimit-reset"]) == ("0", str(reset))
    assert_matches_contract(exhausted, described=False)
    overview = call(limited, "GET", "/rate_limit", credential="ghp_first")
    assert_matches_contract(overview)
    assert overview.json()["rate"] == {"limit": 2, "remaining": 0, "reset": reset, "used": 2}

    time.sleep(max(0.0, reset - time.time()) + 0.05)
    renewed = call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first")
    assert (renewed.status_code, renewed.headers["x-ratelimit-used"]) == (200, "1")
    assert int(renewed.headers["x-ratelimit-reset"]) > reset
    assert (limited.rate_limit_refusals(), limited.secondary_limit_hits()) == (1, 0)


def test_rate_limit_refusals_count_primary_and_secondary_refusals_but_not_faults(with_limits):
    limited = with_limits(rate_limit_per_hour=3, points_per_minute=2)
    listing = [call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_first") for _ in range(3)]
    assert [response.status_code for response in listing] == [200, 200, 403]
    assert_secondary_limit(listing[-1])
    assert (limited.rate_limit_refusals(), limited.secondary_limit_hits()) == (1, 1)

    assert call(limited, "GET", "/orgs/octo/actions/runners/1", credential="ghp_first").status_code == 404
    primary = call(limited, "GET", "/orgs/octo/actions/runners/2", credential="ghp_first")  # points left, hour not
    assert (primary.status_code, primary.json()["message"]) == (403, "API rate limit exceeded for user ID 1.")
    assert (limited.rate_limit_refusals(), limited.secondary_limit_hits()) == (2, 1)

    limited.fail_next(403, retry_after=1)
    limited.fail_next(429, rate_limit_reset_in=60)
    limited.fail_next(503)
    faults = [call(limited, "GET", "/orgs/octo/actions/runners", credential="ghp_second") for _ in range(4)]
    assert [response.status_code for response in faults] == [403, 429, 503, 200]
    assert (limited.rate_limit_refusals(), limited.secondary_limit_hits()) == (2, 1)


# --- GitHub Apps --------------------------------------------------------------------------------------------


def app_jwt(app_id: int, key: str, *, iat_offset: int = -60, lifetime: int = 540) -> str:
    now = int(time.time())
    return jwt.encode({"iat": now + iat_offset, "exp": now + iat_offset + lifetime, "iss": str(app_id)}, key, "RS256")


def test_a_github_app_finds_its_installation_and_gets_a_token_that_expires(github) -> None:
    key = new_private_key()
    installations = github.apps.add_app(7, key, installed_on={"octo": "Organization"})
    bearer = app_jwt(7, key)

    for path in ("/orgs/octo/installation", "/repos/octo/app/installation"):
        found = call(github, "GET", path, credential=bearer)
        assert found.status_code == 200 and found.json()["id"] == installations["octo"]
        assert_matches_contract(found)
    missing = call(github, "GET", "/repos/elsewhere/app/installation", credential=bearer)
    assert missing.status_code == 404
    assert_matches_contract(missing)
    missing = call(github, "GET", "/orgs/elsewhere/installation", credential=bearer)
    assert missing.status_code == 404
    assert_matches_contract(missing, described=False)  # GitHub's description of this call has no 404

    github.apps.token_lifetime = 1.0
    granted = call(github, "POST", f"/app/installations/{installations['octo']}/access_tokens", credential=bearer)
    assert granted.status_code == 201 and granted.json()["token"].startswith("ghs_")
    assert_matches_contract(granted)
    token = granted.json()["token"]
    assert call(github, "GET", "/orgs/octo/actions/runners", credential=token).status_code == 200
    other = call(github, "GET", "/orgs/other/actions/runners", credential=token)
    assert (other.status_code, other.json()["message"]) == (403, "Resource not accessible by integration")
    time.sleep(1.1)
    expired = call(github, "GET", "/orgs/octo/actions/runners", credential=token)
    assert (expired.status_code, expired.json()["message"]) == (401, "Bad credentials")
    assert_matches_contract(expired, described=False)  # 401 is undescribed for the runner calls


@pytest.mark.parametrize(
    ("make_bearer", "message"),
    [
        (lambda key, other: app_jwt(7, other), "A JSON web token could not be decoded"),
        (lambda key, other: app_jwt(8, key), "Integration '8' not found"),
        (lambda key, other: app_jwt(7, key, iat_offset=-700), "'Expiration time' claim ('exp') must be a numeric"),
        (lambda key, other: app_jwt(7, key, iat_offset=120), "'Issued at' claim ('iat') must be an Integer"),
        (lambda key, other: app_jwt(7, key, lifetime=900), "'Expiration time' claim ('exp') is too far in the future"),
        (lambda key, other: "not-a-jwt", "A JSON web token could not be decoded"),
    ],
)
def test_a_jwt_github_would_refuse_gets_its_401(github, make_bearer, message: str) -> None:
    key, other = new_private_key(), new_private_key()
    installations = github.apps.add_app(7, key, installed_on={"octo": "Organization"})
    refused = call(
        github, "POST", f"/app/installations/{installations['octo']}/access_tokens", credential=make_bearer(key, other)
    )
    assert refused.status_code == 401 and refused.json()["message"].startswith(message), refused.json()
    assert_matches_contract(refused)
    assert github.apps.issued == []


# --- runner groups ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["orgs/octo", "enterprises/megacorp"])
def test_runner_groups_are_listed_by_page_and_decide_where_a_runner_registers(github, scope) -> None:
    groups = [github.add_runner_group(scope, f"group-{index}") for index in range(3)]
    first = call(github, "GET", f"/{scope}/actions/runner-groups", params={"per_page": 2})
    assert first.status_code == 200 and first.json()["total_count"] == 4
    assert [g["name"] for g in first.json()["runner_groups"]] == ["Default", "group-0"]
    assert 'rel="next"' in first.headers["Link"]
    assert_matches_contract(first)

    runner_id, _ = register(github, scope, "grouped")
    assert github.runners()[0]["runner_group_id"] == 1  # without --runnergroup: Default
    token = registration_token(github, scope)
    runner_id = github.register_runner(
        github_url=config_url(github, scope), token=token, name="grouped", labels=(), ephemeral=False,
        runner_group="group-1",
    )  # fmt: skip
    assert next(r for r in github.runners() if r["id"] == runner_id)["runner_group_id"] == groups[1]
    with pytest.raises(RegistrationRefused, match='Could not find any self-hosted runner group named "nope"'):
        github.register_runner(
            github_url=config_url(github, scope), token=token, name="lost", labels=(), ephemeral=False,
            runner_group="nope",
        )  # fmt: skip

    body = {"name": "jit", "runner_group_id": groups[2], "labels": ["x"]}
    made = call(github, "POST", f"/{scope}/actions/runners/generate-jitconfig", json=body)
    assert made.status_code == 201 and made.json()["runner"]["runner_group_id"] == groups[2]
    assert_matches_contract(made)


def test_a_just_in_time_runner_has_exactly_the_labels_it_was_given_and_a_labels_put_replaces_them_all(github) -> None:
    """config.sh adds the read-only defaults (self-hosted, the OS, the architecture); generate-jitconfig registers
    the labels it is given, all custom, so a PUT of the labels replaces every one of them."""
    double, scope = github, "repos/octo/app"
    runner_id, _config = jit_runner(double, scope, "jit-0")
    labels = call(double, "GET", f"/{scope}/actions/runners/{runner_id}/labels").json()["labels"]
    assert [(label["name"], label["type"]) for label in labels] == [("self-hosted", "custom"), ("gpu", "custom")]

    call(double, "PUT", f"/{scope}/actions/runners/{runner_id}/labels", json={"labels": ["large"]})

    labels = call(double, "GET", f"/{scope}/actions/runners/{runner_id}/labels").json()["labels"]
    assert [label["name"] for label in labels] == ["large"], "self-hosted went with the other custom labels"
