"""``python -m actions_runners_simulator``: ``demo`` runs the guided tour; ``serve`` keeps the simulator up (the
GitHub double, a real Kubernetes API server with its kubelet stand-in) and answers ``report`` on stdin, and at
exit, with what it saw: see `report`."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading

from . import demo
from .simulator import Simulator
from .tools import TOOLS, tool_dirs


def report(sim: Simulator) -> str:
    """What only the simulator saw, as one JSON line: the jobs lost to a stopped runner, and the kubelet
    stand-in's events, pods' lifecycles among them (``at`` on the machine's monotonic clock, as in the GitHub
    double's call log)."""
    return json.dumps({"jobs_killed": list(sim.runners.jobs_killed), "kube_events": sim.kube.events()})


def answer_reports(sim: Simulator) -> None:
    """A ``report`` line on stdin is answered with `report` on stdout, so that a demo can check each step."""
    for line in sys.stdin:
        if line.strip() == "report":
            print(report(sim), flush=True)


def serve(token_lifetime: float, namespace: str | None) -> int:
    namespaces = (namespace,) if namespace else ()
    with Simulator(token_lifetime=token_lifetime, namespaces=namespaces, fault_proxy=False) as sim:
        app_key_file = sim.workdir / "github-app.private-key.pem"
        app_key_file.write_text(sim.app_private_key)
        app_key_file.chmod(0o600)
        print(
            json.dumps(
                {
                    "github_url": sim.repo_url,
                    "github_api_url": sim.github.api_url,
                    "github_token": sim.credential,
                    "github_app_id": sim.app_id,
                    "github_app_installation_id": sim.app_installation_id,
                    "github_app_private_key_file": str(app_key_file),
                    "kube_api": sim.kube.url,
                    "kubeconfig": str(sim.kubeconfig),
                    "namespace": namespace or sim.namespace,
                }
            ),
            flush=True,
        )
        threading.Thread(target=answer_reports, args=(sim,), name="reports", daemon=True).start()
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        print(report(sim), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="actions-runners-simulator", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    tour = commands.add_parser("demo", help="with the pulumi CLI: create runners, preview a rotation, replace safely")
    tour.add_argument("--runners", type=int, default=3)
    tour.add_argument("--github-app", action="store_true", help="authenticate as the simulated GitHub App")
    server = commands.add_parser("serve", help="run the simulated GitHub and Kubernetes until interrupted")
    server.add_argument("--token-lifetime", type=float, default=3600.0)
    server.add_argument("--namespace", default="actions-runners", help="made at start, for the runners")
    server.add_argument(
        "--no-namespace", action="store_true", help="make none: the program makes it (programs/runners does)"
    )
    commands.add_parser("tools", help="find or build the test bed's binaries (tools/*/build.sh); print env lines")
    args = parser.parse_args(argv)
    if args.command == "tools":
        for name, folder in tool_dirs(*TOOLS).items():
            print(f"{TOOLS[name][0]}={folder}")
        return 0
    if args.command == "demo":
        return demo.run(runners=args.runners, github_app=args.github_app)
    return serve(args.token_lifetime, None if args.no_namespace else args.namespace)


if __name__ == "__main__":
    sys.exit(main())
