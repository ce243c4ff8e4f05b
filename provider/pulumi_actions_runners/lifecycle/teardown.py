"""Taking a runner down without ever killing a job: the procedure behind Delete and replacement.

States, in order (each one safe to repeat after a crash, so a re-run Delete finishes the job):

UNREGISTERING  RemoveRunner until GitHub answers 204 or 404 (by the id in state; a registration found by name
               only if it is provably this runner's, see `owns`; an id that answers 404 is as unknown as none).
               A 422 means the runner is running a job: its pod is left alone, and the call repeated once the
               shared listing shows the runner idle, until ``unregister_timeout_seconds``, then RunnerStillBusy —
               the resource stays in state and nothing is lost. RemoveRunner is the only race-free busy check:
               once it succeeds, GitHub gives that registration no further job. Then the Secret goes, so the
               container cannot start again with the token.
GRACE          only after a RemoveRunner that succeeded, for a runner whose pod ran: ``grace_period_seconds`` for
               the unregistered runner to exit by itself. Never spent blind: a look follows it.
LAST_LOOK      immediately before the pod's deletion, whatever the runner was made as: a look by name, since its
               runner may have registered after the first look (config.sh was running then; a container restarted
               before its Secret went). A registration found that is provably its own gets the same guarded
               RemoveRunner (a 422 keeps the pod), and a successful one its grace, then another look. When a look
               finds none, the pod is deleted at once: between the two, milliseconds and no wait (a runner that
               registers in that gap is still in config.sh or run.sh's start, and SIGTERM ends it before any
               job, see DELETING_POD). Skipped for a pod that is gone or has finished: nothing in it can register.
DELETING_POD   delete the pod (with its own termination grace) and wait until it is gone; a pod stuck
               terminating (a lost node) is then deleted with no grace, since its runner is unregistered.
SWEEPING       after a last look: a pod deleted while config.sh ran registers, offline, before its shell's trap
               ends it (manifests.STOP_BEFORE_RUN): that registration is removed once the pod is gone, so none is
               left behind.

A registration under the runner's name that is not provably its own is never removed, and the teardown
reports it, so that nothing is started over it. For a runner made with an ownership label it is another's,
and the pod goes; for one made before ownership labels it might be this pod's runner, so the pod stays and
the teardown fails saying so (RegistrationNotProvablyOurs).

A runner that died mid-job (its pod gone, or its container not running) stays busy for GitHub until GitHub
abandons the job's lock, about ten minutes: the busy wait says so, bounded as any other.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from ..clock import Clock
from ..github.client import RemoveOutcome
from ..kube.client import describe
from ..kube.manifests import OWNER_LABEL_PREFIX, RunnerSpec, owner_label
from ..kube.pod_state import held_by_job, pod_finished, runner_running
from ..kube.runner_secret import SecretApi, delete_runner_secret
from ..logs import ROUTINE

log = logging.getLogger(__name__)

BUSY_POLL_FIRST_SECONDS = 0.5
BUSY_POLL_MAX_SECONDS = 5.0
POD_POLL_FIRST_SECONDS = 0.1
POD_POLL_MAX_SECONDS = 1.0
FORCED_DELETION_TIMEOUT_SECONDS = 30.0
DEAD_RUNNER_CHECK_SECONDS = 30.0  # how often a busy wait looks at the pod: a runner may die mid-job
JOB_ABANDON_MINUTES = 10  # how long GitHub holds the job of a runner that died (its service's, not documented)
# Registrations the last look removes before it gives up: each one needs the pod's runner to register anew, which
# a pod whose Secret is gone cannot do more than once (a container started before the Secret went).
LAST_LOOK_ROUNDS = 3
DELETION_ATTEMPTS = 4  # each one request, after a look (the client's own retries would wait between them blind)
DELETION_RETRY_SECONDS = 0.5


class TeardownState(enum.Enum):
    UNREGISTERING = "unregistering"
    GRACE = "grace"
    LAST_LOOK = "last look"
    DELETING_POD = "deleting pod"
    SWEEPING = "sweeping"
    DONE = "done"


class RunnerStillBusy(Exception):
    """The runner kept running a job for the whole unregister timeout; its pod was left running."""


class RegistrationNotProvablyOurs(Exception):
    """A registration of the runner's name might be running a job in its pod, yet is not provably its own."""


class WaitTimedOut(Exception):
    """A bounded wait ran out; the message says what it waited for."""


