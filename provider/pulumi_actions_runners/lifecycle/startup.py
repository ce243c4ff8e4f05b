"""Bringing a runner up: its credential in a Secret, its pod, then a bounded wait until GitHub lists it online.

The credential is a registration token fresh enough to register with (see registration_tokens.py), or a
just-in-time config that GitHub makes for this one runner (``generate-jitconfig``, which registers it at
once). Runner names are unique per GitHub repository, organization or enterprise, and ``config.sh --replace``
takes over a registration of the name even while it runs a job: so before anything is written, the name must
be free or registered by this very resource (its ownership label, see manifests.owner_label). A registration of
this resource's that no pod of it runs (a session a dead runner left, say) is removed first. Create must
leave nothing behind when it fails (Pulumi forgets a resource whose Create raised), so whatever it made is
taken down through the same RemoveRunner-guarded teardown as any other runner. A runner this very resource
made with another token or spec, left by a Create that never finished (its provider killed), is taken down the
same way before the new one starts: adopted, it would make the state untrue; left, it would block every run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from ..clock import Clock
from ..github.client import DEFAULT_RUNNER_GROUP_ID, JitConfig
from ..github.client import RunnerNameTaken as GitHubNameTaken
from ..github.registration_tokens import StartTokens
from ..kube.client import PodAlreadyExists
from ..kube.manifests import (
    OWNER_LABEL,
    POOL_LABEL,
    RUNNER_LABEL,
    SPEC_HASH_ANNOTATION,
    TOKEN_HASH_ANNOTATION,
    RunnerSpec,
    made_by,
    pod_manifest,
)
from ..kube.pod_state import pod_finished, pod_live, pod_stuck, why_not_running
from ..kube.runner_secret import SecretApi, write_runner_secret
from ..logs import ROUTINE
from .teardown import (
    PodApi,
    RunnerLocation,
    RunnerRegistry,
    RunnerStillBusy,
    TeardownTimeouts,
    owns,
    tear_down_runner,
    unregister_by_name,
    wait_pod_gone,
)

log = logging.getLogger(__name__)

# actions/runner comes online seconds after its pod is made (scheduling and start, then config.sh and run.sh's
# session: the simulator's RunnerTimings), so the first look waits half a second (a look sooner only finds a test
# bed's quicker runners, and costs a fleet's rotation a listing walk more); then polled often for a second (a
# listing that waiters share costs little), then less and less often.
REGISTRATION_POLL_FIRST_SECONDS = 0.5
REGISTRATION_POLL_STEADY_FOR_SECONDS = 1.0
REGISTRATION_POLL_MAX_SECONDS = 5.0
# Listings are read from their last pages, which GitHub documents nothing about: a runner not seen there this long
# is asked for by name, and again at doubling intervals (and at the deadline), so no order can hide it for good.
REGISTRATION_CONFIRM_FIRST_SECONDS = 10.0


class RunnerDidNotRegister(Exception):
    pass


class RunnerNameTaken(Exception):
    """The runner's name is registered in its GitHub scope by a runner this resource cannot prove its own."""

    def __init__(self, spec: RunnerSpec, registrations: list[dict[str, Any]]) -> None:
        prop = "pool_name" if spec.pool else "runner_name"
        held = ", ".join(
            f"{r['name']} (GitHub id {r['id']}, {r.get('status')}{', running a job' if r.get('busy') else ''})"
            for r in registrations
        )
        names = "the name" if len(registrations) == 1 else f"{len(registrations)} names:"
        verb = "is" if len(registrations) == 1 else "are"
        super().__init__(
            f"{prop} {spec.pool or spec.runner_name!r}: {names} {held} {verb} already registered in "
            f"{spec.github_url} by runners this resource does not own. Runner names are unique per GitHub "
            "repository, organization or enterprise, not per namespace, cluster or stack, and a new runner of the "
            "name would take that registration over (and lose its job). Nothing was created. Choose another "
            f"{prop}, or, if that runner is a leftover, remove it in the repository's or organization's "
            "runner settings first."
        )


class PodCreator(PodApi, SecretApi, Protocol):
    def validate_pod(self, manifest: dict[str, Any]) -> None: ...
    def create_pod(self, manifest: dict[str, Any]) -> None: ...


class JitRegistry(RunnerRegistry, Protocol):
    def generate_jitconfig(self, name: str, labels: Sequence[str], runner_group_id: int) -> JitConfig: ...

    def runner_group_id(self, name: str) -> int:
        """RunnerGroupNotFound if the scope has no group of the name."""
        ...

    def registration_mark(self) -> int | None:
        """An id below that of every runner registered from now on (None: none known cheaply)."""
        ...


