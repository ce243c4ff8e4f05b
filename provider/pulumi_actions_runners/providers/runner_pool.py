"""Dynamic provider of RunnerPool: thin glue from Pulumi's calls to the pool's reconciliation (see pool.py).

The pool is never replaced for a new token or spec: it is updated, and the update rotates its runners
concurrently inside this one call. Update and Create never raise once they have touched anything: what they
return must list exactly the runners that exist (a raise would keep the old list), so what went wrong is
returned in ``problems``, which the RunnerPool resource turns into an error of the program.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)
from pulumi.output import Unknown

from ..clock import SystemClock
from ..github.client import RunnerGroupNotFound
from ..github.registration_tokens import StartTokens
from ..github.registrations import by_preferred_name
from ..inputs import validation
from ..inputs.cluster import CLUSTER, cluster_of, other_cluster, pods_there, verified_cluster
from ..inputs.connections import connect
from ..inputs.runner import (
    RULES,
    SETTINGS,
    SPEC_FIELDS,
    UNDIFFED,
    RunnerInputs,
    check_runner_inputs,
    input_differs,
    runner_spec,
)
from ..kube.client import (
    KubeconfigNotFound,
    NamespaceUnusable,
    PodAlreadyExists,
    PodRejected,
    describe,
    kubeconfig_file,
    unusable_namespace,
)
from ..kube.manifests import POOL_LABEL
from ..kube.pod_state import ENDED_PHASES, crash_looping, pod_phase, pod_problem, runs_unregistered
from ..kube.runner_secret import SecretNotOurs
from ..lifecycle.pool import (
    PoolResult,
    PoolRunner,
    PoolSpec,
    max_unavailable_count,
    reconcile_pool,
    tear_down_pool,
)
from ..lifecycle.refill_pool import observe_refill_pool, reconcile_refill_pool, retire_jobs, tear_down_refill_pool
from ..lifecycle.startup import RunnerNameTaken
from ..lifecycle.teardown import RunnerLocation, owns
from ..logs import log_to_stderr
from ..redaction import scrub_all, scrubbed_provider
from ..unknowns import holds_unknown

POOL_RULES: dict[str, validation.Rule] = {
    **RULES,
    "pool_name": validation.name_prefix,
    "replicas": validation.count_between(0, 1000),
    "max_unavailable": validation.count_or_percent,
    "refill": validation.boolean,
}
# Where the runners are and what they are called: a change makes a new pool (the old one is taken down first).
REPLACE_ON = ("github_url", "namespace", "pool_name")
# A change rotates runners (or adds and removes them) in an update of the pool.
ROLL_ON = ("token_hash", *SPEC_FIELDS, "replicas", "max_unavailable")
log = logging.getLogger(__name__)
# No cluster configured, or no namespace there: found before anything is written, and no retry helps, so the call
# fails as it is instead of recording an unconverged pool that asks for another `pulumi up`.
NOWHERE_TO_RUN = (KubeconfigNotFound, NamespaceUnusable)
# The Kubernetes client's messages when it finds no configuration (config.ConfigException), which 0.1.0 recorded
# as a pool's problem after a create that never reached a cluster.
NO_KUBECONFIG_WORDS = ("Service host/port is not set", "Service token file does not exist", "Invalid kube-config file")
SEEN_BY_REFRESH = "seen by refresh: "  # marks the problems a refresh found, which the next refresh replaces
# Raised by a pool's reconciliation before anything is touched (the names are another's, the pod or group is
# refused, there is nowhere to run): the call fails as it is. Once a refilling pool's Jobs were retired, the state
# records what exists instead.
UNTOUCHED = (RunnerNameTaken, PodAlreadyExists, PodRejected, RunnerGroupNotFound, *NOWHERE_TO_RUN)


@scrubbed_provider
class RunnerPoolProvider(ResourceProvider):
    def configure(self, _req: Any) -> None:
        log_to_stderr()

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = check_runner_inputs(olds, {"refill": False, **news}, POOL_RULES)
        failures += _refill_failures(inputs)
        if not failures:
            inputs |= _spec_hashes(inputs)
        return CheckResult(inputs, [CheckFailure(p, r) for p, r in failures])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """No network call. Besides changed inputs, a pool whose last update did not converge (or whose runners a
        refresh found ended) has changes, so that the next up finishes the work. A kubeconfig that now leads to
        another cluster replaces the pool: its old cluster is drained first, through its old settings."""
        replaces = [k for k in REPLACE_ON if input_differs(olds, news, k)]
        if other_cluster(olds.get(CLUSTER), news.get(CLUSTER)):
            replaces.append(CLUSTER)
        changed = any(input_differs(olds, news, k) for k in (*ROLL_ON, *SETTINGS))
        changed = changed or validation.differs(_refills(olds), news.get("refill"))
        changes = bool(replaces) or changed or not _converged(olds)
        return DiffResult(changes=changes, replaces=replaces, delete_before_replace=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        props = {**props, CLUSTER: cluster_of(props.get("kubeconfig"))}
        return CreateResult(f"{props['namespace']}/{props['pool_name']}", _reconcile(props, [], olds=None))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Only in the cluster its runners are in (the first update of a state from before records it)."""
        cluster = verified_cluster(
            f"pool {olds['pool_name']}", "update", olds.get(CLUSTER), news.get("kubeconfig"), _ours(olds, news)
        )
        # The owner its runners were made with stays (a renamed stack keeps its registrations).
        props = {**news, "owner": olds.get("owner") or news.get("owner"), CLUSTER: cluster or olds.get(CLUSTER)}
        return UpdateResult(_reconcile(props, _recorded(olds), olds=olds))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        tear_down = tear_down_refill_pool if _refills(props) else tear_down_pool
        inputs = _inputs(props)
        if _never_reached_a_cluster(props):
            try:
                kubeconfig_file(inputs.endpoint.kubeconfig)
            except KubeconfigNotFound:
                log.info(
                    "pool %s: its create never reached a cluster, and none is configured: nothing to take down", _id
                )
                return
        verified_cluster(
            f"pool {props['pool_name']}", "delete", props.get(CLUSTER), inputs.endpoint.kubeconfig, _ours(props)
        )
        with connect(inputs.endpoint) as clients:
            problems = tear_down(
                _pool_spec(props, inputs),
                _recorded(props),
                clients.runners,
                clients.kube,
                SystemClock(),
                inputs.timeouts,
            )
        if problems:
            raise RuntimeError(
                f"{len(problems)} runners of pool {props['pool_name']} were not taken down (the pool stays in "
                "state; run destroy again):\n" + "\n".join(problems)
            )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Each runner's registration (only one that is provably its own) and pod as they are now; one that has
        neither is gone from the list. ``problems`` gain what the refresh saw: each runner that will not run a job
        again without an update, and why (a deprecated runner version, an image that cannot be pulled)."""
        inputs = _inputs(props)
        spec = _pool_spec(props, inputs)
        verified_cluster(
            f"pool {props['pool_name']}", "refresh", props.get(CLUSTER), inputs.endpoint.kubeconfig, _ours(props)
        )
        if _refills(props):
            return self._read_refilling(id_, props, spec, inputs)
        with connect(inputs.endpoint) as clients:
            registered = by_preferred_name(clients.github.list_runners())
            pods = {
                pod.metadata.name: pod
                for pod in clients.kube.list_pods(props["namespace"], f"{POOL_LABEL}={props['pool_name']}")
            }
        runners, problems = [], []
        now = datetime.now(UTC)
        for runner in props.get("runners") or []:
            registration, pod = registered.get(runner["name"]), pods.get(runner["pod"])
            location = RunnerLocation.of(spec.template, PoolRunner.of_output(runner).runner_id)
            if registration is not None and not owns(location, registration):
                registration = None  # another's, under the same name: nothing about this runner
            if registration is None and pod is None:
                continue
            after = float(props["register_timeout_seconds"])
            ghost, looping = (
                runs_unregistered(pod, registration, now, after),
                crash_looping(pod, registration, now, after),
            )
            runners.append(
                {
                    **runner,
                    "id": registration["id"] if registration else runner["id"],
                    "status": registration["status"] if registration else None,
                    "busy": registration["busy"] if registration else None,
                    "pod_phase": pod_phase(pod, unregistered=ghost, looping=looping),
                }
            )
            if problem := pod_problem(pod, unregistered=ghost, looping=looping):
                problems.append(f"{SEEN_BY_REFRESH}runner {runner['name']}: {problem}")
        # The last update's problems stay (the next up must finish its work); the last refresh's are replaced.
        return ReadResult(id_, {**props, "runners": runners, "problems": _with_seen(props, problems)})

    def _read_refilling(self, id_: str, props: dict[str, Any], spec: PoolSpec, inputs: RunnerInputs) -> ReadResult:
        """The Job's runner pods as they are now, and why its slots are not being filled, if they are not."""
        with connect(inputs.endpoint) as clients:
            seen = observe_refill_pool(
                spec, props.get("job"), clients.runners, clients.kube, SystemClock(), inputs.timeouts
            )
        problems = _with_seen(props, [f"{SEEN_BY_REFRESH}{problem}" for problem in seen.problems])
        return ReadResult(
            id_, {**props, "runners": seen.runners, "problems": problems, "finished_pods": seen.finished_pods}
        )


