"""A real Kubernetes API server (kube-apiserver and etcd, built by tools/kube/build.sh) on loopback.

It is the API half of a cluster: it validates, defaults, admits and stores objects exactly as a cluster's does,
and nothing more. Nothing schedules or runs pods, and nothing finishes a graceful deletion or a namespace's
deletion: the simulator's kubelet stand-in (kubelet.py) plays those parts. Everything it writes lives in one
temporary folder (etcd's data on tmpfs when the machine has one): certificates made here, a static token file,
kubeconfigs.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import datetime
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from kubernetes import client, config

PR_SET_PDEATHSIG = 1  # prctl(2)
TMPFS_NEEDED_BYTES = 512 * 1024 * 1024
READY_TIMEOUT_SECONDS = 90.0  # /readyz answers in 3-4 s on 2 idle cores; a loaded CI machine is slower
ADMIN_USER = "simulator-admin"  # the kubelet stand-in and the tests' inspection: system:masters
ADMIN_CONNECTIONS = 64  # the kubelet stand-in's steps, runners and watches at once: no TLS handshake per call
PROVIDER_USER = "pulumi-actions-runners"  # what programs and the provider use: only the role below
# What the provider needs in a runners' namespace (pods and their Secrets), and what programs/runners' own
# pulumi_kubernetes Namespace needs. The README's "your own cluster" section lists the same rules.
PROVIDER_RULES = [
    {
        "apiGroups": [""],
        "resources": ["pods", "secrets"],
        "verbs": ["get", "list", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["namespaces"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
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
        self.port = 0
        self.ca_file = self._dir / "ca.crt"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> KubeApiServer:
        try:
            self._write_credentials()
            etcd_url = self._start_etcd()
            self._start_apiserver(etcd_url)
            self._wait_ready()
            self._grant_provider_role()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Killed, not drained: a test bed keeps nothing, and a graceful shutdown waits out open watches."""
        for process in self._processes:
            process.kill()
            process.wait()
        self._processes.clear()
        shutil.rmtree(self._etcd_dir, ignore_errors=True)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def write_kubeconfig(self, path: str | os.PathLike[str], *, admin: bool = False, server: str | None = None) -> Path:
        """A kubeconfig as a cluster's admin hands it out: the CA inline and a bearer token. ``server`` points
        it at another address with the same certificate (the fault proxy)."""
        user, token = (ADMIN_USER, self._admin_token) if admin else (PROVIDER_USER, self._provider_token)
        ca_data = base64.b64encode(self.ca_file.read_bytes()).decode()
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "simulator", "cluster": {"server": server or self.url, "certificate-authority-data": ca_data}}
            ],
            "users": [{"name": user, "user": {"token": token}}],
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
                "--authorization-mode=RBAC",
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
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        headers = {"Authorization": f"Bearer {self._admin_token}"}
        answer = "no answer yet"
        while time.monotonic() < deadline:
            for process in self._processes:
                if process.poll() is not None:
                    raise ApiServerFailed(
                        f"{Path(str(process.args[0])).name} exited {process.returncode}:\n{self._logs()}"
                    )
            try:
                response = requests.get(f"{self.url}/readyz", headers=headers, verify=self.ca_file, timeout=2)
                if response.status_code == 200:
                    return
                answer = f"{response.status_code}: {response.text[-400:]}"
            except requests.RequestException as error:
                answer = str(error)
            time.sleep(0.1)
        raise ApiServerFailed(
            f"kube-apiserver at {self.url} was not ready after {READY_TIMEOUT_SECONDS:.0f} s (last /readyz answer: "
            f"{answer}):\n{self._logs()}"
        )

    def _logs(self) -> str:
        return "\n".join(
            f"--- {log.name} (last lines)\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            for log in sorted(self._dir.glob("*.log"))
        )

    def _grant_provider_role(self) -> None:
        with self.admin_client() as admin:
            rbac = client.RbacAuthorizationV1Api(admin)
            rbac.create_cluster_role({"metadata": {"name": PROVIDER_USER}, "rules": PROVIDER_RULES})
            rbac.create_cluster_role_binding(
                {
                    "metadata": {"name": PROVIDER_USER},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PROVIDER_USER},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": PROVIDER_USER}],
                }
            )
