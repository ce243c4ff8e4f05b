"""The listener's two loops, as actions-runner-controller's cmd/ghalistener has them (a message loop, and a
scaler acting on what it learnt), over one scale set:

- **the queue** (a thread): long-polls the session's message queue with the set's ``max_runners`` as its
  capacity, acknowledges each message, acquires the jobs offered, keeps the last statistics and which runners
  are busy (JobStarted, JobCompleted), and wakes the runners' loop. An expired queue token is refreshed, a
  session GitHub dropped is opened anew, a set GitHub deleted is made again; other failures are retried from
  1 s doubling to 30 s, said each time.
- **the runners** (the main thread): at each message, or every `RESYNC_SECONDS`, reads the ConfigMap (the last
  update's bounds and runner spec), lists its runners' pods (all it knows of them is on them, so a restarted
  listener carries on), and acts on scaler.plan: starts runners, takes retirements one step further, deletes
  ended pods.

Both record what they see in the listener's metrics (metrics.py) and say how they fare (``alive``, ``ready``:
the probes of server.py). On SIGTERM both stop and the session is deleted. Nothing here logs a credential or a
JIT config; every line is scrubbed on its way out anyway (logs.py).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

import requests

from ..clock import Clock
from ..github.client import GitHubError
from ..github.scale_sets import (
    ActionsServiceClient,
    Message,
    QueueTokenExpired,
    ScaleSetNotFound,
    Session,
    SessionGone,
)
from ..kube.client import KubeClient, describe
from ..kube.scale_set_manifests import CONFIG_KEY, SCALE_SET_ID_KEY, ScaleSetConfig, config_of, runner_selector
from ..kube.scale_set_objects import ScaleSetObjects
from ..lifecycle.scale_set_runners import (
    Retirement,
    SetRunner,
    clean_ended,
    retire_step,
    start_runner,
    sweep_orphans,
)
from .metrics import ListenerMetrics
from .scaler import desired_runners, plan
from .session import ScaleSetHold

log = logging.getLogger(__name__)

RESYNC_SECONDS = 2.0  # the runners' loop looks at its pods at least this often
STARTS_AT_ONCE = 8  # runners started concurrently (four calls each)
FIRST_BACKOFF_SECONDS, LAST_BACKOFF_SECONDS = 1.0, 30.0
FAILING_SECONDS = 600.0  # GitHub failing every call this long: the listener exits 1
SWEEP_EVERY_TURNS = 15  # starts cut short are looked for at the first turn, then every 30 s or so
RATE_LIMIT_WAIT_SECONDS = 60.0  # what one GitHub call of the listener waits out a rate limit, at most
# No step of the runners' loop for this long: wedged. A step is one call chain: a rate limit's wait, then the
# client's retries of a call that times out (about 60 s), then a Kubernetes call or two.
STALLED_SECONDS = 300.0


@dataclass
class QueueState:
    """What the message queue said, shared by the two loops under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statistics: dict[str, int] = field(default_factory=dict)
    busy: set[int] = field(default_factory=set)
    online: set[int] = field(default_factory=set)  # runners known to have come online
    finished: dict[int, float] = field(default_factory=dict)  # runner id -> when its one job completed (monotonic)

    def assigned(self) -> int:
        with self.lock:
            return int(self.statistics.get("totalAssignedJobs", 0))


@dataclass(frozen=True)
class ListenerSettings:
    """What the listener is (its Deployment's environment): the rest is in its ConfigMap."""

    scale_set_name: str
    namespace: str
    config_map: str
    pod_name: str


