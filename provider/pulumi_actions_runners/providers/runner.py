"""Dynamic provider of Runner: thin glue from Pulumi's calls to the startup and teardown procedures."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
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

from ..clock import SystemClock
from ..github.client import GitHubClient
from ..inputs import validation
from ..inputs.cluster import CLUSTER, cluster_of, other_cluster, pods_there, verified_cluster
from ..inputs.connections import Connections, Endpoint, connect
from ..inputs.runner import (
    LATER_DEFAULTS,
    RULES,
    SETTINGS,
    SPEC_FIELDS,
    UNDIFFED,
    RunnerInputs,
    check_runner_inputs,
    input_differs,
)
from ..kube.manifests import RUNNER_LABEL, owner_label
from ..kube.pod_state import ENDED_PHASES, crash_looping, pod_phase, pod_problem, runs_unregistered
from ..lifecycle.relabel import relabel_runner
from ..lifecycle.startup import start_runner
from ..lifecycle.teardown import RunnerLocation, owns, tear_down_runner
from ..logs import log_to_stderr
from ..redaction import scrubbed_provider

log = logging.getLogger(__name__)

RUNNER_RULES: dict[str, validation.Rule] = {**RULES, "runner_name": validation.dns_label}
# A new registration means a new pod: these force a replacement (the pod is recreated with them). Labels are
# changed in place (relabel.py), by a replacement only where that cannot be done.
IN_PLACE = ("labels",)
REPLACE_ON = ("namespace", "runner_name", *(field for field in SPEC_FIELDS if field not in IN_PLACE))


@scrubbed_provider
class RunnerProvider(ResourceProvider):
    def configure(self, _req: Any) -> None:
        log_to_stderr()

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = check_runner_inputs(olds, news, RUNNER_RULES)
        return CheckResult(inputs, [CheckFailure(p, r) for p, r in failures])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """No network call: the token's hash decides, so a preview shows every runner a new token recreates; and
        a runner whose pod a refresh found ended, gone or stuck (``pod_phase``) is recreated too, as is one whose
        kubeconfig now leads to another cluster (its old one drained first, through its old settings). New labels
        alone are an update."""
        replaces = [k for k in ("token_hash", *REPLACE_ON) if input_differs(olds, news, k)]
        if other_cluster(olds.get(CLUSTER), news.get(CLUSTER)):
            replaces.append(CLUSTER)
        if olds.get("pod_phase") in ENDED_PHASES:
            replaces.append("pod_phase")
        changes = bool(replaces) or any(validation.differs(olds.get(k), news.get(k)) for k in SETTINGS)
        changes = changes or any(input_differs(olds, news, k) for k in IN_PLACE)
        return DiffResult(changes=changes, replaces=replaces, delete_before_replace=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = RunnerInputs.of(props, props["runner_name"])
        spec = inputs.spec
        cluster = cluster_of(inputs.endpoint.kubeconfig)
        with connect(inputs.endpoint) as clients:
            runner_id = _start(inputs, clients)
        outs = {
            **{k: props.get(k) for k in REPLACE_ON + IN_PLACE + SETTINGS + UNDIFFED},
            CLUSTER: cluster,
            "token_hash": spec.token_hash,
            "runner_id": runner_id,
            "pod_name": spec.pod_name,
            "secret_name": spec.secret_name,
        }
        return CreateResult(f"{spec.namespace}/{spec.runner_name}", outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Settings, and labels: set in place by GitHub; a runner that cannot be relabelled (relabel.py) is
        replaced here, the safe way, and ``labels_updated`` says which it was."""
        outs = {**LATER_DEFAULTS, **olds, **{k: news.get(k) for k in SETTINGS}}
        # The same image as the state's (else Diff replaces), perhaps in the form Check now settles: a 0.2.0
        # default image is now the tracked version's, which the state records from this update on.
        outs.update({k: news.get(k) for k in ("image", "runner_version", "runner_release")})
        cluster = verified_cluster(
            f"runner {olds['runner_name']}", "update", olds.get(CLUSTER), news.get("kubeconfig"), _ours(olds, news)
        )
        outs[CLUSTER] = cluster or olds.get(CLUSTER)  # recorded by the first update of a state from before it
        if not any(input_differs(olds, news, k) for k in IN_PLACE):
            return UpdateResult(outs)
        outs["labels"] = news.get("labels")
        token = {k: news.get(k) for k in ("registration_token", "registration_token_expires_at")}  # a start's
        inputs = RunnerInputs.of({**outs, **token}, outs["runner_name"])
        spec = inputs.spec
        with connect(inputs.endpoint) as clients:
            runner_id = int(outs["runner_id"]) if outs.get("runner_id") is not None else None
            pod = clients.kube.read_pod(spec.namespace, spec.pod_name)
            why = relabel_runner(spec, runner_id, pod, clients.runners, clients.kube)
            if why is not None:
                log.warning("runner %s is replaced rather than relabelled: %s", spec.runner_name, why)
                tear_down_runner(
                    _location(olds), clients.runners, clients.kube, SystemClock(), inputs.timeouts.teardown()
                )
                outs["runner_id"] = _start(inputs, clients)
        outs["labels_updated"] = "in place" if why is None else f"by replacement: {why}"
        return UpdateResult(outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        inputs = RunnerInputs.of(props, props["runner_name"])
        verified_cluster(
            f"runner {props['runner_name']}", "delete", props.get(CLUSTER), inputs.endpoint.kubeconfig, _ours(props)
        )
        with connect(inputs.endpoint) as clients:
            tear_down_runner(_location(props), clients.runners, clients.kube, SystemClock(), inputs.timeouts.teardown())

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """The runner as it is. One whose pod has ended, is gone or is stuck (a persistent runner crash-looping
        on an expired token), or runs with no registration for longer than a registration takes, stays in state
        with that ``pod_phase``, and ``pod_problem`` says why in the user's
        words (a deprecated runner version, say): the next up recreates it (Diff), and a destroy still takes down
        its Secret and registration."""
        verified_cluster(
            f"runner {props['runner_name']}", "refresh", props.get(CLUSTER), props.get("kubeconfig"), _ours(props)
        )
        with connect(Endpoint.of(props)) as clients:
            pod = clients.kube.read_pod(props["namespace"], props["pod_name"])
            runner = _registration(clients.github, props)
        now, after = datetime.now(UTC), float(props["register_timeout_seconds"])
        ghost, looping = runs_unregistered(pod, runner, now, after), crash_looping(pod, runner, now, after)
        outs = {
            **props,
            "runner_id": runner["id"] if runner else props.get("runner_id"),
            "runner_status": runner["status"] if runner else None,
            "runner_busy": runner["busy"] if runner else None,
            "pod_phase": pod_phase(pod, unregistered=ghost, looping=looping),
            "pod_problem": pod_problem(pod, unregistered=ghost, looping=looping),
        }
        return ReadResult(id_, outs)


def _start(inputs: RunnerInputs, clients: Connections) -> int:
    clock = SystemClock()
    tokens = inputs.start_tokens(clients.github, clients.fresh_tokens, clock)
    return start_runner(inputs.spec, tokens, clients.runners, clients.kube, clock, inputs.timeouts.start())


def _ours(props: dict[str, Any], news: dict[str, Any] | None = None) -> Callable[[], bool]:
    """Whether the runner's pod is in the cluster that ``news``' kubeconfig (else its own) leads to."""
    kubeconfig = (news if news is not None else props).get("kubeconfig")
    selector = f"{RUNNER_LABEL}={props['runner_name']}"
    return pods_there(kubeconfig, props["namespace"], selector, props.get("owner"))


def _registration(github: GitHubClient, props: dict[str, Any]) -> dict[str, Any] | None:
    """The runner's registration: by the id in state (one call), else by name if it is ours (it may have
    registered again)."""
    runner = github.get_runner(int(props["runner_id"])) if props.get("runner_id") is not None else None
    if runner is not None:
        return runner
    found = github.find_runner(props["runner_name"])
    return found if found is not None and owns(_location(props), found) else None


def _location(props: dict[str, Any]) -> RunnerLocation:
    runner_id = props.get("runner_id")
    return RunnerLocation(
        namespace=props["namespace"],
        pod_name=props["pod_name"],
        secret_name=props["secret_name"],
        runner_name=props["runner_name"],
        runner_id=int(runner_id) if runner_id is not None else None,
        ephemeral=props["ephemeral"],
        owner_label=owner_label(props["owner"]) if props.get("owner") else None,
    )
