"""The guided tour on the real pulumi CLI: runners created, a token rotation previewed as pending recreations,
then a replacement while one runner is busy; then a RunnerPool rotated in one update; then a refilling pool
whose slot is refilled after a job with no `pulumi up`; then a RunnerScaleSet serving a burst of jobs from 0
runners and back, its runner spec changed mid-burst. The simulator runs as its own local process.

The busy runner's job is held until the update has been seen waiting on it (RemoveRunner answered 422), and only
then released, so the tour shows the busy guard on any machine however slow. Every sentence it prints about what
happened is computed from the simulator's records (GitHub calls, pod events, jobs lost), and the tour fails if
they show the busy runner unprotected (`judge`). The scale set's burst is judged the same way (`judge_burst`): its
first jobs are held until the spec change has been applied, so that it always meets busy runners.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from kubernetes import client, config

from pulumi_actions_runners.kube.manifests import RUNNER_LABEL, SPEC_HASH_ANNOTATION
from pulumi_actions_runners.kube.scale_set_manifests import runner_selector

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
RUNNER_ENDS = ("container_exited", *POD_DELETIONS)  # a runner no longer runs from the first of these
LONG_POLL_SECONDS = 1.0  # an empty message poll answered after 1 s, not GitHub's 50: a job's message comes at once
SCALE_SET = "linux"  # the scale set's name: what a workflow gives as runs-on
MAX_RUNNERS = 10
HELD_JOBS = MAX_RUNNERS  # the burst's first jobs, held until the spec change is applied: every runner is busy
TIMED_JOBS = 10  # the rest, queued behind them: they run on the new spec
JOB_SECONDS = 3.0
SPEC_CHANGE = ("runnerMemory", "2Gi")  # programs/runners' setting; a new runner spec
HOLD_AFTER_UPDATE_SECONDS = 5.0  # the held jobs stay held this long after the update, their pods watched
BURST_TIMEOUT_SECONDS = 90.0  # for each step of the burst (seconds, in practice)
SAMPLE_SECONDS = 0.25
Json = dict[str, Any]
SCALE_SET_INTRO = """
A runner scale set, {name}: 0 to {max} runners that follow the job queue, started and removed by its listener
between updates; workflows ask for it with runs-on: {name} (pulumi config set scaleSet true, scaleSetName {name},
minRunners 0, maxRunners {max}). The simulator answers an empty message poll after {poll:g} s, not GitHub's 50 s;
a job's message comes at once either way."""
BURST_INTRO = """
{total} jobs queued together, runs-on: {name}. The first {held} are held: each runs until the demo ends it (as
`actions-runners-simulator job finish RUNNER` does), so that the spec change below finds its runners busy however
slow the machine. Then {timed} of {seconds:g} s each:"""


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

    def __init__(
        self, kube_bin_dir: Path, long_poll_seconds: float | None = None, listener_image: Path | None = None
    ) -> None:
        command = [sys.executable, "-m", "actions_runners_simulator", "serve"]  # it makes the runners' namespace
        command += ["--token-lifetime", str(TOKEN_LIFETIME_SECONDS)]
        if long_poll_seconds is not None:
            command += ["--long-poll-seconds", str(long_poll_seconds)]
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={
                **os.environ,
                TOOLS["kube"].variable: str(kube_bin_dir),
                **({TOOLS["listener-image"].variable: str(listener_image)} if listener_image else {}),
            },
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

    def queue(self, labels: Sequence[str], seconds: float | None, count: int) -> list[Json]:
        """``count`` jobs with ``runs-on: labels`` queued in the simulated repository, each running ``seconds`` once
        a runner takes it (None: until `job` finishes it); their records."""
        payload = {"labels": list(labels), "duration_seconds": seconds, "count": count, "url": self.info["github_url"]}
        response = requests.post(f"{self.control}/jobs/queue", json=payload, timeout=10)
        if response.status_code != 201:
            raise DemoFailed(f"the simulator would not queue jobs: {response.status_code} {response.text}")
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
    # The listener's image where this machine can build it (mmdebstrap, umoci); else its program runs as a process.
    image = all(shutil.which(tool) for tool in ("mmdebstrap", "umoci"))
    tools = ToolBuilds("kube", "pulumi", "pulumi-yaml", *(["listener-image"] if image else []))
    if not image:
        print(
            "The scale set's listener runs as this environment's program: building its image needs mmdebstrap and umoci"
        )
    try:
        simulator = SimulatorProcess(
            tools.get("kube"), LONG_POLL_SECONDS, tools.get("listener-image") if image else None
        )
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
        with PulumiWorkspace(PROJECT_DIR, tools.get("pulumi"), stack="scale-set", skip_preview=False) as stack:
            scale_set_tour(stack, simulator)
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


