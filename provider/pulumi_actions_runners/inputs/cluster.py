"""Which Kubernetes cluster a call reaches, known without calling it, so that a pool or runner moved to another
cluster is replaced (its old cluster drained through its old settings) instead of being updated into a cluster
where none of its pods are, and so that no call touches a cluster other than the one its runners are in.

A kubeconfig's path says nothing of the cluster (a laptop and CI reach the same one through different paths, and
KUBECONFIG or ~/.kube/config stand in for an unset input): its identity is what the kubeconfig the provider would
use says of the current context's cluster, its API server's address and the CA it trusts. The CA decides where
both sides name one (another CA is another cluster, at whatever address: k3s's 127.0.0.1:6443, a tunnel or a DNS
name moved to a new cluster), else the address; where neither can be compared (no kubeconfig in a pipeline's
preview, a state from before this), there is no verdict. What the kubeconfig alone calls another cluster is
confirmed, before a call is refused, by looking for the resource's own pods there: a renewed CA or another
address of the same cluster then passes (a replacement planned for it rotates the runners, the safe way).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from yaml import YAMLError

from ..kube.client import DEFAULT_KUBECONFIG, KubeClient, KubeconfigNotFound, kubeconfig_file
from ..kube.library import kubernetes
from ..kube.manifests import OWNER_LABEL
from ..unknowns import is_unknown

log = logging.getLogger(__name__)

CLUSTER = "cluster"  # the recorded identity: a Check-computed input, and an output of Runner and RunnerPool
SERVICE_ACCOUNT_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
IN_CLUSTER = "in-cluster"  # the service's address (10.96.0.1, say) is the same in every cluster: not an identity
_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)
_RECORDED = re.compile(r"^(?P<address>\S+)(?: \(CA sha256:(?P<ca>[0-9a-f]+)\))?$")
_DEFAULT_PORTS = {"https": 443, "http": 80}


def _unknowable() -> tuple[type[Exception], ...]:
    """What reading a kubeconfig may raise that leaves its cluster unknown here: no kubeconfig, or one the client
    could not read either (it then says why, when the call connects)."""
    config_exception = kubernetes().config.config_exception.ConfigException
    return (KubeconfigNotFound, config_exception, OSError, ValueError, TypeError, KeyError, AttributeError, YAMLError)


@dataclass(frozen=True)
class Cluster:
    address: str | None  # the API server's, normalized; None in a pod of the cluster
    ca: str | None  # the first 16 hex digits of the SHA-256 of the CA certificates it trusts; None: the system's

    def __str__(self) -> str:
        return (self.address or IN_CLUSTER) + (f" (CA sha256:{self.ca})" if self.ca else "")

    @classmethod
    def parse(cls, recorded: Any) -> Cluster | None:
        match = _RECORDED.match(recorded) if isinstance(recorded, str) else None
        if match is None:
            return None
        address = match["address"]
        return cls(None if address == IN_CLUSTER else address, match["ca"])

    def other_than(self, other: Cluster) -> bool:
        """Another CA than ``other``'s, where both name one; else another address, where both name one."""
        if self.ca is not None and other.ca is not None:
            return self.ca != other.ca
        return self.address is not None and other.address is not None and self.address != other.address


def cluster_of(kubeconfig: Any) -> str | None:
    """The identity of the cluster a call with this ``kubeconfig`` input would reach (else KUBECONFIG's,
    ~/.kube/config's, in-cluster's), as the state records it; None where it cannot be known here: nothing
    configured, a file missing or unreadable, an input not known yet."""
    if is_unknown(kubeconfig) or not (kubeconfig is None or isinstance(kubeconfig, str)):
        return None
    try:
        path = kubeconfig_file(kubeconfig)
        identity = _in_cluster() if path is None else _current_cluster(path)
    except _unknowable():
        return None
    return str(identity)


def other_cluster(recorded: Any, reached: Any) -> bool:
    """For Diff: both known, and not the same cluster."""
    old, new = Cluster.parse(recorded), Cluster.parse(reached)
    return old is not None and new is not None and new.other_than(old)


