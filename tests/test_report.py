"""The preview report (python -m pulumi_actions_runners.report) on `pulumi preview --json` output recorded from the
real CLI in this run, one preview per kind of change, then read as a reviewer, a pipeline and a bot would."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import cmarkgfm
import jsonschema
import pytest
from pulumi.runtime.rpc import UNKNOWN

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners.report import build_report, render
from tests.conftest import ROOT, quick_simulator
from tests.helpers import RecordingHost

OLD_IMAGE, NEW_IMAGE = "ghcr.io/actions/actions-runner:2.336.0", "ghcr.io/actions/actions-runner:2.335.0"
# Labels a pull request's branch may set to forge the report's comment: a mention, a link, an image, raw HTML that
# hides the rows after it, a cell boundary (also behind a backslash), backticks that would close a code span.
HOSTILE_LABELS = [
    "@octo-org/admins",
    "[approve](https://evil.example/a)",
    "![i](https://evil.example/i.png)",
    "<!--",
    "<img src=x onerror=alert(1)>",
    "a|b\\|c",
    "``x`",
    "www.evil.example",
]
# name: (stack, config changed for its preview)
SCENARIOS: dict[str, tuple[str, dict[str, str]]] = {
    "nothing": ("runners", {}),
    "token": ("runners", {"tokenRefreshBeforeSeconds": "3000"}),
    "image": ("runners", {"image": NEW_IMAGE}),
    "labels": ("runners", {"labels": "pulumi,gpu"}),
    "template": ("runners", {"runnerMemory": "2Gi"}),
    "more": ("runners", {"runners": "3"}),
    "fewer": ("runners", {"runners": "1"}),
    "pool_token": ("pool", {"tokenRefreshBeforeSeconds": "3000"}),
    "pool_labels": ("pool", {"labels": "pulumi,gpu"}),
    "pool_scale": ("pool", {"runners": "6"}),
    "group": ("group", {"runnerGroup": "small"}),
    "hostile": ("pool", {"labels": "pulumi," + ",".join(HOSTILE_LABELS)}),
    "pool_refill": ("pool", {"refill": "true"}),
    "refill_token": ("refill", {"tokenRefreshBeforeSeconds": "3000"}),
    "refill_scale": ("refill", {"runners": "5"}),
    "refill_fewer": ("refill", {"runners": "2"}),
}


@dataclass
class Recorded:
    sim: Simulator
    files: dict[str, Path]  # scenario: its preview's JSON
    pool_runners: list[str]
    large_group: int  # the id of runner group "large", where the group stack's runner registered


@pytest.fixture(scope="module")
def recorded(
    kube_api_server: KubeApiServer, cli_dir: Path, plugin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Recorded]:
    """Four stacks (two Runners; a pool of four; a refilling pool of three; an organization's Runner in runner
    group "large"), each up once, then one `pulumi preview --json` per scenario, its config change undone after
    it. The stacks are apart, so each records in a thread of its own, its scenarios in turn."""
    folder = tmp_path_factory.mktemp("previews")
    with quick_simulator(kube_api_server) as sim:
        large = sim.github.add_runner_group("orgs/octo-org", "large")
        sim.github.add_runner_group("orgs/octo-org", "small")
        configs = {
            "runners": sim.stack_config(runners=2, grace_period_seconds=1),
            "pool": sim.stack_config(runners=4, grace_period_seconds=1, pool=True),
            "refill": sim.stack_config(runners=3, grace_period_seconds=1, pool=True, refill=True)
            | {"namespace": "refilled", "createNamespace": "true"},
            "group": sim.stack_config(runners=1, grace_period_seconds=1)
            | {"githubUrl": f"{sim.github.url}/octo-org", "runnerGroup": "large"},
        }
        # Stacks of their own names: the runners stack's and the group stack's runner-0 get pods of their own.
        stacks = {
            name: PulumiWorkspace(ROOT, cli_dir, stack=name, kubernetes_plugin_dir=plugin_dir) for name in configs
        }
        files_ = {scenario: folder / f"{scenario}.json" for scenario in SCENARIOS}

        def record(name: str) -> None:
            stack, config = stacks[name], configs[name]
            stack.new_stack(config=config, secrets={"githubToken": sim.credential})
            stack.run("up", "--yes")
            for scenario, (_, changes) in ((s, c) for s, c in SCENARIOS.items() if c[0] == name):
                if changes:
                    stack.run("config", "set-all", *(f"--plaintext={key}={value}" for key, value in changes.items()))
                files_[scenario].write_text(stack.run("preview", "--json").stdout)
                for key in changes:
                    if key in config:
                        stack.run("config", "set", key, config[key])
                    else:
                        stack.run("config", "rm", key)

        try:
            with ThreadPoolExecutor(max_workers=len(stacks)) as threads:
                for done in [threads.submit(record, name) for name in stacks]:
                    done.result()
            pool_runners = json.loads(stacks["pool"].run("stack", "output", "--json").stdout)["runners"]
            yield Recorded(sim, files_, pool_runners, large)
        finally:
            for stack in stacks.values():
                stack.close()


def report(
    *args: str | Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The command, as a pipeline runs it; without GitHub credentials unless given."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(
        [sys.executable, "-m", "pulumi_actions_runners.report", *map(str, args)],
        input=stdin,
        env=base | (env or {}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


EXPECTED = {  # scenario: (exit code, lines the text report holds)
    "nothing": (0, ["Runners: No change to any runner, pool or registration token."]),
    "token": (
        2,
        [
            "Runners: 2 runners recreated, at most 2 out of service at once; 1 registration token renewed.",
            "RegistrationToken registration  renew the registration token",
            "Runner runner-0                 recreate its runner",
            "because: registration token renewed",
            "GitHub: 2 RemoveRunner, 1 registration-token",
        ],
    ),
    "image": (2, ["Runner runner-1  recreate its runner", f"because: image {OLD_IMAGE} -> {NEW_IMAGE}"]),
    "labels": (
        2,
        [
            "Runners: 2 runners relabelled in place.",
            "relabel its runner in place",
            "because: labels pulumi -> gpu, pulumi",
        ],
    ),
    "template": (2, ["Runners: 2 runners recreated", "because: pod template changed"]),
    "more": (2, ["Runners: 1 runner added.", "Runner runner-2  create 1 runner", "GitHub: no writes."]),
    "fewer": (2, ["Runners: 1 runner removed.", "Runner runner-1  delete its runner", "1 RemoveRunner"]),
    "pool_token": (
        2,
        [
            "Runners: 4 runners recreated, at most 1 out of service at once; 1 registration token renewed.",
            "RunnerPool pool                rotate 4 of 4 runners, at most 1 at a time",
            "because: registration token renewed",
        ],
    ),
    "pool_labels": (2, ["RunnerPool pool  relabel 4 runners in place", "4 set-labels"]),
    "pool_scale": (2, ["Runners: 2 runners added.", "RunnerPool pool  scale from 4 to 6", "because: replicas 4 -> 6"]),
    "group": (2, ["Runner runner-0  recreate its runner", "because: runner group large -> small"]),
    "hostile": (2, ["RunnerPool pool  relabel 4 runners in place"]),
    "pool_refill": (
        2,
        [
            "Runners: 4 runners recreated, at most 1 out of service at once.",
            "RunnerPool pool  roll to a new Job of 4 runners: the 4 runners of the pool drained, idle ones at most 1 "
            "at a time, busy ones left to finish their jobs",
            "because: refill turned on",
        ],
    ),
    "refill_token": (
        2,
        [
            "Runners: 1 registration token renewed.",
            "RunnerPool pool  write the new token to Job",
            "-j1's Secret: registered runners keep theirs; 0 runners not registered yet (seen by refresh) recreated",
        ],
    ),
    "refill_scale": (2, ["RunnerPool pool  raise Job", "-j1's parallelism from 3 to 5", "because: replicas 3 -> 5"]),
    "refill_fewer": (2, ["RunnerPool pool  roll to a new Job of 2 runners", "replicas 3 -> 2: a new Job"]),
}


@pytest.mark.parametrize("scenario", EXPECTED)
def test_the_text_report_says_what_each_change_does_to_the_runners_and_why(recorded: Recorded, scenario: str) -> None:
    code, lines = EXPECTED[scenario]
    result = report(recorded.files[scenario])
    assert result.returncode == code, (result.stdout, result.stderr)
    words = " ".join(result.stdout.split())  # the columns' padding apart
    for line in lines:
        assert " ".join(line.split()) in words, result.stdout
    assert "Traceback" not in result.stderr


def test_markdown_is_a_marked_summary_line_then_a_table(recorded: Recorded) -> None:
    result = report(recorded.files["pool_token"], "--format", "markdown")
    lines = result.stdout.splitlines()
    assert result.returncode == 2
    assert lines[0] == "<!-- pulumi-actions-runners preview report -->"  # the workflow updates its comment by it
    assert lines[1] == (
        "**Runners:** 4 runners recreated, at most 1 out of service at once; 1 registration token renewed."
    )
    assert lines[2:5] == ["", "| Resource | What happens | Why |", "|---|---|---|"]
    assert lines[5].startswith("| RegistrationToken `registration` | renew the registration token | it expires at ")
    assert lines[6] == (
        "| RunnerPool `pool` | rotate 4 of 4 runners, at most 1 at a time | registration token renewed |"
    )
    assert lines[8].startswith("GitHub: 4 RemoveRunner, 1 registration-token")
    nothing = report(recorded.files["nothing"], "--format", "markdown").stdout.splitlines()
    assert nothing[1:] == ["**Runners:** No change to any runner, pool or registration token."]


def test_json_follows_its_versioned_schema_for_every_kind_of_change(recorded: Recorded) -> None:
    schema = json.loads(files("pulumi_actions_runners.report").joinpath("schema.json").read_text())
    for scenario, path in recorded.files.items():
        result = report(path, "--format", "json")
        document = json.loads(result.stdout)
        jsonschema.validate(document, schema)
        assert document["version"] == 1 and document["changes"] is (EXPECTED[scenario][0] == 2), scenario
    pool = json.loads(report(recorded.files["pool_token"], "--format", "json").stdout)
    assert pool["recreates"] is True and pool["live"] is None
    assert pool["totals"] | {"github_writes": None} == {
        "runners_before": 4,
        "runners_after": 4,
        "recreated": 4,
        "added": 0,
        "removed": 0,
        "relabelled": 0,
        "restarted": 0,
        "out_of_service_at_most": 1,
        "registration_tokens_renewed": 1,
        "github_writes": None,
        "shortest_seconds": 0.0,
    }
    assert pool["totals"]["github_writes"] == {
        "remove_runner": 4,
        "generate_jitconfig": 0,
        "registration_token": 1,
        "set_labels": 0,
    }
    [token, pool_change] = pool["resources"]
    assert (token["type"], token["action"]) == ("RegistrationToken", "renew")
    assert (pool_change["type"], pool_change["action"], pool_change["reasons"]) == (
        "RunnerPool",
        "rotate",
        ["registration token renewed"],
    )


def test_fail_on_gates_a_pipeline_and_errors_exit_1_with_a_reason(recorded: Recorded) -> None:
    labels = report(recorded.files["labels"], "--fail-on", "recreate")
    assert labels.returncode == 2, labels.stderr  # relabelled in place: nothing recreated
    token = report(recorded.files["token"], "--fail-on", "recreate")
    assert token.returncode == 1 and "Runners: 2 runners recreated" in token.stdout
    assert "failing, as --fail-on asks: runners would be recreated or rotated" in token.stderr
    assert report(recorded.files["nothing"], "--fail-on", "change").returncode == 0
    assert report(recorded.files["labels"], "--fail-on", "change").returncode == 1

    from_stdin = report("-", stdin=recorded.files["token"].read_text())
    assert from_stdin.returncode == 2 and from_stdin.stdout == report(recorded.files["token"]).stdout
    odd_step = json.dumps({"steps": [{"urn": "urn:pulumi:dev::p::pulumi-python:dynamic/actions-runners:Runner::r"}]})
    for bad, why in (
        ("{}", "not the output of `pulumi preview --json`"),
        ("not json", "Expecting value"),
        (odd_step, "not the output of `pulumi preview --json` (KeyError('op') is amiss)"),
    ):
        result = report(stdin=bad)
        assert result.returncode == 1 and why in result.stderr and "Traceback" not in result.stderr, result.stderr
    one_at_a_time = report(recorded.files["token"], "--parallel", "1").stdout  # `pulumi up --parallel 1`
    assert one_at_a_time.startswith("Runners: 2 runners recreated, at most 1 out of service at once;")
    usage = report(recorded.files["token"], "--fail-on", "busy")  # argparse's own exit code would read as changes
    assert usage.returncode == 1 and "--fail-on busy needs --live" in usage.stderr


def test_a_failed_preview_is_an_error_naming_what_failed(recorded: Recorded, cli_dir: Path) -> None:
    """A preview that failed in the program (here: the Check failure of a bad config) prints its diagnostics."""
    with PulumiWorkspace(ROOT, cli_dir) as stack:
        config = recorded.sim.stack_config(runners=1, grace_period_seconds=1) | {"gracePeriodSeconds": "99999"}
        stack.new_stack(config=config, secrets={"githubToken": recorded.sim.credential})
        failed = stack.run("preview", "--json", check=False)
    assert failed.returncode != 0
    result = report(stdin=failed.stdout)
    assert result.returncode == 1 and "the preview failed" in result.stderr and "grace_period_seconds" in result.stderr


def test_live_names_the_busy_runners_among_those_to_be_taken_down_with_one_read_only_listing(
    recorded: Recorded,
) -> None:
    sim = recorded.sim
    busy = recorded.pool_runners[1]
    sim.github.start_job(busy, None)
    try:
        calls = len(sim.github.calls())
        result = report(
            recorded.files["pool_token"], "--live", "--format", "json", env={"GITHUB_TOKEN": sim.credential}
        )
        document = json.loads(result.stdout)
        assert result.returncode == 2 and document["live"] == {"busy": [busy], "not_looked_up": 0}
        assert "Busy now: " + busy in document["summary"]
        pool = next(r for r in document["resources"] if r["type"] == "RunnerPool")
        assert pool["busy"] == [busy]
        made = sim.github.calls()[calls:]
        assert made and {c["method"] for c in made} == {"GET"}, made  # read-only: one listing of the scope
        text = report(recorded.files["pool_token"], "--live", env={"GITHUB_TOKEN": sim.credential}).stdout
        assert f"busy now: {busy}" in text
        gated = report(
            recorded.files["pool_token"], "--live", "--fail-on", "busy", env={"GITHUB_TOKEN": sim.credential}
        )
        assert gated.returncode == 1 and "running jobs now" in gated.stderr
        markdown = report(
            recorded.files["pool_token"], "--live", "--format", "markdown", env={"GITHUB_TOKEN": sim.credential}
        )
        assert f"| `{busy}` |" in markdown.stdout and "| Busy now |" in markdown.stdout
    finally:
        sim.github.finish_job(busy)
    idle = json.loads(
        report(recorded.files["pool_token"], "--live", "--format", "json", env={"GITHUB_TOKEN": sim.credential}).stdout
    )
    assert idle["live"] == {"busy": [], "not_looked_up": 0}
    no_credential = report(recorded.files["pool_token"], "--live")
    assert no_credential.returncode == 1 and "GITHUB_TOKEN" in no_credential.stderr


def test_no_secret_reaches_the_report(recorded: Recorded) -> None:
    """The preview holds secrets as "[secret]" (Pulumi keeps them so); the report prints none of them, nor any
    token the simulated GitHub issued."""
    secrets = [recorded.sim.credential, *recorded.sim.github.issued_credentials()]
    for path in recorded.files.values():
        preview = path.read_text()
        assert not any(secret in preview for secret in secrets)
    runs = [(path, form) for path in recorded.files.values() for form in ("text", "markdown", "json")]
    with ThreadPoolExecutor(max_workers=4) as threads:  # 48 commands, each mostly its interpreter's start
        outputs = threads.map(lambda run: report(run[0], "--format", run[1]).stdout, runs)
        for run, output in zip(runs, outputs, strict=True):
            assert "[secret]" not in output and not any(secret in output for secret in secrets), run


def test_the_function_gives_the_command_s_report(recorded: Recorded) -> None:
    """For the Automation API: the same report from the parsed preview, without a process."""
    parsed = json.loads(recorded.files["pool_scale"].read_text())
    built = build_report(parsed)
    assert built.to_json() == json.loads(report(recorded.files["pool_scale"], "--format", "json").stdout)
    assert [(c.kind, c.action, c.added) for c in built.changes] == [("RunnerPool", "scale", 2)]


def test_a_fleet_s_writes_and_the_least_time_github_allows_for_them(recorded: Recorded) -> None:
    """The recorded pool preview made a just-in-time pool of 500 (and of 1,000): one RemoveRunner and one
    generate-jitconfig per runner, paced by 80 content-creating requests a minute and 500 an hour."""
    for size, least in ((500, 360.0), (1000, 3960.0)):
        preview = json.loads(recorded.files["pool_token"].read_text())
        step = next(s for s in preview["steps"] if s["urn"].endswith("RunnerPool::pool"))
        preview["steps"] = [step]  # a just-in-time pool has no registration token; a new image rotates it
        step["newState"]["inputs"] |= {"token_hash": step["oldState"]["outputs"]["token_hash"], "image": NEW_IMAGE}
        [template, *_] = step["oldState"]["outputs"]["runners"]
        step["oldState"]["outputs"]["runners"] = [template | {"name": f"pool-{i}"} for i in range(size)]
        for state in (step["oldState"]["outputs"], step["oldState"]["inputs"], step["newState"]["inputs"]):
            state |= {"replicas": size, "jit_config": True, "max_unavailable": "10%"}
        for recorded_by_check in ("spec_hash", "shape_hash"):  # of the inputs before the edit: judged without
            del step["newState"]["inputs"][recorded_by_check]
        built = build_report(preview).to_json()
        totals = built["totals"]
        assert built["resources"][0]["reasons"] == [f"image {OLD_IMAGE} -> {NEW_IMAGE}"]
        assert (totals["recreated"], totals["out_of_service_at_most"]) == (size, size // 10)
        assert totals["github_writes"]["remove_runner"] == totals["github_writes"]["generate_jitconfig"] == size
        assert totals["shortest_seconds"] == least


def step_of(preview: dict, name: str) -> dict:
    return next(s for s in preview["steps"] if s["urn"].endswith(f"::{name}"))


def test_what_real_previews_turn_into_under_other_states(recorded: Recorded) -> None:
    """Recorded previews edited into cases a run does not reach cheaply, each judged as the provider acts."""
    # A pool of 4 whose runners 0 and 2 ended, scaled to 2 with a new token: the ended ones are removed first
    # (pool._scale_down), the other two rotated one at a time.
    preview = json.loads(recorded.files["pool_token"].read_text())
    pool = step_of(preview, "pool")
    [template, *_] = pool["oldState"]["outputs"]["runners"]
    pool["oldState"]["outputs"]["runners"] = [
        template | {"name": f"pool-{i}"} | ({"pod_phase": "Succeeded"} if i in (0, 2) else {}) for i in range(4)
    ]
    pool["newState"]["inputs"]["replicas"] = 2
    [change] = [c for c in build_report(preview).changes if c.kind == "RunnerPool"]
    assert (change.recreated, change.removed, change.restarted, change.out_of_service_at_most) == (2, 2, 0, 1)
    assert change.at_risk == ["pool-1", "pool-3"] and change.writes.removals == 4

    # --show-replacement-steps adds each replacement's two halves: still counted once.
    preview = json.loads(recorded.files["token"].read_text())
    halves = [
        s | {"op": op}
        for s in preview["steps"]
        if s["op"] == "replace"
        for op in ("create-replacement", "delete-replaced")
    ]
    assert build_report(preview | {"steps": preview["steps"] + halves}).summary() == build_report(preview).summary()

    # replicas not known at preview: as many as now, never none.
    preview = json.loads(recorded.files["pool_scale"].read_text())
    pool = step_of(preview, "pool")
    pool["newState"]["inputs"]["replicas"] = UNKNOWN
    pool |= {"op": "replace", "replaceReasons": ["namespace"]}
    [change] = build_report(preview).changes
    assert (change.action, change.recreated, change.out_of_service_at_most) == ("recreate", 4, 4)
    assert change.what == "recreate the pool: its 4 runners taken down first, then 4 made"
    pool["op"] = "create"
    assert build_report(preview).changes[0].what == "create its runners (how many is known once the update runs)"

    # A lone Runner replaced because refresh found its pod ended: started again, nothing in service taken down.
    preview = json.loads(recorded.files["token"].read_text())
    runner = step_of(preview, "runner-0")
    runner["oldState"]["outputs"]["pod_phase"] = "Succeeded"
    preview["steps"] = [runner | {"replaceReasons": ["pod_phase"]}]
    built = build_report(preview)
    assert (built.changes[0].action, built.recreates, built.totals.out_of_service_at_most) == ("restart", False, 0)
    assert built.summary() == "1 runner that had ended restarted."

    # An update whose changed input the preview hides (a new github_token): said, not left without a reason.
    preview = json.loads(recorded.files["labels"].read_text())
    runner = step_of(preview, "runner-0")
    runner["newState"]["inputs"]["labels"] = runner["oldState"]["outputs"]["labels"]
    preview["steps"] = [runner]
    [change] = build_report(preview).changes
    assert (change.action, change.reasons) == (
        "update",
        ["an input the preview hides as a secret changed (github_token, say)"],
    )


def test_the_real_cli_registers_an_organization_s_runner_in_its_runner_group(recorded: Recorded) -> None:
    """programs/runners' runnerGroup, through the real CLI: the group stack's `up` looked "large" up by name and
    registered its runner there (its preview above shows the move to "small" as a replacement)."""
    [runner] = recorded.sim.github.runners("orgs/octo-org")
    assert runner["runner_group_id"] == recorded.large_group and runner["status"] == "online"
    lookups = recorded.sim.github.calls("GET", r"/orgs/octo-org/actions/runner-groups$")
    assert lookups and all(call["status"] == 200 for call in lookups)


def test_live_sends_the_credential_only_to_the_github_hosts_of_the_deployed_state(recorded: Recorded) -> None:
    """A branch that points github_url at a host of its choosing gets no credential sent there, neither a token
    nor a GitHub App's JWT; with --github-host, not even a host the deployed state names is contacted unless it is
    one of those."""
    sim = recorded.sim
    app = {"GITHUB_APP_ID": str(sim.app_id), "GITHUB_APP_PRIVATE_KEY": sim.app_private_key}
    with RecordingHost() as evil:
        preview = json.loads(recorded.files["pool_token"].read_text())
        pool = step_of(preview, "pool")
        pool["newState"]["inputs"]["github_url"] = f"{evil.url}/octo-org/hello-world"
        for credential in ({"GITHUB_TOKEN": sim.credential}, app):
            result = report("-", "--live", "--format", "json", stdin=json.dumps(preview), env=credential)
            document = json.loads(result.stdout)
            assert result.returncode == 2, result.stderr
            assert evil.requests == []
            assert document["live"] == {"busy": [], "not_looked_up": 0}  # the deployed scope was looked up
            [notice] = [n for n in document["notices"] if evil.url in n]
            assert "which its deployed state does not name: --live did not contact it" in notice

        # The deployed state itself names the other host: with --github-host it is not contacted either.
        preview = json.loads(recorded.files["pool_token"].read_text())
        step_of(preview, "pool")["oldState"]["outputs"]["github_url"] = f"{evil.url}/octo-org/hello-world"
        limited = ["-", "--live", "--github-host", sim.github.url]
        result = report(*limited, "--format", "json", stdin=json.dumps(preview), env={"GITHUB_TOKEN": sim.credential})
        document = json.loads(result.stdout)
        assert result.returncode == 2 and evil.requests == []
        assert document["live"]["not_looked_up"] == 4
        assert any("is not a --github-host" in n for n in document["notices"]), document["notices"]
        gated = report(*limited, "--fail-on", "busy", stdin=json.dumps(preview), env={"GITHUB_TOKEN": sim.credential})
        assert gated.returncode == 1 and "could not be looked up" in gated.stderr
        assert "busy now: not looked up" in gated.stdout

        # Without --github-host the runners' deployed scope is where the credential goes: the check above can fail.
        report("-", "--live", stdin=json.dumps(preview), env={"GITHUB_TOKEN": sim.credential})
        assert [r["headers"].get("Authorization") for r in evil.requests] == [f"Bearer {sim.credential}"]
    bad_host = report(recorded.files["pool_token"], "--live", "--github-host", "ftp://x")
    assert bad_host.returncode == 1 and "is not a GitHub host" in bad_host.stderr


def _outside_code(html_text: str) -> str:
    return re.sub(r"<code>.*?</code>", "", html_text, flags=re.S)


def test_markdown_quotes_every_value_so_that_a_branch_cannot_forge_the_comment(recorded: Recorded) -> None:
    """Hostile labels (set through the real CLI) and resource names reach the comment as code spans: GitHub's own
    Markdown (cmark-gfm) makes no link, image, HTML or mention of them, and every row keeps its cells."""
    preview = json.loads(recorded.files["hostile"].read_text())
    hostile_name = "pool <!-- @octo-org/admins [x](https://evil.example) ``|"
    for step in preview["steps"]:
        step["urn"] = step["urn"].replace("::pool", f"::{hostile_name}")
    result = report("-", "--format", "markdown", stdin=json.dumps(preview))
    assert result.returncode == 2, result.stderr
    marker, body = result.stdout.split("\n", 1)
    assert marker == render.MARKDOWN_MARKER  # the one HTML comment: the workflow's, found by its first line
    html_text = cmarkgfm.github_flavored_markdown_to_html(body, options=cmarkgfm.cmark.Options.CMARK_OPT_UNSAFE)
    assert not re.search(r"<(a|img|script)\b|<!--", html_text), html_text
    outside = _outside_code(html_text)
    assert "@" not in outside and "evil.example" not in outside, outside
    rows = re.findall(r"<tr>(.*?)</tr>", html_text, flags=re.S)
    assert len(rows) == 2 and all(len(re.findall(r"<t[hd]>", row)) == 3 for row in rows), rows  # head, the pool
    codes = [html.unescape(code) for code in re.findall(r"<code>(.*?)</code>", html_text, flags=re.S)]
    assert hostile_name.replace("\\", "\\\\") in codes
    for label in HOSTILE_LABELS:
        assert label.replace("\\", "\\\\") in codes, (label, codes)


def test_what_cannot_show_is_written_out_and_cannot_start_a_line_of_its_own(recorded: Recorded) -> None:
    """A value's newline would start a line that a CI log reads as a workflow command; a bidirectional override
    or a zero-width mark would make a name read as another. Each is written out, in every form and in errors."""
    preview = json.loads(recorded.files["hostile"].read_text())
    step_of(preview, "pool")["newState"]["inputs"]["labels"] += [
        "x\n::error title=Approved::merge it",
        "a\u202eb\u200b",
    ]
    for form in ("text", "markdown"):
        output = report("-", "--format", form, stdin=json.dumps(preview)).stdout
        assert not any(line.startswith("::") for line in output.splitlines()), output
        assert "a[U+202E]b[U+200B]" in output
        assert ("[U+000A]::error" if form == "text" else "x ::error") in output  # a code span is one line
    failed = report(stdin=json.dumps({"diagnostics": [{"severity": "error", "message": "boom\n::add-mask::x"}]}))
    assert failed.returncode == 1 and len(failed.stderr.splitlines()) == 1, failed.stderr


def test_a_lone_runner_s_hidden_labels_may_be_relabelled(recorded: Recorded) -> None:
    preview = json.loads(recorded.files["labels"].read_text())
    runner = step_of(preview, "runner-0")
    runner["oldState"]["outputs"]["labels"] = runner["newState"]["inputs"]["labels"] = "[secret]"
    preview["steps"] = [runner]
    [change] = build_report(preview).changes
    assert (change.action, change.what, change.writes.relabels) == ("relabel", "may relabel its runner in place", 1)
    assert change.reasons == ["labels changed (the preview hides its value as a secret)"]


def test_live_lists_at_most_twenty_scopes_however_many_a_preview_names(recorded: Recorded) -> None:
    sim = recorded.sim
    preview = json.loads(recorded.files["pool_token"].read_text())
    pool = step_of(preview, "pool")
    preview["steps"] = []
    for index in range(25):  # 25 pools, each in a repository of its own on the simulator's host
        step = json.loads(json.dumps(pool))
        step["urn"] += f"-{index}"
        step["oldState"]["outputs"]["github_url"] = f"{sim.github.url}/octo-org/repo-{index}"
        preview["steps"].append(step)
    calls = len(sim.github.calls())
    result = report("-", "--live", "--format", "json", stdin=json.dumps(preview), env={"GITHUB_TOKEN": sim.credential})
    document = json.loads(result.stdout)
    listed = {c["path"] for c in sim.github.calls()[calls:]}
    assert len(listed) == 20 and document["live"]["not_looked_up"] == 5 * 4, listed
    assert sum("a look lists at most 20 GitHub scopes" in n for n in document["notices"]) == 5