def _ours(props: dict[str, Any], news: dict[str, Any] | None = None) -> Callable[[], bool]:
    """Whether any pod of the pool is in the cluster that ``news``' kubeconfig (else its own) leads to."""
    kubeconfig = (news if news is not None else props).get("kubeconfig")
    return pods_there(kubeconfig, props["namespace"], f"{POOL_LABEL}={props['pool_name']}", props.get("owner"))


def _with_seen(props: dict[str, Any], seen: list[str]) -> list[str]:
    """The last update's problems stay (the next up must finish its work); the last refresh's are replaced."""
    kept = [p for p in props.get("problems") or [] if not p.startswith(SEEN_BY_REFRESH)]
    return scrub_all([*kept, *seen])


def _refills(props: dict[str, Any]) -> bool:
    """A pool's state from before ``refill`` existed has none: it did not refill."""
    return props.get("refill") is True


def _refill_failures(inputs: dict[str, Any]) -> list[tuple[str, str]]:
    if inputs.get("refill") is not True:
        return []
    failures = []
    if inputs.get("jit_config") is True:
        failures.append(
            (
                "refill",
                "true is not allowed with jit_config: GitHub makes a just-in-time config for one runner by name, "
                "while the Job controller names the pods it starts; set jit_config false (the runners register "
                "with the pool's token), or refill false",
            )
        )
    if inputs.get("ephemeral") is False:
        failures.append(
            (
                "ephemeral",
                "false is not allowed with refill: a persistent runner never ends, so there is no slot to refill "
                "(and its pod restarts by itself); set ephemeral true, or refill false",
            )
        )
    return failures


