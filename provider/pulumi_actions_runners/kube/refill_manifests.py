"""The Job and Secret of a refilling pool (a RunnerPool with ``refill``): Kubernetes' Job controller keeps its
slots filled between updates, with no process of ours running.

An ephemeral runner exits 0 after its one job; the Job controller counts the success and starts the next pod
at once (a success meets no back-off, unlike a container the kubelet restarts). The pod is named
``<job>-<random>`` by the controller, and so is its runner (``fieldRef: metadata.name``), which registers with
the token its container reads from the generation's Secret when it starts: a token written there since serves
every pod started since, and a registered runner never reads it again.

Why these settings (k8s.io/kubernetes v1.37.2, pkg/controller/job/job_controller.go):

- ``completions``: a Job with ``parallelism`` and no ``completions`` is complete at its first success; 2^31-1
  never is.
- ``backoffLimit`` 2^31-1, and no ``podFailurePolicy`` rule that fails the Job, no ``activeDeadlineSeconds``: a
  Job that fails deletes its active pods (``deleteActivePods``), busy runners among them. Failed pods meet the
  controller's back-off instead (``DefaultJobPodFailureBackOff`` 10 s doubling to ``MaxJobPodFailureBackOff``
  10 min, reset by a success: backoff_utils.go), so a pool whose token has lapsed does not crash-loop, and a
  refresh reports why they fail.
- No ``podFailurePolicy`` at all: an ``Ignore`` rule keeps a pod out of the Job's failed count, but not out of
  its back-off (job_controller.go:1051 against 1059; kubernetes#119378), and a pod deleted through the API gets
  no ``DisruptionTarget`` condition to match. A pod the provider deletes is released from the Job first instead
  (pod_state.JOB_TRACKING_FINALIZER), as the controller's own deletions are: it is never counted as failed.
- No ``--replace``: each pod's name is new, so a name another runner holds fails that pod's config.sh, never
  takes the registration over.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

from .manifests import (
    INPUT,
    JOB_LABEL,
    LABELS_KEY,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    OWNER_LABEL,
    POOL_LABEL,
    RUNNER_LABEL,
    SPEC_HASH_ANNOTATION,
    TOKEN_HASH_ANNOTATION,
    TOKEN_KEY,
    RunnerSpec,
    labels_value,
    pod_manifest,
)

NEVER = 2**31 - 1  # int32's largest: completions and failures a Job never reaches
# The Job controller's delay before the pods that follow a failed one (DefaultJobPodFailureBackOff), doubled at
# each failure since the last success up to MaxJobPodFailureBackOff (job_controller.go:77-79, backoff_utils.go).
JOB_FAILURE_BACKOFF_SECONDS = 10.0
JOB_FAILURE_BACKOFF_MAX_SECONDS = 600.0
_GENERATION = re.compile(r"-j(\d+)$")


def job_name(pool: str, generation: int) -> str:
    return f"{pool}-j{generation}"


def generation_of(job: str) -> int:
    """The generation in a Job's name ("ci-j7": 7); 0 for a name not of that form."""
    found = _GENERATION.search(job)
    return int(found.group(1)) if found else 0


def secret_name(job: str) -> str:
    return f"{job}-registration"


def _labels(spec: RunnerSpec, job: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "actions-runner",
        MANAGED_BY_LABEL: MANAGED_BY,
        POOL_LABEL: spec.pool,
        JOB_LABEL: job,
        **({OWNER_LABEL: spec.owner} if spec.owner else {}),
    }


def refill_secret_manifest(spec: RunnerSpec, job: str, token: str) -> dict[str, Any]:
    """What every pod of the generation registers with: the token (rewritten by each update) and the labels."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": secret_name(job), "namespace": spec.namespace, "labels": _labels(spec, job)},
        "stringData": {TOKEN_KEY: token, LABELS_KEY: labels_value(spec)},
    }


def job_manifest(spec: RunnerSpec, job: str, parallelism: int) -> dict[str, Any]:
    """The Job whose pods are the runners of ``spec`` (a pool's template), ``parallelism`` of them at once."""
    pod = pod_manifest(replace(spec, runner_name=job))  # its Secret is then secret_name(job)
    template_metadata = copy.deepcopy(pod["metadata"])
    for key in ("name", "namespace"):
        template_metadata.pop(key, None)
    template_metadata["labels"] = {**template_metadata.get("labels", {}), **_labels(spec, job)}
    template_metadata["labels"].pop(RUNNER_LABEL, None)  # each pod's name is its own
    template_metadata["annotations"].pop(TOKEN_HASH_ANNOTATION, None)  # the Secret's token changes under it
    runner = next(c for c in pod["spec"]["containers"] if c["name"] == "runner")
    runner["env"] = [_each_pods_own(variable) for variable in runner["env"] if variable["name"] != f"{INPUT}REPLACE"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job,
            "namespace": spec.namespace,
            "labels": _labels(spec, job),
            "annotations": {SPEC_HASH_ANNOTATION: spec.spec_hash},
        },
        "spec": {
            "parallelism": parallelism,
            "completions": NEVER,
            "backoffLimit": NEVER,
            "template": {"metadata": template_metadata, "spec": pod["spec"]},
        },
    }


def _each_pods_own(variable: dict[str, Any]) -> dict[str, Any]:
    """The runner's name is its pod's, which the Job controller chooses."""
    if variable["name"] == f"{INPUT}NAME":
        return {"name": variable["name"], "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    return variable
