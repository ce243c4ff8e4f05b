"""Check rejects bad input by property, with what is allowed; Diff decides replace vs update without the network."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pulumi.output import Unknown

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine
from pulumi_actions_runners import RegistrationToken, Runner
from pulumi_actions_runners.github.credentials import token_hash
from pulumi_actions_runners.providers.runner import RunnerProvider
from tests.conftest import ROOT
from tests.helpers import calls_but_the_release_list
from tests.programs import token_and_runners


def _failures(error: DeploymentFailed) -> dict[str, str]:
    found = {}
    for cause in error.errors:
        assert isinstance(cause, CheckFailed), f"expected a Check failure, got {cause!r}"
        found.update(dict(cause.failures))
    return found


def test_every_bad_runner_input_is_a_check_failure_naming_the_property(sim) -> None:
    def program() -> None:
        Runner(
            "bad",
            github_url="ftp://example.com/a/b",
            namespace="Not_A_Namespace",
            registration_token="",
            runner_name="Runner_One",
            labels=["gpu,large"],
            ephemeral="yes",
            image="an image",
            grace_period_seconds=-1,
            unregister_timeout_seconds=1e9,
            register_timeout_seconds=0,
            github_token=" ",
        )

    kube_requests = len(sim.kube.requests())
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.preview(program)

    failures = _failures(raised.value)
    assert set(failures) == {
        "github_url",
        "namespace",
        "registration_token",
        "runner_name",
        "labels",
        "ephemeral",
        "image",
        "grace_period_seconds",
        "unregister_timeout_seconds",
        "register_timeout_seconds",
        "github_token",
    }
    assert "https://HOST/OWNER/REPO" in failures["github_url"]
    assert "lowercase letters, digits or '-'" in failures["namespace"]
    assert "from 0 to 3600" in failures["grace_period_seconds"]
    assert "without commas" in failures["labels"]
    assert all("Traceback" not in reason for reason in failures.values())
    assert sim.github.calls() == [] and len(sim.kube.requests()) == kube_requests


def test_a_kubeconfig_that_is_not_a_path_is_a_check_failure_and_one_not_there_is_not(sim, tmp_path) -> None:
    """Check judges the value; whether a kubeconfig is there is judged by the call that needs the cluster, since a
    pipeline's preview has none (tests/test_kubeconfig.py)."""

    def program(kubeconfig: object) -> Callable[[], None]:
        return lambda: Runner(
            "runner",
            github_url=sim.repo_url,
            namespace="actions-runners",
            registration_token="AREGISTRATIONTOKEN",
            github_token=sim.credential,
            kubeconfig=kubeconfig,
        )

    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.preview(program(" "))
    assert _failures(raised.value) == {
        "kubeconfig": "must be the path of a kubeconfig file, read when a call needs the cluster (a preview needs "
        "none), or left out for KUBECONFIG / ~/.kube/config / in-cluster"
    }

    with MiniEngine(ROOT) as engine:
        assert [step.op for step in engine.preview(program(str(tmp_path / "missing")))] == ["create"]


def test_bad_registration_token_inputs_are_check_failures(sim) -> None:
    def program() -> None:
        RegistrationToken(
            "bad", github_url="https://github.com/a/b/c", refresh_before_seconds=5000, github_token="ghp_example"
        )

    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.preview(program)

    failures = _failures(raised.value)
    assert set(failures) == {"github_url", "refresh_before_seconds"}
    assert "from 0 to 3000" in failures["refresh_before_seconds"]


def test_preview_of_a_new_stack_accepts_the_unknown_token(sim) -> None:
    with MiniEngine(ROOT) as engine:
        steps = engine.preview(token_and_runners(sim, count=2))
    assert sorted(s.op for s in steps) == ["create"] * 3
    assert calls_but_the_release_list(sim) == [] and sim.kube.pods("actions-runners") == []


# Outputs as a Runner wrote them before jit_config existed: upgrading the package must not recreate it.
OLD = {
    "github_url": "http://127.0.0.1:9/octo-org/ci",  # Check reads the release list there: refused at once, kept local
    "namespace": "ci",
    "runner_name": "runner-0",
    "labels": ["gpu", "linux"],
    "ephemeral": True,
    "image": "ghcr.io/actions/actions-runner:2.329.0",
    "grace_period_seconds": 30.0,
    "unregister_timeout_seconds": 600.0,
    "register_timeout_seconds": 300.0,
    "github_token": "ghp_example",
    "kubeconfig": None,
    "token_hash": token_hash("TOKEN1"),
}


def _diff(**changes: object):
    """Check then Diff, as the engine calls them."""
    news = {**OLD, "registration_token": "TOKEN1", **changes}
    news.pop("token_hash", None)
    checked = RunnerProvider().check({}, news)
    assert checked.failures == []
    return RunnerProvider().diff("ci/runner-0", OLD, checked.inputs)


def test_diff_same_token_same_spec_is_no_change() -> None:
    assert _diff().changes is False


@pytest.mark.parametrize(
    ("changes", "replaces"),
    [
        ({"registration_token": "TOKEN2"}, ["token_hash"]),
        ({"registration_token": Unknown()}, ["token_hash"]),
        ({"image": "ghcr.io/actions/actions-runner:2.330.0"}, ["image"]),
        ({"jit_config": True, "registration_token": None}, ["token_hash", "jit_config"]),
        ({"namespace": "other", "registration_token": "TOKEN2"}, ["token_hash", "namespace"]),
    ],
)
def test_diff_replaces_delete_first_for_a_new_token_or_pod_spec(changes, replaces) -> None:
    result = _diff(**changes)
    assert (result.changes, result.replaces, result.delete_before_replace) == (True, replaces, True)


@pytest.mark.parametrize(
    "changes",
    [{"grace_period_seconds": 5.0}, {"github_token": "ghp_new"}, {"kubeconfig": __file__}, {"labels": ["gpu"]}],
)
def test_diff_updates_in_place_what_only_steers_the_provider_and_labels(changes) -> None:
    result = _diff(**changes)
    assert (result.changes, result.replaces) == (True, [])


def test_check_sorts_labels_so_reordering_them_recreates_nothing() -> None:
    checked = RunnerProvider().check({}, {**OLD, "registration_token": "T", "labels": ["linux", "gpu", "gpu"]})
    assert checked.failures == []
    assert checked.inputs["labels"] == ["gpu", "linux"]


def test_check_records_the_token_hash_as_an_input_unknown_while_the_token_is() -> None:
    known = RunnerProvider().check({}, {**OLD, "registration_token": "TOKEN2"}).inputs
    unknown = RunnerProvider().check({}, {**OLD, "registration_token": Unknown()}).inputs
    assert known["token_hash"] == token_hash("TOKEN2")
    assert isinstance(unknown["token_hash"], Unknown)
