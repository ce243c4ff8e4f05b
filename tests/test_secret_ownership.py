"""A runner's Secret is written and deleted only when it is that runner's own, judged by its metadata alone: a
Secret of the name that another tool, stack or person made is an error naming it (never overwritten), and is left
alone by a teardown (never deleted)."""

from __future__ import annotations

import base64
import json

import pytest

from actions_runners_simulator.engine import DeploymentFailed, MiniEngine
from pulumi_actions_runners.kube.client import METADATA_LIST_ONLY, METADATA_ONLY, KubeClient
from tests.conftest import ROOT
from tests.helpers import NAMESPACE, core_api, new_token, outputs
from tests.programs import jit_runner, token_and_pool, token_and_runners

THEIRS = {"app.kubernetes.io/name": "something-else"}


def their_secret(sim, name: str) -> dict:
    body = {"metadata": {"name": name, "labels": THEIRS}, "stringData": {"token": "theirs"}}
    return core_api(sim).create_namespaced_secret(NAMESPACE, body).to_dict()


def unchanged(sim, name: str, made: dict) -> bool:
    now = sim.kube.secret(NAMESPACE, name)
    same_version = now["metadata"]["resourceVersion"] == made["metadata"]["resource_version"]
    return same_version and base64.b64decode(now["data"]["token"]) == b"theirs"


@pytest.mark.parametrize(
    ("program", "secret"),
    [
        (lambda sim: token_and_runners(sim, 1, runner_name="shared"), "shared-registration"),
        (lambda sim: jit_runner(sim, runner_name="shared"), "shared-registration"),
        (lambda sim: token_and_pool(sim, new_token(sim), replicas=2), "pool-1-registration"),
    ],
)
def test_a_secret_of_the_name_made_by_someone_else_is_an_error_naming_it_and_is_not_overwritten(
    sim, program, secret
) -> None:
    made = their_secret(sim, secret)
    with MiniEngine(ROOT) as engine:
        with pytest.raises(DeploymentFailed) as failed:
            engine.up(program(sim))
        assert f"Secret {NAMESPACE}/{secret} exists and is not this runner's" in str(failed.value)
        assert unchanged(sim, secret, made)
        assert secret.removesuffix("-registration") not in {r["name"] for r in sim.github.runners()}
        assert secret.removesuffix("-registration") not in {p["metadata"]["name"] for p in sim.kube.pods(NAMESPACE)}
        engine.destroy()
    assert unchanged(sim, secret, made)


def test_a_teardown_leaves_a_secret_of_the_name_that_is_not_the_runners_alone(sim) -> None:
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_runners(sim, 1))
        name = outputs(engine, "runner-0")["secret_name"]
        core_api(sim).delete_namespaced_secret(name, NAMESPACE)  # ours went; someone made one of the name since
        made = their_secret(sim, name)

        engine.destroy()

        assert unchanged(sim, name, made)
        assert sim.kube.pods(NAMESPACE) == [] and sim.github.runners() == []


def test_secrets_are_judged_by_their_metadata_alone(sim) -> None:
    """Whose a Secret is, and which of a pool's are left over, is read without the data of any Secret."""
    their_secret(sim, "a-registration")
    bodies: list[tuple[str, dict]] = []
    with KubeClient(str(sim.kubeconfig)) as kube:
        api = kube._core.api_client
        call = api.call_api

        def recorded(method, url, header_params=None, *args, **kwargs):
            response = call(method, url, header_params, *args, **kwargs)
            if "/secrets" in url:
                bodies.append((header_params.get("Accept", ""), json.loads(response.read())))
            return response

        api.call_api = recorded
        assert kube.read_secret_metadata(NAMESPACE, "a-registration").labels == THEIRS
        assert [s.name for s in kube.list_secret_metadata(NAMESPACE, "app.kubernetes.io/name=something-else")] == [
            "a-registration"
        ]
    assert [(accept, body["kind"]) for accept, body in bodies] == [
        (METADATA_ONLY, "PartialObjectMetadata"),
        (METADATA_LIST_ONLY, "PartialObjectMetadataList"),
    ]
    assert "data" not in bodies[0][1] and all("data" not in item for item in bodies[1][1]["items"])