class KeptRegistering(Exception):
    """The runner registered again after each removal of the last look: its pod was left running."""


class RunnerRegistry(Protocol):
    def find_runner(self, name: str, max_age: float = 0.0, *, newer_than: int | None = None) -> dict[str, Any] | None:
        """The registration of this name (an online one first). ``max_age`` 0: a lookup of its own by name, whose
        "none" may decide that a pod goes; more: from a listing shared with other waiters, that old at most.
        ``newer_than``: only registrations of a higher id matter, which the listing's last pages answer for."""
        ...

    def remove_runner(self, runner_id: int) -> RemoveOutcome: ...


class Permits(Protocol):
    """How many runners may be out of service at once (a pool's max_unavailable): a permit is taken before a
    RemoveRunner that may succeed, and given back when GitHub says the runner is busy after all."""

    def acquire(self, runner_name: str) -> None:
        """Blocks until a permit is free; raises (saying why) when none can be had."""
        ...

    def release(self) -> None: ...

    def waiting_on_job(self, runner_name: str, waiting: bool) -> None:
        """The runner is busy and waited for (RemoveRunner answered 422), or no longer: for progress lines."""
        ...


class NoLimit:
    """A lone Runner: nothing to count."""

    def acquire(self, runner_name: str) -> None:
        pass

    def release(self) -> None:
        pass

    def waiting_on_job(self, runner_name: str, waiting: bool) -> None:
        pass


NO_LIMIT = NoLimit()


class PodApi(SecretApi, Protocol):
    def read_pod(self, namespace: str, name: str) -> Any: ...
    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None, *, once: bool = False) -> None:
        """``once``: one request, no retry (the caller looks at the runner again before it tries again)."""
        ...

    def release_from_job(self, namespace: str, name: str) -> None: ...


@dataclass(frozen=True)
class RunnerLocation:
    """Where a runner lives; all Delete gets to know is what the state kept."""

    namespace: str
    pod_name: str
    secret_name: str
    runner_name: str
    runner_id: int | None
    ephemeral: bool
    owner_label: str | None = None  # the label its registrations carry; None if it was made before they did
    pool: str = ""  # the RunnerPool it belongs to, if any (its pod's and Secret's labels say so)

    @classmethod
    def of(cls, spec: RunnerSpec, runner_id: int | None, ephemeral: bool | None = None) -> RunnerLocation:
        """Where the runner of ``spec`` lives; ``ephemeral`` as it was made, if that differs from the spec. (A
        registration made before ownership labels existed is proven ours by the id in state.)"""
        made_ephemeral = spec.ephemeral if ephemeral is None else ephemeral
        label = owner_label(spec.owner) if spec.owner else None
        return cls(
            spec.namespace,
            spec.pod_name,
            spec.secret_name,
            spec.runner_name,
            runner_id,
            made_ephemeral,
            label,
            spec.pool,
        )

    @property
    def owner(self) -> str | None:
        """The resource's ownership id, as its pod's and Secret's labels carry it."""
        return self.owner_label.removeprefix(OWNER_LABEL_PREFIX) if self.owner_label else None


def owns(runner: RunnerLocation, registration: dict[str, Any]) -> bool:
    """A runner name is unique per GitHub repository, organization or enterprise, not per namespace or stack:
    a registration is this runner's only by the id recorded in state, or by the ownership label it was made
    with."""
    if runner.runner_id is not None and registration.get("id") == runner.runner_id:
        return True
    labels = {label.get("name") for label in registration.get("labels") or ()}
    return runner.owner_label is not None and runner.owner_label in labels


@dataclass(frozen=True)
class TeardownTimeouts:
    grace_period_seconds: float
    unregister_timeout_seconds: float
    pod_gone_timeout_seconds: float


@dataclass
class TeardownReport:
    """What the procedure went through, for logs and tests."""

    states: list[TeardownState]
    busy_answers: int = 0
    grace_waited_seconds: float = 0.0
    foreign: dict[str, Any] | None = None  # a registration of the name that is not this runner's: left alone


