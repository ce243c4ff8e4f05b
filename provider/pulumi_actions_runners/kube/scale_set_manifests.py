"""What a RunnerScaleSet is made of in its namespace: the listener (Deployment, ServiceAccount, Role, RoleBinding,
the Secret of its GitHub credential), the ConfigMap through which each update hands it the scale set's bounds
and runner spec, and each runner's pod and JIT config Secret.

The provider writes the ConfigMap (`ScaleSetConfig`); the listener reads it again at each turn of its loop, so
a new bound or runner spec reaches it without a restart. Only what the listener process is (its image, its
credential) is in the Deployment's pod template: a change there rolls the listener, nothing else does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .manifests import MANAGED_BY, MANAGED_BY_LABEL, OWNER_LABEL, RunnerSpec, pod_manifest, secret_manifest

SCALE_SET_LABEL = "actions-runners.pulumi.io/scale-set"
COMPONENT_LABEL = "app.kubernetes.io/component"
RUNNER_ID_ANNOTATION = "actions-runners.pulumi.io/runner-id"
# Set on a runner's pod once GitHub removed its registration: from then on it takes no job, and its pod goes once
# the grace period has passed (a listener restarted meanwhile reads when it began).
REMOVED_AT_ANNOTATION = "actions-runners.pulumi.io/removed-at"
CONFIG_KEY = "config.json"
# The id of a set the listener made again (GitHub had deleted it): a key of its own, so that writing it never
# undoes what an update wrote into CONFIG_KEY meanwhile. It wins over the id in CONFIG_KEY.
SCALE_SET_ID_KEY = "scale-set-id"
CREDENTIAL_HASH_ANNOTATION = "actions-runners.pulumi.io/credential-hash"
LISTENER_COMMAND = "actions-runners-listener"  # the package's entry point (pyproject.toml [project.scripts])
# The listener's environment: what it is, not what it does (that is the ConfigMap's).
ENV_SCALE_SET_NAME = "ACTIONS_RUNNERS_SCALE_SET_NAME"
ENV_CONFIG_MAP = "ACTIONS_RUNNERS_CONFIG_MAP"
ENV_NAMESPACE = "ACTIONS_RUNNERS_NAMESPACE"
ENV_POD_NAME = "ACTIONS_RUNNERS_LISTENER_POD"
ENV_GITHUB_URL = "ACTIONS_RUNNERS_GITHUB_URL"
ENV_METRICS_ADDRESS = "ACTIONS_RUNNERS_METRICS_ADDRESS"  # unset in its Deployment: every interface, METRICS_PORT
METRICS_PORT = 8080  # ARC's listener's too (cmd/ghalistener/metrics/metrics.go: ":8080", "/metrics")


@dataclass(frozen=True)
class ScaleSetConfig:
    """The listener's instructions, as the last update left them."""

    scale_set_id: int
    scale_set_name: str
    runner_group_id: int
    labels: tuple[str, ...]  # the set's own labels beside its name
    min_runners: int
    max_runners: int
    grace_period_seconds: float
    register_timeout_seconds: float
    runner: RunnerSpec  # every runner's spec but its name

    def to_json(self) -> str:
        return json.dumps({**dataclasses.asdict(self), "spec_hash": self.runner.spec_hash}, sort_keys=True)

    @classmethod
    def of_json(cls, text: str) -> ScaleSetConfig:
        data = json.loads(text)
        data.pop("spec_hash", None)
        runner = data.pop("runner")
        runner["labels"] = tuple(runner["labels"])
        return cls(**{**data, "labels": tuple(data["labels"]), "runner": RunnerSpec(**runner)})


def config_of(data: dict[str, str] | None) -> ScaleSetConfig | None:
    """The ConfigMap's config, with the id the listener last wrote; None if it holds none."""
    data = data or {}
    if not data.get(CONFIG_KEY):
        return None
    config = ScaleSetConfig.of_json(data[CONFIG_KEY])
    moved = data.get(SCALE_SET_ID_KEY, "")
    return dataclasses.replace(config, scale_set_id=int(moved)) if moved.isdigit() else config


def listener_name(scale_set_name: str) -> str:
    return f"{scale_set_name}-listener"


def credential_secret_name(scale_set_name: str) -> str:
    return f"{scale_set_name}-listener-github"


def _labels(scale_set_name: str, component: str, owner: str | None) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "actions-runners-scale-set",
        MANAGED_BY_LABEL: MANAGED_BY,
        SCALE_SET_LABEL: scale_set_name,
        COMPONENT_LABEL: component,
        **({OWNER_LABEL: owner} if owner else {}),
    }


def runner_selector(scale_set_name: str) -> str:
    return f"{SCALE_SET_LABEL}={scale_set_name},{COMPONENT_LABEL}=runner"


def listener_selector(scale_set_name: str) -> str:
    return f"{SCALE_SET_LABEL}={scale_set_name},{COMPONENT_LABEL}=listener"