@dataclass(frozen=True)
class StartTimeouts:
    register_timeout_seconds: float
    unregister_timeout_seconds: float
    pod_gone_timeout_seconds: float
    grace_period_seconds: float  # for a leftover runner of this resource taken down first


def start_runner(
    spec: RunnerSpec,
    tokens: StartTokens | None,
    github: JitRegistry,
    pods: PodCreator,
    clock: Clock,
    timeouts: StartTimeouts,
    *,
    pod_known_gone: bool = False,
    name_checked: bool = False,
    ours: dict[str, Any] | None = None,
    pod_validated: bool = False,
) -> int:
    """Returns the id GitHub gave the runner. ``tokens`` is None for a just-in-time runner; ``pod_known_gone``
    after a teardown has just seen the pod of this name go; ``name_checked`` when the caller has made sure that
    the name is free (a teardown has just removed its registration by the id in state) or ``ours``;
    ``pod_validated`` when the API server has judged a pod of this spec already (a pool's, once for all)."""
    if not pod_validated:
        pods.validate_pod(pod_manifest(spec))  # PodRejected before anything is written
    # RunnerGroupNotFound before anything is written, too (a cached lookup, once the pool's or an earlier one's).
    group_id = github.runner_group_id(spec.runner_group) if spec.runner_group else DEFAULT_RUNNER_GROUP_ID
    existing = None if pod_known_gone else pods.read_pod(spec.namespace, spec.pod_name)
    if _in_the_way(spec, existing):
        raise _pod_in_the_way(spec)  # checked before the Secret: it may be another resource's, running a job
    if not name_checked:
        ours = check_name_ours(spec, github)
    if existing is not None and _leftover(spec, existing):
        _take_down_leftover(spec, github, pods, clock, timeouts)
        existing, ours = None, None
    if ours is not None and not spec.jit_config and not (existing is not None and pod_live(existing)):
        _remove_unrun_registration(spec, github, pods, clock, timeouts)
    jit: JitConfig | None = None
    try:
        if existing is not None and pod_live(existing):
            # This very token (or a just-in-time pod of this name): adopted, as after a crash of an earlier Create.
            log.info("pod %s/%s already exists with this token; adopting it", spec.namespace, spec.pod_name)
            return _wait_registered(spec, None, github, pods, clock, timeouts.register_timeout_seconds)
        if existing is not None:
            log.info("pod %s/%s has ended or is terminating; replacing it", spec.namespace, spec.pod_name)
            pods.delete_pod(spec.namespace, spec.pod_name)
            wait_pod_gone(pods, spec.namespace, spec.pod_name, clock, timeouts.pod_gone_timeout_seconds)
        jit = (
            _jit_config(spec, group_id, github, clock, timeouts.unregister_timeout_seconds) if spec.jit_config else None
        )
        if jit is not None:
            credential = jit.encoded_jit_config
        elif tokens is not None:
            credential = tokens.for_start()
        else:
            raise ValueError(f"runner {spec.runner_name} has neither a registration token nor jit_config")
        # SecretNotOurs if one of the name is another's: a just-in-time registration made for it is removed below.
        write_runner_secret(pods, spec, credential)
        # Registered from here on: the last pages of the listing say when it is online, whatever else is there.
        newer_than = jit.runner_id - 1 if jit else github.registration_mark()
        try:
            pods.create_pod(pod_manifest(spec))
        except PodAlreadyExists:
            # The client sends a POST whose answer was lost again and gets 409 for the pod it made: adopted.
            if not _is_this_runners(spec, pods.read_pod(spec.namespace, spec.pod_name)):
                raise
            log.info("pod %s/%s was created by a request whose answer was lost", spec.namespace, spec.pod_name)
        expected_id = jit.runner_id if jit else None
        return _wait_registered(
            spec, expected_id, github, pods, clock, timeouts.register_timeout_seconds, newer_than=newer_than
        )
    except (PodAlreadyExists, RunnerNameTaken):
        raise  # another resource's pod or registration: not ours to clean up
    except Exception:
        cleanup = TeardownTimeouts(0, timeouts.unregister_timeout_seconds, timeouts.pod_gone_timeout_seconds)
        try:
            tear_down_runner(RunnerLocation.of(spec, jit.runner_id if jit else None), github, pods, clock, cleanup)
        except Exception as cleanup_error:
            log.error("could not clean up after the failed create of runner %s: %s", spec.runner_name, cleanup_error)
        raise