def tear_down_runner(
    runner: RunnerLocation,
    github: RunnerRegistry,
    pods: PodApi,
    clock: Clock,
    timeouts: TeardownTimeouts,
    permits: Permits = NO_LIMIT,
    pod_running: bool | None = None,
) -> TeardownReport:
    """Once the runner is unregistered it holds one of ``permits``, which the caller gives back when its
    replacement is up (or has failed). ``pod_running``: known from a listing of pods, else read; it decides
    only whether a removed runner gets its grace."""
    # Judged before unregistering: a runner that exits on its own right after the 204 still gets its grace.
    if pod_running is None:
        pod = pods.read_pod(runner.namespace, runner.pod_name)
        pod_running = pod is not None and not pod_finished(pod)

    report = TeardownReport(states=[TeardownState.UNREGISTERING])
    removed = _unregister(
        runner, runner.runner_id, github, clock, timeouts.unregister_timeout_seconds, permits, report, pods=pods
    )
    removed_at = clock.monotonic() if removed and pod_running else None  # the grace period counts from here
    # Without its Secret the container cannot start again, so it cannot register again with the token.
    delete_runner_secret(pods, runner.namespace, runner.secret_name, runner.runner_name, runner.pool, runner.owner)

    pod = pods.read_pod(runner.namespace, runner.pod_name)
    if pod is not None and held_by_job(pod):
        _release_from_job(runner, pods)
    looked = pod is not None and not pod_finished(pod)  # a runner may run in it, now or after a restart
    for attempt in range(1, DELETION_ATTEMPTS + 1):
        if looked:
            _last_look(runner, github, pods, clock, timeouts, report, removed_at)
            removed_at = None  # its grace is spent
        report.states.append(TeardownState.DELETING_POD)
        try:
            pods.delete_pod(runner.namespace, runner.pod_name, once=True)  # one request: a retry follows a look
            break
        except Exception as error:
            if attempt == DELETION_ATTEMPTS:
                raise
            log.info(
                "deleting pod %s/%s failed (%s); looking at its runner again before the next try",
                runner.namespace,
                runner.pod_name,
                describe(error),
            )
            clock.sleep(DELETION_RETRY_SECONDS * attempt)
    if not _wait_pod_gone(pods, runner.namespace, runner.pod_name, clock, timeouts.pod_gone_timeout_seconds):
        # Unregistered, so no job can be lost: force it, as for a pod stuck on a lost node.
        log.warning(
            "pod %s/%s still terminating after %.0f s; deleting it with no grace (its runner is unregistered)",
            runner.namespace,
            runner.pod_name,
            timeouts.pod_gone_timeout_seconds,
        )
        pods.delete_pod(runner.namespace, runner.pod_name, grace_seconds=0)
        wait_pod_gone(pods, runner.namespace, runner.pod_name, clock, FORCED_DELETION_TIMEOUT_SECONDS)
    if looked:
        # Its runner may have been in config.sh: registered as the pod went, never to listen (no job).
        report.states.append(TeardownState.SWEEPING)
        _unregister(
            runner, None, github, clock, timeouts.unregister_timeout_seconds, NO_LIMIT, report, pods=pods, gone=True
        )
    report.states.append(TeardownState.DONE)
    return report


def _release_from_job(runner: RunnerLocation, pods: PodApi) -> None:
    """Taken off its Job's count before anything else (harmless to a pod that is kept after all), so that its
    deletion is no failure feeding the Job controller's back-off. A refusal costs only that back-off: said, and
    the teardown goes on."""
    try:
        pods.release_from_job(runner.namespace, runner.pod_name)
    except Exception as error:
        log.warning(
            "pod %s/%s was not released from its Job (%s): the Job controller counts its deletion as a failure and "
            "holds its next pods back a while",
            runner.namespace,
            runner.pod_name,
            describe(error),
        )


def _last_look(
    runner: RunnerLocation,
    github: RunnerRegistry,
    pods: PodApi,
    clock: Clock,
    timeouts: TeardownTimeouts,
    report: TeardownReport,
    removed_at: float | None,
) -> None:
    """Until a look by name, made just before the pod's deletion, finds no registration of this runner to remove:
    each RemoveRunner that succeeds (``removed_at``: the first one's time) earns the runner its grace, and another
    look follows the grace. Nothing waits between the look that finds none and the deletion."""
    grace = timeouts.grace_period_seconds
    for _ in range(LAST_LOOK_ROUNDS):
        if removed_at is not None and grace > 0:
            report.states.append(TeardownState.GRACE)
            log.info(
                "runner %s unregistered; waiting out its %.1f s grace period before looking at it once more and "
                "deleting pod %s/%s",
                runner.runner_name,
                grace,
                runner.namespace,
                runner.pod_name,
                extra=ROUTINE,
            )
            clock.sleep(max(removed_at + grace - clock.monotonic(), 0.0))
            report.grace_waited_seconds += grace
        report.states.append(TeardownState.LAST_LOOK)
        if not _unregister(
            runner, None, github, clock, timeouts.unregister_timeout_seconds, NO_LIMIT, report, pods=pods
        ):
            return
        removed_at = clock.monotonic()
    raise KeptRegistering(
        f"runner {runner.runner_name} registered anew {LAST_LOOK_ROUNDS} times while its pod "
        f"{runner.namespace}/{runner.pod_name} was being taken down (each registration was removed; something "
        "starts it again with a valid token): its pod was left running and the resource stays in state"
    )


