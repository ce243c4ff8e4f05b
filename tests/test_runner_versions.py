"""The runner version through the real CLI: runners with no image track the newest actions/runner release, which
Check learns from the simulated GitHub once per preview or update; a newer release shows in the preview as a
rotation with GitHub's deadline as its reason; a pinned image behind the newest is warned of and gates a
pipeline; GitHub's answer failing keeps the state's version."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners.github.releases import KNOWN_IMAGE, KNOWN_RELEASE
from tests.conftest import ROOT, quick_simulator, wait_until
from tests.helpers import NAMESPACE, new_token, outputs, up_while_busy
from tests.programs import runner_with_token, token_and_pool
from tests.test_cli_e2e import pool_outputs
from tests.test_report import report

RELEASES = "/repos/actions/runner/releases"
DAY = timedelta(days=1)


@pytest.fixture
def sim(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    """GitHub lists 2.336.0 (published 40 days ago) and 2.337.0 (10 days ago): 2.336.0 gets jobs 20 more days."""
    now = datetime.now(UTC)
    releases = [("2.336.0", _rfc3339(now - 40 * DAY)), ("2.337.0", _rfc3339(now - 10 * DAY))]
    with quick_simulator(kube_api_server, runner_releases=releases) as simulator:
        yield simulator


@pytest.fixture
def stack(cli_dir: Path, sim: Simulator) -> Iterator[PulumiWorkspace]:
    with PulumiWorkspace(ROOT, cli_dir) as workspace:
        config = sim.stack_config(runners=2, grace_period_seconds=1, pool=True) | {"maxUnavailable": "100%"}
        workspace.new_stack(config=config, secrets={"githubToken": sim.credential})
        yield workspace


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def images(sim: Simulator) -> set[str]:
    return {pod["spec"]["containers"][0]["image"] for pod in sim.kube.pods(NAMESPACE)}


def test_a_pool_tracks_the_newest_release_and_a_new_one_rotates_it_with_its_deadline_as_the_reason(
    stack: PulumiWorkspace, sim: Simulator
) -> None:
    stack.run("up", "--yes")
    assert images(sim) == {"ghcr.io/actions/actions-runner:2.337.0"}
    assert pool_outputs(stack)["runner_version"] == "2.337.0"
    assert [r["runner_version"] for r in pool_outputs(stack)["runners"]] == ["2.337.0"] * 2  # each runner's
    looked = sim.github.calls("GET", RELEASES)
    assert looked and len(looked) <= 2, looked  # once per process: the up's preview, and its update

    assert "~  " not in stack.run("preview").stdout  # nothing new: no change

    published = datetime.now(UTC) - DAY
    sim.github.releases.publish("2.338.0", published)
    preview = stack.run("preview").stdout
    deadline = (published + 30 * DAY).strftime("%Y-%m-%d")
    said = f"actions/runner 2.338.0 was released on {published:%Y-%m-%d}; 2.337.0 stops receiving jobs after {deadline}"
    assert "RunnerPool pool update" in preview and said in preview, preview
    recorded = stack.run("preview", "--json").stdout
    text = report("-", stdin=recorded).stdout
    assert said in text and "RunnerPool pool  rotate 2 of 2 runners" in text, text

    [busy, *_] = pool_outputs(stack)["runners"]
    up_while_busy(stack, sim, busy["name"], int(busy["id"]))
    assert images(sim) == {"ghcr.io/actions/actions-runner:2.338.0"}
    assert pool_outputs(stack)["runner_version"] == "2.338.0" and sim.runners.jobs_killed == []
    assert [r["runner_version"] for r in pool_outputs(stack)["runners"]] == ["2.338.0"] * 2


def test_a_pinned_image_behind_the_newest_is_warned_of_and_fails_a_gated_pipeline(
    stack: PulumiWorkspace, sim: Simulator
) -> None:
    stack.run("config", "set", "image", "ghcr.io/actions/actions-runner:2.336.0")
    up = stack.run("up", "--yes")
    deadline = (datetime.now(UTC) - 10 * DAY + 30 * DAY).strftime("%Y-%m-%d")
    warning = (
        "a pinned image runs actions/runner 2.336.0, behind the newest release: GitHub stops sending it jobs after "
        + deadline
    )
    assert warning in up.stdout + up.stderr, up.stdout
    assert images(sim) == {"ghcr.io/actions/actions-runner:2.336.0"}

    recorded = stack.run("preview", "--json", "--show-sames").stdout  # unchanged resources too
    assert report("-", stdin=recorded).returncode == 0  # no change: the pin is the user's
    unseen = report("-", "--fail-on", "deprecated", stdin=stack.run("preview", "--json").stdout)
    assert unseen.returncode == 1 and "--show-sames" in unseen.stdout + unseen.stderr, unseen.stderr  # blind: fails
    gated = report("-", "--fail-on", "deprecated", stdin=recorded)
    assert gated.returncode == 1 and "GitHub stops sending it jobs after" in gated.stdout, gated.stdout
    document = json.loads(report("-", "--format", "json", stdin=recorded).stdout)
    assert document["deprecated"] == [
        {
            "type": "RunnerPool",
            "name": "pool",
            "runner_version": "2.336.0",
            "newest": "2.337.0",
            "no_jobs_after": document["deprecated"][0]["no_jobs_after"],
        }
    ]
    assert document["deprecated"][0]["no_jobs_after"].startswith(deadline)


def test_a_release_list_github_will_not_give_keeps_the_state_s_version_and_says_so_once(
    stack: PulumiWorkspace, sim: Simulator
) -> None:
    stack.run("up", "--yes")
    sim.github.releases.publish("2.338.0")
    sim.github.fail_next(503, count=50, method="GET", path_regex=RELEASES)
    preview = stack.run("preview")
    output = preview.stdout + preview.stderr
    assert "~  " not in preview.stdout, preview.stdout  # the recorded 2.337.0 stays
    [_, diagnostics] = output.split("Diagnostics:")  # the CLI shows each line as it comes, then once more here
    assert diagnostics.count("actions/runner's releases could not be read") == 1, output
    assert "keep 2.337.0" in output, output
    recorded = stack.run("preview", "--json", "--show-sames").stdout  # a new process: it asks, and is refused
    noted = report("-", stdin=recorded).stdout
    assert "could not read GitHub's list" in noted and "may rotate its runners" in noted, noted
    sim.github.clear_faults()
    assert "RunnerPool pool update" in stack.run("preview").stdout  # answered again: the rotation shows


def test_with_no_answer_and_nothing_recorded_a_first_create_runs_the_provider_s_known_release(
    sim: Simulator,
) -> None:
    """Through the engine stand-in: GitHub's list refused, a new pool starts on KNOWN_RELEASE, saying so."""
    sim.github.fail_next(503, count=50, method="GET", path_regex=RELEASES)
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_pool(sim, None, jit_config=True, replicas=1))
        assert images(sim) == {KNOWN_IMAGE}
        said = "\n".join(engine.provider.stderr_lines)
        assert f"new runners that track the newest release get {KNOWN_RELEASE.version}, the provider's own" in said
        assert said.count("actions/runner's releases could not be read") == 1, said
        engine.destroy()


