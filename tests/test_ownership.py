"""Runner names are unique per GitHub repository, organization or enterprise: a registration that another stack
(or anyone) holds under a name is never taken over, removed or swept, busy or idle.

Each scenario runs two stacks of the same project against one simulated GitHub scope, each in a namespace of
its own (as two clusters, or two copies of a stack, would).
"""

from __future__ import annotations

import pytest

from actions_runners_simulator.engine import DeploymentFailed, MiniEngine
from pulumi_actions_runners.github.client import GitHubClient
from pulumi_actions_runners.github.url import parse_github_url
from pulumi_actions_runners.providers.runner_pool import RunnerPoolProvider
from tests.conftest import ROOT
from tests.helpers import NAMESPACE, core_api, expiry_of, new_token, outputs, owner_label, sha256
from tests.programs import jit_runner, runner_with_token, token_and_pool

OTHER_NAMESPACE = "other-cluster"


@pytest.fixture
def other_namespace(sim) -> str:
    core_api(sim).create_namespace({"metadata": {"name": OTHER_NAMESPACE}})
    return OTHER_NAMESPACE


def _nothing_written(sim, namespace: str) -> bool:
    return sim.kube.pods(namespace) == [] and sim.kube.secrets(namespace) == []


def test_a_runner_name_another_stack_holds_fails_create_before_writing_anything_and_its_job_lives(
    sim, other_namespace
) -> None:
    with MiniEngine(ROOT, stack="team-a") as team_a:
        team_a.up(runner_with_token(sim, new_token(sim), runner_name="build-1"))
        theirs = outputs(team_a, "runner")
    sim.github.start_job("build-1", None)  # held: it would be lost if config.sh --replace took the name over

    with (
        MiniEngine(ROOT, stack="team-b") as team_b,
        pytest.raises(DeploymentFailed, match=r"runner_name 'build-1'.* already registered in .*octo-org/ci") as err,
    ):
        team_b.up(runner_with_token(sim, new_token(sim), runner_name="build-1", namespace=other_namespace))

    assert "Nothing was created. Choose another runner_name" in str(err.value)
    assert _nothing_written(sim, other_namespace)
    registered = sim.github.runners()
    assert [(r["id"], r["busy"], r["status"]) for r in registered] == [(theirs["runner_id"], True, "online")]
    assert not [c for c in sim.github.calls("DELETE")], "nothing of the other runner may be removed"
    sim.github.finish_job("build-1")
    assert sim.runners.jobs_killed == []


def test_the_simulator_loses_the_job_of_a_busy_registration_that_config_sh_replace_takes_over(sim) -> None:
    """What the check above prevents, shown on the simulator: the regression the suite must be able to see."""
    with MiniEngine(ROOT, stack="team-a") as team_a:
        team_a.up(runner_with_token(sim, new_token(sim), runner_name="build-1"))
    sim.github.start_job("build-1", None)

    class Listener:
        def job_started(self) -> None: ...
        def job_finished(self) -> None: ...
        def removed(self) -> None: ...

    sim.github.register_runner(
        github_url=sim.repo_url, token=new_token(sim), name="build-1", labels=[], ephemeral=True, listener=Listener()
    )

    assert sim.runners.jobs_killed == ["build-1"]


def test_a_pool_whose_runner_names_another_stack_holds_fails_before_writing_anything(sim, other_namespace) -> None:
    with MiniEngine(ROOT, stack="team-a") as team_a:
        team_a.up(token_and_pool(sim, new_token(sim), replicas=2))
    sim.github.start_job("pool-1", None)

    with (
        MiniEngine(ROOT, stack="team-b") as team_b,
        pytest.raises(DeploymentFailed, match=r"pool_name 'pool': 2 names: pool-0 .* pool-1 .*running a job") as err,
    ):
        team_b.up(token_and_pool(sim, new_token(sim), replicas=3, namespace=other_namespace))

    assert "Nothing was created" in str(err.value)
    assert _nothing_written(sim, other_namespace)
    assert sorted((r["name"], r["busy"]) for r in sim.github.runners()) == [("pool-0", False), ("pool-1", True)]
    assert not sim.github.calls("DELETE")
    sim.github.finish_job("pool-1")
    assert sim.runners.jobs_killed == []


