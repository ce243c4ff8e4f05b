"""The simulated runner: what the actions-runner image does inside a pod, enough to exercise the provider.

It boots from the pod's environment as the runner image does (``ACTIONS_RUNNER_INPUT_TOKEN`` or
``ACTIONS_RUNNER_INPUT_JITCONFIG`` resolved from the Secret by the kubelet stand-in), registers with the
GitHub double as ``config.sh`` would or connects with its just-in-time config as ``run.sh --jitconfig`` does,
takes jobs, and exits when its registration is removed. Like a real runner whose pod is deleted mid-job, or
whose registration another ``config.sh --replace`` takes over, it loses its job if stopped while busy. Those
losses are recorded in ``jobs_killed``: the number the provider must keep at zero. A refused registration
ends the container with config.sh's error as its last log line, which the kubelet stand-in turns into the
termination message.

A container of a ``docker:*dind*`` image runs a simulated dockerd, whose socket is there ``docker_boot_seconds``
after its start; a runner given ``DOCKER_HOST`` waits for it as the provider's runner command does (bounded,
then exit 1 with the command's message). GitHub can be made to refuse runner versions below one
(``deprecate_versions_below``): such a runner registers, then exits when it asks for a job, with code 7 if its
environment asks for it (``ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE=1``), else 0, as run.sh does.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pulumi_actions_runners.manifests import DOCKER_HOST, DOCKER_WAIT_SECONDS, VERSION_DEPRECATED_EXIT_CODE

from .github_double import GitHubDouble, RegistrationRefused
from .kubelet import PodProcess

INPUT = "ACTIONS_RUNNER_INPUT_"  # the runner image's own convention for its command-line arguments
RETURN_DEPRECATED = "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"
_VERSION_TAG = re.compile(r":v?(\d+)\.(\d+)\.(\d+)$")


def image_version(image: str) -> tuple[int, ...] | None:
    """The runner version an image tag names (ghcr.io/actions/actions-runner:2.336.0), if it names one."""
    match = _VERSION_TAG.search(image)
    return tuple(int(part) for part in match.groups()) if match else None


def _is_dockerd(image: str) -> bool:
    name = image.rsplit("/", 1)[-1]
    return name.startswith("docker:") and "dind" in name


log = logging.getLogger(__name__)


@dataclass
class _RunnerProcess:
    """One start of a runner container; ``lock`` keeps exit reported once however it comes about, and orders a
    registration against a SIGTERM that arrives while it is under way."""

    process: PodProcess
    runner_id: int | None = None
    busy: bool = False
    exited: bool = False
    stopping: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def exit(self, code: int, message: str = "") -> None:
        with self.lock:
            if self.exited:
                return
            self.exited = True
        self.process.exited(code, message)


class _Listener:
    """Receives what GitHub does to this runner's registration."""

    def __init__(self, runner: _RunnerProcess, jobs_killed: list[str], idle: Callable[[_RunnerProcess], None]) -> None:
        self._runner = runner
        self._jobs_killed = jobs_killed
        self._idle = idle

    def job_started(self) -> None:
        self._runner.busy = True

    def job_finished(self) -> None:
        self._runner.busy = False
        self._idle(self._runner)

    def removed(self) -> None:
        # The runner's listener sees its registration gone and the process ends (an ephemeral one after its job).
        # RemoveRunner never removes a busy runner; a registration taken over by config.sh --replace is gone
        # busy or not, and its job with it.
        if self._runner.busy:
            name = self._runner.process.env.get(f"{INPUT}NAME", self._runner.process.name)
            log.error("runner %s lost its registration to config.sh --replace while running a job", name)
            self._jobs_killed.append(name)
        self._runner.exit(0)