@dataclass(frozen=True)
class Sample:
    """The scale set's runner pods and the burst's jobs at one moment (the machine's monotonic clock)."""

    at: float
    runners: dict[str, str]  # running runner pods (not ended, not terminating): name -> spec hash
    pods: int  # runner pods of any state, ended or terminating ones too
    busy: int
    queued: int
    done: int


class FleetWatch:
    """Reads the scale set's runner pods (the Kubernetes API, a client of its own) and the burst's jobs (GitHub's
    records) every SAMPLE_SECONDS in a thread of its own: the runners over time, and each runner pod's spec hash
    as its annotation says."""

    def __init__(self, simulator: SimulatorProcess) -> None:
        self._simulator = simulator
        self._kube = config.new_client_from_config(config_file=simulator.info["kubeconfig"], persist_config=False)
        self._pods = client.CoreV1Api(self._kube)
        self.samples: list[Sample] = []
        self.spec_hashes: dict[str, str] = {}  # every runner pod seen
        self.failure: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        namespace, selector = self._simulator.info["namespace"], runner_selector(SCALE_SET)
        while not self._stop.is_set():
            try:
                pods = self._pods.list_namespaced_pod(namespace, label_selector=selector).items
                jobs = [job for job in self._simulator.get("jobs") if job["labels"] == [SCALE_SET]]
            except Exception as error:  # any: the tour waits on `latest`, which raises it as DemoFailed
                self.failure = f"the runners could not be read: {error}"
                return
            running = {}
            for pod in pods:
                spec_hash = (pod.metadata.annotations or {}).get(SPEC_HASH_ANNOTATION, "")
                self.spec_hashes.setdefault(pod.metadata.name, spec_hash)
                if pod.metadata.deletion_timestamp is None and pod.status.phase not in ("Succeeded", "Failed"):
                    running[pod.metadata.name] = spec_hash
            statuses = [job["status"] for job in jobs]
            self.samples.append(
                Sample(
                    time.monotonic(),
                    running,
                    len(pods),
                    statuses.count("in_progress"),
                    statuses.count("queued"),
                    statuses.count("completed"),
                )
            )
            self._stop.wait(SAMPLE_SECONDS)

    def latest(self) -> Sample | None:
        if self.failure is not None:
            raise DemoFailed(self.failure)
        return self.samples[-1] if self.samples else None

    def taken_after(self, moment: float) -> Sample | None:
        """The latest sample if it was taken after ``moment``."""
        latest = self.latest()
        return latest if latest is not None and latest.at > moment else None

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=30)
        self._kube.close()


@dataclass(frozen=True)
class BusyRunner:
    """A runner that ran its job from before an update began until after it ended."""

    name: str
    spec_hash: str | None
    finished_at: float | None  # its job's end
    deleted_at: float | None  # its pod's first deletion event


@dataclass(frozen=True)
class BurstOutcome:
    """What GitHub's job records and the kubelet stand-in's events say of a scale set's burst."""

    peak: int  # runners running at once, at most
    peak_at: float | None
    served: int  # jobs completed with success
    lost: int  # jobs lost: those GitHub recorded lost, and the simulator's jobs_killed
    busy_through_update: tuple[BusyRunner, ...]
    busy_finished_on_old_spec: int  # of those, how many ended their job on the first spec
    old_spec_jobs: int
    new_spec_jobs: int
    back_to_zero_at: float | None  # when the last runner stopped running, if all did
    problems: tuple[str, ...]