@pytest.mark.parametrize(
    ("version", "allowed"),
    [("2.300.0", "GitHub registers runners from 2.329.0 on"), ("latest", "use MAJOR.MINOR.PATCH, as 2.337.0")],
)
def test_a_runner_version_github_would_refuse_or_that_names_none_is_a_check_failure(
    sim: Simulator, version: str, allowed: str
) -> None:
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.preview(
            token_and_pool(sim, None, jit_config=True, image="my.registry/runner:dev", runner_version=version)
        )
    [failure] = [e for e in raised.value.errors if isinstance(e, CheckFailed)]
    assert allowed in dict(failure.failures)["runner_version"], failure.failures


def test_a_refilling_pool_rolls_to_a_new_job_for_a_new_release(sim: Simulator) -> None:
    with MiniEngine(ROOT) as engine:
        token = new_token(sim)
        program = token_and_pool(sim, token, refill=True, replicas=2, max_unavailable=1)
        engine.up(program)
        assert outputs(engine, "pool")["job"] == "pool-j1" and images(sim) == {"ghcr.io/actions/actions-runner:2.337.0"}
        sim.github.releases.publish("2.338.0")
        engine.new_provider_process()  # a new preview or update: the provider learns the list anew
        [step] = [s for s in engine.preview(program) if s.name == "pool"]
        assert step.op == "update" and "runner_version" in step.reasons, step
        engine.up(program)
        assert outputs(engine, "pool")["job"] == "pool-j2"
        wait_until(lambda: images(sim) == {"ghcr.io/actions/actions-runner:2.338.0"}, "the new Job's pods only")
        assert sim.runners.jobs_killed == []
        engine.refresh()  # each runner's version, as its pod's image names it
        assert [r["runner_version"] for r in outputs(engine, "pool")["runners"]] == ["2.338.0"] * 2
        engine.destroy()


def test_a_replacement_checked_without_its_old_inputs_keeps_the_recorded_version_when_github_cannot_be_asked(
    sim: Simulator,
) -> None:
    """The engine checks a replacement anew with no old inputs: with GitHub's list refused, the new runner keeps
    the version this process saw recorded, not the provider's older KNOWN_RELEASE."""
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, new_token(sim)))
        assert images(sim) == {"ghcr.io/actions/actions-runner:2.337.0"}
        sim.github.fail_next(503, count=50, method="GET", path_regex=RELEASES)
        engine.new_provider_process()
        [step] = [s for s in engine.up(runner_with_token(sim, new_token(sim))) if s.name == "runner"]
        assert step.op == "replace", step  # a new token
        wait_until(lambda: len(sim.kube.pods(NAMESPACE)) == 1, "the old pod gone")
        assert images(sim) == {"ghcr.io/actions/actions-runner:2.337.0"}, images(sim)
        engine.destroy()


def test_a_runner_whose_pinned_image_is_the_tracked_one_moves_to_tracking_and_records_it_at_its_next_update(
    sim: Simulator,
) -> None:
    """As a 0.2.0 stack's Runner does (its default image was written as its input): the program drops the image,
    which is the newest release's, so nothing is replaced; the next update records the tracked version."""
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, token, image="ghcr.io/actions/actions-runner:2.337.0"))
        [step] = [s for s in engine.up(runner_with_token(sim, token, grace_period_seconds=1)) if s.name == "runner"]
        assert step.op == "update", step  # the same image: a setting changed, no replacement
        recorded = outputs(engine, "runner")
        assert (recorded.get("image"), recorded["runner_version"]) == (None, "2.337.0"), recorded
        assert recorded["runner_release"]["tracking"] is True
        engine.destroy()