def _take_down_leftover(
    spec: RunnerSpec, github: JitRegistry, pods: PodCreator, clock: Clock, timeouts: StartTimeouts
) -> None:
    """A runner of this resource left by a create that did not finish, made with another token or spec: taken
    down as a replacement takes down its old runner, before anything of the new one is written."""
    log.info(
        "pod %s/%s is this resource's, made with another token or spec by a create that did not finish; taking "
        "it down first",
        spec.namespace,
        spec.pod_name,
    )
    leftover = RunnerLocation.of(spec, None, ephemeral=False)  # as it was made is unknown: swept as persistent
    teardown = TeardownTimeouts(
        timeouts.grace_period_seconds, timeouts.unregister_timeout_seconds, timeouts.pod_gone_timeout_seconds
    )
    try:
        report = tear_down_runner(leftover, github, pods, clock, teardown)
    except RunnerStillBusy:
        raise RunnerStillBusy(
            f"pod {spec.namespace}/{spec.pod_name} is this resource's runner from an earlier run that did not "
            "finish (made with another token or spec), and it is still running a job after "
            f"{timeouts.unregister_timeout_seconds:.0f} s (unregister_timeout_seconds): it was left running and "
            "nothing new was created. Run the update again once the job has finished."
        ) from None
    if report.foreign is not None:  # the name's registration is another's: never to be taken over
        raise RunnerNameTaken(spec, [report.foreign])


def _remove_unrun_registration(
    spec: RunnerSpec, github: JitRegistry, pods: PodCreator, clock: Clock, timeouts: StartTimeouts
) -> None:
    """This resource's registration of the name, which no live pod of this runner runs, is removed (busy guard
    and all) before a new runner registers. Listed online, it may hold a session left by a runner that died:
    config.sh --replace would keep its id, the new runner would meet 409 for minutes, and the listing would call
    it online meanwhile. Removed, the new runner's registration has an id of its own, online only once its
    listener holds a session."""
    log.info(
        "runner name %s is registered by this resource with no pod running it; removing that first", spec.runner_name
    )
    try:
        unregister_by_name(RunnerLocation.of(spec, None), github, clock, timeouts.unregister_timeout_seconds, pods)
    except RunnerStillBusy as busy:
        raise RunnerStillBusy(f"{busy} Nothing new was created.") from None


def check_name_ours(spec: RunnerSpec, github: RunnerRegistry) -> dict[str, Any] | None:
    """The registration of the name if it is this resource's, None if there is none; RunnerNameTaken if it is
    registered by a runner that is not provably this resource's."""
    found = github.find_runner(spec.runner_name)  # by name: a "none" here lets a registration be made
    if found is not None and not owns(RunnerLocation.of(spec, None), found):
        raise RunnerNameTaken(spec, [found])
    return found


def _jit_config(
    spec: RunnerSpec, group_id: int, github: JitRegistry, clock: Clock, unregister_timeout: float
) -> JitConfig:
    """GitHub answers 409 when the name is registered already: after a lost response to our own request, or a
    registration left by an earlier pod of this name (none runs: checked before). If it is ours, it is
    unregistered with the same busy guard as any runner, and the config asked for once more; if not, it is
    left alone."""
    labels = spec.jit_labels
    try:
        return github.generate_jitconfig(spec.runner_name, labels, group_id)
    except GitHubNameTaken:
        log.info("runner name %s is registered already; unregistering it if it is ours", spec.runner_name)
    report = unregister_by_name(RunnerLocation.of(spec, None), github, clock, unregister_timeout)
    if report.foreign is not None:
        raise RunnerNameTaken(spec, [report.foreign])
    return github.generate_jitconfig(spec.runner_name, labels, group_id)


def _is_ours(spec: RunnerSpec, pod: Any) -> bool:
    """A pod this resource made under the name (a pool's pods carry the pool's label, a lone runner's none)."""
    labels = pod.metadata.labels or {}
    named = labels.get(RUNNER_LABEL) == spec.runner_name and labels.get(POOL_LABEL, "") == spec.pool
    return named and made_by(spec, labels)


