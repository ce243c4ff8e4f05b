"""The simulated runner: what the actions-runner image does inside a pod, as unkind as actions/runner is.

It boots from the pod's environment as the runner image does (``ACTIONS_RUNNER_INPUT_TOKEN`` or
``ACTIONS_RUNNER_INPUT_JITCONFIG`` resolved from the Secret by the kubelet stand-in), registers with the
GitHub double as ``config.sh`` would, then opens a session as ``run.sh`` does (``run.sh --jitconfig`` only
connects), takes jobs, and ends as actions/runner v2.336.0 ends (its source, cited below as paths in
github.com/actions/runner at 258d6c8, whose listener and scripts are v2.336.0's):

- **Start.** config.sh takes seconds (three ``ldd`` checks and an ``ldconfig -NXv`` scan, config.sh:14-55, then
  the .NET listener and its registration calls, ConfigurationManager.cs:838-884): registered, the runner is
  listed offline until run.sh holds a session.
- **Sessions.** One per runner. A container killed whole (OOM, SIGKILL) leaves its session behind, listed
  online until GitHub expires it; the container restarted runs ``config.sh --replace``, which keeps the id, and
  its listener meets 409 "A session for this runner already exists." every 30 s; at the 8th attempt (after
  210 s) it exits 5 (MessageListener.cs:52-53, 526-546; Runner.cs:478-480).
- **run.sh hides the listener's exit code** (run-helper.sh.template:36-81, run.sh:13-60): 0, 1, 5 and any
  other code (137 for a listener OOM-killed alone) exit 0; 2 relaunches the listener after 5 s; 7 passes
  through only with ``ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE=1`` (`run_sh_exit`). Exit 0 does not
  mean the registration was removed.
- **Removal while idle.** On the fast path the listener's next message poll finds the runner gone ("The runner
  no longer exists on the server", Runner.cs:823-829) and it exits 0: within one poll, up to 60 s (the message
  connection's timeout, RunnerServer.cs:74). On the slow path the OAuth token refresh fails and the listener
  retries for about 11 minutes (10 tries, 15-60 s apart: BrokerMessageListener.cs:281, 361-374), relaunches,
  and exits when its new session is refused, or retries for ever (actions/runner#3328): a pod Running with no
  registration. Which removals take the slow path is staged (`linger_after_removal`). An idle ephemeral
  runner is left the same way, never told, when a job it was assigned is gone before it acquires it: the
  assignment consumed its registration, and the listener skips the message and polls on (Runner.cs:735-745,
  actions/runner#4617; staged by the GitHub double's ``lose_job_assignment``).
- **Died mid-job.** A runner killed while busy leaves its registration online (its session) and busy, so that
  RemoveRunner answers 422, until GitHub abandons the job's lock (the GitHub double's SESSION_EXPIRY_SECONDS and
  JOB_ABANDON_SECONDS).
- **Stopping.** The image sets ``RUNNER_MANUALLY_TRAP_SIG=1`` (images/Dockerfile:42): run.sh forwards SIGTERM to
  the listener as SIGINT (run.sh:32-60), which cancels a running job (lost: JobDispatcher.cs:206-250) and exits;
  run.sh exits 143. Before run.sh, PID 1 is the container's shell (the provider's command runs config.sh and
  waits for Docker in it): a shell that traps no TERM ignores it, being PID 1, and the pod takes its whole grace
  period (137); one that traps TERM runs the trap once config.sh (or the wait's sleep) returns.
- **Refusals.** A registration token expired or used up fails config.sh with .NET's words for the 404, "Response
  status code does not indicate success: 404 (Not Found).", and exit 1 (ConfigurationManager.cs:868-874,
  Runner.cs:154-164); the kubelet stand-in turns that last log line into the termination message.

Every duration is actions/runner's (`RunnerTimings`), divided by a speed-up for a test bed that cannot wait
minutes: every behaviour stays on, only the clock runs faster. Jobs lost are recorded in ``jobs_killed``: the
number the provider must keep at zero.

A container of a ``docker:*dind*`` image runs a simulated dockerd, whose socket is there ``docker_boot_seconds``
after its start; a runner given ``DOCKER_HOST`` waits for it as the provider's runner command does (bounded,
then exit 1 with the command's message). A runner's version is its image's tag (none for a tag that names
none, as a private build's): GitHub's version policy (runner_releases.py, on the double's releases) refuses
config.sh below the minimum, and jobs to a version behind a release published more than 30 days ago: such a
runner registers, then exits when it asks for a job, as run.sh does (at once if idle when the release appears).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pulumi_actions_runners.github.releases import version_of_image
from pulumi_actions_runners.kube.manifests import DOCKER_HOST, DOCKER_WAIT_SECONDS, VERSION_DEPRECATED_EXIT_CODE

from .github_double import GitHubDouble, RegistrationRefused, SessionOutcome
from .kubelet import PodProcess
from .runner_releases import JOBS_AFTER_NEWER_RELEASE, Release

INPUT = "ACTIONS_RUNNER_INPUT_"  # the runner image's own convention for its command-line arguments
RETURN_DEPRECATED = "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"
TRAP_SIGNALS = "RUNNER_MANUALLY_TRAP_SIG"  # set to 1 by the image (images/Dockerfile:42); a pod may clear it
SIGTERM_EXIT, SIGKILL_EXIT = 143, 137
SESSION_CONFLICT = "A session for this runner already exists."
_TERM_TRAP = re.compile(r"^\s*trap\s+\S.*\s(TERM|SIGTERM)\b", re.MULTILINE)
# Where PID 1, the provider's shell, spends its time before it execs run.sh: the lines each phase runs.
_DOCKER_WAIT_LINE = "until [ -S"
_CONFIG_LINE = "./config.sh"
HOLD_LIMIT_SECONDS = 120.0  # a held config.sh goes on by itself then, so that a test that forgets it cannot hang

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerTimings:
    """actions/runner's own durations, in seconds (sources in the module docstring)."""

    config_seconds: float = 2.0  # config.sh: local checks, the .NET start, the registration's calls
    session_seconds: float = 1.0  # run.sh to a session: run-helper, the listener's start, CreateSession
    session_retry_seconds: float = 30.0  # MessageListener.cs:52
    session_attempts: int = 8  # 8 x 30 s >= the 4-minute limit (MessageListener.cs:53, 540)
    removal_poll_seconds: float = 60.0  # the fast path: the next message poll finds the runner gone
    slow_removal_seconds: float = 660.0  # the slow path: 10 token-refresh retries, then a relaunch
    relaunch_seconds: float = 5.0  # run-helper: listener code 2, re-launched after 5 s
    stop_seconds: float = 1.0  # SIGTERM to exit for an idle listener (it waits up to 30 s for a job's end)
    lock_renewal_seconds: float = 60.0  # a running job's lock is renewed that often (JobDispatcher.cs:886)

    def faster(self, speedup: float) -> RunnerTimings:
        """Every duration divided by ``speedup`` (counts stay)."""
        if speedup <= 0:
            raise ValueError(f"speedup must be positive, not {speedup}")
        return dataclasses.replace(
            self,
            **{f.name: getattr(self, f.name) / speedup for f in dataclasses.fields(self) if f.type == "float"},
        )


