"""The report as plain text (a terminal, a CI log) and as Markdown (a pull request comment).

In Markdown every value from the preview is a code span (see phrase.py), the one place where GitHub makes no link,
mention, image or HTML of it; our own words are escaped as text.
"""

from __future__ import annotations

import html
import re

from .phrase import Phrase, Value, joined, shown
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
            elif report.live and change.busy is None:
                lines.append(f"  {'':<{width}}    busy now: not looked up")
        lines.append(f"  GitHub: {_github(report.totals)}")
    lines += [f"  note: {notice}" for notice in report.notices]
    return "\n".join(map(shown, lines)) + "\n"  # a value's newline cannot start a line of its own


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
            row = [
                Phrase(change.kind, " ", Value(change.name)),
                change.what,
                joined("; ", change.reasons) if change.reasons else "-",
            ]
            if busy:
                row.append(_busy_cell(change))
            lines.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
        lines += ["", f"GitHub: {_cell(_github(report.totals))}"]
    if report.notices:
        lines += ["", *(f"- **Note:** {_cell(notice)}" for notice in report.notices)]
    return "\n".join(lines) + "\n"


def _busy_cell(change: ResourceChange) -> str:
    if change.busy is None:
        return "not looked up"
    return joined(", ", map(Value, change.busy)) if change.busy else "-"


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


def _cell(text: str) -> str:
    """Markdown for a table cell (or the summary line): values as code spans, our words escaped."""
    parts = text.parts if isinstance(text, Phrase) else (text,)
    return "".join(_code(part) if isinstance(part, Value) else _words(part) for part in parts)


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~])")


def _words(text: str) -> str:
    """Our own words as literal text: no emphasis, link, HTML or cell boundary can start in them."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(shown(text.replace("\n", " ")), quote=False))


def _code(value: str) -> str:
    """A code span no value can close: a fence longer than any run of backticks in it. Inside one, GitHub reads
    no Markdown and no HTML; only the table's cell boundary needs its escape, ``\\|``, and a backslash before it
    would undo that, so backslashes are doubled (shown doubled: code spans show every character)."""
    text = shown(re.sub(r"[\t\n\r]", " ", value)).replace("\\", "\\\\").replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"
