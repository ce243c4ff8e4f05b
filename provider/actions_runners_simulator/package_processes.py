"""The container runtime's part for the package's own programs: a container whose command is one of them (the
RunnerScaleSet listener's ``actions-runners-listener``) runs that very program, as a process of this machine,
with the environment the kubelet stand-in resolved for it. Every other container goes to the runtime after it
(the simulated runner).

What a node gives such a container, it gets: a token of its pod's ServiceAccount, bound to the pod (the
kubelet's TokenRequest, ``serviceaccounts/token``), so that the real API server's RBAC judges what it does by
its Role; since a process here cannot have it mounted at /var/run/secrets, it is handed over in a kubeconfig
that ``KUBECONFIG`` names, which a client reads first (the listener's client does: kube/client.py). SIGTERM on
graceful deletion, SIGKILL when the grace period ends; the exit code as a container's (128 + signal); the last
line it wrote becomes the termination message. Its output is kept in ``logs/<namespace>_<pod>.log`` under the
workdir, which tests read.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from pulumi_actions_runners.kube.scale_set_manifests import LISTENER_COMMAND

from .kube_apiserver import KubeApiServer
from .kubelet import ContainerRuntime, PodProcess

_log = logging.getLogger(__name__)

PROGRAMS = (LISTENER_COMMAND,)
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


class PackageProcesses:
    """A ContainerRuntime: the package's programs as processes, anything else to ``then``."""

    def __init__(self, then: ContainerRuntime, server: KubeApiServer, admin: client.ApiClient, workdir: Path) -> None:
        self._then = then
        self._server = server
        self._core = client.CoreV1Api(admin)
        self._logs = workdir / "logs"
        self._logs.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._running: dict[int, _Run] = {}  # by id(process)
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
        """Every process still running is killed (the node goes)."""
        with self._lock:
            running = [r.popen for r in self._running.values() if r.popen is not None]
        for popen in running:
            if popen.poll() is None:
                popen.kill()

    # --- the runtime -------------------------------------------------------------------------------------

    def start(self, process: PodProcess) -> None:
        if not process.command or process.command[0] not in PROGRAMS:
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
        if not process.command or process.command[0] not in PROGRAMS:
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
        try:
            kubeconfig = self._service_account_kubeconfig(process)
        except Exception as error:  # the pod went meanwhile, or its ServiceAccount is missing
            with self._lock:
                self._running.pop(id(process), None)
            process.exited(1, f"no service account token: {error}")
            return
        program = Path(sys.executable).parent / process.command[0]
        env = {
            "PATH": os.environ.get("PATH", ""),
            **process.env,
            "KUBECONFIG": str(kubeconfig),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        log_path = self._logs / f"{process.namespace}_{process.name}.log"
        with log_path.open("ab") as log_file:
            popen = subprocess.Popen(
                [str(program), *process.command[1:]],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            with self._lock:
                run = self._running[id(process)]
                run.popen = popen
                self.started.append(process.name)
                early = run.early
            if early is not None:
                popen.send_signal(early)
            code = popen.wait()
        with self._lock:
            self._running.pop(id(process), None)
        kubeconfig.unlink(missing_ok=True)
        process.exited(128 - code if code < 0 else code, _last_line(log_path))

    def _service_account_kubeconfig(self, process: PodProcess) -> Path:
        """The kubelet's TokenRequest for the pod's ServiceAccount, bound to the pod, in a kubeconfig."""
        pod = self._core.read_namespaced_pod(process.name, process.namespace)
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
        token = self._core.create_namespaced_service_account_token(account, process.namespace, request).status.token
        path = self._logs / f".{process.namespace}_{process.name}.kubeconfig"
        return self._server.write_kubeconfig(
            path, token=(f"system:serviceaccount:{process.namespace}:{account}", token)
        )


def _last_line(path: Path) -> str:
    """Empty if the log is gone (the simulator stopped, and its workdir with it)."""
    try:
        with path.open("rb") as log_file:
            lines = deque(log_file, maxlen=1)
    except FileNotFoundError:
        return ""
    return lines[0].decode(errors="replace").strip() if lines else ""
