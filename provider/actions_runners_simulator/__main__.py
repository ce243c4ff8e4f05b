"""``python -m actions_runners_simulator``: ``demo`` runs the guided tour; ``serve`` keeps the doubles up."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading

from . import demo
from .simulator import Simulator


def serve(token_lifetime: float) -> int:
    with Simulator(token_lifetime=token_lifetime) as sim:
        print(
            json.dumps(
                {
                    "github_url": sim.repo_url,
                    "github_api_url": sim.github.api_url,
                    "github_token": sim.credential,
                    "kubeconfig": str(sim.kubeconfig),
                    "namespace": "actions-runners",
                }
            ),
            flush=True,
        )
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        print(json.dumps({"jobs_killed": sim.runners.jobs_killed}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="actions-runners-simulator", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    tour = commands.add_parser("demo", help="with the pulumi CLI: create runners, preview a rotation, replace safely")
    tour.add_argument("--runners", type=int, default=3)
    server = commands.add_parser("serve", help="run the GitHub and Kubernetes doubles until interrupted")
    server.add_argument("--token-lifetime", type=float, default=3600.0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo.run(runners=args.runners)
    return serve(args.token_lifetime)


if __name__ == "__main__":
    sys.exit(main())