def run_sh_exit(listener_code: int, env: Mapping[str, str]) -> int | None:
    """What run.sh exits with when the listener exits with ``listener_code``; None: it relaunches the listener
    (run-helper.sh.template:36-81: 2, and 3 and 4 after an update, relaunch; 7 passes through only with the
    variable exactly "1"; everything else, 1, 5, 137 and codes it does not know, is 0)."""
    if listener_code in (2, 3, 4):
        return None
    if listener_code == VERSION_DEPRECATED_EXIT_CODE and env.get(RETURN_DEPRECATED) == "1":
        return VERSION_DEPRECATED_EXIT_CODE
    return 0


def image_version(image: str) -> str | None:
    """The runner version an image tag names (ghcr.io/actions/actions-runner:2.336.0), if it names one: read as
    the provider reads it, so that the runner and the provider agree on which version a pod runs."""
    return version_of_image(image)


def _is_dockerd(image: str) -> bool:
    name = image.rsplit("/", 1)[-1]
    return name.startswith("docker:") and "dind" in name


def shell_traps_term(command: tuple[str, ...], at: str) -> bool:
    """Whether the container's shell script (``bash -c SCRIPT``) has trapped SIGTERM by the time it runs the line
    that starts with ``at`` (a trap is in force only from the line that sets it); a script without that line: by
    the time it execs run.sh."""
    script = command[-1] if command else ""
    trap = _TERM_TRAP.search(script)
    if trap is None:
        return False
    reached = re.search(rf"^\s*{re.escape(at)}", script, re.MULTILINE) or re.search(r"^\s*exec ", script, re.MULTILINE)
    return reached is None or trap.start() < reached.start()


