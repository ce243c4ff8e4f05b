"""A real Kubernetes control plane (kube-apiserver, kube-controller-manager and etcd, built by tools/kube/build.sh)
on loopback.

It is a cluster without nodes: the API server validates, defaults, admits and stores objects exactly as a
cluster's does, and the controller manager runs the real controllers the test bed's objects meet (CONTROLLERS:
the Job controller, the garbage collector, the namespace controller that empties and finalizes a deleted
namespace, the service-account controller that gives each namespace its ``default`` ServiceAccount, and the
controller that deletes finished Jobs after their TTL). Nothing schedules or runs pods, and nothing finishes a
pod's graceful deletion: the simulator's kubelet stand-in (kubelet.py) plays those parts. Everything it writes
lives in one temporary folder (etcd's data on tmpfs when the machine has one): certificates made here, a static
token file, kubeconfigs.

Authorization is RBAC's, as a cluster's: the provider's identity may touch pods and Secrets only where a Role
binds RUNNER_NAMESPACE_RULES to it, and namespaces (NAMESPACE_RULES) cluster-wide. Standing in for a cluster
admin's namespace provisioning, every non-system namespace gets that Role (grant_runner_namespace): the kubelet
stand-in binds it as it sees the namespace made, and so that a call made at once after a program made its
namespace cannot outrun that, a webhook placed after RBAC (ProvisioningWebhook) binds it on the spot when RBAC
refuses the provider in a namespace not yet provisioned, then answers what RBAC then says. It never allows
anything RBAC would not.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import datetime
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

_log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # prctl(2)
TMPFS_NEEDED_BYTES = 512 * 1024 * 1024
PORT_ATTEMPTS = 3  # starts of etcd and kube-apiserver on free ports before a taken one fails the start
READY_TIMEOUT_SECONDS = 90.0  # /readyz answers in 3-4 s on 2 idle cores; a loaded CI machine is slower
# The controllers of kube-controller-manager that act on what the provider and the test bed make (its names, from
# `kube-controller-manager --help`); the others watch objects nobody here makes, and would only cost CPU.
CONTROLLERS = (
    "job-controller",
    "deployment-controller",  # a RunnerScaleSet's listener
    "replicaset-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "ttl-after-finished-controller",
)
ADMIN_USER = "simulator-admin"  # the kubelet stand-in and the tests' inspection: system:masters
ADMIN_CONNECTIONS = 64  # the kubelet stand-in's steps, runners and watches at once: no TLS handshake per call
PROVIDER_USER = "pulumi-actions-runners"  # what programs and the provider use: only the rules below
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")  # never a runners' namespace
# A namespace labelled so is one the cluster's admin has not provisioned for runners (no Role for the provider):
# the test bed's provisioning, and its webhook, leave it alone, so a namespace without the Role is met as a user
# meets it (RBAC's 403).
UNPROVISIONED_LABEL = "simulator.actions-runners.invalid/unprovisioned"


def provisioned(namespace: client.V1Namespace | dict[str, Any]) -> bool:
    """Whether the admin's provisioning covers the namespace (not labelled UNPROVISIONED_LABEL)."""
    metadata = namespace["metadata"] if isinstance(namespace, dict) else namespace.metadata
    labels = (metadata.get("labels") if isinstance(metadata, dict) else metadata.labels) or {}
    return UNPROVISIONED_LABEL not in labels