def unregister_by_name(
    runner: RunnerLocation, github: RunnerRegistry, clock: Clock, timeout: float, pods: PodApi | None = None
) -> TeardownReport:
    """The registration under the runner's name, unregistered with the busy guard if it is provably this
    runner's (none: nothing to do); one that is not is left alone and reported in ``foreign``. ``pods``: to
    say so when the runner GitHub counts busy has died mid-job."""
    report = TeardownReport(states=[TeardownState.UNREGISTERING])
    _unregister(runner, None, github, clock, timeout, NO_LIMIT, report, pods=pods)
    return report


def _unregister(
    runner: RunnerLocation,
    runner_id: int | None,
    github: RunnerRegistry,
    clock: Clock,
    timeout: float,
    permits: Permits,
    report: TeardownReport,
    *,
    pods: PodApi | None = None,
    gone: bool = False,
) -> bool:
    """RemoveRunner until it is done (None: look the id up by name), holding a permit once it is; counts in
    ``report`` how often GitHub said busy, and records a registration of the name that is not ours (``gone``:
    the runner's pod is gone already, so that registration cannot be running in it). Whether a registration was
    removed (a 404 and none found by name: none was)."""
    looked_up = False
    permits.acquire(runner.runner_name)
    deadline = clock.monotonic() + timeout  # for the runner's jobs, not for its turn among the pool's
    # Kept from one 422 to the next: asked again at once whenever a listing says idle, a runner taking job after
    # job would get a RemoveRunner twice a second, each costing 5 points of the pool's budget.
    delay = BUSY_POLL_FIRST_SECONDS
    while True:
        if runner_id is None:
            if looked_up:
                return False
            found = github.find_runner(runner.runner_name)  # its own lookup: a "none" here lets the pod go
            looked_up = True
            if found is None:
                return False
            if not owns(runner, found):
                if report.foreign is None:
                    _leave_foreign(runner, found, gone)
                report.foreign = found
                return False
            runner_id = int(found["id"])
        outcome = github.remove_runner(runner_id)
        if outcome is RemoveOutcome.REMOVED:
            return True
        if outcome is RemoveOutcome.NOT_FOUND:
            # The id in state may be gone while the name is registered again (removed by hand, registered anew).
            runner_id = None
            continue
        report.busy_answers += 1
        permits.release()  # a busy runner stays in service: another one may be taken out meanwhile
        permits.waiting_on_job(runner.runner_name, True)
        try:
            delay = _wait_until_idle(runner, runner_id, github, clock, deadline, timeout, delay, pods)
        finally:
            permits.waiting_on_job(runner.runner_name, False)
        permits.acquire(runner.runner_name)


def _leave_foreign(runner: RunnerLocation, found: dict[str, Any], gone: bool = False) -> None:
    """Never removed: it may be another stack's. A runner made with an ownership label registers only with it,
    so its pod runs no other registration and may go. One made before ownership labels cannot be told from
    another's (its pod might be running that registration's job): its pod is left alone, and the error says so
    (unless the pod is ``gone`` already)."""
    if runner.owner_label is None and not gone:
        raise RegistrationNotProvablyOurs(
            f"runner {runner.runner_name}: GitHub lists a registration of its name (id {found['id']}, "
            f"{found.get('status')}{', running a job' if found.get('busy') else ''}) that is not provably this "
            f"runner's (it was made before ownership labels, or by another stack); its pod "
            f"{runner.namespace}/{runner.pod_name} was left running and the resource stays in state. If that "
            "registration is this runner's, remove it in GitHub once its job is done; then run the update again."
        )
    log.warning(
        "runner name %s is registered (GitHub id %s) without this resource's ownership label: that "
        "registration is another's, and is left alone",
        runner.runner_name,
        found["id"],
    )


