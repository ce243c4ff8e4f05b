"""Whether a stack's state is true to the simulator's own records, and nothing of ours is left outside it.

It reads what the GitHub double and the API server hold, never what the provider says, and compares it with the
runners a state lists (lone Runners and each RunnerPool's runners): each has its pod, its Secret and its
registration, with the id, name, token hash and image the state records; every pod, Secret and registration of ours
belongs to one of them. The soak checks this after every round; a test can check it after any scenario.

A RunnerScaleSet's runners are not in the state (its listener makes them between updates): its pods and Secrets
(labelled with the set's name) are judged by the set's own look (`_scale_set_findings`: the set on GitHub, its
listener's objects, its runners within its bounds and registered to the set's current id), and those of a set
the state does not list are leftovers (`_scale_set_leftovers`). The other checks leave out exactly those objects,
and the registrations of the set's runners whose pods the set's look judged; anything else stays theirs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from pulumi_actions_runners.inputs.runner import runner_spec
from pulumi_actions_runners.inputs.runner_version import effective_image
from pulumi_actions_runners.kube.manifests import (
    JOB_LABEL,
    MANAGED_BY,
    POOL_LABEL,
    SPEC_HASH_ANNOTATION,
    TOKEN_HASH_ANNOTATION,
)
from pulumi_actions_runners.kube.refill_manifests import secret_name
from pulumi_actions_runners.kube.scale_set_manifests import (
    COMPONENT_LABEL,
    REMOVED_AT_ANNOTATION,
    RUNNER_ID_ANNOTATION,
    SCALE_SET_LABEL,
    config_of,
    credential_secret_name,
    listener_name,
)

from .simulator import Simulator

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
# The Job controller refills a slot within seconds of its runner's exit: a refilling pool's slots are looked at
# again until then.
REFILLED_WITHIN_SECONDS = 20.0
# A scale set's listener acts between updates: what it owes after the clean runs (its queued jobs served, a
# runner above its bounds retired, a ghost or stuck runner replaced, its pod back after a crash) it has this long
# to do, looked at again until then.
SCALE_SET_SETTLES_WITHIN_SECONDS = 60.0
# A scale set gone from the state: its objects that the garbage collector deletes after their owner (a runner's
# Secret after its pod, the listener's ReplicaSet after its Deployment) are looked at again for this long.
COLLECTED_WITHIN_SECONDS = 10.0
# A scale set's objects besides pods and Secrets, as (API group's client, kind, list call).
_SCALE_SET_KINDS = (
    ("core", "ConfigMap", "list_namespaced_config_map"),
    ("core", "ServiceAccount", "list_namespaced_service_account"),
    ("apps", "Deployment", "list_namespaced_deployment"),
    ("apps", "ReplicaSet", "list_namespaced_replica_set"),
    ("rbac", "Role", "list_namespaced_role"),
    ("rbac", "RoleBinding", "list_namespaced_role_binding"),
)


@dataclass(frozen=True)
class StateRunner:
    """One runner as the state records it."""

    resource: str  # the resource's name, and the runner's within a pool
    name: str
    runner_id: int | None
    pod: str
    secret: str
    token_hash: str | None
    spec_hash: str | None
    image: str


@dataclass(frozen=True)
class RefillingPool:
    """A refilling RunnerPool as the state records it: its runners are whatever pods its Job runs."""

    resource: str
    pool_name: str
    job: str | None
    replicas: int
    image: str
    spec_hash: str | None


@dataclass(frozen=True)
class StateScaleSet:
    """A RunnerScaleSet as the state records it: the set, its bounds and its runners' spec."""

    resource: str
    scale_set_name: str
    scale_set_id: int
    min_runners: int
    max_runners: int
    labels: tuple[str, ...]
    spec_hash: str | None


@dataclass(frozen=True)
class Finding:
    kind: str  # "leaked" (ours, outside the state), "missing" (in the state, not there), "untrue" (differs)
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