RBAC_GROUP = "rbac.authorization.k8s.io"
GRANT_REQUEST_TIMEOUT = (5, 30)
GRANT_TIMEOUT_SECONDS = 10.0  # the authorizer's RBAC cache follows a write within milliseconds
WEBHOOK_TIMEOUT_SECONDS = 15  # the API server's limit is 30
# In a SubjectAccessReview's extra: judge by RBAC alone (the webhook passes it by), so that the provisioning's own
# reviews, made while it provisions, never wait on it.
RBAC_ONLY = "simulator.actions-runners.invalid/rbac-only"
# What the provider calls (kube_client.py), granted only in a runners' namespace by a Role and RoleBinding there
# (grant_runner_namespace), never cluster-wide: a call outside it (a listing across namespaces, another
# namespace, a cluster-scoped resource) is refused 403, so the suite fails if the provider ever makes one.
# Pods: create (the server-side dry run that judges a pod before anything is written is a create too), read,
# list, annotate (merge patch) and delete; never replaced. Secrets: those and a replace (update), also as a
# resourceVersion-preconditioned one; a metadata-only GET or LIST is a get or list; a delete with a uid
# precondition is a delete. docs/operations/rbac.md quotes these.
RUNNER_NAMESPACE_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "get", "list", "update", "patch", "delete"]},
    # A refilling pool's Job: made (and judged by a dry run), listed, read while its deletion completes,
    # scaled (merge patch) and deleted (propagationPolicy Orphan).
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "patch", "delete"]},
    # A RunnerScaleSet's listener: its Deployment, ServiceAccount, Role and RoleBinding and its ConfigMap, each
    # made and changed by server-side apply (a patch, authorized as a create too when it makes one), read, and
    # deleted. The Role it grants holds no more than the rules above: RBAC lets no one grant what it does not hold.
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "get", "list", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["configmaps", "serviceaccounts"], "verbs": ["create", "get", "patch", "delete"]},
    {
        "apiGroups": [RBAC_GROUP],
        "resources": ["roles", "rolebindings"],
        "verbs": ["create", "get", "patch", "delete"],
    },
]
# Namespaces are cluster-scoped, so no Role can grant them: what programs/runners' own pulumi_kubernetes
# Namespace needs (createNamespace) is a ClusterRole bound cluster-wide. It reaches no pod or Secret. As the API
# server's audit log shows it: a server-side apply PATCH makes and changes the namespace (one that creates is
# authorized as a create too), GET, LIST and WATCH await and refresh it, DELETE destroys it; it never replaces
# one (PUT, update). Its wish to list events cluster-wide (to pass Warning events on) is refused, and it carries on.
NAMESPACE_RULES = [
    {
        "apiGroups": [""],
        "resources": ["namespaces"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
]


class ApiServerFailed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    subject: str, key: rsa.RSAPrivateKey, *, issuer: x509.Certificate | None, issuer_key: rsa.RSAPrivateKey
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=7))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    else:
        alternative_names = [
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
        builder = builder.add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _tmpfs() -> str | None:
    """/dev/shm when it has room for etcd's preallocated write-ahead log (two 64 MB files; a container's default
    /dev/shm is 64 MB), else the default temporary folder."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and shutil.disk_usage(shm).free >= TMPFS_NEEDED_BYTES else None


def _die_with_parent() -> None:
    """In the child: killed when the process that started it dies, however it dies (a benchmark interrupted, a
    test run killed), so no server outlives its user. Linux only; elsewhere stop() is the only way."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class KubeApiServer:
    """``with KubeApiServer(bin_dir) as server:`` etcd and kube-apiserver on free loopback ports, ready."""

    def __init__(self, bin_dir: str | os.PathLike[str]) -> None:
        self.bin_dir = Path(bin_dir)
        self._dir = Path(tempfile.mkdtemp(prefix="kube-apiserver-"))
        self._etcd_dir = Path(tempfile.mkdtemp(prefix="etcd-", dir=_tmpfs()))
        self._admin_token = secrets.token_hex(16)
        self._provider_token = secrets.token_hex(16)
        self._processes: list[subprocess.Popen[bytes]] = []
        self._webhook = ProvisioningWebhook()
        self.port = 0
        self.ca_file = self._dir / "ca.crt"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> KubeApiServer:
        try:
            self._write_credentials()
            self._webhook.start(self._dir, self.tls_files, self.ca_file)
            for attempt in range(1, PORT_ATTEMPTS + 1):
                try:
                    self._start_apiserver(self._start_etcd())
                    self._wait_ready()
                    break
                except ApiServerFailed as error:
                    # A free port is chosen, then bound by the child: another test bed starting at once (the
                    # suite's workers) may bind it in between. Started anew on other ports.
                    if attempt == PORT_ATTEMPTS or "address already in use" not in str(error):
                        raise
                    _log.warning("a port of the control plane was taken meanwhile; starting it on others")
                    self._kill_processes()
                    shutil.rmtree(self._etcd_dir, ignore_errors=True)
                    self._etcd_dir.mkdir()
            self._grant_provider_role()
            self._start_controller_manager()
            self._webhook.serve(self.admin_client())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Killed, not drained: a test bed keeps nothing, and a graceful shutdown waits out open watches."""
        self._kill_processes()
        self._webhook.stop()
        shutil.rmtree(self._etcd_dir, ignore_errors=True)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _kill_processes(self) -> None:
        for process in self._processes:
            process.kill()
            process.wait()
        self._processes.clear()

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def write_kubeconfig(
        self,
        path: str | os.PathLike[str],
        *,
        admin: bool = False,
        server: str | None = None,
        token: tuple[str, str] | None = None,
    ) -> Path:
        """A kubeconfig as a cluster's admin hands it out: the CA inline and a bearer token. ``server`` points
        it at another address with the same certificate (the fault proxy); ``token``: another identity's (its
        name, its bearer token), such as a ServiceAccount's."""
        user, token_value = (ADMIN_USER, self._admin_token) if admin else (PROVIDER_USER, self._provider_token)
        if token is not None:
            user, token_value = token
        ca_data = base64.b64encode(self.ca_file.read_bytes()).decode()
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "simulator", "cluster": {"server": server or self.url, "certificate-authority-data": ca_data}}
            ],
            "users": [{"name": user, "user": {"token": token_value}}],
            "contexts": [{"name": "simulator", "context": {"cluster": "simulator", "user": user}}],
            "current-context": "simulator",
        }
        target = Path(path)
        target.write_text(yaml.safe_dump(kubeconfig))
        target.chmod(0o600)
        return target

    def admin_client(self) -> client.ApiClient:
        path = self._dir / "admin.kubeconfig"
        if not path.exists():
            self.write_kubeconfig(path, admin=True)
        configuration = client.Configuration()
        configuration.connection_pool_maxsize = ADMIN_CONNECTIONS
        return config.new_client_from_config(
            config_file=str(path), persist_config=False, client_configuration=configuration
        )

    @property
    def tls_files(self) -> tuple[Path, Path]:
        """The serving certificate and its key, for a proxy that must present the same identity."""
        return self._dir / "apiserver.crt", self._dir / "apiserver.key"

    def _write_credentials(self) -> None:
        ca_key = _key()
        ca = _certificate("simulator-ca", ca_key, issuer=None, issuer_key=ca_key)
        server_key = _key()
        server = _certificate("kube-apiserver", server_key, issuer=ca, issuer_key=ca_key)
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        certificate_file, key_file = self.tls_files
        certificate_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(_pem_key(server_key))
        service_account_key = _key()
        (self._dir / "sa.key").write_bytes(_pem_key(service_account_key))
        public = service_account_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        (self._dir / "sa.pub").write_bytes(public)
        tokens = f'{self._admin_token},{ADMIN_USER},1,"system:masters"\n{self._provider_token},{PROVIDER_USER},2\n'
        (self._dir / "tokens.csv").write_text(tokens)
        for path in self._dir.iterdir():
            path.chmod(0o600)

    def _spawn(self, name: str, arguments: list[str]) -> subprocess.Popen[bytes]:
        log = open(self._dir / f"{name}.log", "wb")  # noqa: SIM115 - the process holds it; closed below
        with log:
            process = subprocess.Popen(
                [str(self.bin_dir / name), *arguments],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C meant for the demo reaches it through stop(), in order
                preexec_fn=_die_with_parent,
            )
        self._processes.append(process)
        return process

    def _start_etcd(self) -> str:
        client_url, peer_url = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
        self._spawn(
            "etcd",
            [
                f"--data-dir={self._etcd_dir}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",  # a test bed's data may be lost with the machine
                "--log-level=warn",
            ],
        )
        return client_url

    def _start_apiserver(self, etcd_url: str) -> None:
        self.port = free_port()
        certificate_file, key_file = self.tls_files
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={self._dir}",
                f"--tls-cert-file={certificate_file}",
                f"--tls-private-key-file={key_file}",
                f"--token-auth-file={self._dir / 'tokens.csv'}",
                f"--authorization-config={self._webhook.authorization_config}",  # RBAC, then the webhook
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self._dir / 'sa.pub'}",
                f"--service-account-signing-key-file={self._dir / 'sa.key'}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",  # as most clusters: Docker-in-Docker sidecars need it
                "--endpoint-reconciler-type=none",  # no kubernetes Service endpoints: nothing listens there
                "--profiling=false",
            ],
        )

    def _wait_ready(self) -> None:
        headers = {"Authorization": f"Bearer {self._admin_token}"}

        def readyz() -> str | None:
            try:
                response = requests.get(f"{self.url}/readyz", headers=headers, verify=self.ca_file, timeout=2)
            except requests.RequestException as error:
                return str(error)
            return None if response.status_code == 200 else f"{response.status_code}: {response.text[-400:]}"

        self._wait_for(f"kube-apiserver at {self.url} to answer /readyz", readyz)

    def _wait_for(self, what: str, probe: Callable[[], str | None]) -> None:
        """Until ``probe`` answers None (ready; else what it saw), at most READY_TIMEOUT_SECONDS; ApiServerFailed,
        with the logs, when a process of the control plane exits meanwhile or the time runs out."""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        answer: str | None = "no answer yet"
        while time.monotonic() < deadline:
            for process in self._processes:
                if process.poll() is not None:
                    raise ApiServerFailed(
                        f"{Path(str(process.args[0])).name} exited {process.returncode}:\n{self._logs()}"
                    )
            answer = probe()
            if answer is None:
                return
            time.sleep(0.1)
        raise ApiServerFailed(
            f"waited {READY_TIMEOUT_SECONDS:.0f} s for {what} (last answer: {answer}):\n{self._logs()}"
        )

    def _start_controller_manager(self) -> None:
        """Its controllers, with the admin's credential (no leader election: one of it; no serving port: nothing
        asks it anything). Ready once the service-account controller has given ``default`` its ServiceAccount,
        which it does once its informers have synced."""
        kubeconfig = self.write_kubeconfig(self._dir / "controller-manager.kubeconfig", admin=True)
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={kubeconfig}",
                f"--controllers={','.join(CONTROLLERS)}",
                "--leader-elect=false",
                "--secure-port=0",
                "--profiling=false",
            ],
        )
        with self.admin_client() as admin:
            core = client.CoreV1Api(admin)

            def default_account() -> str | None:
                try:
                    core.read_namespaced_service_account("default", "default")
                except ApiException as error:
                    return f"{error.status} {error.reason}"
                return None

            self._wait_for("kube-controller-manager to give namespace default its ServiceAccount", default_account)

    def _logs(self) -> str:
        return "\n".join(
            f"--- {log.name} (last lines)\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            for log in sorted(self._dir.glob("*.log"))
        )

    def _grant_provider_role(self) -> None:
        """NAMESPACE_RULES cluster-wide; RUNNER_NAMESPACE_RULES are bound per namespace (grant_runner_namespace)."""
        with self.admin_client() as admin:
            rbac = client.RbacAuthorizationV1Api(admin)
            rbac.create_cluster_role({"metadata": {"name": PROVIDER_USER}, "rules": NAMESPACE_RULES})
            rbac.create_cluster_role_binding(
                {
                    "metadata": {"name": PROVIDER_USER},
                    "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": PROVIDER_USER},
                    "subjects": [{"apiGroup": RBAC_GROUP, "kind": "User", "name": PROVIDER_USER}],
                }
            )