class OtherCluster(Exception):
    """A call would reach a cluster other than the one its runners are recorded in: refused before anything is
    touched or recorded, saying where they are, where the kubeconfig leads, and how to move them."""


def verified_cluster(
    what: str, operation: str, recorded: Any, kubeconfig: Any, ours_there: Callable[[], bool]
) -> str | None:
    """Before ``operation`` (a delete, an update, a refresh) of ``what`` (runner NAME, pool NAME) touches anything:
    the identity of the cluster it reaches (None if not known here: the connection then says why), or
    `OtherCluster` if that is another cluster than ``recorded`` and ``ours_there`` (a read of the resource's own
    pods there) finds none of them."""
    reached = cluster_of(kubeconfig)
    if not other_cluster(recorded, reached):
        return reached
    if ours_there():
        log.info(
            "%s: its kubeconfig now describes its cluster as %s (recorded: %s), and its pods are there: the same "
            "cluster, with a new address or CA",
            what,
            reached,
            recorded,
        )
        return reached
    raise OtherCluster(
        f"{what} is in the Kubernetes cluster {recorded}, as its state records, but this {operation} would reach "
        f"the cluster {reached} ({_named_by(kubeconfig)}): nothing was touched. A replacement's delete, a destroy "
        "and a refresh use the kubeconfig input the resource was last updated with, and KUBECONFIG as it is now. "
        "To move it, drain the old cluster first: keep KUBECONFIG (or the old kubeconfig input) leading to the old "
        "cluster, set the kubeconfig input to the new one's, and update; or destroy it with KUBECONFIG leading to "
        "the old cluster (pulumi destroy --target URN), then update. If the old cluster is gone, and its pods with "
        "it: pulumi state delete URN, then update (the new runners replace their old registrations)"
    )


def pods_there(kubeconfig: str | None, namespace: str, selector: str, owner: str | None) -> Callable[[], bool]:
    """A read of the resource's own pods (its ownership label) in the cluster this kubeconfig leads to."""

    def look() -> bool:
        with KubeClient(kubeconfig) as kube:
            pods = kube.list_pods(namespace, selector)
        return any(owner is not None and (pod.metadata.labels or {}).get(OWNER_LABEL) == owner for pod in pods)

    return look


def _named_by(kubeconfig: str | None) -> str:
    """Which kubeconfig kubeconfig_file picks, in words."""
    if kubeconfig:
        return f"through the kubeconfig input, {kubeconfig}"
    if named := os.environ.get("KUBECONFIG"):
        return f"through KUBECONFIG, {named}"
    return f"through {DEFAULT_KUBECONFIG}" if kubeconfig_file(None) else "as the in-cluster service account"


def _current_cluster(path: str) -> Cluster:
    """As the Kubernetes client reads the file (or KUBECONFIG's list of files, merged): its current context's."""
    kube_config = kubernetes().config.kube_config
    merged = kube_config.KubeConfigMerger(path).config
    context = merged["contexts"].get_with_name(merged["current-context"])["context"]
    cluster = merged["clusters"].get_with_name(context["cluster"])["cluster"]
    base = os.path.dirname(os.path.abspath(cluster.path)) if cluster.path else ""
    ca = kube_config.FileOrData(cluster, "certificate-authority", file_base_path=base).as_data()
    return Cluster(_address(cluster["server"]), _fingerprint(base64.standard_b64decode(ca)) if ca else None)


def _in_cluster() -> Cluster:
    with open(SERVICE_ACCOUNT_CA, "rb") as ca:
        return Cluster(None, _fingerprint(ca.read()))


def _address(server: str) -> str:
    """https://Host:443/ and https://host name the same server."""
    parts = urlsplit(server.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port and parts.port != _DEFAULT_PORTS.get(scheme) else ""
    return f"{scheme}://{host}{port}{parts.path.rstrip('/')}"


def _fingerprint(pem: bytes) -> str:
    """Of the certificates themselves (DER), not of how the file wraps them."""
    blocks = _PEM_CERTIFICATE.findall(pem.decode("ascii", "replace"))
    der = b"".join(ssl.PEM_cert_to_DER_cert(block) for block in blocks) or pem
    return hashlib.sha256(der).hexdigest()[:16]