@dataclass
class ConfigHold:
    """A staged fault: the next ``count`` runners whose pod's name starts with ``pod_prefix`` stay in config.sh
    (their container running, nothing registered yet) until the test releases them, as a slow registration
    leaves a runner while an update looks at it. The hold stands for the look, not for a deletion: a SIGTERM
    that the shell traps releases it too, and config.sh then goes on as usual (its registration made, offline,
    before the trap ends the shell); a SIGKILL ends it. ``HOLD_LIMIT_SECONDS`` bounds a hold nobody releases."""

    namespace: str
    pod_prefix: str
    count: int
    pods: list[str] = field(default_factory=list)  # the pods held so far, in order
    entered: threading.Event = field(default_factory=threading.Event)  # set as each one enters the hold
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()

    def wait_entered(self, timeout: float) -> str:
        """The first pod held, once one is; TimeoutError naming what it waited for."""
        if not self.entered.wait(timeout):
            raise TimeoutError(
                f"no runner of a pod {self.namespace}/{self.pod_prefix}* entered config.sh in {timeout} s"
            )
        return self.pods[0]


@dataclass
class _RunnerProcess:
    """One start of a runner container. ``lock`` keeps its exit reported once however it comes about, and
    orders a registration against a signal that arrives while it is under way."""

    process: PodProcess
    runner_id: int | None = None
    busy: bool = False
    listening: bool = False  # run.sh holds a session (PID 1 is run.sh, not the provider's shell)
    exited: bool = False
    killed: bool = False  # SIGKILL (or the whole container died): nothing of it runs any more
    term_pending: bool = False  # a SIGTERM its shell trapped, to act on once its foreground command returns
    waiting_for_docker: bool = False  # its shell is in the Docker wait's loop (before config.sh)
    stopping: bool = False  # run.sh had a SIGTERM: the listener opens no session and takes no job any more
    removed: bool = False
    jobs_done: int = 0
    session_opened_at: float = 0.0
    signal: threading.Event = field(default_factory=threading.Event)  # wakes its boot thread's sleeps
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return self.process.env.get(f"{INPUT}NAME", self.process.name)

    def exit(self, code: int, message: str = "") -> None:
        with self.lock:
            if self.exited or self.killed:
                return
            self.exited = True
        self.signal.set()
        self.process.exited(code, message)

    def sleep(self, seconds: float) -> bool:
        """Sleep unless killed meanwhile; False if it was (its shell's trap, if any, is judged by the caller)."""
        deadline = time.monotonic() + seconds
        while not self.killed and not self.exited and (left := deadline - time.monotonic()) > 0:
            self.signal.wait(left)
            self.signal.clear()
        return not self.killed and not self.exited


class _Listener:
    """Receives what GitHub does to this runner's registration."""

    def __init__(self, runners: SimulatedRunners, runner: _RunnerProcess) -> None:
        self._runners = runners
        self._runner = runner

    def job_started(self) -> None:
        self._runner.busy = True

    def job_finished(self) -> None:
        self._runner.busy = False
        self._runner.jobs_done += 1
        self._runners._after_job(self._runner)

    def removed(self) -> None:
        self._runners._registration_removed(self._runner)


