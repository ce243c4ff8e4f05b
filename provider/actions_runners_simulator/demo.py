"""The guided tour on the real pulumi CLI: runners created, a token rotation previewed as pending recreations,
then a replacement while one runner is busy; then a RunnerPool rotated in one update; then a refilling pool
whose slot is refilled after a job with no `pulumi up`. The simulator runs as its own local process.

The busy runner's job is held until the update has been seen waiting on it (RemoveRunner answered 422), and only
then released, so the tour shows the busy guard on any machine however slow. Every sentence it prints about what
happened is computed from the simulator's records (GitHub calls, pod events, jobs lost), and the tour fails if
they show the busy runner unprotected (`judge`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from kubernetes import client, config

from pulumi_actions_runners.kube.manifests import RUNNER_LABEL

from . import control
from .simulator import program_credentials
from .tools import TOOLS, ToolBuilds, ToolMissing
from .workspace import PulumiFailed, PulumiProcess, PulumiWorkspace, provider_plugin, yaml_host

PROJECT_DIR = Path(__file__).resolve().parents[2]
GRACE_SECONDS = 2.0
TOKEN_LIFETIME_SECONDS = 2400.0  # GitHub's tokens live an hour; 40 minutes let the tour skip the wait
RENEW_BEFORE_SECONDS = 3000  # more than the token has left: it is due for renewal at once
FLEET_RUNNERS = 20
REFUSAL_TIMEOUT_SECONDS = 120.0  # for the update to ask GitHub to remove the busy runner
HOLD_AFTER_REFUSAL_SECONDS = 5.0  # the job stays held this long after the first 422, its pod watched throughout
POLL_SECONDS = 0.25
REFILL_TIMEOUT_SECONDS = 60.0  # for a fresh runner in the slot of one that took its job (seconds, in practice)
POD_DELETIONS = ("pod_terminating", "container_killed", "pod_removed")  # the kubelet stand-in's event types
Json = dict[str, Any]


class DemoFailed(Exception):
    """The records contradict what the tour set out to show; the message says how."""


@dataclass(frozen=True)
class HeldJob:
    """A job held on one runner from ``held_at`` to ``released_at`` (the machine's monotonic clock, which the
    simulator's records use too)."""

    runner_name: str
    runner_id: int
    ephemeral: bool
    pod_name: str
    held_at: float
    released_at: float


@dataclass(frozen=True)
class Outcome:
    """What the simulator's records say happened to a held job's runner during one update."""

    refusals: int  # its RemoveRunner calls answered 422
    all_refusals: int  # RemoveRunner calls answered 422, for any runner
    first_refusal_at: float | None
    unregistered: tuple[int, float] | None  # (status, time) of its first RemoveRunner answered 204 or 404
    pod_deleted_at: float | None  # its pod's first deletion event
    others_unregistered_while_held: int  # other runners' RemoveRunner calls answered 204 before the release
    jobs_lost: int
    problems: tuple[str, ...]


def judge(job: HeldJob, calls: Sequence[Json], kube_events: Sequence[Json], jobs_lost: int) -> Outcome:
    """Whether the busy runner was protected: refused (422) while busy, unregistered and its pod deleted only
    after its job was released, and no job lost. ``calls`` and ``kube_events`` are the simulator's records."""
    removals = [c for c in calls if c["method"] == "DELETE" and "/actions/runners/" in c["path"]]
    removals = [c for c in removals if c["at"] >= job.held_at]
    own = [c for c in removals if c["path"].endswith(f"/actions/runners/{job.runner_id}")]
    others = [c for c in removals if not c["path"].endswith(f"/actions/runners/{job.runner_id}")]
    refused = [c for c in own if c["status"] == 422]
    unregistered = next(((c["status"], c["at"]) for c in own if c["status"] in (204, 404)), None)
    deleted = [e["at"] for e in kube_events if e["name"] == job.pod_name and e["type"] in POD_DELETIONS]
    pod_deleted_at = min((moment for moment in deleted if moment >= job.held_at), default=None)
    problems = []
    if not refused:
        problems.append(f"RemoveRunner never answered 422 for {job.runner_name}: the update did not wait on it")
    if unregistered is None:
        problems.append(f"no RemoveRunner of {job.runner_name} answered 204 or 404: it was not seen unregistered")
    elif unregistered[1] < job.released_at:
        early = job.released_at - unregistered[1]
        problems.append(f"{job.runner_name} was unregistered {early:.1f} s before its job was released")
    if pod_deleted_at is None:
        problems.append(f"pod {job.pod_name} was not seen deleted")
    elif pod_deleted_at < job.released_at:
        early = job.released_at - pod_deleted_at
        problems.append(f"pod {job.pod_name} was deleted {early:.1f} s before its job was released")
    if jobs_lost:
        problems.append(f"{jobs_lost} job(s) lost (the simulator's jobs_killed)")
    return Outcome(
        refusals=len(refused),
        all_refusals=sum(c["status"] == 422 for c in removals),
        first_refusal_at=refused[0]["at"] if refused else None,
        unregistered=unregistered,
        pod_deleted_at=pod_deleted_at,
        others_unregistered_while_held=sum(c["status"] == 204 and c["at"] < job.released_at for c in others),
        jobs_lost=jobs_lost,
        problems=tuple(problems),
    )


def pod_problem(pod: Json | None, uid: str) -> str | None:
    """Why a pod (``V1Pod.to_dict()``, None if not found) is not the one left running, untouched; None if it is."""
    if pod is None:
        return "it is gone"
    if pod["metadata"]["uid"] != uid:
        return "it was replaced by another pod of the name"
    if pod["metadata"].get("deletion_timestamp"):
        return "it is terminating"
    if pod["status"]["phase"] != "Running":
        return f"it is {pod['status']['phase']}, not Running"
    return None


class SimulatorProcess:
    """`python -m actions_runners_simulator serve` in a process of its own, as a user would run it, seen through
    its control endpoints, its Kubernetes API (the official client) and its reports."""

    def __init__(self, kube_bin_dir: Path) -> None:
        command = [sys.executable, "-m", "actions_runners_simulator", "serve"]  # it makes the runners' namespace
        self._process = subprocess.Popen(
            [*command, "--token-lifetime", str(TOKEN_LIFETIME_SECONDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, TOOLS["kube"].variable: str(kube_bin_dir)},
        )
        self.info: Json = json.loads(self._readline())
        self.control = control.control_url(self.info)
        self._kube = config.new_client_from_config(config_file=self.info["kubeconfig"], persist_config=False)
        self._pods = client.CoreV1Api(self._kube)

    def _readline(self) -> str:
        line = self._process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise DemoFailed(f"the simulator exited ({self._process.wait()}) instead of answering")
        return line

    def report(self) -> Json:
        """Jobs lost so far and every pod event, from the simulator itself."""
        self._process.stdin.write("report\n")  # type: ignore[union-attr]
        self._process.stdin.flush()  # type: ignore[union-attr]
        return json.loads(self._readline())

    def get(self, what: str) -> Any:
        response = requests.get(f"{self.control}/{what}", timeout=10)
        response.raise_for_status()
        return response.json()

    def job(self, action: str, runner_name: str) -> requests.Response:
        """Start a held job on the runner (``jobs``), or end it (``jobs/finish``)."""
        return control.post_job(self.control, action, runner_name)

    def runner_pod(self, runner_name: str) -> Json:
        """The one pod labelled with the runner's name."""
        selector = f"{RUNNER_LABEL}={runner_name}"
        [pod] = self._pods.list_namespaced_pod(self.info["namespace"], label_selector=selector).to_dict()["items"]
        return pod

    def read_pod(self, name: str) -> Json | None:
        try:
            return self._pods.read_namespaced_pod(name, self.info["namespace"]).to_dict()
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def stop(self) -> Json:
        """The final report, printed as it exits."""
        self._kube.close()
        self._process.terminate()
        return json.loads(self._process.communicate(timeout=30)[0].strip().splitlines()[-1])


def banner(text: str) -> None:
    print(f"\n\033[1m$ {text}\033[0m", flush=True)


def run(runners: int = 3, *, github_app: bool = False) -> int:
    # Found, or all built at once (a first build takes minutes, and says so); each step waits only for its own.
    tools = ToolBuilds("kube", "pulumi", "pulumi-yaml")
    try:
        simulator = SimulatorProcess(tools.get("kube"))
    except BaseException:
        tools.stop()  # the other builds, which nobody will wait for now
        raise
    failure = None
    try:
        sim = simulator.info
        print(f"Simulator: GitHub runner API at {sim['github_api_url']}, Kubernetes API server at {sim['kube_api']}")
        if github_app:
            print(f"Authenticating as GitHub App {sim['github_app_id']}, not with a personal access token")
            app_key = Path(sim["github_app_private_key_file"]).read_text()
            sim["credentials"] = program_credentials(sim["github_token"], (sim["github_app_id"], app_key))
        with PulumiWorkspace(PROJECT_DIR, tools.get("pulumi"), skip_preview=False) as stack:
            tour(stack, simulator, runners)
        with yaml_workspace(tools, simulator, "fleet") as stack:
            fleet_tour(stack, simulator, FLEET_RUNNERS)
        with PulumiWorkspace(PROJECT_DIR, tools.get("pulumi"), stack="refill", skip_preview=False) as stack:
            refill_tour(stack, simulator, runners)
    except (DemoFailed, PulumiFailed, ToolMissing) as error:  # a build still under way may fail
        failure = str(error)
    finally:
        tools.stop()
        summary = simulator.stop()
    print(f"\nJobs lost in the whole tour (the simulator's jobs_killed at exit): {len(summary['jobs_killed'])}")
    if summary["jobs_killed"] and not failure:
        failure = f"jobs were lost on {', '.join(summary['jobs_killed'])}"
    if failure:
        print(f"\nDEMO FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


def new_stack(stack: PulumiWorkspace, sim: Json, runners: int, **settings: str) -> None:
    config, secrets = sim.get("credentials") or program_credentials(sim["github_token"])
    stack.new_stack(
        config={
            "githubUrl": sim["github_url"],
            "kubeconfig": sim["kubeconfig"],
            "namespace": sim["namespace"],
            "createNamespace": "false",  # serve made it, as a cluster admin would
            "runners": str(runners),
            "gracePeriodSeconds": str(GRACE_SECONDS),
            **config,
            **settings,
        },
        secrets=secrets,
    )


def yaml_workspace(tools: ToolBuilds, simulator: SimulatorProcess, stack: str) -> PulumiWorkspace:
    """programs/yaml, with Pulumi's YAML host and the provider plugin (this environment's
    pulumi-resource-actions-runners) installed as plugins, and the simulator's cluster as KUBECONFIG."""
    plugins = yaml_host(tools.get("pulumi-yaml")) | provider_plugin()
    workspace = PulumiWorkspace(
        PROJECT_DIR / "programs" / "yaml", tools.get("pulumi"), stack=stack, plugins=plugins, skip_preview=False
    )
    workspace.env["KUBECONFIG"] = simulator.info["kubeconfig"]
    return workspace


def tour(stack: PulumiWorkspace, simulator: SimulatorProcess, runners: int) -> None:
    new_stack(stack, simulator.info, runners)
    banner("pulumi up --yes")
    print(stack.run("up", "--yes").stdout)
    for runner in simulator.get("runners"):
        print(f"  GitHub lists {runner['name']} (id {runner['id']}): {runner['status']}")

    banner("pulumi preview   # nothing changed: nothing to do")
    print(stack.run("preview").stdout)

    lifetime = TOKEN_LIFETIME_SECONDS / 60
    print(f"\nFast-forward: the simulator's token lives {lifetime:.0f} minutes; asking for renewal when less than")
    print(f"{RENEW_BEFORE_SECONDS} s remain puts it inside its renewal window at once, as waiting would with the")
    print("default of 1800 s.")
    busy = simulator.get("runners")[0]
    rotate(stack, simulator, busy, "replaces every runner; the busy one must wait for its job")

    banner("pulumi destroy --yes")
    print(stack.run("destroy", "--yes").stdout)
    print(f"  registrations left on GitHub: {len(simulator.get('runners'))}")


def fleet_tour(stack: PulumiWorkspace, simulator: SimulatorProcess, runners: int) -> None:
    print(f"\nA fleet: one RunnerPool of {runners} runners, all replaceable at once, from programs/yaml (Pulumi YAML")
    print("through the provider plugin, pulumi-resource-actions-runners).")
    sim = simulator.info
    stack.new_stack(
        config={
            "githubUrl": sim["github_url"],
            "namespace": sim["namespace"],
            "runners": str(runners),
            "gracePeriodSeconds": str(int(GRACE_SECONDS)),
            "maxUnavailable": "100%",
        },
        secrets={"githubToken": sim["github_token"]},  # programs/yaml takes a token (a GitHub App: programs/runners)
    )
    banner("pulumi up --yes")
    print(stack.run("up", "--yes").stdout)

    busy = next(r for r in simulator.get("runners") if r["status"] == "online")
    rotate(stack, simulator, busy, f"rotates all {runners} runners concurrently; the busy one must wait")

    banner("pulumi destroy --yes")
    print(stack.run("destroy", "--yes").stdout)
    print(f"  registrations left on GitHub: {len(simulator.get('runners'))}")


def refill_tour(stack: PulumiWorkspace, simulator: SimulatorProcess, runners: int) -> None:
    """A refilling pool: a runner takes a job and exits after it, and Kubernetes' Job controller starts a fresh
    one in its slot, with no `pulumi up`. The job is ended by the tour (not by a timer), and what it prints is
    read from GitHub's runner listing and the pods' records."""
    print(f"\nA pool that keeps itself full: {runners} runners (pulumi config set refill true), the pods of a Job.")
    new_stack(stack, simulator.info, runners, pool="true", refill="true")
    banner("pulumi up --yes")
    print(stack.run("up", "--yes").stdout)
    before = {r["name"]: r for r in simulator.get("runners") if r["status"] == "online"}
    name = sorted(before)[0]
    answer = simulator.job("jobs", name)
    if answer.status_code != 201:
        raise DemoFailed(f"the simulator would not start a job on {name}: {answer.text}")
    print(f"\nA CI job starts on {name}, and ends; an ephemeral runner exits after its one job.")
    simulator.job("jobs/finish", name)
    ended = time.monotonic()
    deadline = ended + REFILL_TIMEOUT_SECONDS
    while True:
        online = {r["name"]: r for r in simulator.get("runners") if r["status"] == "online"}
        fresh = sorted(online.keys() - before.keys())
        if fresh and name not in online:
            break
        if time.monotonic() >= deadline:
            raise DemoFailed(f"no fresh runner came online in {name}'s slot within {REFILL_TIMEOUT_SECONDS:.0f} s")
        time.sleep(POLL_SECONDS)
    waited = time.monotonic() - ended
    pod = simulator.read_pod(fresh[0]) or {}
    owner = next(iter((pod.get("metadata") or {}).get("owner_references") or []), None)
    if owner is None or owner["kind"] != "Job":
        raise DemoFailed(f"runner {fresh[0]}'s pod was not made by a Job: {owner}")
    print(f"  +{waited:.1f} s  GitHub lists {fresh[0]} online in its slot (id {online[fresh[0]]['id']}): the runner")
    print(f"          of a fresh pod that Job {owner['name']}'s controller started; no pulumi command ran meanwhile.")
    print(f"  GitHub lists {len(online)} runners online, as before the job: {', '.join(sorted(online))}")

    banner("pulumi destroy --yes")
    print(stack.run("destroy", "--yes").stdout)
    print(f"  registrations left on GitHub: {len(simulator.get('runners'))}")


def rotate(stack: PulumiWorkspace, simulator: SimulatorProcess, runner: Json, comment: str) -> None:
    """Hold a job on ``runner``, renew the token and run `pulumi up`, then judge the update by the simulator's
    records; the job is released whatever happens, so that a failed tour leaves no runner busy."""
    name, pod = runner["name"], simulator.runner_pod(runner["name"])
    held_at = time.monotonic()
    answer = simulator.job("jobs", name)
    if answer.status_code != 201:
        raise DemoFailed(f"the simulator would not start a job on {name}: {answer.text}")
    print(f"\nA CI job starts on {name} (pod {pod['metadata']['name']}); the demo holds it until the update is seen")
    print("waiting on it.")
    try:
        banner(f"pulumi config set tokenRefreshBeforeSeconds {RENEW_BEFORE_SECONDS} && pulumi preview")
        stack.run("config", "set", "tokenRefreshBeforeSeconds", str(RENEW_BEFORE_SECONDS))
        print(stack.run("preview").stdout)
        banner("pulumi preview --json | python -m pulumi_actions_runners.report --live   # what a reviewer reads")
        print(preview_report(stack, simulator, name))

        banner(f"pulumi up --yes   # {comment}")
        jobs_lost_before = len(simulator.report()["jobs_killed"])
        started = time.monotonic()
        output, released_at, problems = update_while_held(stack, simulator, runner, pod, started)
    except BaseException:
        simulator.job("jobs/finish", name)  # answered 409 if it was released already
        raise
    elapsed = time.monotonic() - started
    print(output)

    report = simulator.report()
    job = HeldJob(name, runner["id"], runner["ephemeral"], pod["metadata"]["name"], held_at, released_at)
    outcome = judge(job, simulator.get("calls"), report["kube_events"], len(report["jobs_killed"]) - jobs_lost_before)
    print("\n".join(timeline(job, outcome, started, elapsed)))
    problems += outcome.problems
    if problems:
        raise DemoFailed(f"the busy runner {name} was not protected: " + "; ".join(problems))


def preview_report(stack: PulumiWorkspace, simulator: SimulatorProcess, busy: str) -> str:
    """The report of the pending preview, as a pipeline would make it: its --live look asks the simulated GitHub
    (with the simulator's token) which runners to be taken down are busy; the held job's runner must be among
    them."""
    preview = stack.run("preview", "--json").stdout
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_APP_")}
    env["GITHUB_TOKEN"] = simulator.info["github_token"]
    report = subprocess.run(
        [sys.executable, "-m", "pulumi_actions_runners.report", "--live"],
        input=preview,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if report.returncode not in (0, 2):
        raise DemoFailed(f"the report of the preview failed (exit {report.returncode}): {report.stderr.strip()}")
    if not any(line.strip().startswith("busy now:") and busy in line for line in report.stdout.splitlines()):
        raise DemoFailed(f"the report of the preview does not name {busy} busy, though its job is held")
    return report.stdout


def update_while_held(
    stack: PulumiWorkspace, simulator: SimulatorProcess, runner: Json, pod: Json, started: float
) -> tuple[str, float, list[str]]:
    """`pulumi up`, with the job released only once the update has been seen refused (422) and the pod seen
    untouched for a while after. Returns the update's output, when the job was released, and what went wrong."""
    update = stack.start("up", "--yes")
    print(f"  (times from the start of the update; the job on {runner['name']} is held)")
    try:
        refused = wait_for_refusal(simulator, runner, update, started)
        problems = watch_pod(simulator, pod, started) if refused else []
        released_at = time.monotonic()  # before the request: what GitHub did after it, it did after this
        answer = simulator.job("jobs/finish", runner["name"])
        what = "is released" if answer.status_code == 200 else f"had ended already ({answer.status_code})"
        print(f"  +{released_at - started:.1f} s  the job on {runner['name']} {what}")
        if answer.status_code != 200:
            problems.append(f"its job had ended before it was released (the runner stopped): {answer.text}")
        return update.wait().stdout, released_at, problems
    finally:
        update.stop()


def wait_for_refusal(simulator: SimulatorProcess, runner: Json, update: PulumiProcess, started: float) -> bool:
    """Whether a RemoveRunner of the busy runner was answered 422 (within the bound, while the update ran)."""
    path = f"/actions/runners/{runner['id']}"
    deadline = started + REFUSAL_TIMEOUT_SECONDS
    while update.running() and time.monotonic() < deadline:
        calls = simulator.get("calls")
        refusals = [c for c in calls if c["method"] == "DELETE" and c["path"].endswith(path) and c["status"] == 422]
        if refusals:
            print(f"  +{refusals[0]['at'] - started:.1f} s  RemoveRunner of {runner['name']} answered 422: busy")
            return True
        time.sleep(POLL_SECONDS)
    state = "still running" if update.running() else "ended"
    print(f"  +{time.monotonic() - started:.1f} s  no RemoveRunner of {runner['name']} answered 422 (update {state})")
    return False


def watch_pod(simulator: SimulatorProcess, pod: Json, started: float) -> list[str]:
    """Keep the job held a while after the refusal, reading the busy runner's pod throughout: it must stay the
    same pod, Running, not terminating. Returns what was wrong with it, if anything."""
    uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
    first = time.monotonic()
    checks = 0
    while True:
        problem = pod_problem(simulator.read_pod(name), uid)
        if problem is not None:
            print(f"  +{time.monotonic() - started:.1f} s  pod {name}: {problem}, while its job is held")
            return [f"pod {name} was touched while its job was held: {problem}"]
        checks += 1
        if time.monotonic() - first >= HOLD_AFTER_REFUSAL_SECONDS:
            break
        time.sleep(POLL_SECONDS)
    span = f"+{first - started:.1f} s to +{time.monotonic() - started:.1f} s"
    print(f"  {span}  pod {name} read {checks} times: the same pod, Running, not terminating")
    return []


def timeline(job: HeldJob, outcome: Outcome, started: float, elapsed: float) -> list[str]:
    """What the records show, in the order it happened (times from ``started``), each figure taken from them."""
    events: list[tuple[float, str]] = [(job.released_at, "the demo releases its job")]
    if outcome.first_refusal_at is not None:
        count = f"{outcome.refusals} time{'s' if outcome.refusals != 1 else ''} for it"
        events.append((outcome.first_refusal_at, f"RemoveRunner of {job.runner_name} answered 422, busy ({count})"))
    if outcome.unregistered is not None:
        status, moment = outcome.unregistered
        answer = f"RemoveRunner answered {status}"
        if status == 404:
            answer += f" (GitHub no longer knew it{': ephemeral, removed after its job' if job.ephemeral else ''})"
        events.append((moment, f"{job.runner_name} unregistered: {answer}"))
    if outcome.pod_deleted_at is not None:
        after = (
            "" if outcome.unregistered is None else f", {outcome.pod_deleted_at - outcome.unregistered[1]:.1f} s after"
        )
        events.append(
            (outcome.pod_deleted_at, f"its pod {job.pod_name} deleted{after} (grace period {GRACE_SECONDS:g} s)")
        )
    lines = [f"  What the records show (times from the start of the update, which took {elapsed:.1f} s):"]
    lines += [f"  {moment - started:+7.1f} s  {text}" for moment, text in sorted(events)]
    lines.append(f"  RemoveRunner answered 422 {outcome.all_refusals} time(s) in all during the update; other runners")
    lines.append(f"  unregistered while the job was held: {outcome.others_unregistered_while_held}.")
    lines.append(f"  Jobs lost during the update (the simulator's jobs_killed): {outcome.jobs_lost}.")
    return lines
