"""The GitHub permissions a RunnerScaleSet needs, as docs/operations/rbac.md states them, against what the GitHub
double serves and refuses: no cluster, one double on loopback.

The page has two tables under "GitHub permissions of a RunnerScaleSet": the permission each kind of credential
needs for each scope, and the REST calls the provider and the listener make, with what each call needs. A scale
set's calls are run here through the client both use (ActionsServiceClient on a GitHubClient), as a GitHub App,
on a repository and on an organization, and compared with the second table; each call's need is checked against
the double (a token with the read permission alone is refused every write); the App column of the first table
against the permissions the double's installation tokens carry.

What the double does not model, and this cannot check: classic tokens' scopes (any token it knows may do
everything), and an App granted less than both permissions (every installation token carries both)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from actions_runners_simulator.actions_service import SERVICE_PREFIX
from actions_runners_simulator.github_apps import new_private_key
from actions_runners_simulator.github_double import GitHubDouble
from pulumi_actions_runners.github.app import GitHubApp, app_jwt, installation_tokens
from pulumi_actions_runners.github.auth import auth_failures
from pulumi_actions_runners.github.client import GitHubClient, RunnerGroupNotFound
from pulumi_actions_runners.github.scale_sets import ActionsServiceClient
from pulumi_actions_runners.github.url import parse_github_url
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "operations" / "rbac.md"
SECTION = "## GitHub permissions of a RunnerScaleSet"
WRITE_TOKEN, READ_TOKEN = "ghp_simulator", "github_pat_runners_read_only"
ORG, REPO = "octo", "app"
APP_ID = 424242
KEY = new_private_key()  # the App's
# GitHub's names of the permissions, as its settings pages show them, and the keys of its API.
PERMISSION_KEYS = {
    ("repository", "Administration"): "administration",
    ("organization", "Self-hosted runners"): "organization_self_hosted_runners",
}
LEVELS = {"read": "read", "read and write": "write"}
NEEDS = ("write", "read", "nothing: public", "the registration token", "the App's JWT")


# --- the page --------------------------------------------------------------------------------------------------


def section(page: Path, heading: str) -> str:
    """The text under ``heading``, to the next heading of its level or above."""
    text = page.read_text()
    start = text.index(heading + "\n") + len(heading) + 1
    level = heading.split(" ")[0]
    following = re.compile(rf"^#{{1,{len(level)}}} ", re.M)
    end = following.search(text, start)
    return text[start : end.start() if end else len(text)]


def tables(markdown: str) -> list[list[dict[str, str]]]:
    """Each Markdown table of the text, as its rows keyed by the header's cells."""
    found, lines = [], markdown.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|(?:\s*:?-+:?\s*\|)+", lines[i + 1]):
            header = _cells(line)
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(header, _cells(row), strict=True)))
            found.append(rows)
    return found


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def page_tables() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The section's two tables: the permissions by scope, and the calls."""
    permissions, calls = tables(section(PAGE, SECTION))
    return permissions, calls


def app_permissions(rows: list[dict[str, str]]) -> dict[str, str]:
    """The App column as GitHub's API names it: {"administration": "write", ...}."""
    granted = {}
    for row in rows:
        cell = row["a GitHub App, or a fine-grained token"]
        for kind, name, level in re.findall(r'(repository|organization) permission "([^":]+): ([a-z ]+)"', cell):
            granted[PERMISSION_KEYS[(kind, name)]] = LEVELS[level]
    return granted