def _is_this_runners(spec: RunnerSpec, pod: Any) -> bool:
    """Ours, and made with this token and spec (a pod of a version before spec hashes: with this token)."""
    if pod is None or not _is_ours(spec, pod):
        return False
    annotations = pod.metadata.annotations or {}
    made_with = annotations.get(SPEC_HASH_ANNOTATION, spec.spec_hash)
    return (annotations.get(TOKEN_HASH_ANNOTATION), made_with) == (spec.token_hash, spec.spec_hash)


def _proven_ours(spec: RunnerSpec, pod: Any) -> bool:
    """Made by this very resource, as its ownership label says (not merely by some resource of the name)."""
    proven = spec.owner is not None and (pod.metadata.labels or {}).get(OWNER_LABEL) == spec.owner
    return proven and _is_ours(spec, pod)


def _leftover(spec: RunnerSpec, pod: Any) -> bool:
    """A live pod that this very resource made with another token or spec."""
    return _proven_ours(spec, pod) and pod_live(pod) and not _is_this_runners(spec, pod)


def made_as_specified(spec: RunnerSpec, pod: Any) -> bool:
    """A live pod that this very resource made with this token and spec: as good as one it would make now, so
    that a runner of it can be taken over instead of replaced (after an update cut short, or a lost state). Its
    spec hash must say so: a pod from before spec hashes may be of any spec."""
    recorded = (pod.metadata.annotations or {}).get(SPEC_HASH_ANNOTATION) is not None
    return recorded and _proven_ours(spec, pod) and pod_live(pod) and _is_this_runners(spec, pod)


def _in_the_way(spec: RunnerSpec, pod: Any) -> bool:
    """A pod of the name that is not this runner's: any of another resource, or a live one of another token or
    spec that cannot be proven this resource's (made before ownership labels)."""
    if pod is None:
        return False
    if not _is_ours(spec, pod):
        return True
    return pod_live(pod) and not _is_this_runners(spec, pod) and not _leftover(spec, pod)


def _pod_in_the_way(spec: RunnerSpec) -> PodAlreadyExists:
    return PodAlreadyExists(
        f"pod {spec.namespace}/{spec.pod_name} already exists and runs with another registration token or for "
        "another resource; it may be running a job, so it is left alone. Choose another runner_name (or pool_name)."
    )


def _wait_registered(
    spec: RunnerSpec,
    expected_id: int | None,
    github: RunnerRegistry,
    pods: PodApi,
    clock: Clock,
    timeout: float,
    *,
    newer_than: int | None = None,
) -> int:
    log.info("waiting up to %.0f s for runner %s to come online", timeout, spec.runner_name, extra=ROUTINE)
    started = clock.monotonic()
    deadline = started + timeout
    delay = REGISTRATION_POLL_FIRST_SECONDS
    confirm_gap = REGISTRATION_CONFIRM_FIRST_SECONDS
    confirm_at = started + confirm_gap

    def online(found: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
        # Online, and not an old offline registration of the same name (nor, for JIT, another one's).
        return found is not None and found.get("status") == "online" and expected_id in (None, found["id"])

    while True:
        clock.sleep(delay)
        found = github.find_runner(spec.runner_name, max_age=delay, newer_than=newer_than)  # shared with others
        if not online(found) and clock.monotonic() >= min(confirm_at, deadline):
            found = github.find_runner(spec.runner_name)  # by name: what the shared listing missed
            confirm_gap *= 2
            confirm_at = clock.monotonic() + confirm_gap
        if online(found):
            return int(found["id"])
        if clock.monotonic() - started < REGISTRATION_POLL_STEADY_FOR_SECONDS:
            continue  # its pod is looked at from then on: a container that fails to start takes that long anyway
        pod = pods.read_pod(spec.namespace, spec.pod_name)
        if pod is None or pod_finished(pod) or pod_stuck(pod):
            state = "is gone" if pod is None else f"cannot run ({pod_stuck(pod)})" if pod_stuck(pod) else "ended"
            raise RunnerDidNotRegister(
                f"runner {spec.runner_name} did not register: {why_not_running(pod)} "
                f"(pod {spec.namespace}/{spec.pod_name} {state})"
            )
        if clock.monotonic() >= deadline:
            raise RunnerDidNotRegister(
                f"runner {spec.runner_name} was not listed online by GitHub within {timeout:.0f} s "
                f"(register_timeout_seconds); pod {spec.namespace}/{spec.pod_name}: {why_not_running(pod)}"
            )
        delay = min(delay * 1.5, REGISTRATION_POLL_MAX_SECONDS, max(deadline - clock.monotonic(), 0.0))
