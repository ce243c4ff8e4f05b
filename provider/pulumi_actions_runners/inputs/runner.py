"""The inputs a Runner and a RunnerPool share: their rules, their checking, and what a provider call converts them
into, once, at the front door (RunnerInputs: where to connect, the runner's spec, its timeouts, its token)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..clock import Clock
from ..github.auth import APP_INPUTS, auth_failures
from ..github.credentials import token_hash
from ..github.registration_tokens import FreshTokens, StartTokens, TokenMinter, expiry_seconds, validity_needed
from ..github.url import GitHubTarget, parse_github_url
from ..kube.manifests import JIT_TOKEN_HASH, TERMINATION_GRACE_SECONDS, RunnerSpec
from ..kube.pod_template import template_failures, template_json
from ..lifecycle.pool import PoolTimeouts
from ..unknowns import holds_unknown, is_unknown
from . import validation
from .cluster import CLUSTER, cluster_of
from .connections import Endpoint
from .runner_version import effective_image, settle

RULES: dict[str, validation.Rule] = {
    "github_url": validation.github_url,
    "namespace": validation.dns_label,
    "labels": validation.runner_labels,
    "ephemeral": validation.boolean,
    "jit_config": validation.boolean,
    "image": validation.optional(validation.image_reference),
    "runner_version": validation.runner_version,
    "grace_period_seconds": validation.seconds_between(0, 3600),
    "unregister_timeout_seconds": validation.seconds_between(0, 86400),
    "register_timeout_seconds": validation.seconds_between(1, 3600),
    "kubeconfig": validation.kubeconfig_path,
    "registration_token_expires_at": validation.optional_timestamp,
    "owner": validation.owner_id,
    "docker": validation.boolean,
    "runner_group": validation.runner_group,
}
# What a runner's pod and registration are made of: a change recreates the runner. The image and the runner
# version settle one image between them, which is what Diff compares (see input_differs).
SPEC_FIELDS = (
    "github_url",
    "labels",
    "ephemeral",
    "image",
    "runner_version",
    "jit_config",
    "pod_template",
    "docker",
    "runner_group",
)
# These only steer how the provider works, so they change in place.
SETTINGS = (
    "grace_period_seconds",
    "unregister_timeout_seconds",
    "register_timeout_seconds",
    "github_token",
    *APP_INPUTS,
    "kubeconfig",
)
# Not compared by Diff: ``owner`` is recorded as the runner was made (its registration carries it), the token's
# expiry changes only with the token, whose hash Diff compares already, and what GitHub says of the runner version
# (runner_version.py) is for the report.
UNDIFFED = ("owner", "registration_token_expires_at", "runner_release")
# Inputs added after the first release: a state written before them holds none, which means the default.
LATER_DEFAULTS: dict[str, Any] = {
    "jit_config": False,
    "pod_template": None,
    "docker": False,
    "runner_group": None,
    "runner_version": None,
}
# How long a deleted pod may take to go beyond its termination grace before it is forced.
POD_GONE_MARGIN_SECONDS = 60


def stored(props: Mapping[str, Any], key: str) -> Any:
    return props.get(key, LATER_DEFAULTS.get(key))


def input_differs(olds: dict[str, Any], news: dict[str, Any], key: str) -> bool:
    """For Diff. A pod template counts by what it makes, not how it is written: key order, a quantity's 2
    against "2", an empty template against none."""
    old, new = stored(olds, key), news.get(key)
    if key == "pod_template" and not holds_unknown(new):
        return template_json(old) != template_json(new)
    if key == "image":  # what the pods run, given or tracked: 0.2.0's default image is the tracked 2.336.0's
        return validation.differs(effective_image(olds), effective_image(news))
    if key == "runner_version":  # it changes nothing the image does not
        return False
    return validation.differs(old, new)


def check_runner_inputs(
    olds: Mapping[str, Any], news: dict[str, Any], rules: dict[str, validation.Rule]
) -> tuple[dict[str, Any], list]:
    """The checked inputs, with ``token_hash`` computed (unknown while the token is) and the ``cluster`` the
    kubeconfig leads to (the old inputs' where that is not known here: no verdict), and the failures."""
    inputs = {**LATER_DEFAULTS, **news}
    if (cluster := cluster_of(inputs.get("kubeconfig")) or olds.get(CLUSTER)) is not None:
        inputs[CLUSTER] = cluster
    if inputs.get("runner_group") == "Default":
        inputs["runner_group"] = None  # where runners are without one: naming it changes nothing
    labels = inputs.get("labels")
    if isinstance(labels, (list, tuple)) and validation.runner_labels(labels) is None:
        inputs["labels"] = _normalized_labels(labels)
    failures = validation.failures(inputs, rules)
    failures += auth_failures(inputs)
    if (reason := _group_out_of_scope(inputs)) is not None:
        failures.append(("runner_group", reason))
    failures += template_failures(inputs.get("pod_template"), docker=inputs.get("docker"))
    jit, token = inputs.get("jit_config"), inputs.get("registration_token")
    if not any(prop == "labels" for prop, _ in failures) and (reason := _too_many_labels(inputs)):
        failures.append(("labels", reason))
    if is_unknown(jit):
        inputs["token_hash"] = jit
    elif jit is True:
        if inputs.get("ephemeral") is False:
            failures.append(
                (
                    "ephemeral",
                    "false is not allowed with jit_config: GitHub registers just-in-time "
                    "runners as ephemeral; set ephemeral true, or jit_config false",
                )
            )
        if token is not None:
            failures.append(
                (
                    "registration_token",
                    "is not used with jit_config (each runner gets its own "
                    "just-in-time config): leave it out, or set jit_config false",
                )
            )
        inputs["token_hash"] = JIT_TOKEN_HASH
    elif is_unknown(token):
        inputs["token_hash"] = token  # so that `pulumi preview --diff` names it: unknown until the new token is
    elif token is None:
        failures.append(
            ("registration_token", "is required unless jit_config is true: give it the token of a RegistrationToken")
        )
    elif (reason := validation.secret_string(token)) is not None:
        failures.append(("registration_token", reason))
    else:
        inputs["token_hash"] = token_hash(token)
    if not failures:
        settle(olds, inputs)
    return inputs, failures


def _group_out_of_scope(inputs: dict[str, Any]) -> str | None:
    """Runner groups are an organization's or an enterprise's: a repository's runners are all in Default."""
    group, url = inputs.get("runner_group"), inputs.get("github_url")
    if group in (None, "Default") or is_unknown(group) or validation.github_url(url) is not None:
        return None
    if parse_github_url(url).scope.startswith("repos/"):
        return (
            f"{group!r} is not allowed for a repository's runners, which are always in the Default group: leave it "
            "out, or register the runners with the organization (github_url https://HOST/ORG)"
        )
    return None


def _too_many_labels(inputs: dict[str, Any]) -> str | None:
    """GitHub takes at most 100 labels a runner: the ownership label, and for a just-in-time runner
    "self-hosted", count too."""
    labels, jit = inputs.get("labels") or [], inputs.get("jit_config")
    if is_unknown(labels) or is_unknown(jit) or any(map(is_unknown, labels)):
        return None
    added = ["the ownership label"] + (['"self-hosted"'] if jit is True and "self-hosted" not in labels else [])
    if len(set(labels)) + len(added) <= validation.MAX_LABELS:
        return None
    return (
        f"{len(set(labels))} labels and {' and '.join(added)} are more than the {validation.MAX_LABELS} GitHub "
        f"allows a runner: use at most {validation.MAX_LABELS - len(added)} labels"
    )


@dataclass(frozen=True)
class RunnerInputs:
    """A Runner's or a RunnerPool's inputs (or state) as one provider call works with them, converted once from
    the property dict: nothing the providers call reads that dict."""

    endpoint: Endpoint
    spec: RunnerSpec  # a pool's: every runner's spec but its name
    timeouts: PoolTimeouts
    registration_token: str | None  # None for just-in-time runners
    registration_token_expires_at: str | None

    @classmethod
    def of(cls, props: Mapping[str, Any], runner_name: str = "", *, pool: str = "") -> RunnerInputs:
        endpoint = Endpoint.of(props)
        return cls(
            endpoint=endpoint,
            spec=runner_spec(props, runner_name, pool=pool, target=endpoint.target),
            timeouts=PoolTimeouts(
                grace_period_seconds=props["grace_period_seconds"],
                unregister_timeout_seconds=props["unregister_timeout_seconds"],
                register_timeout_seconds=props["register_timeout_seconds"],
                pod_gone_timeout_seconds=pod_gone_timeout_seconds(props),
            ),
            registration_token=None if stored(props, "jit_config") else props.get("registration_token"),
            registration_token_expires_at=props.get("registration_token_expires_at"),
        )

    def start_tokens(self, minter: TokenMinter, fresh: FreshTokens, clock: Clock) -> StartTokens | None:
        """What runners start with: None for just-in-time runners."""
        if self.spec.jit_config:
            return None
        expires_at = self.registration_token_expires_at
        return StartTokens(
            given=self.registration_token,
            given_expires=expiry_seconds(expires_at) if expires_at else None,
            fresh=fresh,
            minter=minter,
            clock=clock,
            needed_seconds=validity_needed(self.timeouts.register_timeout_seconds),
        )


def runner_spec(
    props: Mapping[str, Any], runner_name: str, *, pool: str = "", target: GitHubTarget | None = None
) -> RunnerSpec:
    """``target``: the parsed ``github_url``, when the caller has it."""
    return RunnerSpec(
        github_url=(target or parse_github_url(props["github_url"])).url,
        namespace=props["namespace"],
        runner_name=runner_name,
        labels=tuple(props.get("labels") or ()),
        ephemeral=props["ephemeral"],
        image=effective_image(props),
        token_hash=props["token_hash"],
        jit_config=bool(stored(props, "jit_config")),
        pool=pool,
        owner=props.get("owner"),
        pod_template=template_json(stored(props, "pod_template")),
        docker=bool(stored(props, "docker")),
        runner_group=stored(props, "runner_group") or "",
    )


def pod_gone_timeout_seconds(props: Mapping[str, Any]) -> float:
    """The pod's termination grace (the template's, else the provider's) and a margin: then it is forced."""
    grace = ((stored(props, "pod_template") or {}).get("spec") or {}).get("terminationGracePeriodSeconds")
    return float(TERMINATION_GRACE_SECONDS if grace is None else grace) + POD_GONE_MARGIN_SECONDS


def _normalized_labels(labels: list[Any] | tuple[Any, ...]) -> list[Any]:
    """Labels are a set to GitHub: sort known ones so that reordering them does not recreate runners."""
    if any(is_unknown(label) for label in labels):
        return list(labels)
    return sorted(set(labels))
