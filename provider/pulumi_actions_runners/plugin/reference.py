"""The reference of every resource's inputs and outputs, generated from what the provider runs: the property table
(properties.py) for names, types, defaults and descriptions; Check's own rules for what is allowed (each rule's
message for a value it refuses); Diff's own lists for what a change does. So the page cannot disagree with Check
or Diff: `python -m pulumi_actions_runners.plugin.reference > docs/reference.md`, and a test compares."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..inputs import scale_set, validation
from ..inputs.runner import SETTINGS
from ..inputs.runner_version import QUERY_RULES
from ..kube.pod_template import WHAT_IS_ALLOWED
from ..providers import registration_token, runner, runner_pool
from .properties import FUNCTIONS, KINDS, Property, ResourceKind, snake_case


class _Refused:
    """A value every rule refuses, so that its message says what it allows."""

    def __repr__(self) -> str:
        return "VALUE"


def allowed(rule: Callable[[Any], str | None] | None) -> str:
    if rule is None:
        return ""
    reason = rule(_Refused()) or ""
    return reason.split(": ", 1)[1] if ": " in reason else reason


# What Check refuses that no rule of one property says: the credentials' rules, the token's, the pod template's.
CREDENTIAL = "checked with the other credential inputs (a token, or an App's id and key; not both)"
OTHER_CHECKS = {
    "github_token": CREDENTIAL,
    "github_app_id": CREDENTIAL,
    "github_app_installation_id": CREDENTIAL,
    "github_app_private_key": CREDENTIAL,
    "registration_token": f"{allowed(validation.secret_string)}; required unless jit_config is true",
    "pod_template": WHAT_IS_ALLOWED.removeprefix("must be "),
}


def rules(kind: ResourceKind) -> dict[str, Callable[[Any], str | None]]:
    return {
        "RegistrationToken": registration_token.RULES,
        "Runner": runner.RUNNER_RULES,
        "RunnerPool": runner_pool.POOL_RULES,
        "RunnerScaleSet": scale_set.SCALE_SET_RULES,
    }[kind.name]


def change(kind: ResourceKind, name: str) -> str:
    """What a changed value does, as Diff decides it."""
    if kind.name == "RegistrationToken":
        if name == "github_url":
            return "replaces the token"
        if name == "refresh_before_seconds":
            return "decides when the token is renewed: a larger value may make it due now (replaced)"
        return "used from the next renewal; no change"
    if name == "kubeconfig":
        replaced = {"Runner": "runner", "RunnerPool": "pool", "RunnerScaleSet": "scale set"}[kind.name]
        return (
            "updates the state; no runner touched, unless it leads to another cluster (`cluster`): that replaces the "
            f"{replaced}, its old cluster drained first through the old kubeconfig"
        )
    if kind.name == "RunnerScaleSet":
        return _scale_set_change(name)
    if name in SETTINGS:
        return "updates the state; no runner touched"
    if kind.name == "Runner":
        if name in runner.IN_PLACE:
            return "updates the labels in place (a replacement where GitHub cannot)"
        if name in runner.REPLACE_ON or name == "registration_token":
            return "replaces the runner, the safe way"
        return "no change by itself"
    if name in runner_pool.REPLACE_ON:
        return "replaces the pool (taken down first, the safe way)"
    pool_updates = {
        "labels": (
            "an update that relabels the runners in place (rotates those GitHub cannot relabel); a refilling pool "
            "(`refill` true) rolls to a new Job instead, the safe way (a Job's pods register with its labels)"
        ),
        "replicas": "an update that adds or removes runners (idle ones first, never a busy one)",
        "max_unavailable": "an update; how many rotate at once, no runner touched by itself",
        "refill": "an update that moves the runners to a Job (or back), the safe way",
    }
    if name in pool_updates:
        return pool_updates[name]
    if name in runner_pool.ROLL_ON or name == "registration_token":
        return "an update that rotates the runners, the safe way"
    return "no change by itself"


def _scale_set_change(name: str) -> str:
    """What a changed value of a scale set does: its Diff's lists (inputs/scale_set.py), and what its update hands
    the listener."""
    if name in scale_set.REPLACE_ON:
        return "replaces the scale set: the old one drained first (busy runners waited for), then deleted on GitHub"
    if name == "labels":
        return "an update that sends the set's labels to GitHub; no runner touched"
    if name in scale_set.BOUNDS:
        return "an update that hands the listener its new bounds: it adds runners, or removes idle ones"
    if name == "runner_group":
        return "an update that moves the set to the group on GitHub; the listener replaces its idle runners"
    if name in scale_set.RUNNER_SPEC:
        return "an update: the listener replaces its idle runners; busy ones finish on the old spec"
    if name in scale_set.LISTENER:
        return "an update that rolls the listener (its Deployment); no runner touched"
    if name in ("grace_period_seconds", "register_timeout_seconds"):
        return "an update that hands it to the listener; no runner touched"
    return "updates the state; no runner touched"


def markdown() -> str:
    lines = [
        "# Reference",
        "",
        "<!-- Generated by `python -m pulumi_actions_runners.plugin.reference`: do not edit by hand. -->",
        "",
        "Inputs are named as the Python resources name them (`grace_period_seconds`) and as the provider plugin's",
        "schema does (`gracePeriodSeconds`). *Allowed* is what Check accepts, in its own words; *a change* is what",
        "Diff makes of a new value.",
    ]
    for kind in KINDS:
        lines += ["", f"## `{kind.name}` (`{kind.token}`)", "", kind.description, "", "### Inputs", ""]
        lines += ["| input | type | default | allowed | a change | description |", "|---|---|---|---|---|---|"]
        kind_rules = rules(kind)
        for prop in kind.inputs:
            required = "**required**" if prop.required else _default(prop)
            lines.append(
                f"| {_names(prop)} | {_type(prop)} | {required} | {_allowed(prop, kind_rules)} | "
                f"{change(kind, prop.name)} | {_description(prop)} |"
            )
        lines += _results("Outputs", "output", kind.outputs)
    for function in FUNCTIONS:  # Python: functions.py, the same name in snake_case, and its _output form
        python = f"{snake_case(function.name)}` / `{snake_case(function.name)}_output"
        lines += ["", f"## `{function.name}` (`{function.token}`; Python: `{python}`)", "", function.description]
        lines += ["", "### Arguments", "", "| argument | type | allowed | description |", "|---|---|---|---|"]
        for prop in function.inputs:
            required = " **Required**." if prop.required else ""
            lines.append(
                f"| {_names(prop)} | {_type(prop)} | {_allowed(prop, QUERY_RULES)} | "
                f"{prop.description}{required}{' Secret.' if prop.secret else ''} |"
            )
        lines += _results("Result", "field", function.outputs)
    return "\n".join(lines) + "\n"


def _names(prop: Property) -> str:
    return f"`{prop.name}` / `{prop.camel}`"


def _allowed(prop: Property, prop_rules: dict[str, Callable[[Any], str | None]]) -> str:
    rule = prop_rules.get(prop.name)
    return allowed(rule) if rule else OTHER_CHECKS.get(prop.name, "")


def _description(prop: Property) -> str:
    return f"{prop.description}{' Secret.' if prop.secret else ''}"


def _results(title: str, column: str, props: tuple[Property, ...]) -> list[str]:
    """A table of what a resource or function gives back."""
    rows = [f"| {_names(prop)} | {_type(prop)} | {prop.description} |" for prop in props]
    return ["", f"### {title}", "", f"| {column} | type | description |", "|---|---|---|", *rows]


def _default(prop: Property) -> str:
    return "" if prop.default is None else f"`{json.dumps(prop.default)}`"


def _type(prop: Property) -> str:
    schema = prop.schema
    if "oneOf" in schema:
        return " or ".join(s["type"] for s in schema["oneOf"])
    if schema.get("type") == "array":
        item = schema["items"]
        return f"list of {item.get('type') or item['$ref'].rsplit(':', 1)[-1]}"
    return schema.get("type") or "any (a Kubernetes PodTemplateSpec)"


if __name__ == "__main__":
    print(markdown(), end="")