def _wait_until_idle(
    runner: RunnerLocation,
    runner_id: int,
    github: RunnerRegistry,
    clock: Clock,
    deadline: float,
    timeout: float,
    delay: float,
    pods: PodApi | None,
) -> float:
    """Until the listing shows the runner idle (or gone): a page of it costs 1 point for up to 100 runners and
    is shared by every runner waited on, where asking RemoveRunner again costs 5 for each. RemoveRunner, asked
    again afterwards, stays the guard: a job that starts in between gets another 422. Polls start ``delay``
    apart and grow; returns the delay to go on with, so that RemoveRunner is never asked more often than that.
    A runner the listing does not show is looked up by name before it counts as gone: GitHub documents no
    order for the listing, whose last pages are read here. Now and then the pod is looked at: a runner that
    died mid-job stays busy for GitHub until GitHub abandons its job, and the wait says so."""
    log.info(
        "runner %s is running a job (RemoveRunner answered 422); its pod is left alone until the job ends "
        "(at most %.0f s more, of unregister_timeout_seconds %.0f s)",
        runner.runner_name,
        max(deadline - clock.monotonic(), 0.0),
        timeout,
    )
    dead: str | None = None  # why its runner cannot be running the job GitHub counts, once seen
    look_at_pod = clock.monotonic()
    while True:
        left = deadline - clock.monotonic()
        if pods is not None and dead is None and clock.monotonic() >= look_at_pod:
            look_at_pod = clock.monotonic() + DEAD_RUNNER_CHECK_SECONDS
            dead = _died_mid_job(runner, pods)
            if dead is not None:
                log.warning(
                    "runner %s: GitHub counts it busy, but %s: it died mid-job, and GitHub holds that job until it "
                    "abandons it (about %d minutes). Waiting at most %.0f s more (unregister_timeout_seconds); "
                    "cancelling the workflow run in GitHub releases the runner sooner.",
                    runner.runner_name,
                    dead,
                    JOB_ABANDON_MINUTES,
                    max(left, 0.0),
                )
        if left <= 0:
            why = (
                f"GitHub still counts it busy, but {dead}: it died mid-job, and GitHub holds that job until it "
                f"abandons it (about {JOB_ABANDON_MINUTES} minutes), or until the workflow run is cancelled"
                if dead
                else f"its pod {runner.namespace}/{runner.pod_name} was left running"
            )
            raise RunnerStillBusy(
                f"runner {runner.runner_name} is still running a job after {timeout:.0f} s "
                f"(unregister_timeout_seconds); {why}. The resource stays in state. Run the update again once "
                "the job has finished."
            )
        clock.sleep(min(delay, left))
        found = github.find_runner(runner.runner_name, max_age=delay, newer_than=runner_id - 1)
        if found is None:
            found = github.find_runner(runner.runner_name)  # by name: a tail that missed it proves nothing
        next_delay = min(delay * 1.25, BUSY_POLL_MAX_SECONDS)
        if found is None or (found["id"] == runner_id and not found.get("busy")):
            return next_delay
        if found["id"] != runner_id and delay >= BUSY_POLL_MAX_SECONDS:
            return next_delay  # another registration of the name is listed: now and then RemoveRunner is asked
        delay = next_delay


def _died_mid_job(runner: RunnerLocation, pods: PodApi) -> str | None:
    """Why the runner GitHub counts busy cannot be running a job (its pod gone, its container not running),
    or None if it may be."""
    pod = pods.read_pod(runner.namespace, runner.pod_name)
    if pod is None:
        return f"its pod {runner.namespace}/{runner.pod_name} is gone"
    if not runner_running(pod):
        return f"the runner container of pod {runner.namespace}/{runner.pod_name} is not running"
    return None


def wait_pod_gone(pods: PodApi, namespace: str, name: str, clock: Clock, timeout: float) -> None:
    if not _wait_pod_gone(pods, namespace, name, clock, timeout):
        raise WaitTimedOut(f"pod {namespace}/{name} is still terminating after {timeout:.0f} s")


def _wait_pod_gone(pods: PodApi, namespace: str, name: str, clock: Clock, timeout: float) -> bool:
    log.info("waiting up to %.0f s for pod %s/%s to be gone", timeout, namespace, name, extra=ROUTINE)
    deadline = clock.monotonic() + timeout
    delay = POD_POLL_FIRST_SECONDS
    while pods.read_pod(namespace, name) is not None:
        if clock.monotonic() >= deadline:
            return False
        clock.sleep(delay)
        delay = min(delay * 2, POD_POLL_MAX_SECONDS)
    return True