def _never_reached_a_cluster(props: dict[str, Any]) -> bool:
    """A pool whose create failed before its first Kubernetes call, as 0.1.0 recorded it: no runner, no Job, and
    no problem but the Kubernetes client's words for a missing kubeconfig. It made nothing anywhere (its runners'
    Secrets and pods come after that call), so its delete needs no cluster."""
    problems = props.get("problems") or []
    return (
        not _refills(props)
        and not props.get("runners")
        and not props.get("job")
        and bool(problems)
        and all(any(words in problem for words in NO_KUBECONFIG_WORDS) for problem in problems)
    )


def _recorded(props: dict[str, Any]) -> list[PoolRunner]:
    """The runners the state lists that a pool made itself (a refilling pool's Job makes the others)."""
    return [PoolRunner.of_output(r) for r in props.get("runners") or [] if not r.get("job")]


def _reconcile(props: dict[str, Any], current: list[PoolRunner], *, olds: dict[str, Any] | None) -> dict[str, Any]:
    """A name held by another runner fails the call (nothing was touched, so the state stays true)."""
    if _refills(props):
        return _reconcile_refilling(props, current, olds)
    inputs = _inputs(props)
    spec = _pool_spec(props, inputs)
    result: PoolResult | None = None
    clock = SystemClock()
    problems: list[str] = []
    retired = False  # a refilling pool's Jobs retired: something in the namespace was touched
    try:
        with connect(inputs.endpoint) as clients:
            spec = _pool_spec(props, inputs, inputs.start_tokens(clients.github, clients.fresh_tokens, clock))
            if olds is not None and _refills(olds):  # its Job first, so that nothing refills it meanwhile
                retired = True
                problems = retire_jobs(spec, clients.runners, clients.kube, clock, inputs.timeouts)
            result = reconcile_pool(spec, current, clients.runners, clients.kube, clock, inputs.timeouts)
    except Exception as error:
        if result is None and not retired:  # raised before anything was touched
            if isinstance(error, UNTOUCHED):
                raise
            if (unusable := unusable_namespace(error, spec.template.namespace)) is not None:
                raise unusable from None  # its first call in the namespace refused: nothing there is touched
        if result is None:  # no runner was touched (say, the cluster could not be reached), or Jobs were retired
            retirement = "its refilling Jobs were retired (it no longer refills), then: " if retired else ""
            result = PoolResult(runners=current, problems=[f"pool {spec.name}: {retirement}{describe(error)}"])
    return {
        **_outputs(props, spec),
        "runners": [_runner_output(spec, r, props.get("runner_version")) for r in result.runners],
        "problems": scrub_all([*problems, *result.problems]),
    }


