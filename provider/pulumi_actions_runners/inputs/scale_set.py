"""A RunnerScaleSet's inputs: its rules, its checking, and what a provider call converts them into, once, at the
front door (ScaleSetInputs)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..github.auth import APP_ENV, APP_INPUTS
from ..github.credentials import GITHUB_TOKEN_ENV, GITHUB_TOKEN_INPUT
from ..github.url import GitHubTarget
from ..kube.manifests import JIT_TOKEN_HASH, RunnerSpec
from ..kube.scale_set_manifests import ListenerSpec
from ..lifecycle.scale_set import ScaleSetBounds, ScaleSetTimeouts
from ..unknowns import is_unknown
from . import validation
from .connections import Endpoint
from .listener_image import default_listener_image
from .runner import RULES, check_runner_inputs, runner_spec

MAX_RUNNERS = 1000
SCALE_SET_RULES: dict[str, validation.Rule] = {
    **{k: v for k, v in RULES.items() if k not in ("jit_config", "ephemeral", "registration_token_expires_at")},
    "scale_set_name": validation.scale_set_name,
    "min_runners": validation.count_between(0, MAX_RUNNERS),
    "max_runners": validation.count_between(1, MAX_RUNNERS),
    "listener_image": validation.optional(validation.listener_image),
}
# Where the set is, and what it is called: a change makes a new scale set (the old one is drained first).
REPLACE_ON = ("github_url", "namespace", "scale_set_name")
# Handed to the listener in place: GitHub's bounds and labels, and what runners are made of (idle runners of an
# earlier spec are replaced, busy ones finish on it).
BOUNDS = ("min_runners", "max_runners", "labels")
RUNNER_SPEC = ("image", "runner_version", "pod_template", "docker", "runner_group")
# What the listener process is: a change rolls its Deployment.
LISTENER = ("listener_image", GITHUB_TOKEN_INPUT, *APP_INPUTS)
SETTINGS = ("grace_period_seconds", "unregister_timeout_seconds", "register_timeout_seconds", "kubeconfig")


def check_scale_set_inputs(olds: Mapping[str, Any], news: dict[str, Any]) -> tuple[dict[str, Any], list]:
    """The checked inputs (a runner's rules for what its runners share with a Runner's) and the failures."""
    inputs, failures = check_runner_inputs(olds, {**news, "jit_config": True, "ephemeral": True}, SCALE_SET_RULES)
    low, high = inputs.get("min_runners"), inputs.get("max_runners")
    judged = not any(p in ("min_runners", "max_runners") for p, _ in failures)
    if judged and all(isinstance(v, (int, float)) and not is_unknown(v) for v in (low, high)) and low > high:
        failures.append(
            (
                "max_runners",
                f"{high:g} is below min_runners ({low:g}): the scale set keeps min_runners idle runners, and "
                "max_runners bounds them all; raise max_runners or lower min_runners",
            )
        )
    return inputs, failures


@dataclass(frozen=True)
class ScaleSetInputs:
    """A RunnerScaleSet's inputs (or state), converted once from the property dict."""

    endpoint: Endpoint
    bounds: ScaleSetBounds
    timeouts: ScaleSetTimeouts
    listener: ListenerSpec

    @classmethod
    def of(cls, props: Mapping[str, Any]) -> ScaleSetInputs:
        endpoint = Endpoint.of(props)
        name = props["scale_set_name"]
        return cls(
            endpoint=endpoint,
            bounds=ScaleSetBounds(
                scale_set_name=name,
                runner_group=props.get("runner_group") or "",
                labels=tuple(props.get("labels") or ()),
                min_runners=int(props["min_runners"]),
                max_runners=int(props["max_runners"]),
                runner=scale_set_runner_spec(props, endpoint.target),
            ),
            timeouts=ScaleSetTimeouts(
                grace_period_seconds=float(props["grace_period_seconds"]),
                unregister_timeout_seconds=float(props["unregister_timeout_seconds"]),
                register_timeout_seconds=float(props["register_timeout_seconds"]),
            ),
            listener=ListenerSpec(
                scale_set_name=name,
                namespace=props["namespace"],
                github_url=endpoint.target.url,
                image=props.get("listener_image") or default_listener_image(),
                owner=props.get("owner"),
                credential=_listener_credential(props),
            ),
        )


def scale_set_runner_spec(props: Mapping[str, Any], target: GitHubTarget | None = None) -> RunnerSpec:
    """Every runner's spec but its name: a just-in-time runner's (ephemeral, no token)."""
    return runner_spec(
        {**props, "jit_config": True, "ephemeral": True, "token_hash": JIT_TOKEN_HASH}, "", target=target
    )


def _listener_credential(props: Mapping[str, Any]) -> dict[str, str]:
    """What the listener calls GitHub with, as its environment names it: the resource's token or App (else the
    environment of `pulumi`'s, as the provider itself uses)."""
    if props.get(GITHUB_TOKEN_INPUT):
        return {GITHUB_TOKEN_ENV: str(props[GITHUB_TOKEN_INPUT]).strip()}
    app = {APP_ENV[k]: _text(props[k]) for k in APP_INPUTS if props.get(k) is not None}
    if app:
        return app
    environment = {env: os.environ[env] for env in APP_ENV.values() if os.environ.get(env)}
    if environment:
        return environment
    return {GITHUB_TOKEN_ENV: os.environ.get(GITHUB_TOKEN_ENV, "").strip()}


def _text(value: Any) -> str:
    """An id as a number comes as a float (protobuf): 123.0 is "123"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()
