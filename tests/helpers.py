"""What the tests do as an administrator would: get tokens, look at pods, touch things behind Pulumi's back."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from kubernetes import client, config

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners.github_client import GitHubClient
from pulumi_actions_runners.github_url import parse_github_url

NAMESPACE = "actions-runners"


def new_token(sim: Simulator) -> str:
    with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
        return github.create_registration_token().token


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def core_api(sim: Simulator) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig), persist_config=False))


def outputs(engine: MiniEngine, name: str) -> dict[str, Any]:
    return next(r.outputs for urn, r in engine.state.items() if urn.endswith(f"::{name}"))


def secret_token(sim: Simulator, secret_name: str) -> str:
    secret = sim.kube.secret(NAMESPACE, secret_name)
    assert secret is not None, f"secret {secret_name} missing"
    return base64.b64decode(secret["data"]["token"]).decode()


def events_for(sim: Simulator, pod_name: str, *types: str) -> list[dict[str, Any]]:
    return [e for e in sim.kube.events() if e.get("name") == pod_name and e["type"] in types]