def test_a_pool_recreated_after_a_crash_takes_back_the_names_it_registered_itself(sim) -> None:
    """The ownership label survives a lost state: the same stack's pool adopts its own registrations."""
    token = new_token(sim)
    with MiniEngine(ROOT, stack="team-a") as first:
        first.up(token_and_pool(sim, token, replicas=2))
    with MiniEngine(ROOT, stack="team-a") as again:  # the same stack, its state lost
        again.up(token_and_pool(sim, token, replicas=2))
        runners = outputs(again, "pool")["runners"]

    assert sorted(r["name"] for r in runners) == ["pool-0", "pool-1"]
    online = {r["name"] for r in sim.github.runners() if r["status"] == "online"}
    assert online == {"pool-0", "pool-1"}


def test_a_just_in_time_name_registered_by_someone_else_is_left_alone(sim) -> None:
    with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
        theirs = github.generate_jitconfig("jit-runner", ["self-hosted"])  # not our label: not ours

    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed, match="runner_name 'jit-runner'"):
        engine.up(jit_runner(sim, runner_name="jit-runner"))

    assert [r["id"] for r in sim.github.runners()] == [theirs.runner_id]
    assert _nothing_written(sim, NAMESPACE)
    assert not sim.github.calls("DELETE")


def test_a_just_in_time_registration_that_is_ours_is_taken_back_after_a_lost_answer_even_from_the_409(sim) -> None:
    """The check by name passes it (our label); generate-jitconfig's 409 then leads to removing our own."""
    with MiniEngine(ROOT) as engine:
        ours = owner_label(engine, "Runner", "runner")
        with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
            lost = github.generate_jitconfig("jit-runner", ["self-hosted", ours])
        engine.up(jit_runner(sim, runner_name="jit-runner"))
        out = outputs(engine, "runner")

    assert [c["path"].rsplit("/", 1)[1] for c in sim.github.calls("DELETE")] == [str(lost.runner_id)]
    assert [r["id"] for r in sim.github.runners()] == [out["runner_id"]]


def test_a_pool_of_the_same_name_in_the_same_namespace_is_not_taken_in(sim) -> None:
    """Pods carry their resource's ownership label too: another stack's pool of the same name is never
    mistaken for runners a cut-short update left behind."""
    with MiniEngine(ROOT, stack="team-a") as team_a:
        team_a.up(token_and_pool(sim, new_token(sim), replicas=2))
    sim.github.start_job("pool-0", None)
    pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)}
    secrets_before = sorted(s["metadata"]["name"] for s in sim.kube.secrets(NAMESPACE))

    with (
        MiniEngine(ROOT, stack="team-b") as team_b,
        pytest.raises(DeploymentFailed, match=r"pool_name 'pool': pods pool-0, pool-1 .* belong to another"),
    ):
        team_b.up(token_and_pool(sim, new_token(sim), replicas=2))

    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(NAMESPACE)} == pods_before
    assert sorted(s["metadata"]["name"] for s in sim.kube.secrets(NAMESPACE)) == secrets_before
    assert not sim.github.calls("DELETE")
    sim.github.finish_job("pool-0")
    assert sim.runners.jobs_killed == []


def test_a_pool_keeps_the_ownership_it_was_made_with_when_its_ownership_id_changes(sim) -> None:
    """A stack or project renamed (with an alias) gives the resource another ownership id; its runners keep the
    one they were made with, so that the pool still knows its own registrations."""
    with MiniEngine(ROOT, stack="team-a") as engine:
        engine.up(token_and_pool(sim, new_token(sim), replicas=2))
        olds = outputs(engine, "pool")
        made_with = owner_label(engine, "RunnerPool", "pool")
    token = new_token(sim)
    news = {
        **olds,
        "registration_token": token,
        "registration_token_expires_at": expiry_of(token),
        "token_hash": sha256(token),
        "replicas": 3,
        "owner": "f" * 16,  # what the renamed stack computes
    }

    outs = RunnerPoolProvider().update("actions-runners/pool", olds, news).outs

    assert outs["problems"] == [] and outs["owner"] == olds["owner"]
    labels = {r["name"]: {label["name"] for label in r["labels"]} for r in sim.github.runners()}
    assert sorted(labels) == ["pool-0", "pool-1", "pool-2"]
    assert all(made_with in names for names in labels.values())
