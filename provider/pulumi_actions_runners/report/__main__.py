"""python -m pulumi_actions_runners.report [PREVIEW_JSON] [--format text|markdown|json] [--live] [--fail-on ...]

Exit codes, as `terraform plan -detailed-exitcode`: 0 nothing of ours changes; 2 something of ours changes (the
report says whether runners are recreated); 1 an error, or a --fail-on condition that holds (the report is
printed all the same).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from . import PreviewUnreadable, Report, build_report, look_live, render
from .live import LiveLookFailed
from .phrase import shown
from .versions import UNLISTED_SAMES, sames_unlisted

NO_CHANGE, FAILED, CHANGES = 0, 1, 2
FORMATS: dict[str, Callable[[Report], str]] = {
    "text": render.text,
    "markdown": render.markdown,
    "json": Report.json_text,
}
GATES: dict[str, tuple[Callable[[Report], bool], str]] = {
    "recreate": (lambda r: r.recreates, "runners would be recreated or rotated"),
    "busy": (
        lambda r: bool(r.busy) or r.not_looked_up > 0,
        "runners it takes down are running jobs now, or could not be looked up",
    ),
    "change": (lambda r: bool(r.changes), "runners, pools or tokens would change"),
    "deprecated": (
        lambda r: bool(r.deprecated),
        "runners would run an actions/runner version GitHub stops sending jobs to (see the notes)",
    ),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit code, 2, means "changes" here
        self.print_usage(sys.stderr)
        self.exit(FAILED, f"{self.prog}: error: {message}\n")


def _at_least_one(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of 1 or more")
    return int(value)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(
        prog="python -m pulumi_actions_runners.report",
        description="What a `pulumi preview --json` does to the runners, and why.",
    )
    parser.add_argument("preview", nargs="?", default="-", help="its output: a file, or - for standard input")
    parser.add_argument("--format", choices=FORMATS, default="text")
    parser.add_argument(
        "--live",
        action="store_true",
        help="list the runners to be taken down that are busy now (one GitHub listing per scope, only of the "
        "scopes the deployed state names)",
    )
    parser.add_argument(
        "--github-host",
        action="append",
        metavar="HOST",
        help="with --live: the only GitHub host to send the credential to (repeatable; https://github.com, say); "
        "default: the hosts the deployed state names",
    )
    parser.add_argument("--fail-on", choices=GATES, action="append", default=[], help="exit 1 when this holds")
    parser.add_argument(
        "--parallel",
        type=_at_least_one,
        help="`pulumi up --parallel`: how many lone Runners it replaces at once (default: all)",
    )
    args = parser.parse_args(argv)
    if "busy" in args.fail_on and not args.live:
        parser.error("--fail-on busy needs --live")
    if args.github_host and not args.live:
        parser.error("--github-host goes with --live")
    try:
        text = sys.stdin.read() if args.preview == "-" else Path(args.preview).read_text(encoding="utf-8")
        preview = json.loads(text)
        report = build_report(preview, parallel=args.parallel)
        blind = "deprecated" in args.fail_on and sames_unlisted(preview)
        if blind:
            report.notices.append(UNLISTED_SAMES)
        if args.live:
            look_live(report, args.github_host)
    except (OSError, ValueError, PreviewUnreadable, LiveLookFailed) as error:
        _say(f"report: {error}")
        return FAILED
    except (KeyError, TypeError, AttributeError, IndexError) as error:  # JSON, but not shaped as a preview's
        _say(f"report: this is not the output of `pulumi preview --json` ({error!r} is amiss)")
        return FAILED
    sys.stdout.write(FORMATS[args.format](report))
    failed = [GATES[gate][1] for gate in args.fail_on if GATES[gate][0](report)]
    if blind:  # a gate that cannot see what it guards fails, rather than pass a pinned image it never saw
        failed.append(
            "--fail-on deprecated needs `pulumi preview --json --show-sames`: unchanged resources are unlisted"
        )
    for why in failed:
        print(f"report: failing, as --fail-on asks: {why}", file=sys.stderr)
    if failed:
        return FAILED
    return CHANGES if report.changes else NO_CHANGE


def _say(message: str) -> None:
    """One line on stderr: a preview's error text (a branch's program writes it) cannot start a line of its own,
    which a CI log would read as a workflow command."""
    print(shown(" | ".join(message.splitlines())), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
