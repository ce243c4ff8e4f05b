"""GitHub App authentication through the SDK's provider server: the installation found for the scope, its token
shared and renewed (before it expires, and when GitHub refuses it) in the middle of a rotation, every wrong
configuration a Check failure naming its property, and nothing of the key or a token left in the state."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator

import pytest

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool
from pulumi_actions_runners.github.auth import github_auth
from pulumi_actions_runners.github.credentials import InvalidCredential
from pulumi_actions_runners.redaction import REDACTED, remember, scrub
from tests.conftest import ROOT, quick_simulator
from tests.helpers import NAMESPACE, outputs
from tests.programs import credentials_from_environment

WITHOUT_GITHUB_CREDENTIALS = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_TOKEN", "GITHUB_APP"))}


@pytest.fixture
def short_lived(kube_api_server: KubeApiServer) -> Iterator[Simulator]:
    """Installation tokens that live 6 s: renewed every 3 s by the provider."""
    with quick_simulator(kube_api_server, app_token_lifetime=6) as simulator:
        yield simulator


def app_fleet(
    sim: Simulator, *, image: str = "ghcr.io/actions/actions-runner:2.336.0", **app: object
) -> Callable[[], None]:
    """A RegistrationToken, a Runner and a RunnerPool of 3, all authenticated as the simulator's App."""
    app = app or {"github_app_id": sim.app_id, "github_app_private_key": sim.app_private_key}

    def program() -> None:
        common = {"github_url": sim.repo_url, **app}
        token = RegistrationToken("registration", **common)
        settings = {"namespace": NAMESPACE, "kubeconfig": str(sim.kubeconfig), "image": image, **common}
        Runner("runner", registration_token=token, grace_period_seconds=0.3, **settings)
        RunnerPool(
            "pool",
            pool_name="pool",
            replicas=3,
            max_unavailable=1,
            jit_config=True,
            grace_period_seconds=1.5,
            **settings,
        )

    return program


def bearers(sim: Simulator, path_regex: str) -> set[str]:
    """The kinds of bearer the GitHub double saw on these paths: "jwt", "installation", "pat"."""
    kinds = set()
    for call in sim.github.calls(path_regex=path_regex):
        bearer = call["headers"].get("Authorization", "").removeprefix("Bearer ")
        kinds.add("installation" if bearer.startswith("ghs_") else "pat" if bearer.startswith("ghp_") else "jwt")
    return kinds


def test_runners_register_and_rotate_as_a_github_app_whose_token_is_renewed_mid_rotation(short_lived) -> None:
    sim = short_lived
    with MiniEngine(ROOT, env=WITHOUT_GITHUB_CREDENTIALS) as engine:
        engine.up(app_fleet(sim))
        assert len([r for r in sim.github.runners() if r["status"] == "online"]) == 4
        # The installation was found for the repository, then its token used for every runner call.
        assert [c["status"] for c in sim.github.calls("GET", r"^/repos/octo-org/ci/installation$")] == [200]
        assert bearers(sim, r"/installation$|/access_tokens$") == {"jwt"}
        assert bearers(sim, r"/actions/runners") == {"installation"}
        issued_before = len(sim.github.apps.issued)

        # A rotation of the pool (one runner at a time, 1.5 s of grace each, while one runner holds a job for 4 s)
        # outlives the 6 s token: the provider renews it halfway through its life, and no call is refused.
        sim.github.start_job("pool-0", 4.0)
        engine.up(app_fleet(sim, image="ghcr.io/actions/actions-runner:2.335.0"))
        assert {r["spec_hash"] for r in outputs(engine, "pool")["runners"]} == {outputs(engine, "pool")["spec_hash"]}
        assert len(sim.github.apps.issued) >= issued_before + 2
        assert [c for c in sim.github.calls(path_regex="/actions/runners") if c["status"] == 401] == []
        assert sim.runners.jobs_killed == []

        # GitHub refuses the token it gave (revoked): one 401, a new token, and the call goes through. The token
        # revoked is an hour's, which the provider would not have renewed by itself.
        sim.github.apps.token_lifetime = 3600
        time.sleep(3.5)  # past half of the 6 s token's life: the next call renews it, for an hour
        engine.refresh()
        sim.github.apps.revoke_tokens()
        engine.refresh()
        statuses = [c["status"] for c in sim.github.calls(path_regex="/actions/runners")]
        assert 401 in statuses and statuses[-1] == 200

        exported = json.dumps(engine.export())
        for secret in [*sim.github.apps.issued, *sim.app_private_key.splitlines()[1:-1]]:
            assert secret not in exported
        assert "ghp_" not in exported
        engine.destroy()
    assert sim.github.runners() == []


