"""The container runtime's part for the package's own image: a container of the RunnerScaleSet listener's
image runs that very image, and every other container goes to the runtime after it (the simulated runner).

**From the image** (``images``: a reference -> the OCI image layout `make listener-image` built, as a registry
would serve it): its layers unpacked once, a copy of them per container start (hard links), and in it, as a
container runtime does, the image's Entrypoint and Cmd (or the pod's command), its Env under the container's
resolved environment, its WorkingDir, and its User unless the pod's securityContext names another (runAsNonRoot
refuses root, as the kubelet does: CreateContainerConfigError). It runs chrooted there in a user namespace of
its own (util-linux ``unshare``, oci_image.py). What a node mounts, it finds where a pod finds it:
/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}, the token a TokenRequest for the pod's
ServiceAccount bound to the pod (the kubelet's projected token, ``serviceaccounts/token``), so that the real API
server's RBAC judges it by its Role; and ``KUBERNETES_SERVICE_HOST``/``PORT`` as the kubelet sets them, here the
API server's loopback address (a cluster's would be the ``kubernetes`` Service's), so its client takes the
in-cluster path a real pod takes.

Where the test bed differs from a node, on purpose: no network namespace (the processes share this machine's
network, where the API server and the GitHub double listen on loopback), so a program that serves HTTP is told
to bind its pod's IP (a loopback address, kubelet.py) in ``ACTIONS_RUNNERS_METRICS_ADDRESS`` (its Deployment
leaves it unset: every interface, in a pod's own namespace), where the kubelet's probes and tests reach it; and
the root filesystem is not made read-only (the copy is writable; the listener writes nothing there, and the
image's hook.sh checks as much).

**Without an image** (a machine that cannot build one: no mmdebstrap), a container of the listener's repository
runs the package's own ``actions-runners-listener`` of this environment, the image's Entrypoint (a test checks
that the image's config names it), with a kubeconfig of the same token in ``KUBECONFIG``.

Either way: SIGTERM on graceful deletion, SIGKILL when the grace period ends; the exit code as a container's
(128 + signal); the last line it wrote becomes the termination message. Its output is kept in
``logs/<namespace>_<pod>.log`` under the workdir, which tests read.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kubernetes import client

from pulumi_actions_runners.inputs.listener_image import REPOSITORY, default_listener_image
from pulumi_actions_runners.kube.scale_set_manifests import ENV_METRICS_ADDRESS, LISTENER_COMMAND, METRICS_PORT

from .kube_apiserver import KubeApiServer
from .kubelet import ContainerRuntime, PodProcess
from .oci_image import Image, read_image

_log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = "var/run/secrets/kubernetes.io/serviceaccount"  # under the root filesystem
STOP_SECONDS = 10.0  # for the killed containers' threads to remove their root filesystems' copies
# A kubelet's projected service account token lives an hour unless the pod asks otherwise, and is renewed at 80 %
# of that (Kubernetes' "Configure Service Accounts for Pods", serviceAccountToken.expirationSeconds: 3600 by
# default); a listener of the test bed never lives that long.
TOKEN_SECONDS = 3600


@dataclass
class _Run:
    """One start of one of the package's programs."""

    process: PodProcess
    popen: subprocess.Popen[bytes] | None = None  # None while its token is asked for
    early: signal.Signals | None = None  # a signal that came meanwhile: sent as soon as it runs
    rootfs: Path | None = None  # its copy of the image's root filesystem


class ContainerConfigError(Exception):
    """What the kubelet would refuse to start (CreateContainerConfigError)."""


