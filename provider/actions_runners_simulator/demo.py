"""The guided tour on the real pulumi CLI: runners created, a token rotation previewed as pending recreations,
then a safe replacement while one runner is busy; then a RunnerPool rotated in one update. The simulator runs as
its own local process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from .workspace import PulumiWorkspace

PROJECT_DIR = Path(__file__).resolve().parents[2]
BUILD_CLI = PROJECT_DIR / "tools" / "pulumi" / "build.sh"
JOB_SECONDS = 12.0  # longer than the preview `pulumi up` runs first
GRACE_SECONDS = 2.0
TOKEN_LIFETIME_SECONDS = 2400.0  # GitHub's tokens live an hour; 40 minutes let the tour skip the wait
FLEET_RUNNERS = 20


def banner(text: str) -> None:
    print(f"\n\033[1m$ {text}\033[0m", flush=True)


def run(runners: int = 3) -> int:
    # build.sh prints the CLI's folder; its progress (a first, cold build takes minutes) goes to our stderr.
    cli_dir = Path(subprocess.run([str(BUILD_CLI)], check=True, stdout=subprocess.PIPE, text=True).stdout.strip())
    simulator = subprocess.Popen(
        [sys.executable, "-m", "actions_runners_simulator", "serve", "--token-lifetime", str(TOKEN_LIFETIME_SECONDS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        sim: dict[str, Any] = json.loads(simulator.stdout.readline())  # type: ignore[union-attr]
        control = sim["github_api_url"].removesuffix("/api/v3") + "/_simulator"
        print(f"Simulator: GitHub runner API at {sim['github_api_url']}, Kubernetes via {sim['kubeconfig']}")
        with PulumiWorkspace(PROJECT_DIR, cli_dir) as stack:
            tour(stack, sim, control, runners)
        with PulumiWorkspace(PROJECT_DIR, cli_dir, stack="fleet") as stack:
            fleet_tour(stack, sim, control, FLEET_RUNNERS)
    finally:
        simulator.terminate()
        summary = json.loads(simulator.communicate(timeout=30)[0].strip().splitlines()[-1])
    print(f"\nJobs lost to a deleted pod: {len(summary['jobs_killed'])}")
    return 1 if summary["jobs_killed"] else 0


def new_stack(stack: PulumiWorkspace, sim: dict[str, Any], runners: int, **config: str) -> None:
    stack.new_stack(
        config={
            "githubUrl": sim["github_url"],
            "kubeconfig": sim["kubeconfig"],
            "namespace": sim["namespace"],
            "createNamespace": "false",  # the simulator's cluster has it; pulumi_kubernetes would need its plugin
            "runners": str(runners),
            "gracePeriodSeconds": str(GRACE_SECONDS),
            **config,
        },
        secrets={"githubToken": sim["github_token"]},
    )


def tour(stack: PulumiWorkspace, sim: dict[str, Any], control: str, runners: int) -> None:
    new_stack(stack, sim, runners)
    banner("pulumi up --yes")
    print(stack.run("up", "--yes").stdout)
    for runner in requests.get(f"{control}/runners", timeout=10).json():
        print(f"  GitHub lists {runner['name']} (id {runner['id']}): {runner['status']}")

    banner("pulumi preview   # nothing changed: nothing to do")
    print(stack.run("preview").stdout)

    busy = requests.get(f"{control}/runners", timeout=10).json()[0]["name"]
    requests.post(f"{control}/jobs", json={"runner_name": busy, "duration_seconds": JOB_SECONDS}, timeout=10)
    print(f"A {JOB_SECONDS:.0f} s CI job starts on {busy}.")

    print("\nFast-forward: the simulator's token lives 40 minutes; asking for renewal when less than 3000 s remain")
    print("puts it inside its renewal window, as 30 minutes of waiting would with the default of 1800 s.")
    banner("pulumi config set tokenRefreshBeforeSeconds 3000 && pulumi preview")
    stack.run("config", "set", "tokenRefreshBeforeSeconds", "3000")
    print(stack.run("preview").stdout)

    banner("pulumi up --yes   # replaces every runner; the busy one only once its job is done")
    started = time.monotonic()
    print(stack.run("up", "--yes").stdout)
    elapsed = time.monotonic() - started
    answers = [c["status"] for c in requests.get(f"{control}/calls", timeout=10).json() if c["method"] == "DELETE"]
    print(f"  RemoveRunner answered 422 (busy: pod left alone) {answers.count(422)} times; then 204, or 404 for the")
    print("  busy runner, which GitHub removed itself once its one job was done (it is ephemeral).")
    print(f"  The update took {elapsed:.1f} s: the busy job ({JOB_SECONDS:.0f} s), then the grace period.")

    banner("pulumi destroy --yes")
    print(stack.run("destroy", "--yes").stdout)
    print(f"  registrations left on GitHub: {len(requests.get(f'{control}/runners', timeout=10).json())}")


def fleet_tour(stack: PulumiWorkspace, sim: dict[str, Any], control: str, runners: int) -> None:
    print(f"\nA fleet: one RunnerPool of {runners} runners (pulumi config set pool true), all replaceable at once.")
    new_stack(stack, sim, runners, pool="true", maxUnavailable="100%")
    banner("pulumi up --yes")
    print(stack.run("up", "--yes").stdout)

    busy = next(r["name"] for r in requests.get(f"{control}/runners", timeout=10).json() if r["status"] == "online")
    requests.post(f"{control}/jobs", json={"runner_name": busy, "duration_seconds": JOB_SECONDS / 2}, timeout=10)
    print(f"A {JOB_SECONDS / 2:.0f} s CI job starts on {busy}.")
    banner("pulumi config set tokenRefreshBeforeSeconds 3000 && pulumi preview   # the pool is updated, not replaced")
    stack.run("config", "set", "tokenRefreshBeforeSeconds", "3000")
    print(stack.run("preview").stdout)

    banner(f"pulumi up --yes   # rotates all {runners} runners concurrently in one update")
    started = time.monotonic()
    print(stack.run("up", "--yes").stdout)
    print(
        f"  The update took {time.monotonic() - started:.1f} s: the busy job, then the grace period, for all at once."
    )

    banner("pulumi destroy --yes")
    print(stack.run("destroy", "--yes").stdout)
