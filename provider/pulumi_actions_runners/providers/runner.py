"""Dynamic provider of Runner: thin glue from Pulumi's calls to the startup and teardown procedures."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)

from .. import validation
from ..clock import SystemClock
from ..credentials import github_credential, token_hash
from ..github_client import GitHubClient
from ..github_url import parse_github_url
from ..kube_client import KubeClient, pod_finished
from ..logs import log_to_stderr
from ..manifests import TERMINATION_GRACE_SECONDS, RunnerSpec
from ..startup import start_runner
from ..teardown import RunnerLocation, TeardownTimeouts, tear_down_runner

RULES: dict[str, validation.Rule] = {
    "github_url": validation.github_url,
    "namespace": validation.dns_label,
    "runner_name": validation.dns_label,
    "registration_token": validation.secret_string,
    "labels": validation.runner_labels,
    "ephemeral": validation.boolean,
    "image": validation.image_reference,
    "grace_period_seconds": validation.seconds_between(0, 3600),
    "unregister_timeout_seconds": validation.seconds_between(0, 86400),
    "register_timeout_seconds": validation.seconds_between(1, 3600),
    "github_token": validation.github_credential,
    "kubeconfig": validation.kubeconfig_path,
}
# A new registration means a new pod: these force a replacement (the pod is recreated with them).
REPLACE_ON = ("github_url", "namespace", "runner_name", "labels", "ephemeral", "image")
# These only steer how the provider works, so they change in place.
UPDATE_IN_PLACE = (
    "grace_period_seconds",
    "unregister_timeout_seconds",
    "register_timeout_seconds",
    "github_token",
    "kubeconfig",
)
POD_GONE_TIMEOUT_SECONDS = TERMINATION_GRACE_SECONDS + 60


class RunnerProvider(ResourceProvider):
    def configure(self, _req: Any) -> None:
        log_to_stderr()

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs = dict(news)
        labels = inputs.get("labels")
        if isinstance(labels, (list, tuple)) and validation.runner_labels(labels) is None:
            inputs["labels"] = _normalized_labels(labels)
        failures = validation.failures(inputs, RULES)
        token = inputs.get("registration_token")
        if validation.is_unknown(token) or "registration_token" not in dict(failures):
            # An input, so that `pulumi preview --diff` names it: unknown while the new token is unknown.
            inputs["token_hash"] = token if validation.is_unknown(token) else token_hash(token)
        return CheckResult(inputs, [CheckFailure(p, r) for p, r in failures])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """No network call: the token's hash decides, so a preview shows every runner a new token recreates."""
        replaces = [k for k in ("token_hash", *REPLACE_ON) if validation.differs(olds.get(k), news.get(k))]
        changes = bool(replaces) or any(validation.differs(olds.get(k), news.get(k)) for k in UPDATE_IN_PLACE)
        return DiffResult(changes=changes, replaces=replaces, delete_before_replace=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        spec = _spec(props, props["token_hash"])
        with _clients(props) as (github, kube):
            runner_id = start_runner(
                spec,
                props["registration_token"],
                github,
                kube,
                SystemClock(),
                register_timeout_seconds=props["register_timeout_seconds"],
                unregister_timeout_seconds=props["unregister_timeout_seconds"],
                pod_gone_timeout_seconds=POD_GONE_TIMEOUT_SECONDS,
            )
        outs = {
            **{k: props.get(k) for k in REPLACE_ON + UPDATE_IN_PLACE},
            "token_hash": spec.token_hash,
            "runner_id": runner_id,
            "pod_name": spec.pod_name,
            "secret_name": spec.secret_name,
        }
        return CreateResult(f"{spec.namespace}/{spec.runner_name}", outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult({**olds, **{k: news.get(k) for k in UPDATE_IN_PLACE}})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        with _clients(props) as (github, kube):
            tear_down_runner(
                _location(props),
                github,
                kube,
                SystemClock(),
                TeardownTimeouts(
                    grace_period_seconds=props["grace_period_seconds"],
                    unregister_timeout_seconds=props["unregister_timeout_seconds"],
                    pod_gone_timeout_seconds=POD_GONE_TIMEOUT_SECONDS,
                ),
            )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """A pod that is gone or has finished takes the resource out of state, so the next up recreates it."""
        with _clients(props) as (github, kube):
            pod = kube.read_pod(props["namespace"], props["pod_name"])
            if pod is None or pod_finished(pod):
                return ReadResult("", {})
            runner = _registration(github, props)
        outs = {
            **props,
            "runner_id": runner["id"] if runner else None,
            "runner_status": runner["status"] if runner else None,
            "runner_busy": runner["busy"] if runner else None,
            "pod_phase": pod.status.phase if pod.status else None,
        }
        return ReadResult(id_, outs)


def _registration(github: GitHubClient, props: dict[str, Any]) -> dict[str, Any] | None:
    """The runner's registration: by the id in state (one call), else by name (it may have registered again)."""
    runner = github.get_runner(int(props["runner_id"])) if props.get("runner_id") is not None else None
    return runner if runner is not None else github.find_runner(props["runner_name"])


def _spec(props: dict[str, Any], hash_of_token: str) -> RunnerSpec:
    return RunnerSpec(
        github_url=parse_github_url(props["github_url"]).url,
        namespace=props["namespace"],
        runner_name=props["runner_name"],
        labels=tuple(props.get("labels") or ()),
        ephemeral=props["ephemeral"],
        image=props["image"],
        token_hash=hash_of_token,
    )


def _location(props: dict[str, Any]) -> RunnerLocation:
    runner_id = props.get("runner_id")
    return RunnerLocation(
        namespace=props["namespace"],
        pod_name=props["pod_name"],
        secret_name=props["secret_name"],
        runner_name=props["runner_name"],
        runner_id=int(runner_id) if runner_id is not None else None,
        ephemeral=props["ephemeral"],
    )


@contextmanager
def _clients(props: dict[str, Any]) -> Iterator[tuple[GitHubClient, KubeClient]]:
    target = parse_github_url(props["github_url"])
    credential = github_credential(props.get("github_token"))
    with GitHubClient(target, credential) as github, KubeClient(props.get("kubeconfig")) as kube:
        yield github, kube


def _normalized_labels(labels: list[Any] | tuple[Any, ...]) -> list[Any]:
    """Labels are a set to GitHub: sort known ones so that reordering them does not recreate runners."""
    if any(validation.is_unknown(label) for label in labels):
        return list(labels)
    return sorted(set(labels))