def test_the_app_comes_from_the_environment_of_pulumi(sim) -> None:
    env = {
        **WITHOUT_GITHUB_CREDENTIALS,
        "GITHUB_APP_ID": str(sim.app_id),
        "GITHUB_APP_PRIVATE_KEY": sim.app_private_key,
    }
    env["GITHUB_APP_INSTALLATION_ID"] = str(sim.app_installation_id)  # given: no lookup

    with MiniEngine(ROOT, env=env) as engine:
        engine.up(credentials_from_environment(sim))
        assert [r["status"] for r in sim.github.runners()] == ["online"]
        assert sim.github.calls(path_regex=r"/installation$") == []
        assert bearers(sim, r"/actions/runners") == {"installation"}
        engine.destroy()


def _check_failures(sim: Simulator, program: Callable[[], None], env: dict[str, str] | None = None) -> dict[str, str]:
    with MiniEngine(ROOT, env=env or WITHOUT_GITHUB_CREDENTIALS) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.preview(program)
    found: dict[str, str] = {}
    for cause in raised.value.errors:
        assert isinstance(cause, CheckFailed), cause
        found |= dict(cause.failures)
    return found


def test_every_wrong_app_configuration_is_a_check_failure_naming_its_property(sim) -> None:
    key = sim.app_private_key
    cases = [
        (
            {"github_token": sim.credential, "github_app_id": sim.app_id, "github_app_private_key": key},
            "github_app_id",
            "not both",
        ),
        (
            {"github_app_id": sim.app_id},
            "github_app_private_key",
            "github_app_private_key is required with github_app_id",
        ),
        ({"github_app_private_key": key}, "github_app_id", "github_app_id is required"),
        (
            {
                "github_app_id": sim.app_id,
                "github_app_private_key": "-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----",
            },
            "github_app_private_key",
            "is not a PEM RSA private key",
        ),
        ({"github_app_id": "my app", "github_app_private_key": key}, "github_app_id", "is not a GitHub App id"),
        (
            {"github_app_id": sim.app_id, "github_app_private_key": key, "github_app_installation_id": -3},
            "github_app_installation_id",
            "whole number",
        ),
    ]
    for app, prop, reason in cases:
        failures = _check_failures(sim, app_fleet(sim, **app))
        assert prop in failures and reason in failures[prop], (app.keys(), failures)
        assert key.splitlines()[1] not in json.dumps(failures) and sim.credential not in json.dumps(failures)

    def enterprise() -> None:
        RegistrationToken(
            "registration",
            github_url=f"{sim.github.url}/enterprises/octo",
            github_app_id=sim.app_id,
            github_app_private_key=key,
        )

    failures = _check_failures(sim, enterprise)
    assert "personal access token (classic)" in failures["github_app_id"], failures
    both = {**WITHOUT_GITHUB_CREDENTIALS, "GITHUB_TOKEN": sim.credential, "GITHUB_APP_ID": str(sim.app_id)}
    failures = _check_failures(sim, lambda: RegistrationToken("registration", github_url=sim.repo_url), both)
    assert "both GITHUB_TOKEN and GITHUB_APP_ID are in the environment" in failures["github_token"], failures
    assert sim.github.calls() == []  # Check alone


def test_an_app_not_installed_on_the_scope_fails_saying_so(sim) -> None:
    def program() -> None:
        RegistrationToken(
            "registration",
            github_url=f"{sim.github.url}/elsewhere/repo",
            github_app_id=sim.app_id,
            github_app_private_key=sim.app_private_key,
        )

    with MiniEngine(ROOT, env=WITHOUT_GITHUB_CREDENTIALS) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.up(program)
    message = str(raised.value)
    assert f"GitHub App {sim.app_id} is not installed on elsewhere/repo" in message, message
    assert sim.app_private_key.splitlines()[1] not in message


def test_refresh_and_destroy_judge_the_environment_by_check_s_rules(sim, monkeypatch) -> None:
    """They run no Check: an App half given in the environment is refused by name, not met with a KeyError."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.setenv("GITHUB_APP_ID", str(sim.app_id))
    monkeypatch.delenv("GITHUB_APP_PRIVATE_KEY", raising=False)
    with pytest.raises(InvalidCredential, match="GITHUB_APP_PRIVATE_KEY in the environment is required"):
        github_auth({"github_url": sim.repo_url})


def test_the_key_is_scrubbed_but_not_the_words_of_every_pem_block(sim) -> None:
    remember(sim.app_private_key)
    line = sim.app_private_key.splitlines()[3]
    assert scrub(f"echoed: {line}") == f"echoed: {REDACTED}"
    assert scrub("x509: -----BEGIN CERTIFICATE----- is malformed") == "x509: -----BEGIN CERTIFICATE----- is malformed"