class SimulatedRunners:
    """The container runtime of the kubelet stand-in: every container with runner env runs a simulated runner."""

    def __init__(
        self,
        github: GitHubDouble,
        *,
        timings: RunnerTimings | None = None,
        docker_boot_seconds: float = 0.2,
    ) -> None:
        self._github = github
        self.timings = timings or RunnerTimings()
        self.docker_boot_seconds = docker_boot_seconds
        self._running: dict[tuple[str, str, str], _RunnerProcess] = {}
        self._dockers: dict[tuple[str, str], threading.Event] = {}  # each pod's dockerd: set once it answers
        self._lock = threading.Lock()
        self._lingering: list[bool] = []  # staged slow removals: for ever, or for the slow path's length
        self.jobs_killed: list[str] = []
        self.registrations_refused: list[tuple[str, str]] = []
        self.docker_waits: list[tuple[str, float]] = []  # (pod, seconds) each runner waited for its Docker
        self.session_conflicts: list[str] = []  # runner names, once per 409 on CreateSession
        self.sigterms_ignored: list[str] = []  # pods whose PID 1 shell dropped a SIGTERM
        self._holds: list[ConfigHold] = []
        github.releases.on_publish(self._releases_changed)

    # --- what tests stage -----------------------------------------------------------------------------

    def _releases_changed(self, release: Release) -> None:
        """A release was published: GitHub refuses jobs to the versions before it, from now or from its deadline
        on (a timer: late, never early; what it finds is judged against the release list)."""
        self._exit_idle_if_deprecated()
        wait = (release.published_at + JOBS_AFTER_NEWER_RELEASE - datetime.now(UTC)).total_seconds()
        if wait > 0:
            _after(wait, self._exit_idle_if_deprecated)

    def _exit_idle_if_deprecated(self) -> None:
        """Idle runners of a refused version exit now; busy ones do after their job (`_after_job`)."""
        with self._lock:
            idle = [runner for runner in self._running.values() if not runner.busy and runner.listening]
        for runner in idle:
            self._exit_if_deprecated(runner)

    def linger_after_removal(self, count: int = 1, *, forever: bool = False) -> None:
        """The next ``count`` runners removed while idle take the slow path: they run on with no registration
        for ``slow_removal_seconds`` (or, ``forever``, until their pod is deleted)."""
        with self._lock:
            self._lingering += [forever] * count

    def hold_config(self, namespace: str, pod_prefix: str, count: int = 1) -> ConfigHold:
        """The next ``count`` runners of pods named ``pod_prefix``... stay in config.sh until released (ConfigHold)."""
        hold = ConfigHold(namespace, pod_prefix, count)
        with self._lock:
            self._holds.append(hold)
        return hold

    def crash(self, namespace: str, pod_name: str, exit_code: int = SIGKILL_EXIT, *, idle_only: bool = False) -> bool:
        """The container dies whole (killed for memory): its session is left behind (listed online until GitHub
        expires it), a job it ran is lost and holds the runner busy until GitHub abandons it; a persistent
        runner's pod restarts it, and config.sh --replace registers it again under the same id. ``idle_only``:
        only if it runs no job. Whether it crashed."""
        runner = self._take(namespace, pod_name, idle_only)
        if runner is None or not self._kill(runner):
            return False
        runner.process.exited(exit_code, "Killed")
        return True

    def kill_listener(self, namespace: str, pod_name: str, *, idle_only: bool = False) -> bool:
        """The listener alone is killed (OOM inside the container): its session is left behind, and run.sh
        exits 0 (it maps 137 to 0), so the container ends as if the runner had been removed."""
        runner = self._take(namespace, pod_name, idle_only)
        if runner is None or not self._kill(runner):
            return False
        code = run_sh_exit(SIGKILL_EXIT, runner.process.env) or 0
        runner.process.exited(code, f"Exiting with unknown error code: {SIGKILL_EXIT}")
        return True

    # --- the container runtime ------------------------------------------------------------------------

    def start(self, process: PodProcess) -> None:
        """A container with a runner's environment runs a runner, a dind image a dockerd; any other (a user's
        sidecar) idles until stopped."""
        if _is_dockerd(process.image):
            ready = threading.Event()
            with self._lock:
                self._dockers[(process.namespace, process.name)] = ready
            _after(self.docker_boot_seconds, ready.set)
            return
        jit = f"{INPUT}JITCONFIG" in process.env  # the config names its server and scope (a scale set's: alone)
        if not jit and not {f"{INPUT}NAME", f"{INPUT}TOKEN", f"{INPUT}URL"} <= process.env.keys():
            return
        runner = _RunnerProcess(process)
        with self._lock:
            self._running[(process.namespace, process.name, process.container)] = runner
        thread = threading.Thread(target=self._boot, args=(runner, jit), name=f"runner-{process.name}", daemon=True)
        thread.start()

    def terminate(self, process: PodProcess) -> None:
        """SIGTERM, to PID 1: the provider's shell (before run.sh), or run.sh."""
        runner = self._runner_of(process)
        if runner is None:
            with self._lock:
                if _is_dockerd(process.image):
                    self._dockers.pop((process.namespace, process.name), None)
            _after(self.timings.stop_seconds, process.exited, 0)  # dockerd and a user's sidecar stop cleanly
            return
        with runner.lock:
            if runner.exited or runner.killed:
                return
            listening = runner.listening
            if not listening:
                at = _DOCKER_WAIT_LINE if runner.waiting_for_docker else _CONFIG_LINE
                runner.term_pending = shell_traps_term(process.command, at)
        if not listening:
            if not runner.term_pending:
                self.sigterms_ignored.append(process.name)  # PID 1 without a handler: the kernel drops it
            runner.signal.set()
            return
        if not process.env.get(TRAP_SIGNALS, "1"):
            self.sigterms_ignored.append(process.name)  # run.sh traps only with the image's variable set
            return
        with runner.lock:
            runner.stopping = True
        # run.sh forwards it as SIGINT: the listener cancels a running job and ends its session; run.sh exits 143.
        self._lose_job_if_busy(runner, "stopped while running a job")
        if runner.runner_id is not None:
            self._github.end_session(runner.runner_id, gracefully=True)
        self._forget(runner)
        _after(self.timings.stop_seconds, runner.exit, SIGTERM_EXIT)

    def kill(self, process: PodProcess) -> None:
        """SIGKILL (the grace period ran out, or the pod was deleted at once): the kubelet records the exit."""
        runner = self._runner_of(process)
        if runner is not None:
            self._forget(runner)
            self._kill(runner)
        elif _is_dockerd(process.image):
            with self._lock:
                self._dockers.pop((process.namespace, process.name), None)

    # --- a runner's life ------------------------------------------------------------------------------

    def _boot(self, runner: _RunnerProcess, jit: bool) -> None:
        """PID 1 is the provider's shell until it execs run.sh: it waits for Docker and runs config.sh."""
        if not self._docker_answers(runner) or self._trapped(runner):
            return
        if not jit:
            if not self._through_hold(runner) or not runner.sleep(self.timings.config_seconds):
                return
            try:
                runner_id = self._register(runner)
            except RegistrationRefused as refused:
                self.registrations_refused.append((runner.name, str(refused)))
                self._forget(runner)
                runner.exit(1, str(refused))  # config.sh exits 1; the refusal's message never quotes a credential
                return
            with runner.lock:
                runner.runner_id = runner_id
                killed = runner.killed
            if killed or self._trapped(runner):
                return  # registered, offline: no session was opened
        self._listen(runner, jit)

    def _through_hold(self, runner: _RunnerProcess) -> bool:
        """config.sh held by a staged ConfigHold, if one matches, until it is released; False if the container
        was killed meanwhile."""
        process = runner.process
        with self._lock:
            hold = next(
                (
                    h
                    for h in self._holds
                    if h.namespace == process.namespace and process.name.startswith(h.pod_prefix) and h.count > 0
                ),
                None,
            )
            if hold is not None:
                hold.count -= 1
                hold.pods.append(process.name)
        if hold is None:
            return True
        hold.entered.set()
        deadline = time.monotonic() + HOLD_LIMIT_SECONDS
        while not hold.released.wait(0.01) and not runner.term_pending:
            if runner.killed or runner.exited:
                return False
            if time.monotonic() >= deadline:
                log.warning(
                    "config.sh of %s held for %.0f s and never released: going on", process.name, HOLD_LIMIT_SECONDS
                )
                break
        return not runner.killed and not runner.exited

    def _trapped(self, runner: _RunnerProcess) -> bool:
        """The shell's TERM trap runs once its foreground command has returned: the container exits 143."""
        if runner.term_pending:
            self._forget(runner)
            runner.exit(SIGTERM_EXIT)
            return True
        return runner.killed or runner.exited

    def _listen(self, runner: _RunnerProcess, jit: bool) -> None:
        """run.sh (exec'd: PID 1 now, trapping signals) and its listener's CreateSession, retried on 409."""
        with runner.lock:
            runner.listening = True
        if not runner.sleep(self.timings.session_seconds):
            return
        listener = _Listener(self, runner)
        if jit:
            with runner.lock:  # so that a SIGKILL meanwhile sees the session it must leave behind
                if runner.killed or runner.exited or runner.stopping:
                    return
                try:
                    runner.runner_id = self._connect_jit(runner, listener)
                    runner.session_opened_at = time.monotonic()
                except RegistrationRefused as refused:
                    refusal = refused
                else:
                    refusal = None
            if refusal is not None:
                self.registrations_refused.append((runner.name, str(refusal)))
                self._forget(runner)
                runner.exit(0, f"An error occurred: {refusal}")  # the listener's 1, which run.sh makes 0
                return
            self._session_opened(runner)
            return
        assert runner.runner_id is not None
        for attempt in range(1, self.timings.session_attempts + 1):
            with runner.lock:
                if runner.killed or runner.exited or runner.stopping:
                    return
                outcome = self._github.open_session(runner.process.env[f"{INPUT}URL"], runner.runner_id, listener)
                if outcome is SessionOutcome.OPENED:
                    runner.session_opened_at = time.monotonic()  # under the lock: a SIGKILL sees it
            if outcome is SessionOutcome.OPENED:
                self._session_opened(runner)
                return
            if outcome is SessionOutcome.GONE:
                self._forget(runner)
                runner.exit(0, "The runner no longer exists on the server. Please reconfigure the runner.")
                return
            self.session_conflicts.append(runner.name)
            if attempt < self.timings.session_attempts and not runner.sleep(self.timings.session_retry_seconds):
                return
        self._forget(runner)
        runner.exit(
            run_sh_exit(5, runner.process.env) or 0,
            "Runner listener exit with Session Conflict error, stop the service, no retry needed.",
        )

    def _session_opened(self, runner: _RunnerProcess) -> None:
        if runner.removed:  # removed between its registration and its session
            self._registration_removed(runner)
            return
        self._exit_if_deprecated(runner)

    def _registration_removed(self, runner: _RunnerProcess) -> None:
        """RemoveRunner, a config.sh --replace elsewhere, or an ephemeral runner's job done."""
        with runner.lock:
            runner.removed = True
            if runner.killed or runner.exited or not runner.session_opened_at:
                return
        if runner.busy:  # RemoveRunner never removes a busy runner: its registration was taken over
            log.error("runner %s lost its registration to config.sh --replace while running a job", runner.name)
            self.jobs_killed.append(runner.name)
            runner.busy = False
        env = runner.process.env
        ephemeral = env.get(f"{INPUT}EPHEMERAL") == "true" or f"{INPUT}JITCONFIG" in env
        if ephemeral and runner.jobs_done:
            self._forget(runner)
            _after(self.timings.stop_seconds, runner.exit, 0)  # done after its one job, as it was told it would be
            return
        with self._lock:
            lingering = self._lingering.pop(0) if self._lingering else None
        if lingering is None:
            poll = self.timings.removal_poll_seconds
            next_poll = poll - (time.monotonic() - runner.session_opened_at) % poll
            _after(next_poll, self._gone_at_poll, runner)
        elif not lingering:
            _after(self.timings.slow_removal_seconds + self.timings.relaunch_seconds, self._gone_at_poll, runner)
        # for ever: it runs on, registered nowhere, until its pod is deleted (actions/runner#3328)

    def _gone_at_poll(self, runner: _RunnerProcess) -> None:
        self._forget(runner)
        runner.exit(0, "The runner no longer exists on the server. Cleaning up local configuration.")

    def _after_job(self, runner: _RunnerProcess) -> None:
        """A persistent runner asks for its next job (an ephemeral one is done, and removed by GitHub)."""
        env = runner.process.env
        if env.get(f"{INPUT}EPHEMERAL") != "true" and f"{INPUT}JITCONFIG" not in env:
            self._exit_if_deprecated(runner)

    def _exit_if_deprecated(self, runner: _RunnerProcess) -> None:
        """run.sh asking for a job of GitHub when its version is refused: the listener ends, and run.sh exits."""
        version = image_version(runner.process.image)
        if runner.busy or runner.runner_id is None or not self._github.refuses_jobs(version):
            return
        self._forget(runner)
        self._github.end_session(runner.runner_id, gracefully=True)
        # actions/runner#4305: the message poll's AccessDeniedException, as the listener writes it.
        message = f"An error occurred: Runner version v{version} is deprecated and cannot receive messages."
        deprecated = VERSION_DEPRECATED_EXIT_CODE if runner.process.env.get(RETURN_DEPRECATED) == "1" else 1
        runner.exit(run_sh_exit(deprecated, runner.process.env) or 0, message)

    def _kill(self, runner: _RunnerProcess) -> bool:
        """Nothing of the process runs any more; its session is left behind. False if it had ended already."""
        with runner.lock:
            if runner.killed or runner.exited:
                return False
            runner.killed = True
            registered = runner.runner_id is not None and runner.session_opened_at
        runner.signal.set()
        self._lose_job_if_busy(runner, "killed while running a job")
        if registered:
            self._github.end_session(runner.runner_id, gracefully=False)  # type: ignore[arg-type]
        return True

    def _lose_job_if_busy(self, runner: _RunnerProcess, how: str) -> None:
        if runner.busy:
            log.error("runner %s %s: the job is lost", runner.name, how)
            self.jobs_killed.append(runner.name)
            runner.busy = False  # lost once: a later takeover of its registration loses nothing more

    def _docker_answers(self, runner: _RunnerProcess) -> bool:
        """The runner command's wait for the Docker socket when it is given DOCKER_HOST (a shell loop: a TERM it
        traps ends it at the next poll); False once it gave up (exit 1 with the command's message)."""
        if runner.process.env.get("DOCKER_HOST") != DOCKER_HOST:
            return True
        started = time.monotonic()
        runner.waiting_for_docker = True
        try:
            return self._wait_for_docker(runner, started)
        finally:
            runner.waiting_for_docker = False

    def _wait_for_docker(self, runner: _RunnerProcess, started: float) -> bool:
        while time.monotonic() - started < DOCKER_WAIT_SECONDS:
            if runner.killed or runner.exited:
                return False
            if runner.term_pending:
                self._trapped(runner)
                return False
            with self._lock:
                docker = self._dockers.get((runner.process.namespace, runner.process.name))
            if docker is not None and docker.wait(0.05):
                self.docker_waits.append((runner.process.name, time.monotonic() - started))
                return True
            if docker is None:
                time.sleep(0.05)
        self._forget(runner)
        waited = f"Docker did not start within {DOCKER_WAIT_SECONDS} s: no socket at {DOCKER_HOST} (see container dind)"
        runner.exit(1, waited)
        return False

    def _register(self, runner: _RunnerProcess) -> int:
        env = runner.process.env
        return self._github.register_runner(
            github_url=env[f"{INPUT}URL"],
            token=env[f"{INPUT}TOKEN"],
            name=env[f"{INPUT}NAME"],
            labels=[label for label in env.get(f"{INPUT}LABELS", "").split(",") if label],
            ephemeral=env.get(f"{INPUT}EPHEMERAL") == "true",
            listener=_Listener(self, runner),
            replace=env.get(f"{INPUT}REPLACE") == "true",
            runner_group=env.get(f"{INPUT}RUNNERGROUP"),
            session=False,
            version=image_version(runner.process.image),
        )

    def _connect_jit(self, runner: _RunnerProcess, listener: _Listener) -> int:
        """A just-in-time runner is registered already (ephemeral, named and labelled by GitHub): it only connects."""
        env = runner.process.env
        return self._github.connect_jit_runner(
            github_url=env.get(f"{INPUT}URL"),  # a scale set's runner is given its config alone
            encoded_jit_config=env[f"{INPUT}JITCONFIG"],
            listener=listener,
            version=image_version(runner.process.image),
        )

    # --- bookkeeping ----------------------------------------------------------------------------------

    def _runner_of(self, process: PodProcess) -> _RunnerProcess | None:
        with self._lock:
            runner = self._running.get((process.namespace, process.name, process.container))
        return runner if runner is not None and runner.process is process else None

    def _take(self, namespace: str, pod_name: str, idle_only: bool = False) -> _RunnerProcess | None:
        with self._lock:
            runner = self._running.get((namespace, pod_name, "runner"))
            if runner is None or (idle_only and (runner.busy or not runner.session_opened_at)):
                return None
            return self._running.pop((namespace, pod_name, "runner"))

    def _forget(self, runner: _RunnerProcess) -> None:
        key = (runner.process.namespace, runner.process.name, runner.process.container)
        with self._lock:
            if self._running.get(key) is runner:
                del self._running[key]


def _after(seconds: float, action: Callable[..., None], *args: object) -> None:
    timer = threading.Timer(seconds, action, args)
    timer.daemon = True
    timer.start()