class SimulatedRunners:
    """The container runtime of the kubelet stand-in: every container with runner env runs a simulated runner."""

    def __init__(
        self,
        github: GitHubDouble,
        *,
        boot_seconds: float = 0.05,
        stop_seconds: float = 0.05,
        docker_boot_seconds: float = 0.2,
    ) -> None:
        self._github = github
        self._boot_seconds = boot_seconds
        self._stop_seconds = stop_seconds
        self.docker_boot_seconds = docker_boot_seconds
        self._running: dict[tuple[str, str, str], _RunnerProcess] = {}
        self._dockers: dict[tuple[str, str], threading.Event] = {}  # each pod's dockerd: set once it answers
        self._lock = threading.Lock()
        self._oldest_version: tuple[int, ...] | None = None
        self.jobs_killed: list[str] = []
        self.registrations_refused: list[tuple[str, str]] = []
        self.docker_waits: list[tuple[str, float]] = []  # (pod, seconds) each runner waited for its Docker

    def deprecate_versions_below(self, version: str) -> None:
        """GitHub refuses jobs to runners older than ``version``: idle ones exit now, busy ones after their job."""
        oldest = image_version(f":{version}")
        with self._lock:
            self._oldest_version = oldest
            idle = [runner for runner in self._running.values() if not runner.busy]
        for runner in idle:
            self._exit_if_deprecated(runner)

    def start(self, process: PodProcess) -> None:
        """A container with a runner's environment runs a runner, a dind image a dockerd; any other (a user's
        sidecar) idles until stopped."""
        if _is_dockerd(process.image):
            ready = threading.Event()
            with self._lock:
                self._dockers[(process.namespace, process.name)] = ready
            _after(self.docker_boot_seconds, ready.set)
            return
        if {f"{INPUT}JITCONFIG", f"{INPUT}URL"} <= process.env.keys():
            connect = self._connect_jit
        elif {f"{INPUT}NAME", f"{INPUT}TOKEN", f"{INPUT}URL"} <= process.env.keys():
            connect = self._register
        else:
            return
        runner = _RunnerProcess(process)
        with self._lock:
            self._running[(process.namespace, process.name, process.container)] = runner
        _after(self._boot_seconds, self._boot, runner, connect)

    def terminate(self, process: PodProcess) -> None:
        key = (process.namespace, process.name, process.container)
        with self._lock:
            if _is_dockerd(process.image):
                self._dockers.pop((process.namespace, process.name), None)
            runner = self._running.get(key)
            if runner is not None and runner.process is process:
                del self._running[key]
            else:
                runner = None
        if runner is None:
            _after(self._stop_seconds, process.exited, 0)
            return
        with runner.lock:
            runner.stopping = True
            registered = runner.runner_id is not None and not runner.exited
        self._lose_job_if_busy(runner)
        if registered:
            self._github.runner_offline(runner.runner_id)  # type: ignore[arg-type]
        _after(self._stop_seconds, runner.exit, 0)

    def _lose_job_if_busy(self, runner: _RunnerProcess) -> None:
        if runner.busy:
            name = runner.process.env.get(f"{INPUT}NAME", runner.process.name)
            log.error("runner %s stopped while running a job: the job is lost", name)
            self.jobs_killed.append(name)
            runner.busy = False  # lost once: a later takeover of its registration loses nothing more

    def crash(self, namespace: str, pod_name: str, exit_code: int = 137) -> None:
        """The container dies (say, killed for memory): GitHub sees its runner offline; a persistent runner's pod
        restarts it (``OnFailure``), and it registers again with the token in its Secret."""
        with self._lock:
            runner = self._running.pop((namespace, pod_name, "runner"))
        if runner.runner_id is not None:
            self._github.runner_offline(runner.runner_id)
        runner.exit(exit_code, "Killed")

    def _boot(self, runner: _RunnerProcess, connect: Callable[[_RunnerProcess], int]) -> None:
        """config.sh (or run.sh with a just-in-time config) once the container is up. A SIGTERM first means it
        never runs; a registration that completes after one goes offline with the container at once."""
        if runner.stopping or not self._docker_answers(runner):
            return
        try:
            runner_id = connect(runner)
        except RegistrationRefused as refused:
            # The container exits 1, as a real one does with an expired token or a config used already. The
            # refusal's message never quotes the credential, so it may be recorded and logged.
            name = runner.process.env.get(f"{INPUT}NAME", runner.process.name)
            self.registrations_refused.append((name, str(refused)))
            runner.exit(1, f"An error occurred: {refused}")
            return
        with runner.lock:
            runner.runner_id = runner_id
            stopped = runner.stopping
        if stopped:
            self._lose_job_if_busy(runner)
            self._github.runner_offline(runner_id)
            return
        self._exit_if_deprecated(runner)

    def _docker_answers(self, runner: _RunnerProcess) -> bool:
        """The runner command's wait for the Docker socket when it is given DOCKER_HOST; False once it gave up
        (the container has exited 1 with the command's message)."""
        if runner.process.env.get("DOCKER_HOST") != DOCKER_HOST:
            return True
        started = time.monotonic()
        while time.monotonic() - started < DOCKER_WAIT_SECONDS and not runner.stopping:
            with self._lock:
                docker = self._dockers.get((runner.process.namespace, runner.process.name))
            if docker is not None and docker.wait(0.05):
                self.docker_waits.append((runner.process.name, time.monotonic() - started))
                return True
            if docker is None:
                time.sleep(0.05)
        if not runner.stopping:
            runner.exit(
                1,
                f"Docker did not start within {DOCKER_WAIT_SECONDS} s: no socket at {DOCKER_HOST} (see container dind)",
            )
        return False

    def _after_job(self, runner: _RunnerProcess) -> None:
        """A persistent runner asks for its next job (an ephemeral one is done, and removed by GitHub)."""
        env = runner.process.env
        if env.get(f"{INPUT}EPHEMERAL") != "true" and f"{INPUT}JITCONFIG" not in env:
            self._exit_if_deprecated(runner)

    def _exit_if_deprecated(self, runner: _RunnerProcess) -> None:
        """run.sh asking for a job of GitHub when its version is refused: the listener ends, and run.sh exits."""
        version = image_version(runner.process.image)
        with self._lock:
            oldest = self._oldest_version
            key = (runner.process.namespace, runner.process.name, runner.process.container)
            if oldest is None or version is None or version >= oldest or runner.busy or runner.runner_id is None:
                return
            if self._running.get(key) is runner:
                del self._running[key]
        self._github.runner_offline(runner.runner_id)
        deprecated = runner.process.env.get(RETURN_DEPRECATED) == "1"
        named = ".".join(map(str, version))
        message = f"An error occurred: Runner version v{named} is deprecated and cannot receive messages."
        runner.exit(VERSION_DEPRECATED_EXIT_CODE if deprecated else 0, message)

    def _register(self, runner: _RunnerProcess) -> int:
        env = runner.process.env
        return self._github.register_runner(
            github_url=env[f"{INPUT}URL"],
            token=env[f"{INPUT}TOKEN"],
            name=env[f"{INPUT}NAME"],
            labels=[label for label in env.get(f"{INPUT}LABELS", "").split(",") if label],
            ephemeral=env.get(f"{INPUT}EPHEMERAL") == "true",
            listener=_Listener(runner, self.jobs_killed, self._after_job),
            replace=env.get(f"{INPUT}REPLACE") == "true",
            runner_group=env.get(f"{INPUT}RUNNERGROUP"),
        )

    def _connect_jit(self, runner: _RunnerProcess) -> int:
        """A just-in-time runner is registered already (ephemeral, named and labelled by GitHub): it only connects."""
        env = runner.process.env
        return self._github.connect_jit_runner(
            github_url=env[f"{INPUT}URL"],
            encoded_jit_config=env[f"{INPUT}JITCONFIG"],
            listener=_Listener(runner, self.jobs_killed, self._after_job),
        )


def _after(seconds: float, action: Callable[..., None], *args: object) -> None:
    timer = threading.Timer(seconds, action, args)
    timer.daemon = True
    timer.start()
