"""Dynamic provider of RunnerScaleSet: thin glue from Pulumi's calls to the scale set's procedures
(lifecycle/scale_set.py). Its runners are its listener's: an update hands the listener bounds and a runner spec,
a refresh reports what the listener did with them.

What an update is, as Diff sees it (``update_kind`` in the state, for the report): ``bounds`` (min, max, labels:
capacity changes, no runner is replaced by it), ``runners`` (what runners are made of: the listener replaces its
idle runners, busy ones finish on the old spec), ``listener`` (its image or credential: its Deployment rolls,
runners untouched), or several of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
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
from pulumi.output import Unknown

from ..clock import SystemClock
from ..github.scale_sets import ActionsServiceClient
from ..inputs.cluster import CLUSTER, cluster_of, other_cluster, pods_there, verified_cluster
from ..inputs.connections import connect
from ..inputs.runner import input_differs
from ..inputs.scale_set import (
    BOUNDS,
    LISTENER,
    REPLACE_ON,
    RUNNER_SPEC,
    SETTINGS,
    ScaleSetInputs,
    check_scale_set_inputs,
    scale_set_runner_spec,
)
from ..kube.client import KubeClient
from ..kube.scale_set_manifests import listener_name, listener_selector
from ..kube.scale_set_objects import ScaleSetObjects
from ..lifecycle.scale_set import create_scale_set, delete_scale_set, observe_scale_set, update_scale_set
from ..logs import log_to_stderr
from ..redaction import scrubbed_provider
from ..unknowns import holds_unknown

log = logging.getLogger(__name__)

SEEN_BY_REFRESH = ("statistics", "runners", "listener_running")
KEPT = (*REPLACE_ON, *BOUNDS, *RUNNER_SPEC, *LISTENER, *SETTINGS, "owner", "runner_release", CLUSTER)


@scrubbed_provider
class RunnerScaleSetProvider(ResourceProvider):
    def configure(self, _req: Any) -> None:
        log_to_stderr()

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = check_scale_set_inputs(olds, news)
        if not failures:
            inputs["spec_hash"] = _spec_hash(inputs)
        return CheckResult(inputs, [CheckFailure(p, r) for p, r in failures])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """No network call: the inputs, and a kubeconfig that leads to another cluster (a replacement)."""
        replaces = [k for k in REPLACE_ON if input_differs(olds, news, k)]
        if other_cluster(olds.get(CLUSTER), news.get(CLUSTER)):
            replaces.append(CLUSTER)
        changed = [k for k in (*BOUNDS, *RUNNER_SPEC, *LISTENER, *SETTINGS) if input_differs(olds, news, k)]
        return DiffResult(
            changes=bool(replaces or changed),
            replaces=replaces,
            delete_before_replace=True,  # one name, one set on GitHub
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        props = {**props, CLUSTER: cluster_of(props.get("kubeconfig"))}
        inputs = ScaleSetInputs.of(props)
        with _clients(inputs) as (github, objects, kube):
            scale_set_id = create_scale_set(
                inputs.bounds, inputs.listener, inputs.timeouts, github, objects, kube, SystemClock()
            )
        return CreateResult(
            f"{props['namespace']}/{props['scale_set_name']}", _outputs(props, inputs, scale_set_id, update_kind=[])
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        cluster = verified_cluster(
            f"scale set {olds['scale_set_name']}",
            "update",
            olds.get(CLUSTER),
            news.get("kubeconfig"),
            _ours(olds, news),
        )
        props = {
            **news,
            "owner": olds.get("owner") or news.get("owner"),
            CLUSTER: cluster or olds.get(CLUSTER),
            **{k: olds.get(k) for k in SEEN_BY_REFRESH},  # the last refresh's, until the next
        }
        inputs = ScaleSetInputs.of(props)
        with _clients(inputs) as (github, objects, kube):
            scale_set_id = update_scale_set(
                inputs.bounds,
                inputs.listener,
                inputs.timeouts,
                int(olds["scale_set_id"]),
                github,
                objects,
                kube,
                SystemClock(),
            )
        return UpdateResult(_outputs(props, inputs, scale_set_id, update_kind=update_kind(olds, news)))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        inputs = ScaleSetInputs.of(props)
        verified_cluster(
            f"scale set {props['scale_set_name']}", "delete", props.get(CLUSTER), props.get("kubeconfig"), _ours(props)
        )
        with _clients(inputs) as (github, objects, kube):
            delete_scale_set(
                inputs.listener, inputs.timeouts, int(props["scale_set_id"]), github, objects, kube, SystemClock()
            )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """The set's statistics and runners as they are now; its id as its listener last wrote it."""
        inputs = ScaleSetInputs.of(props)
        verified_cluster(
            f"scale set {props['scale_set_name']}", "refresh", props.get(CLUSTER), props.get("kubeconfig"), _ours(props)
        )
        with _clients(inputs) as (github, objects, kube):
            seen = observe_scale_set(inputs.listener, int(props["scale_set_id"]), github, objects, kube)
        return ReadResult(
            id_,
            {
                **props,
                "scale_set_id": seen.scale_set_id or props["scale_set_id"],
                "statistics": seen.statistics,
                "runners": seen.runners,
                "listener_running": seen.listener_running,
            },
        )


def update_kind(olds: dict[str, Any], news: dict[str, Any]) -> list[str]:
    """Which of bounds, runners and listener an update changes (see the module's docstring)."""
    kinds = {"bounds": BOUNDS, "runners": RUNNER_SPEC, "listener": LISTENER}
    return [kind for kind, keys in kinds.items() if any(input_differs(olds, news, k) for k in keys)]


@contextmanager
def _clients(inputs: ScaleSetInputs) -> Iterator[tuple[ActionsServiceClient, ScaleSetObjects, KubeClient]]:
    with connect(inputs.endpoint) as clients, ActionsServiceClient(clients.github) as github:
        yield github, ScaleSetObjects(clients.kube), clients.kube


def _ours(props: dict[str, Any], news: dict[str, Any] | None = None) -> Callable[[], bool]:
    """Whether the set's listener is in the cluster that ``news``' kubeconfig (else its own) leads to."""
    kubeconfig = (news if news is not None else props).get("kubeconfig")
    return pods_there(kubeconfig, props["namespace"], listener_selector(props["scale_set_name"]), props.get("owner"))


def _spec_hash(inputs: dict[str, Any]) -> Any:
    """What its runners are made of, for the report to compare with the runners a refresh saw."""
    if any(holds_unknown(inputs.get(k)) for k in (*RUNNER_SPEC, "github_url", "namespace", "scale_set_name")):
        return Unknown()
    return scale_set_runner_spec(inputs).spec_hash


def _outputs(
    props: dict[str, Any], inputs: ScaleSetInputs, scale_set_id: int, *, update_kind: list[str]
) -> dict[str, Any]:
    return {
        **{k: props.get(k) for k in KEPT},
        "spec_hash": inputs.bounds.runner.spec_hash,
        "scale_set_id": scale_set_id,
        "listener": listener_name(props["scale_set_name"]),
        "update_kind": update_kind,
        "statistics": props.get("statistics") or {},
        "runners": props.get("runners") or [],
        "listener_running": props.get("listener_running"),
    }