def grant_runner_namespace(api_client: client.ApiClient, namespace: str) -> None:
    """What a cluster's admin does for each runners' namespace: RUNNER_NAMESPACE_RULES in a Role there, bound to
    the provider's identity. It returns once the API server's authorizer applies them (its RBAC cache follows
    the writes a little later), so the provider's first call after it cannot meet a 403. Repeatable: what a
    shared server's earlier user bound is kept."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    metadata = {"name": PROVIDER_USER, "namespace": namespace}
    role = {"metadata": metadata, "rules": RUNNER_NAMESPACE_RULES}
    binding = {
        "metadata": metadata,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": PROVIDER_USER},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "User", "name": PROVIDER_USER}],
    }
    for create, body in ((rbac.create_namespaced_role, role), (rbac.create_namespaced_role_binding, binding)):
        try:
            create(namespace, body, _preload_content=False, _request_timeout=GRANT_REQUEST_TIMEOUT)
        except ApiException as error:
            if error.status != 409:
                raise
    wait_until_authorized(api_client, namespace)


def wait_until_authorized(api_client: client.ApiClient, namespace: str) -> None:
    """Until RBAC lets the provider's identity make a pod in ``namespace`` (a SubjectAccessReview is judged by
    the same RBAC cache as the provider's own calls); every rule of the Role applies from then."""
    spec = {
        "user": PROVIDER_USER,
        "groups": ["system:authenticated"],
        "resourceAttributes": {"namespace": namespace, "verb": "create", "resource": "pods"},
    }
    deadline = time.monotonic() + GRANT_TIMEOUT_SECONDS
    while True:
        if rbac_allows(api_client, spec):
            return
        if time.monotonic() > deadline:
            raise ApiServerFailed(
                f"the provider's Role in {namespace} was not in force after {GRANT_TIMEOUT_SECONDS} s"
            )
        time.sleep(0.005)


