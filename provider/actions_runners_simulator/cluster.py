"""The simulator's Kubernetes: the real API server, the kubelet stand-in, and the fault proxy the provider uses.

``SimulatedCluster`` starts its own API server, or borrows a running one (the tests share one per session:
starting it takes seconds). A borrowed server is reset when the cluster starts: every namespace but the
system ones and the cluster's own is deleted, and every pod and Secret in its own, so each user starts clean
whatever the one before it left.

The provider's identity may touch pods and Secrets only in a runners' namespace, through a Role and RoleBinding
there (kube_apiserver.RUNNER_NAMESPACE_RULES), as a cluster's admin would grant it. The cluster binds them in
the namespaces it is told to make before ``start`` returns, and, standing in for an admin's namespace
provisioning, in every other non-system namespace as the kubelet stand-in sees it created (a program's own);
should the provider call there before that, the API server's provisioning webhook binds them first.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .kube_apiserver import (
    SYSTEM_NAMESPACES,
    UNPROVISIONED_LABEL,
    KubeApiServer,
    grant_runner_namespace,
    provisioned,
)
from .kube_proxy import FaultProxy
from .kubelet import ContainerRuntime, CrashLoopBackOff, Kubelet
from .package_processes import PackageProcesses
from .tools import tool_dirs

RESET_TIMEOUT_SECONDS = 30.0


class SimulatedCluster:
    """``sim.kube``: what the provider talks to (through ``url``), and what tests read and stage."""

    def __init__(
        self,
        runtime: ContainerRuntime,
        *,
        api_server: KubeApiServer | None = None,
        namespaces: tuple[str, ...] = (),
        schedule_delay: float = 0.1,
        crash_loop: CrashLoopBackOff | None = None,
        fault_proxy: bool = True,
        workdir: Path | None = None,
        listener_image: Path | None = None,
    ) -> None:
        """``workdir``: where the processes of the package's programs (a listener) keep their logs;
        ``listener_image``: the OCI layout of the listener's image (package_processes.py)."""
        self._then = runtime
        self._runtime: ContainerRuntime = runtime
        self._workdir = workdir
        self._listener_image = listener_image
        self._with_proxy = fault_proxy
        self._own_server = api_server is None
        self._server = api_server
        self._namespaces = namespaces
        self._schedule_delay = schedule_delay
        self._crash_loop = crash_loop
        self._admin: client.ApiClient | None = None
        self._kubelet: Kubelet | None = None
        self._proxy: FaultProxy | None = None
        self._bound_at_start: set[str] = set()  # uids of the namespaces start made and bound
        self.processes: PackageProcesses | None = None  # the package's programs the node runs (a listener)

    def start(self) -> SimulatedCluster:
        try:
            if self._server is None:
                self._server = KubeApiServer(tool_dirs("kube")["kube"]).start()
            self._admin = self._server.admin_client()
            self._core = client.CoreV1Api(self._admin)
            if not self._own_server:
                self._reset()
            for namespace in self._namespaces:
                self._bound_at_start.add(self._make_namespace(namespace))
                grant_runner_namespace(self._admin, namespace)  # in force before the provider knows of it
            self._kubelet_api = self._server.admin_client()
            if self._workdir is not None:
                self.processes = PackageProcesses(
                    self._then, self._server, self._kubelet_api, self._workdir, self._listener_image
                )
                self._runtime = self.processes
            self._kubelet = Kubelet(
                self._kubelet_api,
                self._runtime,
                schedule_delay=self._schedule_delay,
                crash_loop=self._crash_loop,
                provision_namespace=self._provision_namespace,
            ).start()
            if self._with_proxy:
                self._proxy = FaultProxy(self._server.url, self._server.ca_file, self._server.tls_files).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Safe to call more than once, and after a failed start."""
        kubelet, self._kubelet = self._kubelet, None
        proxy, self._proxy = self._proxy, None
        admin, self._admin = self._admin, None
        if kubelet is not None:
            kubelet.stop()
            if self.processes is not None:
                self.processes.stop()
            self._kubelet_api.close()
        if proxy is not None:
            proxy.stop()
        if admin is not None:
            admin.close()
        if self._server is not None and self._own_server:
            self._server.stop()

    @property
    def url(self) -> str:
        """Where the provider reaches the API server: the fault proxy, if the cluster has one."""
        return self._proxy.url if self._proxy is not None else self.api_server.url

    @property
    def api_server(self) -> KubeApiServer:
        assert self._server is not None, "the cluster is not started"
        return self._server

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        """A kubeconfig for the provider and programs: the CA inline, a token bound to the provider's role."""
        return self.api_server.write_kubeconfig(path, server=self.url)

    # --- what tests read: the API server's own records -----------------------------------------------------

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(lambda: self._core.read_namespaced_pod(name, namespace, _preload_content=False))

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        if namespace is None:
            return self._items(self._core.list_pod_for_all_namespaces(_preload_content=False))
        return self._items(self._core.list_namespaced_pod(namespace, _preload_content=False))

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(lambda: self._core.read_namespaced_secret(name, namespace, _preload_content=False))

    def secrets(self, namespace: str | None = None) -> list[dict[str, Any]]:
        if namespace is None:
            return self._items(self._core.list_secret_for_all_namespaces(_preload_content=False))
        return self._items(self._core.list_namespaced_secret(namespace, _preload_content=False))

    def namespaces(self) -> list[dict[str, Any]]:
        return self._items(self._core.list_namespace(_preload_content=False))

    def jobs(self, namespace: str) -> list[dict[str, Any]]:
        return self._items(client.BatchV1Api(self._admin).list_namespaced_job(namespace, _preload_content=False))

    def events(self) -> list[dict[str, Any]]:
        """The kubelet stand-in's record: pods created, scheduled, terminating, removed; containers started,
        exited, killed (``at`` on the machine's monotonic clock)."""
        assert self._kubelet is not None, "the cluster is not started"
        return self._kubelet.events()

    # --- what tests stage: the fault proxy -----------------------------------------------------------------

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request the provider sent, in order; 0 for an answer lost on purpose."""
        return self._fault_proxy.requests()

    def fail_next(self, method: str, path_regex: str, status: int, *, count: int = 1) -> None:
        self._fault_proxy.fail_next(method, path_regex, status, count=count)

    def lose_next_answer(self, method: str, path_regex: str, *, count: int = 1) -> None:
        self._fault_proxy.lose_next_answer(method, path_regex, count=count)

    def delay_next(self, method: str, path_regex: str, seconds: float, *, count: int = 1) -> None:
        self._fault_proxy.delay_next(method, path_regex, seconds, count=count)

    # --- what tests stage: the node --------------------------------------------------------------------------

    def leave_unscheduled(self, count: int = 1) -> None:
        """The next ``count`` new pods find no node with room (the scheduler reports them unschedulable)."""
        self._node.leave_unscheduled(count)

    def fail_image_pulls(self, count: int = 1) -> None:
        """The next ``count`` pods the node starts cannot pull their images (ErrImagePull, ImagePullBackOff)."""
        self._node.fail_image_pulls(count)

    def stall_terminations(self, seconds: float, count: int = 1) -> None:
        """The next ``count`` pods deleted stay terminating for ``seconds`` before the node acts on it."""
        self._node.stall_terminations(seconds, count)

    def clear_faults(self) -> int:
        """Forget every fault staged in the proxy and on the node and not met yet; how many there were."""
        return self._fault_proxy.clear_faults() + self._node.clear_faults()

    def proxy_timeline(self) -> list[dict[str, Any]]:
        """The fault proxy's requests with their monotonic times."""
        return self._fault_proxy.timeline()

    @property
    def _node(self) -> Kubelet:
        assert self._kubelet is not None, "the cluster is not started"
        return self._kubelet

    @property
    def _fault_proxy(self) -> FaultProxy:
        if self._proxy is None:
            raise RuntimeError("this simulated cluster has no fault proxy (fault_proxy=False), or is not started")
        return self._proxy

    # --- internals -----------------------------------------------------------------------------------------

    def _make_namespace(self, name: str) -> str:
        """The namespace made, or kept from an earlier user of a shared server (409); its uid."""
        try:
            made = self._core.create_namespace({"metadata": {"name": name}})
        except ApiException as error:
            if error.status != 409:
                raise
            made = self._core.read_namespace(name)
        return str(made.metadata.uid)

    def unprovisioned_namespace(self, name: str) -> None:
        """A namespace the cluster's admin has not provisioned for runners: it exists, and the provider's identity
        has no Role there (its calls there meet RBAC's 403, as in a cluster)."""
        self._core.create_namespace({"metadata": {"name": name, "labels": {UNPROVISIONED_LABEL: "true"}}})

    def _provision_namespace(self, name: str, uid: str) -> bool:
        """The cluster admin's namespace provisioning, for a namespace made after start (by a program): the
        provider's Role there, in force when this returns. The system namespaces get none, nor one left
        unprovisioned, and those start bound need nothing more. Whether it bound."""
        if name in SYSTEM_NAMESPACES or uid in self._bound_at_start:
            return False
        if not provisioned(client.CoreV1Api(self._kubelet_api).read_namespace(name)):
            return False
        grant_runner_namespace(self._kubelet_api, name)
        return True

    @staticmethod
    def _items(response: Any) -> list[dict[str, Any]]:
        return list(json.loads(response.data)["items"])

    @staticmethod
    def _read(call: Any) -> dict[str, Any] | None:
        try:
            return dict(json.loads(call().data))
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def _reset(self) -> None:
        """Delete every Job, force-delete every pod and Secret outside the system namespaces, and delete the
        namespaces not kept (which the namespace controller then empties and finalizes)."""
        existing = [n["metadata"]["name"] for n in self.namespaces()]
        own = [name for name in existing if name in self._namespaces]
        extra = [name for name in existing if name not in (*SYSTEM_NAMESPACES, *self._namespaces)]
        batch = client.BatchV1Api(self._admin)
        apps = client.AppsV1Api(self._admin)
        for namespace in [*own, *extra]:
            apps.delete_collection_namespaced_deployment(namespace, propagation_policy="Background")
            apps.delete_collection_namespaced_replica_set(namespace, propagation_policy="Background")
            # Jobs first, or their controller makes their pods anew; the garbage collector deletes any pod one
            # makes meanwhile (its owner gone), and those there now are force-deleted below.
            batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
            self._core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            self._core.delete_collection_namespaced_secret(namespace)
        if not extra:
            return
        for namespace in extra:
            with contextlib.suppress(ApiException):
                self._core.delete_namespace(namespace)
        deadline = time.monotonic() + RESET_TIMEOUT_SECONDS
        while any(n["metadata"]["name"] in extra for n in self.namespaces()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"namespaces {extra} were not deleted within {RESET_TIMEOUT_SECONDS:.0f} s")
            time.sleep(0.05)