class PackageProcesses:
    """A ContainerRuntime: the listener's image (or, without one, its program) as processes, anything else to
    ``then``. ``listener_image``: the OCI layout of the listener's image, served under its own tag and the
    package's default reference."""

    def __init__(
        self,
        then: ContainerRuntime,
        server: KubeApiServer,
        admin: client.ApiClient,
        workdir: Path,
        listener_image: Path | None = None,
    ) -> None:
        self._then = then
        self._server = server
        self._core = client.CoreV1Api(admin)
        self._workdir = workdir
        self._logs = workdir / "logs"
        self._logs.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._running: dict[int, _Run] = {}  # by id(process)
        self._unpacking = threading.Lock()
        self._unpacked: dict[str, Path] = {}  # image digest -> its root filesystem
        self.images: dict[str, Image] = {}  # reference -> image
        if listener_image is not None:
            image = read_image(listener_image)
            self.images = {f"{REPOSITORY}:{image.ref}": image, default_listener_image(): image}
        self.started: list[str] = []  # pod names, in start order

    def log_of(self, namespace: str, pod: str) -> str:
        path = self._logs / f"{namespace}_{pod}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def crash(self, namespace: str, pod: str, signum: signal.Signals = signal.SIGKILL) -> bool:
        """The pod's program killed from inside its node (an OOM kill, a crash), not by the kubelet: its container
        exits and restarts as its pod's restartPolicy says. False if none of the pod's runs."""
        with self._lock:
            runs = [r for r in self._running.values() if (r.process.namespace, r.process.name) == (namespace, pod)]
        popen = runs[0].popen if runs else None
        if popen is None or popen.poll() is not None:
            return False
        popen.send_signal(signum)
        return True

    def stop(self) -> None:
        """Every process still running is killed (the node goes), and what each start made is gone when this
        returns (STOP_SECONDS at most): the simulator removes its workdir next."""
        with self._lock:
            running = [r.popen for r in self._running.values() if r.popen is not None]
            for starting in (r for r in self._running.values() if r.popen is None):
                starting.early = signal.SIGKILL  # killed as soon as it runs
        for popen in running:
            if popen.poll() is None:
                popen.kill()
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    return
            time.sleep(0.05)
        _log.warning("containers still ending after %.0f s: their files may be left behind", STOP_SECONDS)

    # --- the runtime -------------------------------------------------------------------------------------

    def ours(self, process: PodProcess) -> bool:
        """A container of the listener's image (one this node has, or any of its repository's without one)."""
        if self.images:
            return process.image in self.images
        return process.image.partition("@")[0].rpartition(":")[0] == REPOSITORY

    def start(self, process: PodProcess) -> None:
        if not self.ours(process):
            self._then.start(process)
            return
        with self._lock:
            self._running[id(process)] = _Run(process)
        threading.Thread(target=self._run, args=(process,), name=f"process-{process.name}", daemon=True).start()

    def terminate(self, process: PodProcess) -> None:
        if not self._signal(process, signal.SIGTERM):
            self._then.terminate(process)

    def kill(self, process: PodProcess) -> None:
        if not self._signal(process, signal.SIGKILL):
            self._then.kill(process)

    def _signal(self, process: PodProcess, signum: signal.Signals) -> bool:
        """False if the process is not ours."""
        if not self.ours(process):
            return False
        with self._lock:
            run = self._running.get(id(process))
            if run is None:
                return True  # it ended already
            if run.popen is None:
                run.early = signum  # sent as soon as it runs
                return True
        if run.popen.poll() is None:
            run.popen.send_signal(signum)
        return True

    def _run(self, process: PodProcess) -> None:
        image = self.images.get(process.image)
        try:
            pod = self._core.read_namespaced_pod(process.name, process.namespace)
            token = self._service_account_token(pod)
            if image is not None:
                argv, env = self._in_image(process, pod, image, token)
            else:
                argv, env = self._on_host(process, pod, token)
        except Exception as error:  # the pod went meanwhile, its ServiceAccount is missing, or it cannot run
            self._ended(process, {})
            process.exited(1, str(error) if isinstance(error, ContainerConfigError) else f"cannot start: {error}")
            return
        env[ENV_METRICS_ADDRESS] = f"{pod.status.pod_ip}:{METRICS_PORT}"  # its pod's address (the docstring)
        log_path = self._logs / f"{process.namespace}_{process.name}.log"
        with log_path.open("ab") as log_file:
            try:
                popen = subprocess.Popen(
                    argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as error:  # a runtime's StartError: exit 128, its reason the message
                self._ended(process, env)
                process.exited(128, f"StartError: {error}")
                return
            with self._lock:
                run = self._running[id(process)]
                run.popen = popen
                self.started.append(process.name)
                early = run.early
            if early is not None:
                popen.send_signal(early)
            code = popen.wait()
        self._ended(process, env)
        process.exited(128 - code if code < 0 else code, _last_line(log_path))

    def _ended(self, process: PodProcess, env: dict[str, str]) -> None:
        """What the start made goes: its root filesystem's copy, its kubeconfig."""
        with self._lock:
            run = self._running.pop(id(process), None)
        if run is not None and run.rootfs is not None:
            shutil.rmtree(run.rootfs, ignore_errors=True)
        if "KUBECONFIG" in env:
            Path(env["KUBECONFIG"]).unlink(missing_ok=True)

    def _in_image(
        self, process: PodProcess, pod: client.V1Pod, image: Image, token: str
    ) -> tuple[list[str], dict[str, str]]:
        """The command line and environment of a container of ``image``, its root filesystem made (a copy)."""
        uid, gid = _user(pod, process.container, image)
        rootfs = self._workdir / "containers" / f"{process.namespace}_{process.name}_{id(process):x}"
        rootfs.parent.mkdir(parents=True, exist_ok=True)
        unpacked = self._root_filesystem(image)
        with self._lock:
            self._running[id(process)].rootfs = rootfs  # removed at the end, a partial copy too
        subprocess.run(["cp", "-al", str(unpacked), str(rootfs)], check=True)
        mounted = rootfs / SERVICE_ACCOUNT_DIR
        mounted.mkdir(parents=True, exist_ok=True)
        (mounted / "token").write_text(token)
        (mounted / "ca.crt").write_bytes(self._server.ca_file.read_bytes())
        (mounted / "namespace").write_text(process.namespace)
        api = urlsplit(self._server.url)
        env = image.config.environment(
            {
                "HOSTNAME": process.name,
                "KUBERNETES_SERVICE_HOST": api.hostname or "127.0.0.1",
                "KUBERNETES_SERVICE_PORT": str(api.port or 443),
                **process.env,
            }
        )
        argv = image.config.argv(process.command or None)
        user = dataclasses.replace(image.config, user=f"{uid}:{gid}")
        return dataclasses.replace(image, config=user).unshare_argv(rootfs, argv, env), env

    def _root_filesystem(self, image: Image) -> Path:
        """The image's layers unpacked, once for the test bed's life (under a lock of its own: signals to the
        running pods do not wait for it)."""
        with self._unpacking:
            if image.digest not in self._unpacked:
                target = self._workdir / "images" / image.digest.replace(":", "-")
                shutil.rmtree(target, ignore_errors=True)
                self._unpacked[image.digest] = image.unpack(target)
            return self._unpacked[image.digest]

    def _on_host(self, process: PodProcess, pod: client.V1Pod, token: str) -> tuple[list[str], dict[str, str]]:
        """Without an image: this environment's own program, the token in a kubeconfig."""
        account = pod.spec.service_account_name or "default"
        path = self._logs / f".{process.namespace}_{process.name}.kubeconfig"
        kubeconfig = self._server.write_kubeconfig(
            path, token=(f"system:serviceaccount:{process.namespace}:{account}", token)
        )
        env = {
            "PATH": os.environ.get("PATH", ""),
            **process.env,
            "KUBECONFIG": str(kubeconfig),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        program = Path(sys.executable).parent / LISTENER_COMMAND
        return [str(program), *process.command[1:]], env

    def _service_account_token(self, pod: client.V1Pod) -> str:
        """The kubelet's TokenRequest for the pod's ServiceAccount, bound to the pod."""
        account = pod.spec.service_account_name or "default"
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=[],  # the API server's own
                expiration_seconds=TOKEN_SECONDS,
                bound_object_ref=client.V1BoundObjectReference(
                    api_version="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid
                ),
            )
        )
        namespace = pod.metadata.namespace
        return self._core.create_namespaced_service_account_token(account, namespace, request).status.token


def _user(pod: client.V1Pod, container: str, image: Image) -> tuple[int, int]:
    """The user a container runs as: its securityContext's, else its pod's, else the image's; runAsNonRoot
    refuses root ("container has runAsNonRoot and image will run as root", the kubelet's words)."""
    spec = next(c for c in pod.spec.containers if c.name == container)
    contexts = [spec.security_context, pod.spec.security_context]
    image_uid, image_gid = image.config.uid_gid()
    uid = next((c.run_as_user for c in contexts if c is not None and c.run_as_user is not None), image_uid)
    gid = next((c.run_as_group for c in contexts if c is not None and c.run_as_group is not None), image_gid)
    non_root = next((c.run_as_non_root for c in contexts if c is not None and c.run_as_non_root is not None), False)
    if non_root and uid == 0:
        raise ContainerConfigError("container has runAsNonRoot and image will run as root")
    return uid, gid


def _last_line(path: Path) -> str:
    """Empty if the log is gone (the simulator stopped, and its workdir with it)."""
    try:
        with path.open("rb") as log_file:
            lines = deque(log_file, maxlen=1)
    except FileNotFoundError:
        return ""
    return lines[0].decode(errors="replace").strip() if lines else ""
