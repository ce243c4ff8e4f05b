"""``python -m actions_runners_simulator``: ``demo`` runs the guided tour; ``serve`` keeps the simulator up (the
GitHub double, a real Kubernetes API server with its kubelet stand-in) and answers ``report`` on stdin, and at
exit, with what it saw: see `report`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
import threading

from . import control, demo, runner_process
from .actions_service import LONG_POLL_SECONDS, MAX_LONG_POLL_SECONDS
from .runner_releases import DEFAULT_RELEASE, parse_day, parse_release
from .simulator import Simulator
from .tools import TOOLS, ToolMissing, tool_dirs

SERVE = """The simulated GitHub (a runner-API double on loopback) and a real Kubernetes API server with its
controller manager, a kubelet stand-in and a simulated runner in each runner pod. It prints one JSON line:
github_url (the github_url input), github_api_url (where the double serves GitHub's REST API), github_token
(GITHUB_TOKEN, or the github_token input), github_app_id, github_app_installation_id and
github_app_private_key_file (its GitHub App), kube_api (the API server), kubeconfig (KUBECONFIG, or the
kubeconfig input) and namespace (made for the runners, unless --no-namespace). `env` and `job` find a running
simulator by itself. A `report` line on stdin is answered with the jobs lost and the pods' events, as is its
exit (SIGTERM, SIGHUP or Ctrl-C)."""
JOB = """A CI job on a runner of the running simulator: while it runs, GitHub answers RemoveRunner with 422 and the
provider leaves the runner's pod alone. `start` holds the job until `finish` (or for --seconds)."""
RUNNER = """A simulated runner as a plain local process: given a just-in-time config (from a runner scale set's
generatejitconfig, or GitHub's REST generate-jitconfig) it connects to the simulator that issued it, takes one
job, runs it and exits 0, as an ephemeral actions/runner started with run.sh does; SIGTERM cancels a running job
and exits 143. Point an autoscaler that starts runners as processes at it (RUNNER_COMMAND). Its durations are
divided by $ACTIONS_RUNNERS_SIMULATOR_SPEEDUP (default 1)."""
QUEUE = """Jobs queued as a workflow run queues them: GitHub hands each, in queue order, to an idle online runner
whose labels contain its runs-on labels (case-insensitively; self-hosted every runner has), or to the runner
scale set its runs-on names; unmatched jobs wait (24 hours at most, as on GitHub). `job list` shows each job's
wait, its runner and whether it was lost; GitHub's REST API lists them too (GET .../actions/runs?status=queued)."""


def report(sim: Simulator) -> str:
    """What only the simulator saw, as one JSON line: the jobs lost to a stopped runner, and the kubelet
    stand-in's events, pods' lifecycles among them (``at`` on the machine's monotonic clock, as in the GitHub
    double's call log)."""
    events = sim.kube.events() if sim.kubernetes else []
    return json.dumps({"jobs_killed": list(sim.runners.jobs_killed), "kube_events": events})


def answer_reports(sim: Simulator) -> None:
    """A ``report`` line on stdin is answered with `report` on stdout, so that a demo can check each step."""
    for line in sys.stdin:
        if line.strip() == "report":
            print(report(sim), flush=True)


def serve(
    token_lifetime: float,
    namespace: str | None,
    releases: list[tuple[str, str]] | None = None,
    long_poll_seconds: float = LONG_POLL_SECONDS,
    *,
    kubernetes: bool = True,
) -> int:
    control.settings_folder()  # one that cannot be made the user's own is refused before anything starts
    namespaces = (namespace,) if namespace else ()
    with Simulator(
        token_lifetime=token_lifetime,
        namespaces=namespaces,
        fault_proxy=False,
        runner_releases=releases,
        kubernetes=kubernetes,
    ) as sim:
        sim.github.service.long_poll_seconds = sim.github.runner_connections.long_poll_seconds = long_poll_seconds
        app_key_file = sim.workdir / "github-app.private-key.pem"
        app_key_file.write_text(sim.app_private_key)
        app_key_file.chmod(0o600)
        info = {
            "github_url": sim.repo_url,
            "github_api_url": sim.github.api_url,
            "github_token": sim.credential,
            "github_app_id": sim.app_id,
            "github_app_installation_id": sim.app_installation_id,
            "github_app_private_key_file": str(app_key_file),
        }
        if kubernetes:
            info |= {
                "kube_api": sim.kube.url,
                "kubeconfig": str(sim.kubeconfig),
                "namespace": namespace or sim.namespace,
            }
        if not control.publish(info):
            print(
                f"another simulator is published in {control.info_file()}: `env` and `job` reach that one",
                file=sys.stderr,
            )
        try:
            print(json.dumps(info), flush=True)
            threading.Thread(target=answer_reports, args=(sim,), name="reports", daemon=True).start()
            stop = threading.Event()
            for stop_signal in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(stop_signal, lambda *_: stop.set())
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait()
        finally:
            control.withdraw()
        print(report(sim), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="actions-runners-simulator", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    tour = commands.add_parser("demo", help="with the pulumi CLI: create runners, preview a rotation, replace safely")
    tour.add_argument("--runners", type=int, default=3)
    tour.add_argument("--github-app", action="store_true", help="authenticate as the simulated GitHub App")
    server = commands.add_parser(
        "serve",
        help="run the simulated GitHub and Kubernetes until interrupted; print one JSON line of settings",
        description=SERVE,
    )
    server.add_argument(
        "--token-lifetime",
        type=float,
        default=3600.0,
        help="seconds a registration token lives (GitHub's: 3600). Below a RegistrationToken's "
        "refresh_before_seconds (default 1800), such as 600, every `pulumi up` renews the token and rotates the "
        "runners registered with it: a token rotation on demand",
    )
    server.add_argument("--namespace", default="actions-runners", help="made at start, for the runners")
    server.add_argument(
        "--no-namespace", action="store_true", help="make none: the program makes it (programs/runners does)"
    )
    server.add_argument(
        "--runner-release",
        action="append",
        type=_release,
        metavar="VERSION@YYYY-MM-DD",
        help="an actions/runner release GitHub lists (repeatable; default: "
        f"{DEFAULT_RELEASE}, published a week before the start). GitHub refuses jobs to a runner behind a release "
        "published more than 30 days ago, and registration below 2.329.0",
    )
    server.add_argument(
        "--github-only",
        action="store_true",
        help="run the simulated GitHub alone, no Kubernetes: for an autoscaler whose runners are processes "
        "(`actions-runners-simulator runner`); it prints no kubeconfig",
    )
    server.add_argument(
        "--long-poll-seconds",
        type=_long_poll,
        default=LONG_POLL_SECONDS,
        metavar="SECONDS",
        help=f"how long the Actions service holds a message poll that nothing answers (GitHub's: about "
        f"{LONG_POLL_SECONDS:g}); shorter makes an autoscaler that acts only on messages react sooner",
    )
    publish = commands.add_parser(
        "release", help="publish an actions/runner release on the running simulator's GitHub (`serve`)"
    )
    publish.add_argument("version", help="as 2.337.0")
    publish.add_argument(
        "--published",
        type=_day,
        metavar="YYYY-MM-DD",
        help="its publication day (default: now); older runners get no jobs 30 days after it",
    )
    jobs = commands.add_parser(
        "job", help="queue CI jobs, or start or finish one on a runner, on the running simulator (`serve`)"
    )
    actions = jobs.add_subparsers(dest="action", required=True)
    runner_name = "the runner's name, as GitHub lists it (a pool's: POOL_NAME-INDEX)"
    start = actions.add_parser("start", help="a job on the named idle runner", description=JOB)
    start.add_argument("runner", help=runner_name)
    start.add_argument("--seconds", type=float, help="end the job after this long (default: when finished)")
    finish = actions.add_parser("finish", help="end the job the named runner runs", description=JOB)
    finish.add_argument("runner", help=runner_name)
    finish.add_argument(
        "--after-refusal",
        type=float,
        metavar="SECONDS",
        help="first wait (at most this long) until GitHub has answered the runner's RemoveRunner with 422, so that "
        "an update is seen waiting on the job",
    )
    queued = actions.add_parser(
        "queue", help="queue jobs by their runs-on labels, as a workflow run does", description=QUEUE
    )
    queued.add_argument("--labels", required=True, type=_labels, help="runs-on, comma-separated: linux,x64")
    queued.add_argument("--seconds", required=True, type=float, help="how long each job runs once a runner takes it")
    queued.add_argument("--count", type=int, default=1, help="how many jobs (a matrix of one workflow run)")
    queued.add_argument("--repository", metavar="URL", help="its repository's URL (default: the simulated one)")
    actions.add_parser("list", help="every job so far, one JSON line each: waits, runner, and whether it was lost")
    process = commands.add_parser(
        "runner",
        help="a simulated runner as a local process, from a JIT config, as run.sh is started",
        description=RUNNER,
    )
    process.add_argument("--jitconfig", help=f"the encoded JIT config (default: ${runner_process.JIT_VARIABLE})")
    environment = commands.add_parser(
        "env", help="print `export GITHUB_URL=… GITHUB_TOKEN=… KUBECONFIG=…` for the running simulator, for eval"
    )
    environment.add_argument("--wait", type=float, default=0.0, metavar="SECONDS", help="for one still starting")
    tools = commands.add_parser(
        "tools", help="find or build the test bed's binaries (tools/*/build.sh); print NAME_DIR=FOLDER lines"
    )
    tools.add_argument("names", nargs="*", choices=[[], *TOOLS], metavar="NAME", help=f"of {', '.join(TOOLS)}: all")
    tools.add_argument(
        "--shell", action="store_true", help="print export lines instead, PATH with pulumi and its language hosts"
    )
    args = parser.parse_args(argv)
    if args.command == "job" and args.action == "queue" and args.count < 1:
        parser.error("--count must be at least 1")
    try:
        return run(args)
    except ToolMissing as error:
        print(f"actions-runners-simulator: {error}", file=sys.stderr)
        return 2
    except control.NoSimulator as error:
        print(f"actions-runners-simulator: {error}", file=sys.stderr)
        return 1
    except control.UnsafeFolder as error:
        print(f"actions-runners-simulator: {error}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    if args.command == "tools":
        folders = tool_dirs(*(args.names or TOOLS))
        for name, folder in folders.items():  # as `env` takes them (the Makefile), or quoted for a shell
            print(
                f"export {TOOLS[name].variable}={shlex.quote(str(folder))}"
                if args.shell
                else f"{TOOLS[name].variable}={folder}"
            )
        if args.shell:
            hosts = [str(folders[name]) for name in ("pulumi", "pulumi-yaml", "pulumi-languages") if name in folders]
            print(f'export PATH={shlex.quote(os.pathsep.join(hosts))}{os.pathsep}"$PATH"')
        return 0
    if args.command == "job" and args.action == "queue":
        print(control.queue_jobs(args.labels, args.seconds, args.count, args.repository))
        return 0
    if args.command == "job" and args.action == "list":
        print(control.list_jobs())
        return 0
    if args.command == "job":
        seconds, after_refusal = getattr(args, "seconds", None), getattr(args, "after_refusal", None)
        print(control.job(args.action, args.runner, seconds, after_refusal=after_refusal))
        return 0
    if args.command == "env":
        print(control.environment(args.wait))
        return 0
    if args.command == "release":
        print(control.release(args.version, args.published))
        return 0
    if args.command == "runner":
        return runner_process.run(args.jitconfig)
    if args.command == "demo":
        return demo.run(runners=args.runners, github_app=args.github_app)
    namespace = None if args.no_namespace else args.namespace
    return serve(
        args.token_lifetime, namespace, args.runner_release, args.long_poll_seconds, kubernetes=not args.github_only
    )


def _long_poll(text: str) -> float:
    """Seconds, above 0 and at most MAX_LONG_POLL_SECONDS: a runner process's poll gives up after 120 s."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= MAX_LONG_POLL_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds above 0, at most {MAX_LONG_POLL_SECONDS:g}")
    return value


def _labels(text: str) -> list[str]:
    labels = [label.strip() for label in text.split(",") if label.strip()]
    if not labels:
        raise argparse.ArgumentTypeError("give at least one label, as linux,x64")
    return labels


def _release(text: str) -> tuple[str, str]:
    try:
        return parse_release(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _day(text: str) -> str:
    try:
        return parse_day(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


if __name__ == "__main__":
    sys.exit(main())
