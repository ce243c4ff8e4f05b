"""Whether a stack's state is true to the simulator's own records, and nothing of ours is left outside it.

It reads what the GitHub double and the API server hold, never what the provider says, and compares it with the
runners a state lists (lone Runners and each RunnerPool's runners): each has its pod, its Secret and its
registration, with the id, name, token hash and image the state records; every pod, Secret and registration of ours
belongs to one of them. The soak checks this after every round; a test can check it after any scenario.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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

from .simulator import Simulator

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
# The Job controller refills a slot within seconds of its runner's exit: a refilling pool's slots are looked at
# again until then.
REFILLED_WITHIN_SECONDS = 20.0


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
) -> list[Finding]:
    """What differs between the state's runners and the records; registrations of ``foreign_ids`` (runners
    the stack does not manage) must be there, untouched, and are nobody's leak. ``refilling``: pools whose
    runners are the pods of a Job (see `_refill_findings`)."""
    findings: list[Finding] = []
    foreign = set(foreign_ids)
    ours = {MANAGED_BY_LABEL: MANAGED_BY}
    pods = {p["metadata"]["name"]: p for p in sim.kube.pods(namespace) if _labelled(p, ours)}
    secrets = {s["metadata"]["name"]: s for s in sim.kube.secrets(namespace) if _labelled(s, ours)}
    registrations = {r["id"]: r for r in sim.github.runners()}
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


def _labelled(item: dict[str, Any], labels: Mapping[str, str]) -> bool:
    own = item["metadata"].get("labels") or {}
    return all(own.get(key) == value for key, value in labels.items())


def _phase(pod: dict[str, Any]) -> str:
    phase = pod.get("status", {}).get("phase", "Pending")
    return f"{phase}, terminating" if pod["metadata"].get("deletionTimestamp") else phase