def _reconcile_refilling(props: dict[str, Any], recorded: list[PoolRunner], olds: dict[str, Any] | None) -> dict:
    """The pool's Job made or changed (see refill_pool.py); like a pool's, a failure after anything was touched
    is returned in ``problems``."""
    inputs = _inputs(props)
    spec = _pool_spec(props, inputs)
    clock = SystemClock()
    token_changed = olds is not None and olds.get("token_hash") != props.get("token_hash")
    try:
        with connect(inputs.endpoint) as clients:
            spec = _pool_spec(props, inputs, inputs.start_tokens(clients.github, clients.fresh_tokens, clock))
            result = reconcile_refill_pool(
                spec, recorded, token_changed, clients.runners, clients.kube, clock, inputs.timeouts
            )
    except (PodAlreadyExists, PodRejected, SecretNotOurs, *NOWHERE_TO_RUN):
        raise  # raised before anything was touched
    except Exception as error:
        was = olds or {}
        return {
            **_outputs(props, spec),
            **{k: was.get(k) for k in ("job", "parallelism", "runners")},
            "problems": scrub_all([f"pool {spec.name}: {describe(error)}"]),
        }
    return {
        **_outputs(props, spec),
        "job": result.job,
        "parallelism": result.parallelism,
        "finished_pods": 0,
        "runners": result.runners,
        "problems": scrub_all(result.problems),
    }


def _outputs(props: dict[str, Any], spec: PoolSpec) -> dict[str, Any]:
    """The inputs as the state keeps them, and the hash of what the runners are made of."""
    return {
        **{k: props.get(k) for k in (*REPLACE_ON, *ROLL_ON, *SETTINGS, *UNDIFFED, CLUSTER)},
        **({"refill": True} if _refills(props) else {}),
        "spec_hash": spec.template.spec_hash,
    }


def _spec_hashes(inputs: dict[str, Any]) -> dict[str, Any]:
    """The hashes the pool judges its runners by (PoolSpec.up_to_date, relabels), as inputs: the preview report
    sees a secret image or pod template only as [secret], but can compare these with each runner's recorded
    ones. They tell no more than those recorded hashes do already. Unknown while a spec input is."""
    if any(holds_unknown(inputs.get(k)) for k in (*SPEC_FIELDS, "namespace", "pool_name")):
        return {"spec_hash": Unknown(), "shape_hash": Unknown()}
    template = runner_spec(inputs, "", pool=inputs["pool_name"])
    return {"spec_hash": template.spec_hash, "shape_hash": template.shape_hash}


def _converged(olds: dict[str, Any]) -> bool:
    """A refilling pool's runners come and go by themselves: its Job, running one pod a slot, is what counts."""
    runners = olds.get("runners") or []
    if _refills(olds):  # and finished pods are deleted once there are as many as slots
        return (
            not olds.get("problems")
            and bool(olds.get("job"))
            and olds.get("parallelism") == olds.get("replicas")
            and (olds.get("finished_pods") or 0) < (olds.get("replicas") or 1)
        )
    return (
        not olds.get("problems")
        and len(runners) == olds.get("replicas")
        and all(
            (r.get("token_hash"), r.get("spec_hash")) == (olds.get("token_hash"), olds.get("spec_hash"))
            and r.get("pod_phase") not in ENDED_PHASES
            for r in runners
        )
    )


def _inputs(props: dict[str, Any]) -> RunnerInputs:
    return RunnerInputs.of(props, pool=props["pool_name"])


def _pool_spec(props: dict[str, Any], inputs: RunnerInputs, tokens: StartTokens | None = None) -> PoolSpec:
    """``tokens``: what its runners start with (None for just-in-time runners, and to only take them down)."""
    replicas = int(props["replicas"])
    return PoolSpec(
        name=props["pool_name"],
        template=inputs.spec,
        replicas=replicas,
        max_unavailable=max_unavailable_count(props.get("max_unavailable"), replicas),
        tokens=tokens,
    )


def _runner_output(spec: PoolSpec, runner: PoolRunner, runner_version: str | None) -> dict[str, Any]:
    """``runner_version``: the pool's; a runner not yet rotated to the pool's spec keeps the one it recorded."""
    runner_spec_ = spec.runner(runner.name)
    current = runner.spec_hash == spec.template.spec_hash
    return {
        "name": runner.name,
        "id": runner.runner_id,
        "pod": runner_spec_.pod_name,
        "token_hash": runner.token_hash,
        "spec_hash": runner.spec_hash,
        "shape_hash": runner.shape_hash,
        "ephemeral": runner.ephemeral,
        "runner_version": runner_version if current else runner.runner_version,
    }