class Listener:
    def __init__(
        self,
        settings: ListenerSettings,
        github: ActionsServiceClient,
        kube: KubeClient,
        clock: Clock,
        metrics: ListenerMetrics,
    ) -> None:
        self._settings = settings
        self.metrics = metrics
        self._github = github
        self._kube = kube
        self._objects = ScaleSetObjects(kube)
        self._clock = clock
        self.stop = threading.Event()
        self._wake = threading.Event()
        self.queue = QueueState()
        self._hold = ScaleSetHold(github, settings.pod_name, clock, self.stop, self._set_moved)
        self._config: ScaleSetConfig | None = None
        self.stop_requested = False
        self._failure: Exception | None = None  # what stopped the message loop, for run() to raise
        self._starts_paused_until = 0.0  # monotonic: after runners failed to start, a back-off
        self._start_backoff = 0.0
        self._turns = 0
        self._last_progress: float | None = None  # monotonic: the runners' loop's last step (a call, a turn)
        self._first_turn_done = False

    # -- the whole ------------------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """From outside (SIGTERM): both loops end, and the session is deleted."""
        self.stop_requested = True
        self.stop.set()

    def alive(self) -> tuple[bool, str]:
        """The liveness probe's answer (server.py): the runners' loop makes progress. Each of its steps is one
        bounded call chain (the client waits out a rate limit for `RATE_LIMIT_WAIT_SECONDS` at most), so a loop
        without a step for `STALLED_SECONDS` is wedged, not waiting for GitHub."""
        if self._last_progress is None:
            return True, "starting: opening the session"
        stalled = self._clock.monotonic() - self._last_progress
        if stalled > STALLED_SECONDS:
            return False, f"the runners' loop has made no step for {stalled:.0f} s"
        return True, "the runners' loop makes progress"

    def _progress(self) -> None:
        self._last_progress = self._clock.monotonic()

    def ready(self) -> tuple[bool, str]:
        """The readiness probe's answer: the set is served (its session open, its runners looked at)."""
        if self.stop.is_set():
            return False, "stopping"
        if self._hold.session is None:
            return False, "no session open with the scale set"
        if not self._first_turn_done:
            return False, "the session is open; the runners' first turn is under way"
        return True, f"serving scale set {self._settings.scale_set_name}"

    def run(self) -> None:
        """Until ``stop`` is set; raises what it cannot carry on from (the session another's for too long)."""
        config = self._read_config()
        session = self._hold.open(config)
        with self.queue.lock:
            self.queue.statistics = dict(session.statistics)
        self.metrics.record_statistics(session.statistics)
        self._progress()
        poller = threading.Thread(target=self._queue_loop, name="message-queue", daemon=True)
        poller.start()
        try:
            self._runners_loop()
        finally:
            self.stop.set()
            try:
                self._hold.close()
            except (GitHubError, requests.RequestException) as error:
                log.warning("the session could not be deleted (%s): it expires on GitHub's side", error)
            poller.join(timeout=10)
        if self._failure is not None:
            raise self._failure

    def _read_config(self) -> ScaleSetConfig:
        config = config_of(self._objects.config_data(self._settings.namespace, self._settings.config_map))
        if config is None:
            raise RuntimeError(
                f"ConfigMap {self._settings.namespace}/{self._settings.config_map} has no {CONFIG_KEY}: the "
                "RunnerScaleSet's update writes it"
            )
        if self._hold.scale_set_id and self._hold.scale_set_id != config.scale_set_id:
            config = dataclasses.replace(config, scale_set_id=self._hold.scale_set_id)  # made again, not read yet
        self._config = config
        return config

    def _set_moved(self, scale_set_id: int) -> None:
        """The set was made again: its new id, for the runners' JIT configs and the provider's refresh (under a
        key of its own: an update may have written the config meanwhile)."""
        if self._config is not None:
            self._config = dataclasses.replace(self._config, scale_set_id=scale_set_id)
        self._objects.set_config(
            self._settings.namespace, self._settings.config_map, SCALE_SET_ID_KEY, str(scale_set_id)
        )
        with self.queue.lock:
            self.queue.busy.clear()
            self.queue.finished.clear()

    # -- the message queue ----------------------------------------------------------------------------------

    def _queue_loop(self) -> None:
        """Until stopped: a GitHub failure is retried after a back-off, for `FAILING_SECONDS` in a row at most
        (a revoked credential never heals: the process exits, and its pod's restarts show it); anything else
        ends the listener at once."""
        last_message_id, backoff, failing_since = 0, FIRST_BACKOFF_SECONDS, None
        while not self.stop.is_set():
            try:
                last_message_id = self._poll(last_message_id)
                backoff, failing_since = FIRST_BACKOFF_SECONDS, None
            except (GitHubError, requests.RequestException) as error:
                if self.stop.is_set():
                    return
                failing_since = failing_since or self._clock.monotonic()
                if self._clock.monotonic() - failing_since > FAILING_SECONDS:
                    self._failure = RuntimeError(f"GitHub failed every call for {FAILING_SECONDS:.0f} s: {error}")
                    self.stop.set()
                    return
                self.metrics.record_queue_failure()
                log.warning("the message queue failed (%s); trying again in %.0f s", error, backoff)
                self.stop.wait(backoff)
                backoff = min(LAST_BACKOFF_SECONDS, backoff * 2)
            except Exception as error:  # the session another's for too long, or a bug: the process exits 1
                if not self.stop.is_set():
                    self._failure = error
                self.stop.set()
            finally:
                self._wake.set()

    def _poll(self, last_message_id: int) -> int:
        """One long poll and what it brought; the id of the last message seen."""
        config = self._config
        assert config is not None
        session = self._hold.session or self._hold.open(config)
        try:
            message = self._github.get_message(session, last_message_id, config.max_runners)
        except QueueTokenExpired:
            if not self.stop.is_set():
                self._hold.refresh(config)
            return last_message_id
        except (SessionGone, ScaleSetNotFound):
            if self.stop.is_set():
                return last_message_id  # its session was deleted on the way out
            log.warning("scale set %s: its session is gone; opening another", config.scale_set_name)
            self._hold.session = None
            reopened = self._hold.open(config)
            with self.queue.lock:
                self.queue.statistics = dict(reopened.statistics)
            self.metrics.record_statistics(reopened.statistics)
            return 0  # a new set's message ids start anew; unacknowledged ones come again
        if message is None:
            return last_message_id
        self._handle(message, session)
        return message.id

    def _handle(self, message: Message, session: Session) -> None:
        available = []
        with self.queue.lock:
            if message.statistics is not None:
                self.queue.statistics = dict(message.statistics)
            for job in message.jobs:
                kind, runner_id = job.get("messageType"), _whole(job.get("runnerId"))
                if kind == "JobAvailable" and _whole(job.get("runnerRequestId")):
                    available.append(_whole(job.get("runnerRequestId")))
                elif kind == "JobStarted" and runner_id:
                    self.queue.busy.add(runner_id)
                    self.queue.online.add(runner_id)
                elif kind == "JobCompleted" and runner_id:
                    self.queue.busy.discard(runner_id)
                    self.queue.finished[runner_id] = (
                        self._clock.monotonic()
                    )  # its pod ends soon: not serving, not retired
        self._github.delete_message(session, message.id)
        # Counted once acknowledged, as ARC does: a message whose acknowledgement failed comes again.
        if message.statistics is not None:
            self.metrics.record_statistics(message.statistics)
        for job in message.jobs:
            if job.get("messageType") == "JobStarted":
                self.metrics.record_job_started(job)
            elif job.get("messageType") == "JobCompleted":
                self.metrics.record_job_completed(job)
        if available:
            acquired = self._github.acquire_jobs(session, self._hold.scale_set_id, available)
            log.info("acquired %d of %d jobs offered", len(acquired), len(available))

    # -- the runners ----------------------------------------------------------------------------------------

    def _runners_loop(self) -> None:
        with ThreadPoolExecutor(STARTS_AT_ONCE, thread_name_prefix="runner-start") as starts:
            while not self.stop.is_set():
                try:
                    self._turn(starts)
                except Exception as error:  # a failed turn is retried at the next; the loop never dies of it
                    log.warning("the runners' turn failed: %s", describe(error))
                self._first_turn_done = True
                self._progress()
                self._wake.wait(RESYNC_SECONDS)
                self._wake.clear()

    def _turn(self, starts: ThreadPoolExecutor) -> None:
        config = self._read_config()
        namespace, selector = config.runner.namespace, runner_selector(config.scale_set_name)
        pods = self._kube.list_pods(namespace, selector)
        runners = [SetRunner.of_pod(pod) for pod in pods]
        now = datetime.now(UTC)
        self._progress()
        if self._turns % SWEEP_EVERY_TURNS == 0:
            uids = {pod.metadata.name: pod.metadata.uid for pod in pods}
            secrets = self._kube.list_secret_metadata(namespace, selector)
            sweep_orphans(config, self._github, self._kube, self._objects, secrets, uids, now)
            self._progress()
        self._turns += 1
        self._look_online(runners, now, config)
        with self.queue.lock:
            ids = {r.runner_id for r in runners}
            self.queue.finished = {i: at for i, at in self.queue.finished.items() if i in ids}
            busy, online = set(self.queue.busy), set(self.queue.online)
            # A runner whose job completed is leaving by itself; one still up long after is judged as any other.
            finishing = {
                i
                for i, at in self.queue.finished.items()
                if self._clock.monotonic() - at < config.register_timeout_seconds
            }
        desired = desired_runners(config.min_runners, config.max_runners, self.queue.assigned())
        self.metrics.record_static(config.min_runners, config.max_runners)
        self.metrics.record_desired(desired)
        self.metrics.record_busy_waited(
            sum(1 for r in runners if r.runner_id in busy and r.spec_hash != config.runner.spec_hash and not r.ended)
        )
        decided = plan(
            runners,
            desired=desired,
            max_runners=config.max_runners,
            spec_hash=config.runner.spec_hash,
            busy=busy,
            online=online,
            finishing=finishing,
            now=now,
            register_timeout_seconds=config.register_timeout_seconds,
        )
        if decided.start or decided.retire:
            log.info(
                "runners: %d wanted (min %d, max %d, %d jobs assigned), %d to start, %d retiring",
                desired,
                config.min_runners,
                config.max_runners,
                self.queue.assigned(),
                decided.start,
                len(decided.retire),
            )
        by_name = {r.name: r for r in runners}
        for name in decided.clean:
            clean_ended(by_name[name], self._github, self._kube)
            self._progress()
        for name, why in decided.retire.items():
            self._progress()
            runner = by_name[name]
            beginning = runner.removed_at is None
            if beginning:
                log.info("runner %s retires: %s", name, why.text)
            step = retire_step(runner, self._github, self._kube, self._clock, config.grace_period_seconds)
            if step is Retirement.BUSY:
                self.metrics.record_remove_refused()
                if runner.runner_id is not None:
                    with self.queue.lock:
                        self.queue.busy.add(runner.runner_id)
                log.info("runner %s runs a job (GitHub refused its removal): it stays", name)
            elif beginning and why.reason is not None:
                self.metrics.record_retired(why.reason)
        if decided.start and self._clock.monotonic() >= self._starts_paused_until:
            failed = sum(not f.result() for f in [starts.submit(self._start, config) for _ in range(decided.start)])
            for _ in range(failed):
                self.metrics.record_start_failure()
            if failed:
                self._start_backoff = min(LAST_BACKOFF_SECONDS, max(FIRST_BACKOFF_SECONDS, self._start_backoff * 2))
                self._starts_paused_until = self._clock.monotonic() + self._start_backoff
                log.warning("%d runners could not be started: trying again in %.0f s", failed, self._start_backoff)
            else:
                self._start_backoff = 0.0

    def _start(self, config: ScaleSetConfig) -> bool:
        if self.stop.is_set():
            return True  # stopping: no new runner (a start cut short would leave work for the next listener)
        try:
            runner = start_runner(config, self._github, self._kube, self._objects)
        except Exception as error:
            log.warning("a runner could not be started: %s", describe(error))
            return False
        finally:
            self._progress()
        self.metrics.record_runner_started()
        log.info("runner %s started (id %s)", runner.name, runner.runner_id)
        return True

    def _look_online(self, runners: list[SetRunner], now: datetime, config: ScaleSetConfig) -> None:
        """Runners past their registration time not known online: looked up in GitHub's REST listing (whose
        ``status`` is documented), once each until they are."""
        with self.queue.lock:
            known = self.queue.online | self.queue.busy
        for runner in runners:
            late = (
                runner.created is not None and (now - runner.created).total_seconds() > config.register_timeout_seconds
            )
            if not late or runner.runner_id is None or runner.runner_id in known or runner.removed_at is not None:
                continue
            if runner.ended or runner.terminating:
                continue
            found = self._github.listed_runner(runner.runner_id)
            self._progress()
            if found is not None and found.get("status") == "online":
                with self.queue.lock:
                    self.queue.online.add(runner.runner_id)


def _whole(value: object) -> int:
    """A job message's id as a number; 0 for one missing or malformed (the message is skipped, not fatal)."""
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0