def runner_lives(events: Iterable[Json], names: Iterable[str]) -> dict[str, tuple[float, float | None]]:
    """Each named runner pod's run, from its creation to the first of its container's exit and its deletion (None:
    it runs on), from the kubelet stand-in's events; a pod it never saw made is left out."""
    by_name: dict[str, list[Json]] = {name: [] for name in names}
    for event in events:
        if event["name"] in by_name:
            by_name[event["name"]].append(event)
    lives = {}
    for name, own in by_name.items():
        created = min((e["at"] for e in own if e["type"] == "pod_created"), default=None)
        if created is not None:
            ends = [e["at"] for e in own if e["type"] in RUNNER_ENDS and e["at"] >= created]
            lives[name] = (created, min(ends, default=None))
    return lives


def peak_runners(lives: dict[str, tuple[float, float | None]]) -> tuple[int, float | None]:
    """The most runs at once, and when that count was first reached (a run ending as another starts is not
    counted with it)."""
    moments = [(start, 1) for start, _ in lives.values()]
    moments += [(end, -1) for _, end in lives.values() if end is not None]
    count, peak, peak_at = 0, 0, None
    for moment, step in sorted(moments):  # at one moment, ends (-1) first
        count += step
        if count > peak:
            peak, peak_at = count, moment
    return peak, peak_at


def judge_burst(
    jobs: Sequence[Json],
    kube_events: Sequence[Json],
    spec_hashes: dict[str, str],
    *,
    old_hash: str,
    new_hash: str,
    update: tuple[float, float],
    max_runners: int,
    jobs_killed: int,
) -> BurstOutcome:
    """Whether a burst was served as a scale set should serve it: every job served and none lost, at most
    ``max_runners`` runners at once, no runner's pod deleted while its job ran, runners busy throughout the
    ``update`` (start, end) that changed the runner spec finishing on the old spec, jobs run on the new, and the
    fleet back to 0. ``jobs`` are GitHub's records of the burst's jobs, ``kube_events`` the kubelet stand-in's,
    ``spec_hashes`` each runner pod's annotation as read, ``jobs_killed`` the simulator's count of jobs lost
    meanwhile."""
    names = set(spec_hashes) | {job["runner_name"] for job in jobs if job["runner_name"]}
    lives = runner_lives(kube_events, names)
    peak, peak_at = peak_runners(lives)
    deletions: dict[str, list[float]] = {}
    for event in kube_events:
        if event["name"] in names and event["type"] in POD_DELETIONS:
            deletions.setdefault(event["name"], []).append(event["at"])
    problems = []
    if peak > max_runners:
        problems.append(f"{peak} runners ran at once, above max_runners {max_runners}")
    served = sum(job["status"] == "completed" and job["conclusion"] == "success" for job in jobs)
    if served < len(jobs):
        problems.append(f"{len(jobs) - served} of {len(jobs)} jobs were not served")
    lost = sum(bool(job["lost"]) for job in jobs)
    if lost or jobs_killed:
        problems.append(f"jobs lost: {lost} in GitHub's records, {jobs_killed} in the simulator's jobs_killed")
    specs = {"old": 0, "new": 0}
    for job in jobs:
        runner = job["runner_name"]
        if runner is None:
            continue
        spec = spec_hashes.get(runner)
        if spec == old_hash:
            specs["old"] += 1
        elif spec == new_hash:
            specs["new"] += 1
        else:
            problems.append(f"runner {runner} ran job {job['id']} on a spec neither the first nor the new: {spec}")
        started, finished = job["started_at"], job["finished_at"]
        early = [moment for moment in deletions.get(runner, []) if moment >= started]
        if early and (finished is None or min(early) < finished):
            problems.append(f"pod {runner} was deleted while its job {job['id']} ran")
    start, end = update
    busy = tuple(
        BusyRunner(
            job["runner_name"],
            spec_hashes.get(job["runner_name"]),
            job["finished_at"],
            min(deletions.get(job["runner_name"], []), default=None),
        )
        for job in jobs
        if job["started_at"] is not None
        and job["started_at"] < start
        and (job["finished_at"] is None or job["finished_at"] > end)
    )
    if not busy:
        problems.append("no runner ran a job throughout the update: the spec change met no busy runner")
    problems += [
        f"busy runner {b.name} did not finish on the first spec ({b.spec_hash})"
        for b in busy
        if b.spec_hash != old_hash
    ]
    if not specs["new"]:
        problems.append("no job ran on the new spec")
    running = sorted(name for name, (_, ended) in lives.items() if ended is None)
    if running:
        problems.append(f"the fleet is not back to 0: {', '.join(running)} still run")
    ends = [ended for _, ended in lives.values() if ended is not None]
    return BurstOutcome(
        peak=peak,
        peak_at=peak_at,
        served=served,
        lost=lost + jobs_killed,
        busy_through_update=busy,
        busy_finished_on_old_spec=sum(b.spec_hash == old_hash and b.finished_at is not None for b in busy),
        old_spec_jobs=specs["old"],
        new_spec_jobs=specs["new"],
        back_to_zero_at=None if running or not ends else max(ends),
        problems=tuple(problems),
    )


