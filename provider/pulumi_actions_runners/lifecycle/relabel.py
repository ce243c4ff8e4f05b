"""Changing a registered runner's labels without recreating it, or saying why it cannot be.

GitHub sets a runner's custom labels in place (``PUT .../runners/{id}/labels``): the runner keeps its pod, its
registration and any job it runs. What must follow is where a token runner reads its labels when its container
restarts and registers again (config.sh sets the labels it is given): its Secret. A pod made before the labels
moved there reads them from a literal of its spec, which cannot change, so such a persistent runner is replaced
instead. Last, the pod's spec-hash annotation is brought up to date, so that later runs see it made of the spec
it now serves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from ..kube.manifests import INPUT, LABELS_KEY, SPEC_HASH_ANNOTATION, RunnerSpec, labels_value

log = logging.getLogger(__name__)


class Relabeler(Protocol):
    def set_labels(self, runner_id: int, labels: Sequence[str]) -> bool: ...


class PodRelabeler(Protocol):
    def set_secret_value(self, namespace: str, name: str, key: str, value: str) -> None: ...
    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None: ...


def relabel_runner(
    spec: RunnerSpec, runner_id: int | None, pod: Any, github: Relabeler, pods: PodRelabeler
) -> str | None:
    """None once the runner has ``spec``'s labels; else why it must be replaced instead (nothing was changed, or
    only GitHub's labels, which the replacement sets again). ``pod``: the runner's pod as the caller read or
    listed it, None if it has none."""
    if pod is None:
        return "its pod is gone"
    if not spec.ephemeral and not spec.jit_config and _labels_in_spec(pod):
        return (
            "its pod (made by an earlier version of the provider) has its labels in its spec, and a persistent "
            "runner registers again with them whenever its container restarts"
        )
    if runner_id is None:
        return "its registration's id is not known"
    # GitHub's PUT replaces every custom label. config.sh gives a token runner read-only defaults, which stay; a
    # just-in-time runner has only the labels generate-jitconfig was given, all custom, "self-hosted" among them.
    labels = spec.jit_labels if spec.jit_config else spec.registration_labels
    if not github.set_labels(runner_id, labels):
        return "GitHub refused to relabel it"
    if not spec.jit_config:
        pods.set_secret_value(spec.namespace, spec.secret_name, LABELS_KEY, labels_value(spec))
    pods.annotate_pod(spec.namespace, spec.pod_name, {SPEC_HASH_ANNOTATION: spec.spec_hash})
    log.info("runner %s relabelled in place: %s", spec.runner_name, ", ".join(spec.labels) or "(no labels)")
    return None


def _labels_in_spec(pod: Any) -> bool:
    """Whether the runner container's labels are a literal of the pod's spec, not read from its Secret."""
    for container in pod.spec.containers or []:
        if container.name == "runner":
            return any(e.name == f"{INPUT}LABELS" and e.value_from is None for e in container.env or [])
    return False
