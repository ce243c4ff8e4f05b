"""The guided tour: runners created, a token rotation previewed as pending recreations, then a safe replace
while one runner is busy — all on the local simulator, through the SDK's dynamic-provider server."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from .engine import MiniEngine, Step
from .simulator import Simulator

PROJECT_DIR = Path(__file__).resolve().parents[2]
SYMBOLS = {"create": "+ ", "replace": "+-", "update": "~ ", "delete": "- ", "same": "  ", "refresh": "  "}
JOB_SECONDS = 6.0
GRACE_SECONDS = 2.0
TOKEN_LIFETIME_SECONDS = 2400.0  # GitHub's tokens live an hour; these 40 minutes let the tour skip the wait


def show(title: str, steps: Iterable[Step]) -> None:
    print(f"\n{title}")
    for step in sorted(steps, key=lambda s: (s.type, s.name)):
        reason = f"  [diff: ~{', ~'.join(step.reasons)}]" if step.reasons else ""
        kind = step.type.removeprefix("pulumi-python:")
        print(f"  {SYMBOLS.get(step.op, '  ')} {kind:42} {step.name:14} {step.op}{reason}")


def run(project_dir: Path = PROJECT_DIR, runners: int = 3) -> int:
    with Simulator(token_lifetime=TOKEN_LIFETIME_SECONDS) as sim:
        print(f"Simulator: GitHub at {sim.github.url}, Kubernetes at {sim.kube.url}")
        config = {
            "githubUrl": sim.repo_url,
            "kubeconfig": str(sim.kubeconfig),
            "createNamespace": "false",  # the simulator's cluster already has it; pulumi_kubernetes needs a plugin
            "runners": str(runners),
            "gracePeriodSeconds": str(GRACE_SECONDS),
        }
        with MiniEngine(project_dir, config=config, secret_config={"githubToken": sim.credential}) as engine:
            engine.provider.on_stderr = lambda line: print(f"    provider: {line.split(' ', 2)[-1]}")

            show("pulumi up — create", engine.up())
            for runner in sim.github.runners():
                print(f"    GitHub lists {runner['name']} (id {runner['id']}): {runner['status']}")

            show("pulumi up — nothing changed, nothing happens", engine.up())

            busy = sim.github.runners()[0]["name"]
            sim.github.start_job(busy, JOB_SECONDS)
            print(f"\nA {JOB_SECONDS:.0f} s CI job starts on {busy}.")

            print("\nFast-forward: the simulator's token lives 40 minutes; asking for renewal when less than 3000 s")
            print("remain puts it inside its renewal window, as 30 minutes of waiting would with the default 1800 s.")
            engine.config["tokenRefreshBeforeSeconds"] = "3000"
            github_calls = len(sim.github.calls())
            show("pulumi preview — pending recreations, nothing touched", engine.preview())
            print(f"    GitHub calls during preview: {len(sim.github.calls()) - github_calls}")

            started = time.monotonic()
            show("pulumi up — safe replacement", engine.up())
            elapsed = time.monotonic() - started
            job, grace = JOB_SECONDS, GRACE_SECONDS
            answers = [c["status"] for c in sim.github.calls("DELETE")]
            print(f"\n    RemoveRunner answered 422 (busy) {answers.count(422)} times, then 204/404 for each runner")
            print(f"    update took {elapsed:.1f} s: the busy job ({job:.0f} s), then the grace period ({grace:.0f} s)")
            print(f"    jobs killed: {len(sim.runners.jobs_killed)}")
            for runner in sim.github.runners():
                print(f"    GitHub lists {runner['name']} (id {runner['id']}): {runner['status']}")

            show("pulumi destroy", engine.destroy())
            pods_left = len(sim.kube.pods("actions-runners"))
            print(f"    pods left: {pods_left}, registrations left: {len(sim.github.runners())}")
        return 1 if sim.runners.jobs_killed else 0