def rbac_allows(api_client: client.ApiClient, spec: dict[str, Any]) -> bool:
    """Whether RBAC alone allows what a SubjectAccessReview's ``spec`` describes (the webhook passes it by)."""
    extra = {**(spec.get("extra") or {}), RBAC_ONLY: ["true"]}
    review = {"spec": {key: value for key, value in spec.items() if key != "extra"} | {"extra": extra}}
    answer = client.AuthorizationV1Api(api_client).create_subject_access_review(
        review, _preload_content=False, _request_timeout=GRANT_REQUEST_TIMEOUT
    )
    return bool(json.loads(answer.data)["status"].get("allowed"))  # raw: a model costs milliseconds


class ProvisioningWebhook:
    """The API server's second authorizer, after RBAC, asked only of what RBAC does not allow the provider's
    identity: the cluster admin's namespace provisioning on demand. When the call is in a namespace that exists,
    is not a system one, is not terminating and is not left unprovisioned (UNPROVISIONED_LABEL), it binds the
    provider's Role there (grant_runner_namespace; a no-op if the kubelet stand-in did already) and answers what
    RBAC says then; else it has no opinion, and the call is refused. So the provider's first call in a namespace
    a program has just made waits for the binding (milliseconds) instead of racing it, and a call outside a
    runners' namespace is refused as before. Nothing is cached: each answer is RBAC's of the moment."""

    def __init__(self) -> None:
        self._api: client.ApiClient | None = None
        self._server: ThreadingHTTPServer | None = None
        self.authorization_config = Path()

    def start(self, folder: Path, tls_files: tuple[Path, Path], ca_file: Path) -> None:
        """Listening, before the API server starts (it reads the address from the files written here); it has
        no opinion on anything until ``serve``."""
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(*map(str, tls_files))
        server = _WebhookServer(self)
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self._server = server
        threading.Thread(target=server.serve_forever, args=(0.05,), name="provisioning-webhook", daemon=True).start()
        url = f"https://127.0.0.1:{server.server_address[1]}/authorize"
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "webhook", "cluster": {"server": url, "certificate-authority": str(ca_file)}}],
            "users": [{"name": "kube-apiserver", "user": {}}],
            "contexts": [{"name": "webhook", "context": {"cluster": "webhook", "user": "kube-apiserver"}}],
            "current-context": "webhook",
        }
        (folder / "webhook.kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        webhook = {
            "timeout": f"{WEBHOOK_TIMEOUT_SECONDS}s",
            "authorizedTTL": "1s",  # required, though nothing is cached
            "unauthorizedTTL": "1s",
            "cacheAuthorizedRequests": False,
            "cacheUnauthorizedRequests": False,
            "subjectAccessReviewVersion": "v1",
            "matchConditionSubjectAccessReviewVersion": "v1",
            "failurePolicy": "NoOpinion",  # unreachable: RBAC's refusal stands
            "connectionInfo": {"type": "KubeConfigFile", "kubeConfigFile": str(folder / "webhook.kubeconfig")},
            "matchConditions": [
                {"expression": f"request.user == '{PROVIDER_USER}' && has(request.resourceAttributes)"}
            ],
        }
        configuration = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "AuthorizationConfiguration",
            "authorizers": [
                {"type": "RBAC", "name": "rbac"},
                {"type": "Webhook", "name": "namespace-provisioning", "webhook": webhook},
            ],
        }
        self.authorization_config = folder / "authorization.yaml"
        self.authorization_config.write_text(yaml.safe_dump(configuration))

    def serve(self, admin: client.ApiClient) -> None:
        self._api = admin

    def stop(self) -> None:
        server, self._server = self._server, None
        api, self._api = self._api, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if api is not None:
            api.close()

    def judge(self, spec: dict[str, Any]) -> dict[str, Any]:
        """A SubjectAccessReview's status for its ``spec``: allowed only if RBAC allows it once provisioned."""
        api = self._api
        namespace = (spec.get("resourceAttributes") or {}).get("namespace")
        passed_by = api is None or RBAC_ONLY in (spec.get("extra") or {}) or spec.get("user") != PROVIDER_USER
        if passed_by or not namespace or namespace in SYSTEM_NAMESPACES:
            return {"allowed": False}
        try:
            found = client.CoreV1Api(api).read_namespace(namespace, _request_timeout=GRANT_REQUEST_TIMEOUT)
            if found.metadata.deletion_timestamp is not None or not provisioned(found):
                return {"allowed": False}
            grant_runner_namespace(api, namespace)
            if rbac_allows(api, spec):
                return {"allowed": True, "reason": f"RBAC, once namespace {namespace} was provisioned"}
        except ApiException as error:
            if error.status != 404:
                _log.warning("provisioning webhook: namespace %s: %s %s", namespace, error.status, error.reason)
        except Exception as error:  # the server is stopping: no opinion, so RBAC's refusal stands
            if self._api is not None:
                _log.warning("provisioning webhook: namespace %s: %s", namespace, error)
        return {"allowed": False}


class _WebhookServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, webhook: ProvisioningWebhook) -> None:
        super().__init__(("127.0.0.1", 0), _WebhookHandler)
        self.webhook = webhook


class _WebhookHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the API server keeps its connection
    disable_nagle_algorithm = True  # the body, written after the headers, must not wait for their ACK (40 ms)
    server: _WebhookServer

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        status = self.server.webhook.judge(review.get("spec") or {})
        body = json.dumps(
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "status": status}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass
