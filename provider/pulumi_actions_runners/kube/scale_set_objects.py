"""The Kubernetes calls of a RunnerScaleSet beyond its runners' pods: the listener's objects, applied with
server-side apply (one idempotent PATCH each, whatever was there), read, and deleted, and its ConfigMap."""

from __future__ import annotations

from typing import Any

from .client import MERGE_PATCH, REQUEST_TIMEOUT, KubeClient
from .library import api_exception, kubernetes

APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML: the manifest as it is
FIELD_MANAGER = "pulumi-actions-runners"


class ScaleSetObjects:
    """The listener's Deployment, ServiceAccount, Role, RoleBinding, Secret and ConfigMap in one namespace."""

    def __init__(self, kube: KubeClient) -> None:
        api_client = kube.api_client
        k8s = kubernetes().client
        self._core = k8s.CoreV1Api(api_client)
        self._apps = k8s.AppsV1Api(api_client)
        self._rbac = k8s.RbacAuthorizationV1Api(api_client)

    def _calls(self, kind: str) -> tuple[Any, Any, Any]:
        """(apply, read, delete) of a kind, namespaced."""
        api, noun = {
            "ConfigMap": (self._core, "config_map"),
            "Secret": (self._core, "secret"),
            "ServiceAccount": (self._core, "service_account"),
            "Role": (self._rbac, "role"),
            "RoleBinding": (self._rbac, "role_binding"),
            "Deployment": (self._apps, "deployment"),
        }[kind]
        return (
            getattr(api, f"patch_namespaced_{noun}"),
            getattr(api, f"read_namespaced_{noun}"),
            getattr(api, f"delete_namespaced_{noun}"),
        )

    def apply(self, manifest: dict[str, Any]) -> None:
        """The object made or brought to the manifest (fields another manager set are taken over)."""
        patch, _, _ = self._calls(manifest["kind"])
        metadata = manifest["metadata"]
        patch(
            metadata["name"],
            metadata["namespace"],
            manifest,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type=APPLY_PATCH,
            _request_timeout=REQUEST_TIMEOUT,
        )

    def read(self, kind: str, namespace: str, name: str) -> Any | None:
        _, read, _ = self._calls(kind)
        try:
            return read(name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            if error.status == 404:
                return None
            raise

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Gone afterwards (or before). Its dependents (a Deployment's ReplicaSet and pod) go in the background."""
        _, _, delete = self._calls(kind)
        body = kubernetes().client.V1DeleteOptions(propagation_policy="Background")
        try:
            delete(name, namespace, body=body, _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            if error.status != 404:
                raise

    def config_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's data; None if there is no such ConfigMap."""
        config_map = self.read("ConfigMap", namespace, name)
        return None if config_map is None else dict(config_map.data or {})

    def set_config(self, namespace: str, name: str, key: str, value: str) -> None:
        """One key of the ConfigMap, merged (the listener writes the id of a scale set it made again)."""
        self._core.patch_namespaced_config_map(
            name,
            namespace,
            {"data": {key: value}},
            _content_type=MERGE_PATCH,
            _request_timeout=REQUEST_TIMEOUT,
        )

    def own_secret(self, namespace: str, name: str, owner: dict[str, Any]) -> None:
        """The Secret is the pod's from now on: the garbage collector deletes it with the pod."""
        body = {"metadata": {"ownerReferences": [owner]}}
        self._core.patch_namespaced_secret(
            name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT
        )