def fleet_chart(samples: Sequence[Sample], old_hash: str, since: float, until: float, origin: float) -> list[str]:
    """The first sample taken since ``since``, then one a second, and the last by ``until`` (times from
    ``origin``), a row left out when it says what the one before said: the running runners, each a mark (# the
    first spec, + another), and the jobs."""
    taken = [sample for sample in samples if since <= sample.at <= until]
    chosen = taken[:1]
    for moment in [since + step for step in range(1, int(until - since) + 1)] + [until]:
        chosen += [sample for sample in taken if sample.at <= moment][-1:]
    rows, last = [], None
    for sample in chosen:
        old = sum(spec == old_hash for spec in sample.runners.values())
        marks = "#" * old + "+" * (len(sample.runners) - old)
        jobs = f"busy {sample.busy:2d}, queued {sample.queued:2d}, done {sample.done:2d}"
        text = f"{len(sample.runners):3d} {marks:<{MAX_RUNNERS + 2}} {jobs}"
        if text != last:
            rows.append(f"  {sample.at - origin:+6.1f} s {text}")
            last = text
    return rows


def scale_set_tour(stack: PulumiWorkspace, simulator: SimulatorProcess) -> None:
    """A RunnerScaleSet from 0 runners: a burst of jobs is served by at most MAX_RUNNERS runners, which its
    listener starts and removes as the queue says, with no `pulumi up`; mid-burst its runner spec changes. The
    first MAX_RUNNERS jobs are held until the change has been applied, so that it meets every runner busy and
    the rest of the burst queued on any machine however slow."""
    print(SCALE_SET_INTRO.format(name=SCALE_SET, max=MAX_RUNNERS, poll=LONG_POLL_SECONDS))
    settings = {"scaleSet": "true", "scaleSetName": SCALE_SET, "minRunners": "0", "maxRunners": str(MAX_RUNNERS)}
    new_stack(stack, simulator.info, 0, **settings)
    banner("pulumi up --yes")
    print(stack.run("up", "--yes").stdout)
    old_hash = scale_set_outputs(stack)["spec_hash"]
    watch = FleetWatch(simulator)
    held: list[str] = []
    try:
        burst(stack, simulator, watch, old_hash, held)
    finally:
        watch.stop()
        for name in held:
            simulator.job("jobs/finish", name)  # answered 409 if it was released already

    banner("pulumi destroy --yes")
    print(stack.run("destroy", "--yes").stdout)
    print(f"  registrations left on GitHub: {len(simulator.get('runners'))}")


