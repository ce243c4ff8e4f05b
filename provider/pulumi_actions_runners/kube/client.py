"""The few Kubernetes calls a runner needs, through the official ``kubernetes`` client.

The kubeconfig is loaded at call time from the path given, else ``KUBECONFIG`` / ``~/.kube/config``,
else the in-cluster service account: the client library reads ``KUBECONFIG`` only at import time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from urllib3.util.retry import Retry

from .library import api_exception, is_api_exception, kubernetes
from .pod_state import JOB_TRACKING_FINALIZER

if TYPE_CHECKING:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

DEFAULT_KUBECONFIG = "~/.kube/config"
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # what load_incluster_config reads
REQUEST_TIMEOUT = (5, 30)  # (connect, read) seconds: an API server that never answers must not hang a call
MERGE_PATCH = "application/merge-patch+json"  # the client would send a JSON patch (a list of operations)
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"  # core types': a list entry removed by value
CONNECTION_POOL_SIZE = 64  # a pool rotates hundreds of runners from as many threads; the default is 5 x cores
# The API server's metadata-only form of an object (PartialObjectMetadata, what client-go's metadata informers
# read): a Secret's labels without its data, so that judging whose a Secret is never reads another's credential.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
METADATA_LIST_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


class PodAlreadyExists(Exception):
    pass


class KubeconfigNotFound(Exception):
    """No cluster is configured where the provider looks: said before anything is written, with where it looked
    and what to set, since trying again changes nothing."""


class NamespaceUnusable(Exception):
    """The runners' namespace does not exist, or the provider's identity may not use it: found by the first call
    there, before anything is written; trying again changes nothing."""


def unusable_namespace(error: Exception, namespace: str) -> NamespaceUnusable | None:
    """What a refusal of a call in the runners' namespace means for the user, if it means that the namespace
    cannot be used: a 404 for the namespace itself, or a 403 (RBAC: no Role there; a namespace that does not
    exist has none either, and the provider may not look namespaces up to tell which)."""
    if not is_api_exception(error):
        return None
    if error.status == 404 and _kind_not_found(error) == "namespaces":
        return NamespaceUnusable(
            f"namespace {namespace} does not exist: create it first (in the program, with the runners depending on "
            "it, or by your cluster's provisioning), or set namespace to one that exists"
        )
    if error.status == 403:
        return NamespaceUnusable(
            f"the provider may not use namespace {namespace} ({describe(error)}): either it does not exist, or the "
            "provider's identity has no Role there granting the verbs the Permissions page lists "
            "(docs/operations/rbac.md). Create the namespace and bind the Role, or set namespace to one that has both"
        )
    return None


class PodRejected(Exception):
    """The API server refuses the runner's pod (a field of its pod template, an admission policy): nothing of the
    runner was made."""


@dataclass(frozen=True)
class SecretMetadata:
    """A Secret as its metadata alone says (never its data)."""

    name: str
    uid: str
    resource_version: str
    labels: dict[str, str] = field(default_factory=dict)
    owned: bool = False  # it has an ownerReference (a scale set runner's Secret, once its pod owns it)
    created: str = ""  # creationTimestamp, RFC 3339

    @classmethod
    def of(cls, item: dict[str, Any]) -> SecretMetadata:
        meta = item["metadata"]
        return cls(
            meta["name"],
            meta["uid"],
            meta["resourceVersion"],
            dict(meta.get("labels") or {}),
            owned=bool(meta.get("ownerReferences")),
            created=meta.get("creationTimestamp") or "",
        )


def load_api_client(kubeconfig: str | None, *, retries: bool = True) -> client.ApiClient:
    """``retries`` False: each call is one request, for a caller that must look again before it tries again."""
    k8s = kubernetes()
    configuration = k8s.client.Configuration()
    configuration.retries = (
        Retry(
            total=4,
            backoff_factor=0.5,
            status_forcelist=(429, 500, 502, 503, 504),
            allowed_methods=None,  # create/delete here are idempotent or checked for 409/404
            respect_retry_after_header=False,  # a Retry-After would be an unbounded wait; backoff is bounded
            raise_on_status=False,
        )
        if retries
        else False
    )
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    path = kubeconfig_file(kubeconfig)
    if path is not None:
        return k8s.config.new_client_from_config(
            config_file=path, persist_config=False, client_configuration=configuration
        )
    k8s.config.load_incluster_config(client_configuration=configuration)
    return k8s.client.ApiClient(configuration)


def kubeconfig_file(kubeconfig: str | None) -> str | None:
    """The kubeconfig the provider uses: the ``kubeconfig`` input, else ``KUBECONFIG``, else ``~/.kube/config``;
    None in a pod of a cluster with none of them (its service account). `KubeconfigNotFound` when there is
    nothing at all, or what is named is missing or a directory: judged here, when a call needs the cluster, and
    not by Check (a pipeline's preview has no kubeconfig)."""
    # As the client reads them: a list of paths (KUBECONFIG's separator), each with ~ expanded, merged.
    if kubeconfig:
        _usable(f"the kubeconfig input names {kubeconfig}", kubeconfig, _SET_THE_INPUT)
        return kubeconfig
    if named := os.environ.get("KUBECONFIG"):
        _usable(f"KUBECONFIG names {named}", named, _SET_IT)
        return named
    if _any_exists(DEFAULT_KUBECONFIG):
        _usable(
            f"neither the kubeconfig input nor KUBECONFIG is set, and {DEFAULT_KUBECONFIG}", DEFAULT_KUBECONFIG, _SET_IT
        )
        return DEFAULT_KUBECONFIG
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(SERVICE_ACCOUNT_TOKEN):
        return None  # in a pod of a cluster, with its service account's token mounted
    raise KubeconfigNotFound(
        f"no kubeconfig found: the kubeconfig input is not set, KUBECONFIG is not set, {DEFAULT_KUBECONFIG} does "
        f"not exist, and this is not a pod of a cluster with a service account token ({SERVICE_ACCOUNT_TOKEN}){_SET_IT}"
    )


def _usable(named: str, paths: str, what_to_do: str) -> None:
    """KubeconfigNotFound unless ``paths`` name a file, and no directory (the client would fail to read it)."""
    existing = [path for path in _expanded(paths) if os.path.exists(path)]
    if not existing:
        raise KubeconfigNotFound(f"{named}, which does not exist{what_to_do}")
    if directory := next((path for path in existing if os.path.isdir(path)), None):
        where = "" if directory == os.path.expanduser(paths) else f": {directory}"
        raise KubeconfigNotFound(f"{named}{where}, which is a directory, not a kubeconfig file{what_to_do}")


def _any_exists(paths: str) -> bool:
    return any(os.path.exists(path) for path in _expanded(paths))


def _expanded(paths: str) -> list[str]:
    return [os.path.expanduser(path) for path in paths.split(os.pathsep) if path]


_SET_IT = (
    ". Set the kubeconfig input to a kubeconfig file's path, or KUBECONFIG in the environment of pulumi (a delete or "
    "refresh uses the inputs the resource was made with, so there only KUBECONFIG is read anew)"
)
_SET_THE_INPUT = (
    ". The input, when set, is used instead of KUBECONFIG: set it to a kubeconfig file's path, or leave it out to "
    "use KUBECONFIG (a delete or refresh uses the input the resource was last updated with: put a kubeconfig "
    "there, or first update the resource without the input)"
)


class KubeClient:
    """Pods and Secrets of runners, and the Jobs of refilling pools, with 404 on delete taken as done (every step
    may be repeated)."""

    def __init__(self, kubeconfig: str | None) -> None:
        self._kubeconfig = kubeconfig
        self._api_client = load_api_client(kubeconfig)
        self._core = kubernetes().client.CoreV1Api(self._api_client)
        self._batch = kubernetes().client.BatchV1Api(self._api_client)
        self._once: client.ApiClient | None = None  # made when first needed (delete_pod's once)

    @property
    def api_client(self) -> client.ApiClient:
        """For the calls of other kinds (scale_set_objects.py), over the same connections."""
        return self._api_client

    def close(self) -> None:
        self._api_client.close()
        if self._once is not None:
            self._once.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def create_secret(self, manifest: dict[str, Any]) -> bool:
        """False if a Secret of the name exists (nothing was written)."""
        return _created(self._core.create_namespaced_secret, manifest)

    def replace_secret(self, manifest: dict[str, Any], resource_version: str) -> bool:
        """Replace the Secret if it is still as read at ``resource_version``; False if it changed or went since
        (nothing was written)."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        body = {**manifest, "metadata": {**manifest["metadata"], "resourceVersion": resource_version}}
        try:
            self._core.replace_namespaced_secret(name, namespace, body, _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            if error.status in (404, 409):
                return False
            raise
        return True

    def read_secret_metadata(self, namespace: str, name: str) -> SecretMetadata | None:
        try:
            response = self._core.read_namespaced_secret(
                name,
                namespace,
                _headers={"Accept": METADATA_ONLY},
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except api_exception() as error:
            if error.status == 404:
                return None
            raise
        return SecretMetadata.of(json.loads(response.data))

    def create_pod(self, manifest: dict[str, Any]) -> client.V1Pod:
        """The pod as made (its uid, for what it is to own)."""
        try:
            return self._core.create_namespaced_pod(
                manifest["metadata"]["namespace"], manifest, _request_timeout=REQUEST_TIMEOUT
            )
        except api_exception() as error:
            if error.status == 409:
                raise PodAlreadyExists(manifest["metadata"]["name"]) from error
            raise

    def validate_pod(self, manifest: dict[str, Any]) -> None:
        """A server-side dry run of the pod's creation, so that what only the API server judges (quantities,
        names, label values, admission policies such as Pod Security) is judged before anything is written. A
        name in use passes (who holds it is judged later), and so does a full ResourceQuota: a rotation frees the
        old pod's share before the new pod is made."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        try:
            self._core.create_namespaced_pod(namespace, manifest, dry_run="All", _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            if error.status == 403 and "exceeded quota" in (error.body or ""):
                return
            _refused(error, f"pod {namespace}/{name}", namespace)

    def read_pod(self, namespace: str, name: str) -> client.V1Pod | None:
        try:
            return self._core.read_namespaced_pod(name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            if error.status == 404:
                return None
            raise

    def list_pods(self, namespace: str, label_selector: str) -> list[client.V1Pod]:
        return self._core.list_namespaced_pod(
            namespace, label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT
        ).items

    def list_secret_metadata(self, namespace: str, label_selector: str) -> list[SecretMetadata]:
        """The Secrets that match, by their metadata alone (never their data)."""
        response = self._core.list_namespaced_secret(
            namespace,
            label_selector=label_selector,
            _headers={"Accept": METADATA_LIST_ONLY},
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        return [SecretMetadata.of(item) for item in json.loads(response.data)["items"] or ()]  # null when empty

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None, *, once: bool = False) -> None:
        """Graceful deletion, with the pod's own terminationGracePeriodSeconds unless told otherwise. ``once``: one
        request, no retry after a refusal or a timeout (the caller looks at the runner again first)."""
        core = self._core
        if once:
            if self._once is None:
                self._once = load_api_client(self._kubeconfig, retries=False)
            core = kubernetes().client.CoreV1Api(self._once)
        try:
            core.delete_namespaced_pod(
                name, namespace, grace_period_seconds=grace_seconds, _request_timeout=REQUEST_TIMEOUT
            )
        except api_exception() as error:
            if error.status != 404:
                raise

    def release_from_job(self, namespace: str, name: str) -> None:
        """The Job controller's tracking finalizer taken off a pod of a Job (see pod_state.held_by_job); gone
        already: nothing to do."""
        body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}
        try:
            self._core.patch_namespaced_pod(
                name, namespace, body, _content_type=STRATEGIC_MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT
            )
        except api_exception() as error:
            if error.status != 404:
                raise

    def set_secret_value(self, namespace: str, name: str, key: str, value: str) -> None:
        """One key of a Secret (a merge patch: its other keys, the credential among them, are not read)."""
        body = {"stringData": {key: value}}
        self._core.patch_namespaced_secret(
            name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT
        )

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        body = {"metadata": {"annotations": annotations}}
        self._core.patch_namespaced_pod(
            name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT
        )

    def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Gone afterwards (or before); with ``uid``, only that very Secret: False if another one holds the name
        now (nothing was deleted)."""
        k8s = kubernetes().client
        body = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid)) if uid else None
        try:
            self._core.delete_namespaced_secret(name, namespace, body=body, _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            if error.status == 409 and uid:
                return False
            if error.status != 404:
                raise
        return True

    def validate_job(self, manifest: dict[str, Any]) -> None:
        """A server-side dry run of the Job's creation (its pod template judged as a pod's is), as validate_pod."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        try:
            self._batch.create_namespaced_job(namespace, manifest, dry_run="All", _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            _refused(error, f"Job {namespace}/{name}", namespace)

    def create_job(self, manifest: dict[str, Any]) -> bool:
        """False if a Job of the name exists (nothing was written)."""
        return _created(self._batch.create_namespaced_job, manifest)

    def list_jobs(self, namespace: str, label_selector: str) -> list[client.V1Job]:
        return self._batch.list_namespaced_job(
            namespace, label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT
        ).items

    def scale_job(self, namespace: str, name: str, parallelism: int) -> None:
        body = {"spec": {"parallelism": parallelism}}
        self._batch.patch_namespaced_job(
            name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT
        )

    def orphan_job(self, namespace: str, name: str, uid: str) -> None:
        """The Job deleted, its pods left running (propagationPolicy Orphan: the garbage collector takes its
        ownerReference off them), so that nothing refills them; ``uid``: that very Job."""
        k8s = kubernetes().client
        body = k8s.V1DeleteOptions(propagation_policy="Orphan", preconditions=k8s.V1Preconditions(uid=uid))
        try:
            self._batch.delete_namespaced_job(name, namespace, body=body, _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            if error.status not in (404, 409):  # gone already, or another Job of the name: not that one
                raise

    def read_job(self, namespace: str, name: str) -> client.V1Job | None:
        try:
            return self._batch.read_namespaced_job(name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except api_exception() as error:
            if error.status == 404:
                return None
            raise


def _created(create: Callable[..., Any], manifest: dict[str, Any]) -> bool:
    """``create`` (a namespaced create of the client) of the manifest; False if one of its name exists."""
    try:
        create(manifest["metadata"]["namespace"], manifest, _request_timeout=REQUEST_TIMEOUT)
    except api_exception() as error:
        if error.status == 409:
            return False
        raise
    return True


def describe(error: Exception) -> str:
    """An ApiException's str() is headers and body; a user needs the status and the API server's message."""
    if not is_api_exception(error):
        return str(error)
    try:
        message = json.loads(error.body or "{}").get("message")
    except ValueError:
        message = None
    return f"Kubernetes answered {error.status} {error.reason}" + (f": {message}" if message else "")


def _refused(error: ApiException, what: str, namespace: str) -> None:
    """A dry run's error, as what it means: the object refused (PodRejected; a 403 here is an admission policy's,
    such as Pod Security), its namespace missing, or else the error itself. A name in use (409) passes: who holds
    it is judged later."""
    if error.status in (400, 403, 422):
        raise PodRejected(f"{what} was refused: {describe(error)}") from None
    if error.status == 404 and (unusable := unusable_namespace(error, namespace)) is not None:
        raise unusable from None
    if error.status != 409:
        raise error


def _kind_not_found(error: ApiException) -> str | None:
    """What a 404 says is missing (the Status body's details.kind: "namespaces" when the namespace is)."""
    try:
        return (json.loads(error.body or "{}").get("details") or {}).get("kind")
    except ValueError:
        return None