def runner_pod(config: ScaleSetConfig, name: str, runner_id: int) -> dict[str, Any]:
    """One runner: the runner spec's pod, named and labelled as the set's, its JIT config in its Secret."""
    pod = pod_manifest(dataclasses.replace(config.runner, runner_name=name))
    pod["metadata"]["labels"] |= _labels(config.scale_set_name, "runner", config.runner.owner)
    pod["metadata"]["annotations"][RUNNER_ID_ANNOTATION] = str(runner_id)
    return pod


def runner_secret(config: ScaleSetConfig, name: str, encoded_jit_config: str) -> dict[str, Any]:
    secret = secret_manifest(dataclasses.replace(config.runner, runner_name=name), encoded_jit_config)
    secret["metadata"]["labels"] |= _labels(config.scale_set_name, "runner", config.runner.owner)
    return secret


def owned_by(pod: dict[str, Any] | Any) -> dict[str, Any]:
    """An ownerReference to the pod: its Secret goes with it (the garbage collector), whoever deletes it."""
    metadata = pod["metadata"] if isinstance(pod, dict) else pod.metadata
    name, uid = (metadata["name"], metadata["uid"]) if isinstance(metadata, dict) else (metadata.name, metadata.uid)
    return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}


@dataclass(frozen=True)
class ListenerSpec:
    """What the listener process is: a change rolls its Deployment."""

    scale_set_name: str
    namespace: str
    github_url: str
    image: str
    owner: str | None
    credential: dict[str, str] = dataclasses.field(repr=False)  # env name -> value, written only to its Secret

    @property
    def credential_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.credential, sort_keys=True).encode()).hexdigest()[:16]


def config_map(spec: ListenerSpec, config: ScaleSetConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": listener_name(spec.scale_set_name),
            "namespace": spec.namespace,
            "labels": _labels(spec.scale_set_name, "listener", spec.owner),
        },
        "data": {CONFIG_KEY: config.to_json()},
    }


def credential_secret(spec: ListenerSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": credential_secret_name(spec.scale_set_name),
            "namespace": spec.namespace,
            "labels": _labels(spec.scale_set_name, "listener", spec.owner),
        },
        "stringData": dict(spec.credential),
    }


def listener_rbac(spec: ListenerSpec) -> list[dict[str, Any]]:
    """The listener's ServiceAccount and what it may do, in its namespace only: its runners' pods and Secrets
    (made, listed by their metadata to finish or undo a start cut short, patched, deleted), and its own ConfigMap
    (read, and the id of a set it made again written). It reads no Secret's data, its own credential included:
    the kubelet gives it that. (A Role cannot grant a listing without the data; one that may make pods may read
    every Secret of the namespace through a pod anyway.)"""
    name, namespace = listener_name(spec.scale_set_name), spec.namespace
    labels = _labels(spec.scale_set_name, "listener", spec.owner)
    metadata = {"name": name, "namespace": namespace, "labels": labels}
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "list", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"], "resourceNames": [name]},
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata, "automountServiceAccountToken": True},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]


def listener_deployment(spec: ListenerSpec) -> dict[str, Any]:
    """One replica, ``Recreate``: the old listener is gone (its session deleted) before the new one starts, so
    two never hold one scale set's session."""
    name = listener_name(spec.scale_set_name)
    labels = _labels(spec.scale_set_name, "listener", spec.owner)
    secret = credential_secret_name(spec.scale_set_name)
    env = [
        {"name": ENV_SCALE_SET_NAME, "value": spec.scale_set_name},
        {"name": ENV_CONFIG_MAP, "value": name},
        {"name": ENV_GITHUB_URL, "value": spec.github_url},
        {"name": ENV_NAMESPACE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": ENV_POD_NAME, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        *(
            {"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
            for key in sorted(spec.credential)
        ),
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {SCALE_SET_LABEL: spec.scale_set_name, COMPONENT_LABEL: "listener"}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        CREDENTIAL_HASH_ANNOTATION: spec.credential_hash,
                        # The convention Prometheus' Kubernetes discovery examples and many charts follow.
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(METRICS_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": {
                    "serviceAccountName": name,
                    "terminationGracePeriodSeconds": 30,  # its session deleted on SIGTERM takes one call
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000},
                    "containers": [
                        {
                            "name": "listener",
                            "image": spec.image,  # its entrypoint is the listener (LISTENER_COMMAND)
                            "env": env,
                            "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
                            # Readiness: its session is open and its runners looked at; liveness: its runners'
                            # loop makes progress (listener/server.py). A failing GitHub is no reason to restart it.
                            "readinessProbe": {
                                "httpGet": {"path": "/readyz", "port": "metrics"},
                                "periodSeconds": 5,
                                "failureThreshold": 3,
                            },
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz", "port": "metrics"},
                                "periodSeconds": 20,
                                "timeoutSeconds": 5,
                                "failureThreshold": 3,
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "96Mi"},
                                "limits": {"memory": "256Mi"},
                            },
                        }
                    ],
                },
            },
        },
    }