def state_runners(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[StateRunner]:
    """The runners of a state given as (type, name, outputs) per resource."""
    runners = []
    for type_, name, outputs in resources:
        if type_.endswith(":Runner"):
            runner_id = outputs.get("runner_id")
            runners.append(
                StateRunner(
                    name,
                    outputs["runner_name"],
                    int(runner_id) if runner_id is not None else None,
                    outputs["pod_name"],
                    outputs["secret_name"],
                    outputs.get("token_hash"),
                    runner_spec(dict(outputs), outputs["runner_name"]).spec_hash,
                    effective_image(outputs),
                )
            )
        elif type_.endswith(":RunnerPool") and outputs.get("refill") is not True:
            for runner in outputs.get("runners") or []:
                runner_id = runner.get("id")
                runners.append(
                    StateRunner(
                        f"{name}/{runner['name']}",
                        runner["name"],
                        int(runner_id) if runner_id is not None else None,
                        runner["pod"],
                        f"{runner['name']}-registration",
                        runner.get("token_hash"),
                        runner.get("spec_hash"),
                        effective_image(outputs),
                    )
                )
    return runners


def refilling_pools(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[RefillingPool]:
    return [
        RefillingPool(
            name,
            outputs["pool_name"],
            outputs.get("job"),
            int(outputs["replicas"]),
            effective_image(outputs),
            outputs.get("spec_hash"),
        )
        for type_, name, outputs in resources
        if type_.endswith(":RunnerPool") and outputs.get("refill") is True
    ]


def state_scale_sets(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[StateScaleSet]:
    return [
        StateScaleSet(
            name,
            outputs["scale_set_name"],
            int(outputs["scale_set_id"]),
            int(outputs["min_runners"]),
            int(outputs["max_runners"]),
            tuple(outputs.get("labels") or ()),
            outputs.get("spec_hash"),
        )
        for type_, name, outputs in resources
        if type_.endswith(":RunnerScaleSet")
    ]


def unconverged_pools(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[Finding]:
    """Pools whose state is not what was asked for: problems left, another number of runners than ``replicas``,
    runners of another token or spec than the pool's."""
    findings = []
    for type_, name, outputs in resources:
        if not type_.endswith(":RunnerPool"):
            continue
        runners = outputs.get("runners") or []
        if outputs.get("problems"):
            findings.append(Finding("untrue", f"{name}: problems left: {outputs['problems']}"))
        if outputs.get("refill") is True:  # its runners come and go: its Job is what converges
            if not outputs.get("job") or outputs.get("parallelism") != outputs.get("replicas"):
                findings.append(
                    Finding("untrue", f"{name}: Job {outputs.get('job')} runs {outputs.get('parallelism')} pods")
                )
            continue
        if len(runners) != outputs.get("replicas"):
            findings.append(Finding("untrue", f"{name}: {len(runners)} runners, replicas {outputs.get('replicas')}"))
        stale = [
            r["name"]
            for r in runners
            if (r.get("token_hash"), r.get("spec_hash")) != (outputs.get("token_hash"), outputs.get("spec_hash"))
        ]
        if stale:
            findings.append(Finding("untrue", f"{name}: runners of another token or spec: {', '.join(stale)}"))
    return findings


def audit(
    sim: Simulator,
    expected: list[StateRunner],
    *,
    namespace: str,
    foreign_ids: Iterable[int],
    refilling: Iterable[RefillingPool] = (),
    scale_sets: Iterable[StateScaleSet] = (),
) -> list[Finding]:
    """What differs between the state's runners and the records; registrations of ``foreign_ids`` (runners
    the stack does not manage) must be there, untouched, and are nobody's leak. ``refilling``: pools whose
    runners are the pods of a Job (see `_refill_findings`). ``scale_sets``: the state's RunnerScaleSets (see
    `_scale_set_findings`); whatever is left of a scale set the state does not list is a leak."""
    findings: list[Finding] = []
    foreign = set(foreign_ids)
    scale_sets = list(scale_sets)
    for scale_set in scale_sets:
        findings += _scale_set_findings(sim, scale_set, namespace)
    findings += _scale_set_leftovers(sim, scale_sets, namespace)
    ours = {MANAGED_BY_LABEL: MANAGED_BY}
    # A scale set's pods and Secrets were judged just now, by its look or as leftovers: not the runners' checks'.
    pods = {p["metadata"]["name"]: p for p in sim.kube.pods(namespace) if _labelled(p, ours) and not _of_a_scale_set(p)}
    secrets = {
        s["metadata"]["name"]: s for s in sim.kube.secrets(namespace) if _labelled(s, ours) and not _of_a_scale_set(s)
    }
    registrations = {r["id"]: r for r in sim.github.runners()}
    # Registrations of a state's scale set's runners, whose pods its look judged; any other is judged below.
    set_runners = _scale_set_runner_registrations(sim, scale_sets, namespace)
    registrations = {i: r for i, r in registrations.items() if i not in set_runners}
    for pool in refilling:
        pool_findings, accounted, runners = _refill_findings(sim, pool, namespace)
        findings += pool_findings
        pods = {name: pod for name, pod in pods.items() if name not in accounted}
        secrets = {name: secret for name, secret in secrets.items() if name not in accounted}
        registrations = {i: r for i, r in registrations.items() if r["name"] not in runners}

    for missing_id in sorted(foreign - registrations.keys()):
        findings.append(Finding("untrue", f"foreign registration {missing_id} was removed"))
    wanted_pods = {r.pod: r for r in expected}
    wanted_secrets = {r.secret for r in expected}
    wanted_ids = {r.runner_id for r in expected if r.runner_id is not None}
    for name in sorted(pods.keys() - wanted_pods.keys()):
        findings.append(Finding("leaked", f"pod {name} ({_phase(pods[name])}) belongs to no resource in the state"))
    for name in sorted(secrets.keys() - wanted_secrets):
        findings.append(Finding("leaked", f"Secret {name} belongs to no resource in the state"))
    for runner_id in sorted(registrations.keys() - wanted_ids - foreign):
        registration = registrations[runner_id]
        findings.append(
            Finding(
                "leaked",
                f"registration {runner_id} ({registration['name']}, {registration['status']}) belongs to no "
                "resource in the state",
            )
        )
    for runner in expected:
        findings += _runner_findings(runner, pods.get(runner.pod), runner.secret in secrets, registrations)
    return findings


def _runner_findings(
    runner: StateRunner, pod: dict[str, Any] | None, has_secret: bool, registrations: Mapping[int, dict[str, Any]]
) -> list[Finding]:
    found = []
    if pod is None:
        found.append(Finding("missing", f"{runner.resource}: pod {runner.pod} does not exist"))
    else:
        annotations = pod["metadata"].get("annotations") or {}
        for what, annotation, recorded in (
            ("token hash", TOKEN_HASH_ANNOTATION, runner.token_hash),
            ("spec hash", SPEC_HASH_ANNOTATION, runner.spec_hash),
        ):
            if annotations.get(annotation) != recorded:
                found.append(
                    Finding("untrue", f"{runner.resource}: {what} {recorded}, pod has {annotations.get(annotation)}")
                )
        images = [c["image"] for c in pod["spec"]["containers"] if c["name"] == "runner"]
        if images != [runner.image]:
            found.append(Finding("untrue", f"{runner.resource}: image {runner.image}, pod runs {images}"))
        if _phase(pod) != "Running" or pod["metadata"].get("deletionTimestamp"):
            found.append(Finding("untrue", f"{runner.resource}: pod {runner.pod} is {_phase(pod)}, not running"))
    if not has_secret:
        found.append(Finding("missing", f"{runner.resource}: Secret {runner.secret} does not exist"))
    registration = registrations.get(runner.runner_id) if runner.runner_id is not None else None
    if registration is None:
        found.append(Finding("missing", f"{runner.resource}: registration {runner.runner_id} does not exist"))
    elif registration["name"] != runner.name:
        found.append(Finding("untrue", f"{runner.resource}: registration {runner.runner_id} is {registration['name']}"))
    elif registration["status"] != "online":
        found.append(Finding("untrue", f"{runner.resource}: registration {runner.runner_id} is offline"))
    return found


def _refill_findings(sim: Simulator, pool: RefillingPool, namespace: str) -> tuple[list[Finding], set[str], set[str]]:
    """A refilling pool is true when its Job is the state's, of its image and spec, running ``replicas`` pods
    whose runners are online (looked at again for up to REFILLED_WITHIN_SECONDS: a slot whose runner has just
    exited is being refilled), with its Secret. Pods of other generations may only finish a job; finished pods
    may stay until as many as slots (an update deletes them then), with no registration left of their runners.
    Returns the findings, the names of the pods and Secret so accounted for, and the runners that may be
    registered (those of running pods)."""
    deadline = time.monotonic() + REFILLED_WITHIN_SECONDS
    while True:
        findings, accounted, runners = _refill_look(sim, pool, namespace)
        if not findings or time.monotonic() >= deadline:
            return findings, accounted, runners
        time.sleep(0.5)


def _refill_look(sim: Simulator, pool: RefillingPool, namespace: str) -> tuple[list[Finding], set[str], set[str]]:
    findings: list[Finding] = []
    jobs = {j["metadata"]["name"]: j for j in sim.kube.jobs(namespace) if _labelled(j, {POOL_LABEL: pool.pool_name})}
    pods = [
        p
        for p in sim.kube.pods(namespace)
        if _labelled(p, {POOL_LABEL: pool.pool_name}) and JOB_LABEL in p["metadata"]["labels"]
    ]
    online = {r["name"]: r for r in sim.github.runners() if r["status"] == "online"}
    job = jobs.get(pool.job or "")
    if job is None:
        findings.append(Finding("missing", f"{pool.resource}: Job {pool.job} does not exist"))
    else:
        template = job["spec"]["template"]["spec"]
        images = [c["image"] for c in template["containers"] if c["name"] == "runner"]
        if images != [pool.image] or job["metadata"]["annotations"].get(SPEC_HASH_ANNOTATION) != pool.spec_hash:
            findings.append(Finding("untrue", f"{pool.resource}: Job {pool.job} runs {images}, not as the state says"))
        if job["spec"]["parallelism"] != pool.replicas:
            findings.append(
                Finding("untrue", f"{pool.resource}: Job {pool.job} runs {job['spec']['parallelism']} pods")
            )
    for other in sorted(jobs.keys() - {pool.job}):
        findings.append(Finding("leaked", f"{pool.resource}: Job {other} is not the state's"))
    finished = [p for p in pods if _phase(p) in ("Succeeded", "Failed")]
    running = [p for p in pods if p not in finished and not p["metadata"].get("deletionTimestamp")]
    serving = [p for p in running if p["metadata"]["labels"][JOB_LABEL] == pool.job]
    registered = [p for p in serving if p["metadata"]["name"] in online]
    if len(registered) != pool.replicas:
        findings.append(
            Finding("missing", f"{pool.resource}: {len(registered)} of {pool.replicas} slots hold a runner")
        )
    for pod in running:
        name = pod["metadata"]["name"]
        if pod not in serving and not (online.get(name) or {}).get("busy"):
            findings.append(Finding("leaked", f"{pool.resource}: pod {name} of an older Job runs no job"))
    if len(finished) > pool.replicas:
        findings.append(Finding("leaked", f"{pool.resource}: {len(finished)} finished pods, more than its slots"))
    secrets = {s["metadata"]["name"] for s in sim.kube.secrets(namespace) if _labelled(s, {POOL_LABEL: pool.pool_name})}
    if pool.job and secret_name(pool.job) not in secrets:
        findings.append(Finding("missing", f"{pool.resource}: Secret {secret_name(pool.job)} does not exist"))
    accounted = {p["metadata"]["name"] for p in pods} | ({secret_name(pool.job)} if pool.job else set())
    return findings, accounted, {p["metadata"]["name"] for p in running}


# --- RunnerScaleSets --------------------------------------------------------------------------------------------


def _scale_set_findings(sim: Simulator, scale_set: StateScaleSet, namespace: str) -> list[Finding]:
    """A scale set of the state is true when, after its listener has had the time to act on what it was told
    (looked at again for up to SCALE_SET_SETTLES_WITHIN_SECONDS): the jobs queued for it have been served; GitHub
    has one set of its name, of the state's id and labels; its listener's objects are there, its ConfigMap
    telling the state's id, bounds and spec, its pod running; its runner pods are at most ``max_runners``, at
    least ``min_runners`` of them serving, each of the state's spec, registered to the set of the state's id and
    online, none ended, retiring or terminating still; each runner Secret belongs to a pod of the set."""
    deadline = time.monotonic() + SCALE_SET_SETTLES_WITHIN_SECONDS
    with sim.kube.api_server.admin_client() as admin:
        while True:
            findings = _scale_set_look(sim, admin, scale_set, namespace)
            if not findings or time.monotonic() >= deadline:
                return findings
            time.sleep(0.5)


def _scale_set_look(sim: Simulator, admin: Any, scale_set: StateScaleSet, namespace: str) -> list[Finding]:
    findings: list[Finding] = []
    name, where = scale_set.scale_set_name, scale_set.resource

    waiting = [j["id"] for j in sim.github.jobs("queued") if name.lower() in {x.lower() for x in j["labels"]}]
    if waiting:
        findings.append(Finding("missing", f"{where}: {len(waiting)} jobs queued for {name} wait for a runner"))

    sets = [s for s in sim.github.service.scale_sets() if s["name"].lower() == name.lower()]
    if [s["id"] for s in sets] != [scale_set.scale_set_id]:
        findings.append(
            Finding("untrue", f"{where}: scale set id {scale_set.scale_set_id}, GitHub has {[s['id'] for s in sets]}")
        )
    elif {label["name"] for label in sets[0]["labels"]} != {name, *scale_set.labels}:
        labels = sorted(label["name"] for label in sets[0]["labels"])
        findings.append(Finding("untrue", f"{where}: labels {list(scale_set.labels)}, GitHub has {labels}"))

    own = _scale_set_objects(admin, namespace, name)
    wanted = [(kind, listener_name(name)) for _, kind, _ in _SCALE_SET_KINDS if kind != "ReplicaSet"]
    for kind, object_name in [*wanted, ("Secret", credential_secret_name(name))]:
        if object_name not in {o["metadata"]["name"] for o in own.get(kind, [])}:
            findings.append(Finding("missing", f"{where}: {kind} {object_name} does not exist"))
    config_maps = [c for c in own.get("ConfigMap", []) if c["metadata"]["name"] == listener_name(name)]
    if config_maps:
        config = config_of(config_maps[0].get("data"))  # the id the listener wrote of a set it made again wins
        told = (config.scale_set_id, config.min_runners, config.max_runners, config.runner.spec_hash) if config else ()
        state = (scale_set.scale_set_id, scale_set.min_runners, scale_set.max_runners, scale_set.spec_hash)
        if told != state:
            findings.append(Finding("untrue", f"{where}: its ConfigMap tells (id, min, max, spec) {told}, not {state}"))

    pods = own.get("Pod", [])
    listeners = [p for p in pods if _component(p) == "listener" and not p["metadata"].get("deletionTimestamp")]
    running = [p for p in listeners if _phase(p) == "Running" and _container_running(p, "listener")]
    if len(listeners) != 1 or len(running) != 1:
        phases = [f"{p['metadata']['name']} {_phase(p)}" for p in listeners]
        findings.append(Finding("untrue", f"{where}: its listener pods are {phases or 'none'}, not one running"))

    registrations = _registrations_with_sets(sim)
    runners = [p for p in pods if _component(p) == "runner"]
    up = [p for p in runners if _phase(p) not in ("Succeeded", "Failed")]
    if len(up) > scale_set.max_runners:
        findings.append(Finding("untrue", f"{where}: {len(up)} runner pods, above max_runners {scale_set.max_runners}"))
    serving = 0
    for pod in runners:
        pod_name, annotations = pod["metadata"]["name"], pod["metadata"].get("annotations") or {}
        if pod not in up:
            findings.append(Finding("leaked", f"{where}: runner pod {pod_name} ({_phase(pod)}) ended, not cleaned"))
            continue
        if pod["metadata"].get("deletionTimestamp") or annotations.get(REMOVED_AT_ANNOTATION):
            findings.append(Finding("leaked", f"{where}: runner pod {pod_name} ({_phase(pod)}) is still retiring"))
            continue
        if annotations.get(SPEC_HASH_ANNOTATION) != scale_set.spec_hash:
            findings.append(Finding("untrue", f"{where}: runner pod {pod_name} is of an earlier spec"))
        runner_id = annotations.get(RUNNER_ID_ANNOTATION, "")
        registration = registrations.get(int(runner_id)) if runner_id.isdigit() else None
        if registration is None or registration["name"] != pod_name:
            findings.append(Finding("untrue", f"{where}: runner pod {pod_name}: registration {runner_id} not there"))
        elif registration["scale_set_id"] != scale_set.scale_set_id:
            findings.append(
                Finding(
                    "untrue",
                    f"{where}: runner pod {pod_name}: registration {runner_id} is of scale set "
                    f"{registration['scale_set_id']}, not {scale_set.scale_set_id}",
                )
            )
        elif registration["status"] != "online" or _phase(pod) != "Running":
            findings.append(
                Finding("untrue", f"{where}: runner pod {pod_name} is {_phase(pod)}, {registration['status']}")
            )
        else:
            serving += 1
    if serving < scale_set.min_runners:
        findings.append(Finding("missing", f"{where}: {serving} runners serving, min_runners {scale_set.min_runners}"))
    runner_names = {p["metadata"]["name"] for p in runners}
    for secret in own.get("Secret", []):
        secret_name_ = secret["metadata"]["name"]
        if (
            secret_name_ != credential_secret_name(name)
            and secret_name_.removesuffix("-registration") not in runner_names
        ):
            findings.append(Finding("leaked", f"{where}: Secret {secret_name_} belongs to no runner pod of the set"))
    return findings


def _scale_set_leftovers(sim: Simulator, scale_sets: list[StateScaleSet], namespace: str) -> list[Finding]:
    """What is left of scale sets the state does not list: objects labelled with another set's name, sets on
    GitHub of another id (looked at again for up to COLLECTED_WITHIN_SECONDS: the garbage collector's part)."""
    names = {s.scale_set_name for s in scale_sets}
    ids = {s.scale_set_id for s in scale_sets}
    deadline = time.monotonic() + COLLECTED_WITHIN_SECONDS
    with sim.kube.api_server.admin_client() as admin:
        while True:
            findings = [
                Finding("leaked", f"scale set {s['name']} (id {s['id']}) on GitHub belongs to no resource in the state")
                for s in sim.github.service.scale_sets()
                if s["id"] not in ids
            ]
            for kind, items in _scale_set_objects(admin, namespace, None).items():
                for item in items:
                    of = item["metadata"]["labels"][SCALE_SET_LABEL]
                    if of not in names:
                        findings.append(
                            Finding(
                                "leaked",
                                f"{kind} {item['metadata']['name']} of scale set {of} belongs to no resource in the "
                                "state",
                            )
                        )
            if not findings or time.monotonic() >= deadline:
                return findings
            time.sleep(0.5)


def _scale_set_runner_registrations(sim: Simulator, scale_sets: list[StateScaleSet], namespace: str) -> set[int]:
    """The ids of registrations to the state's scale sets (their current ids) of runners whose pods are there."""
    pods = {
        (p["metadata"]["labels"][SCALE_SET_LABEL], p["metadata"]["name"])
        for p in sim.kube.pods(namespace)
        if _of_a_scale_set(p) and _component(p) == "runner"
    }
    by_id = {s.scale_set_id: s.scale_set_name for s in scale_sets}
    return {
        runner_id
        for runner_id, registration in _registrations_with_sets(sim).items()
        if registration["scale_set_id"] in by_id and (by_id[registration["scale_set_id"]], registration["name"]) in pods
    }


def _registrations_with_sets(sim: Simulator) -> dict[int, dict[str, Any]]:
    """Every registration with the scale set it belongs to (``scale_set_id``, None: none), as the Actions
    service's agent look-up tells it (runnerScaleSetId); GitHub's REST listing does not say, so this asks the
    double's registry, whose record it is."""
    registry = sim.github._registry
    scopes = {r["scope"] for r in sim.github.runners()}
    return {r["id"]: r for scope in scopes for r in registry.runners_of(scope)}


def _scale_set_objects(admin: Any, namespace: str, scale_set_name: str | None) -> dict[str, list[dict[str, Any]]]:
    """Our objects of one scale set (None: of any), by kind, as the API server holds them."""
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{SCALE_SET_LABEL}" + (f"={scale_set_name}" if scale_set_name else "")
    apis = {
        "core": client.CoreV1Api(admin),
        "apps": client.AppsV1Api(admin),
        "rbac": client.RbacAuthorizationV1Api(admin),
    }
    kinds = [*_SCALE_SET_KINDS, ("core", "Pod", "list_namespaced_pod"), ("core", "Secret", "list_namespaced_secret")]
    found = {}
    for api, kind, call in kinds:
        response = getattr(apis[api], call)(namespace, label_selector=selector, _preload_content=False)
        found[kind] = list(json.loads(response.data)["items"])
    return found


def _of_a_scale_set(item: dict[str, Any]) -> bool:
    return SCALE_SET_LABEL in (item["metadata"].get("labels") or {})


def _component(item: dict[str, Any]) -> str | None:
    return (item["metadata"].get("labels") or {}).get(COMPONENT_LABEL)


def _container_running(pod: dict[str, Any], container: str) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses", [])
    return any(s["name"] == container and (s.get("state") or {}).get("running") for s in statuses)


def _labelled(item: dict[str, Any], labels: Mapping[str, str]) -> bool:
    own = item["metadata"].get("labels") or {}
    return all(own.get(key) == value for key, value in labels.items())


def _phase(pod: dict[str, Any]) -> str:
    phase = pod.get("status", {}).get("phase", "Pending")
    return f"{phase}, terminating" if pod["metadata"].get("deletionTimestamp") else phase
