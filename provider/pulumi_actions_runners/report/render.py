"""The report as plain text (a terminal, a CI log) and as Markdown (a pull request comment)."""

from __future__ import annotations

from .plan import ResourceChange
from .summary import Report, Totals

# The first line of the Markdown: a workflow finds its earlier comment by it, to update it in place.
MARKDOWN_MARKER = "<!-- pulumi-actions-runners preview report -->"


def text(report: Report) -> str:
    lines = [f"Runners: {report.summary()}"]
    if report.changes:
        width = max(len(_resource(c)) for c in report.changes)
        for change in report.changes:
            lines.append(f"  {_resource(change):<{width}}  {change.what}")
            for reason in change.reasons:
                lines.append(f"  {'':<{width}}    because: {reason}")
            if change.busy:
                lines.append(f"  {'':<{width}}    busy now: {', '.join(change.busy)}")
        lines.append(f"  GitHub: {_github(report.totals)}")
    return "\n".join(lines) + "\n"


def markdown(report: Report) -> str:
    lines = [MARKDOWN_MARKER, f"**Runners:** {_cell(report.summary())}"]
    if report.changes:
        busy = report.live
        lines += [
            "",
            "| Resource | What happens | Why" + (" | Busy now |" if busy else " |"),
            "|---|---|---" + ("|---|" if busy else "|"),
        ]
        for change in report.changes:
            row = [f"{change.kind} `{change.name}`", change.what, "; ".join(change.reasons) or "-"]
            if busy:
                row.append(", ".join(change.busy or ()) or "-")
            lines.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
        lines += ["", f"GitHub: {_cell(_github(report.totals))}"]
    return "\n".join(lines) + "\n"


def _resource(change: ResourceChange) -> str:
    return f"{change.kind} {change.name}"


def _github(totals: Totals) -> str:
    writes = totals.writes
    counts = [
        (writes.removals, "RemoveRunner"),
        (writes.jit_configs, "generate-jitconfig"),
        (writes.tokens, "registration-token"),
        (writes.relabels, "set-labels"),
    ]
    named = ", ".join(f"{count} {name}" for count, name in counts if count)
    if not named:
        return "no writes."
    pace = (
        "let them all through at once"
        if totals.shortest_seconds == 0
        else f"need {_duration(totals.shortest_seconds)} for them at the least"
    )
    return (
        f"{named} (besides listings, which all waiting runners share); GitHub's limits (80 content-creating "
        f"requests a minute and 500 an hour, 900 points a minute per endpoint) {pace}."
    )


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")
