"""Runner groups of an organization: looked up by name at Create (never in Check or Diff), used for token and
just-in-time registrations alike; an unknown group fails before anything is made, a repository's runners have
none, and a changed group recreates runners."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine
from actions_runners_simulator.simulator import OWNER, Simulator
from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool
from tests.conftest import ROOT
from tests.helpers import NAMESPACE, calls_but_the_release_list


def org_runners(sim: Simulator, group: str) -> Callable[[], None]:
    """An organization's token Runner and just-in-time pool of 2, in ``group``."""
    org_url = f"{sim.github.url}/{OWNER}"

    def program() -> None:
        common = {"github_url": org_url, "github_token": sim.credential}
        settings = {**common, "namespace": NAMESPACE, "kubeconfig": str(sim.kubeconfig), "runner_group": group}
        settings["grace_period_seconds"] = 0.3
        token = RegistrationToken("registration", **common)
        Runner("runner", registration_token=token, **settings)
        RunnerPool("pool", pool_name="pool", replicas=2, jit_config=True, max_unavailable="100%", **settings)

    return program


def test_runners_register_in_their_organization_s_runner_group(sim) -> None:
    large = sim.github.add_runner_group(f"orgs/{OWNER}", "large")
    small = sim.github.add_runner_group(f"orgs/{OWNER}", "small")
    with MiniEngine(ROOT) as engine:
        engine.up(org_runners(sim, "large"))
        assert [r["runner_group_id"] for r in sim.github.runners()] == [large] * 3
        assert len(sim.github.calls("GET", r"/actions/runner-groups$")) == 1  # one lookup for the whole run

        requests = len(sim.github.calls())
        steps = {s.name: (s.op, s.reasons) for s in engine.preview(org_runners(sim, "small"))}
        assert steps["runner"] == ("replace", ("runner_group",)) and steps["pool"][0] == "update"
        assert calls_but_the_release_list(sim, requests) == []  # no group lookup in Check or Diff
        engine.up(org_runners(sim, "small"))
        assert {r["runner_group_id"] for r in sim.github.runners()} == {small}
        assert sim.runners.jobs_killed == []
        engine.destroy()


def test_an_unknown_group_fails_create_naming_runner_group_and_the_groups_there_are(sim) -> None:
    sim.github.add_runner_group(f"orgs/{OWNER}", "large")
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.up(org_runners(sim, "gpu"))
    for error in raised.value.errors:
        assert f"runner_group 'gpu' is not a runner group of orgs/{OWNER}, which has: Default, large" in str(error)
    assert len(raised.value.errors) == 2  # the Runner and the pool
    assert sim.github.calls("POST", "generate-jitconfig") == [] and sim.github.runners() == []
    assert sim.kube.pods(NAMESPACE) == [] and sim.kube.secrets(NAMESPACE) == []


def test_a_repository_s_runners_have_no_runner_group(sim) -> None:
    def program() -> None:
        Runner(
            "runner",
            github_url=sim.repo_url,
            namespace=NAMESPACE,
            jit_config=True,
            github_token=sim.credential,
            runner_group="large",
        )

    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.preview(program)
    [error] = raised.value.errors
    assert isinstance(error, CheckFailed)
    assert "always in the Default group" in dict(error.failures)["runner_group"]