def burst(
    stack: PulumiWorkspace, simulator: SimulatorProcess, watch: FleetWatch, old_hash: str, held: list[str]
) -> None:
    """Queue the burst, change the spec while the held jobs run, release them, and judge it all by the records.
    ``held`` gets the names of the runners whose jobs are held, for the caller to release whatever happens."""
    jobs_killed_before = len(simulator.report()["jobs_killed"])
    total = HELD_JOBS + TIMED_JOBS
    print(BURST_INTRO.format(total=total, name=SCALE_SET, held=HELD_JOBS, timed=TIMED_JOBS, seconds=JOB_SECONDS))
    banner(f"actions-runners-simulator job queue --labels {SCALE_SET} --seconds {JOB_SECONDS:g} --count {TIMED_JOBS}")
    origin = time.monotonic()
    held_ids = {job["id"] for job in simulator.queue([SCALE_SET], None, HELD_JOBS)}
    ids = held_ids | {job["id"] for job in simulator.queue([SCALE_SET], JOB_SECONDS, TIMED_JOBS)}
    queued_at = time.monotonic()

    def records() -> list[Json]:
        return [job for job in simulator.get("jobs") if job["id"] in ids]

    def held_running() -> list[Json]:
        return [job for job in records() if job["id"] in held_ids and job["status"] == "in_progress"]

    wait_for(lambda: len(held_running()) == HELD_JOBS, f"the {HELD_JOBS} held jobs running", watch)
    held += sorted(job["runner_name"] for job in held_running())
    seen = time.monotonic()
    wait_for(lambda: watch.taken_after(seen) is not None, "a sample of the runners since", watch)
    print("  Runner pods running (# of the first spec, + of the new) and jobs; times from the queueing:")
    print("\n".join(fleet_chart(watch.samples, old_hash, queued_at, time.monotonic(), origin)))
    pods = {name: simulator.read_pod(name) for name in held}
    gone = [name for name, pod in pods.items() if pod is None]
    if gone:
        raise DemoFailed(f"the pods of busy runners {', '.join(gone)} are gone before the update")
    uids = {name: pod["metadata"]["uid"] for name, pod in pods.items() if pod is not None}

    key, value = SPEC_CHANGE
    banner(f"pulumi config set {key} {value} && pulumi up --yes   # a new runner spec, mid-burst")
    stack.run("config", "set", key, value)
    update_started = time.monotonic()
    print(stack.run("up", "--yes").stdout)
    update_ended = time.monotonic()
    outputs = scale_set_outputs(stack)
    new_hash = outputs["spec_hash"]
    kind = ", ".join(outputs["update_kind"])
    specs = f"new runners get spec {new_hash[:12]}, not {old_hash[:12]}"
    print(f"  update_kind {kind}: {specs}; busy ones are to finish on the first.")
    problems = watch_held_pods(simulator, uids, update_ended, origin)
    if problems:
        raise DemoFailed("; ".join(problems))
    released_at = time.monotonic()
    for name in held:
        answer = simulator.job("jobs/finish", name)
        if answer.status_code != 200:
            raise DemoFailed(f"the held job on {name} had ended before the demo released it: {answer.text}")
    print(f"  {released_at - origin:+.1f} s  the demo ends the {len(held)} held jobs; the runners since:")

    def settled() -> bool:
        sample = watch.taken_after(released_at)
        return sample is not None and sample.done == total and sample.pods == 0

    wait_for(settled, f"the {total} jobs done and every runner pod gone", watch)
    watch.stop()
    print("\n".join(fleet_chart(watch.samples, old_hash, released_at, time.monotonic(), origin)))

    report = simulator.report()
    jobs = records()
    outcome = judge_burst(
        jobs,
        [e for e in report["kube_events"] if e["namespace"] == simulator.info["namespace"]],
        watch.spec_hashes,
        old_hash=old_hash,
        new_hash=new_hash,
        update=(update_started, update_ended),
        max_runners=MAX_RUNNERS,
        jobs_killed=len(report["jobs_killed"]) - jobs_killed_before,
    )
    print("\n".join(burst_summary(outcome, len(jobs), (update_started, update_ended), origin)))
    if outcome.problems:
        raise DemoFailed("the scale set's burst: " + "; ".join(outcome.problems))
    registered = [r["name"] for r in simulator.get("runners") if r["name"] in watch.spec_hashes]
    print(f"  GitHub lists {len(registered)} of the set's runners now.")