def call_patterns(rows: list[dict[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each row's call as (method, path template): a regex of the concrete path for each scope it is made in
    ("repos", "orgs"; "any" for a path of no scope), and what it needs."""
    scopes = {"repos": f"repos/{ORG}/{REPO}", "orgs": f"orgs/{ORG}"}
    patterns = {}
    for row in rows:
        match = re.fullmatch(r"`(GET|POST|DELETE|PUT|PATCH) (/\S+)`", row["call"])
        assert match, f"a call of the page's table is not `METHOD /path`: {row['call']!r}"
        method, template = match.groups()
        assert row["needs"] in NEEDS, f"{template}: needs {row['needs']!r}, not one of {NEEDS}"
        concrete = {
            kind: template.replace("{scope}", scope)
            for kind, scope in scopes.items()
            if "{scope}" in template or template.startswith(f"/{kind}/{{")
        } or {"any": template}
        regexes = {
            kind: re.escape(path)
            .replace(re.escape("{org}"), ORG)
            .replace(re.escape("{owner}"), ORG)
            .replace(re.escape("{repo}"), REPO)
            .replace(re.escape("{runner_id}"), r"\d+")
            .replace(re.escape("{installation_id}"), r"\d+")
            for kind, path in concrete.items()
        }
        patterns[(method, template)] = {"regexes": regexes, "needs": row["needs"]}
    return patterns


# --- a scale set's calls, on the double -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def double() -> Iterator[GitHubDouble]:
    github = GitHubDouble(credentials=(WRITE_TOKEN,), read_only_credentials=(READ_TOKEN,)).start()
    github.apps.add_app(APP_ID, KEY, installed_on={ORG: "Organization"})
    yield github
    github.stop()


def scale_set_life(double: GitHubDouble, url: str, name: str) -> None:
    """What the provider and the listener ask of GitHub over a scale set's life, as the App: the runner release
    list (a set with no image), the set made, a runner's config, the runner looked up in the REST listing, a runner
    group that is not there (an organization's), the runner removed, the set deleted."""
    target = parse_github_url(url)
    credential = installation_tokens(target, GitHubApp(str(APP_ID), KEY))
    with GitHubClient(target, credential) as rest, ActionsServiceClient(rest) as service:
        assert rest.runner_releases()
        made = service.create_scale_set(name, service.runner_group_id("Default"), ())
        runner = service.generate_jit_config(made.id, f"{name}-abcde")
        assert runner is not None and service.listed_runner(runner.id) is not None
        if target.scope.startswith("orgs/"):
            with pytest.raises(RunnerGroupNotFound):
                service.runner_group_id("no-such-group")
        service.remove_runner(runner.id)
        service.delete_scale_set(made.id)


@pytest.fixture(scope="module")
def rest_calls(double: GitHubDouble) -> list[dict[str, Any]]:
    """The REST calls of a scale set's life on a repository, then on an organization (the Actions service's
    calls, authenticated by its admin token, left out)."""
    scale_set_life(double, f"{double.url}/{ORG}/{REPO}", "perm-repo")
    scale_set_life(double, f"{double.url}/{ORG}", "perm-org")
    calls = [c for c in double.calls() if not c["path"].startswith(SERVICE_PREFIX)]
    assert all(c["status"] is not None and c["status"] < 400 for c in calls), [
        (c["method"], c["path"], c["status"]) for c in calls if c["status"] is None or c["status"] >= 400
    ]
    return calls


def template_of(call: dict[str, Any], patterns: dict[tuple[str, str], dict[str, Any]]) -> tuple[str, str] | None:
    for (method, template), pattern in patterns.items():
        if call["method"] == method and any(re.fullmatch(r, call["path"]) for r in pattern["regexes"].values()):
            return method, template
    return None


def authorization(call: dict[str, Any]) -> str:
    return next((v for k, v in call["headers"].items() if k.lower() == "authorization"), "")


# --- the checks ---------------------------------------------------------------------------------------------------


def test_the_page_has_both_tables() -> None:
    permissions, calls = page_tables()
    assert [row["`github_url` names"] for row in permissions] == ["a repository", "an organization", "an enterprise"]
    assert len(calls) >= 5


def test_the_calls_the_page_lists_are_exactly_a_scale_sets_calls(rest_calls: list[dict[str, Any]]) -> None:
    patterns = call_patterns(page_tables()[1])
    unlisted = sorted({(c["method"], c["path"]) for c in rest_calls if template_of(c, patterns) is None})
    assert unlisted == [], "calls a scale set makes that the page does not list"
    unmade = [
        f"{method} {template} ({kind})"
        for (method, template), pattern in patterns.items()
        for kind, regex in pattern["regexes"].items()
        if not any(c["method"] == method and re.fullmatch(regex, c["path"]) for c in rest_calls)
    ]
    assert unmade == [], "calls the page lists that a scale set does not make"


def test_each_call_is_made_with_the_credential_the_page_says(double: GitHubDouble, rest_calls: list) -> None:
    patterns = call_patterns(page_tables()[1])
    installation_tokens_issued = set(double.apps.issued)
    for call in rest_calls:
        key = template_of(call, patterns)
        if key is None:
            continue  # not on the page: the test above says so
        needs, sent = patterns[key]["needs"], authorization(call)
        template = key[1]
        if needs == "the registration token":
            assert sent.startswith("RemoteAuth "), (template, needs)
        elif needs == "the App's JWT":
            token = sent.removeprefix("Bearer ")
            assert token.count(".") == 2 and token.startswith("eyJ"), (template, needs)
        else:  # read, write, public: the installation token, as any REST call of the provider's
            assert sent.removeprefix("Bearer ") in installation_tokens_issued, (template, needs)


def test_the_double_refuses_each_write_to_a_read_only_token_and_answers_each_read(
    double: GitHubDouble, rest_calls: list[dict[str, Any]]
) -> None:
    """Each call replayed as it was made, with a token of the read permission alone, a write token, and none."""
    patterns = call_patterns(page_tables()[1])
    judged = set()
    for call in rest_calls:
        key = template_of(call, patterns)
        if key is None or key in judged or patterns[key]["needs"] not in ("write", "read", "nothing: public"):
            continue
        judged.add(key)
        needs = patterns[key]["needs"]

        def answer(token: str | None, call: dict[str, Any] = call) -> requests.Response:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return requests.request(call["method"], double.api_url + call["path"], headers=headers, timeout=10)

        read_only = answer(READ_TOKEN)
        if needs == "write":
            assert read_only.status_code == 403, (key, read_only.status_code)
            assert read_only.json()["message"] == "Resource not accessible by personal access token"
        else:
            assert read_only.status_code in (200, 404), (key, read_only.status_code, read_only.text)
        assert answer(WRITE_TOKEN).status_code in (200, 201, 404), key
        if needs == "nothing: public":
            assert answer(None).status_code == 200, key
    assert {patterns[key]["needs"] for key in judged} == {"write", "read", "nothing: public"}


def test_the_app_column_is_what_the_doubles_installation_tokens_carry(double: GitHubDouble) -> None:
    granted = app_permissions(page_tables()[0])
    assert granted, "the page names no App permission"
    app = GitHubApp(str(APP_ID), KEY)
    headers = {"Authorization": f"Bearer {app_jwt(app, time.time())}"}
    installation = requests.get(f"{double.api_url}/orgs/{ORG}/installation", headers=headers, timeout=10).json()
    token = requests.post(
        f"{double.api_url}/app/installations/{installation['id']}/access_tokens", headers=headers, timeout=10
    ).json()
    assert granted == token["permissions"] == installation["permissions"]


def test_an_enterprise_takes_a_classic_token_only() -> None:
    """The enterprise row: no App (Check refuses it, naming the classic token's scope), that scope."""
    permissions = {row["`github_url` names"]: row for row in page_tables()[0]}
    enterprise = permissions["an enterprise"]
    assert not app_permissions([enterprise])
    scope = enterprise["a classic token"].strip("`")
    failures = auth_failures(
        {
            "github_url": "https://github.com/enterprises/octo-enterprise",
            "github_app_id": str(APP_ID),
            "github_app_private_key": KEY,
        }
    )
    assert failures and all(scope in reason for _, reason in failures), failures