def wait_for(condition: Callable[[], bool], what: str, watch: FleetWatch) -> None:
    deadline = time.monotonic() + BURST_TIMEOUT_SECONDS
    while not condition():
        watch.latest()  # raises if the watch failed
        if time.monotonic() >= deadline:
            raise DemoFailed(f"timed out after {BURST_TIMEOUT_SECONDS:.0f} s waiting for {what}")
        time.sleep(POLL_SECONDS)


def watch_held_pods(simulator: SimulatorProcess, uids: dict[str, str], since: float, origin: float) -> list[str]:
    """Keep the jobs held a while after the update, reading their runners' pods (name: uid) throughout: each must
    stay the same pod, Running, not terminating. Returns what was wrong, if anything."""
    checks = 0
    while True:
        for name, uid in uids.items():
            problem = pod_problem(simulator.read_pod(name), uid)
            if problem is not None:
                return [f"pod {name} was touched while its job was held: {problem}"]
        checks += 1
        if time.monotonic() - since >= HOLD_AFTER_UPDATE_SECONDS:
            break
        time.sleep(POLL_SECONDS)
    span = f"{since - origin:+.1f} s to {time.monotonic() - origin:+.1f} s"
    what = f"the {len(uids)} busy runners' pods, read {checks} times each"
    print(f"  {span}  {what}: the same pods, Running, not terminating")
    return []


def scale_set_outputs(stack: PulumiWorkspace) -> Json:
    """The RunnerScaleSet's outputs in the stack's state."""
    state = json.loads(stack.run("stack", "export").stdout)
    [resource] = [r for r in state["deployment"]["resources"] if r["type"].endswith(":RunnerScaleSet")]
    return resource["outputs"]


def burst_summary(outcome: BurstOutcome, total: int, update: tuple[float, float], origin: float) -> list[str]:
    """What the records show of the burst, each figure taken from them (times from ``origin``)."""
    start, end = (moment - origin for moment in update)
    busy = outcome.busy_through_update
    lines = ["  What the records show (GitHub's jobs, the kubelet stand-in's pod events; times from the queueing):"]
    peak_at = "" if outcome.peak_at is None else f", first at {outcome.peak_at - origin:+.1f} s"
    lines.append(f"  runners at once, at most: {outcome.peak} (max_runners {MAX_RUNNERS}){peak_at}")
    change = f"the spec change, `pulumi up` from {start:+.1f} s to {end:+.1f} s"
    lines.append(f"  {change}: {len(busy)} runners ran jobs from before it began until after it ended")
    finished = sorted(b.finished_at - origin for b in busy if b.finished_at is not None)
    if finished:
        when = seconds(finished[0], finished[-1], "+")
        when = f"from {when}" if " to " in when else f"at {when}"
        lines.append(f"  {outcome.busy_finished_on_old_spec} of them finished their jobs on the first spec, {when}")
    after = [b.deleted_at - b.finished_at for b in busy if b.deleted_at is not None and b.finished_at is not None]
    if after and min(after) >= 0:
        lines.append(f"  their pods deleted {seconds(min(after), max(after))} after their jobs ended, none before")
    elif after:
        lines.append(f"  {sum(gap < 0 for gap in after)} of their pods deleted before their jobs ended")
    lines.append(f"  jobs run on the first spec: {outcome.old_spec_jobs}; on the new spec: {outcome.new_spec_jobs}")
    if outcome.back_to_zero_at is not None:
        lines.append(f"  the fleet back to 0 runners at {outcome.back_to_zero_at - origin:+.1f} s")
    lines.append(f"  jobs served: {outcome.served} of {total}; jobs lost: {outcome.lost}")
    return lines


def seconds(low: float, high: float, sign: str = "") -> str:
    """``low`` to ``high`` in seconds, to a tenth; one figure when they agree to a tenth."""
    low_text, high_text = f"{low:{sign}.1f}", f"{high:{sign}.1f}"
    return f"{low_text} s" if low_text == high_text else f"{low_text} s to {high_text} s"
