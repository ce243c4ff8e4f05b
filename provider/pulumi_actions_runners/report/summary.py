"""The report of a preview: its changes to our resources, their totals, and (with a live look) who is busy."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..github.budget import GITHUB_WINDOW_SECONDS, content_creating_seconds, endpoint_writes_seconds
from .phrase import Phrase, Value, joined
from .plan import RUNNER, TOKEN, GitHubWrites, ResourceChange, plan_changes, runners_phrase
from .upcoming import renewals_due
from .versions import Deprecation, deprecations, unread

SCHEMA = "pulumi-actions-runners/preview-report"
SCHEMA_VERSION = 1


@dataclass
class Totals:
    runners_before: int
    runners_after: int
    recreated: int
    added: int
    removed: int
    relabelled: int
    restarted: int
    out_of_service_at_most: int
    tokens_renewed: int
    writes: GitHubWrites
    shortest_seconds: float  # for the writes, by GitHub's documented limits


@dataclass
class Report:
    changes: list[ResourceChange]
    parallel: int | None  # `pulumi up --parallel`, if the reader gave it: bounds the lone Runners replaced at once
    live: bool = False  # whether ``busy`` was looked up
    notices: list[str] = field(default_factory=list)  # what a reviewer should know beyond the changes
    deprecated: list[Deprecation] = field(default_factory=list)  # runners kept on a version GitHub is dropping

    @property
    def totals(self) -> Totals:
        changes, writes = self.changes, sum((c.writes for c in self.changes), GitHubWrites())
        lone = sum(c.out_of_service_at_most for c in changes if c.kind == RUNNER)
        pools = sum(c.out_of_service_at_most for c in changes if c.kind != RUNNER)
        shortest = max(
            content_creating_seconds(writes.content_creating, GITHUB_WINDOW_SECONDS),
            endpoint_writes_seconds(writes.removals),
        )
        return Totals(
            runners_before=sum(c.runners_before for c in changes),
            runners_after=sum(c.runners_after for c in changes),
            recreated=sum(c.recreated for c in changes),
            added=sum(c.added for c in changes),
            removed=sum(c.removed for c in changes),
            relabelled=sum(c.relabelled for c in changes),
            restarted=sum(c.restarted for c in changes),
            out_of_service_at_most=pools + (lone if self.parallel is None else min(lone, self.parallel)),
            tokens_renewed=sum(1 for c in changes if c.kind == TOKEN and c.action == "renew"),
            writes=writes,
            shortest_seconds=shortest,
        )

    @property
    def recreates(self) -> bool:
        """Runners would be recreated or rotated: the answer a reviewer needs first."""
        return any(c.recreated for c in self.changes)

    @property
    def busy(self) -> list[str]:
        return sorted({name for c in self.changes for name in c.busy or ()})

    @property
    def not_looked_up(self) -> int:
        """With a live look, how many runners it takes down it could not look up (see the notices)."""
        return sum(len(c.at_risk) for c in self.changes if self.live and c.busy is None)

    def summary(self) -> str:
        """One line: what happens to CI capacity."""
        if not self.changes:
            return "No change to any runner, pool or registration token."
        totals = self.totals
        parts = []
        if totals.recreated:
            at_once = totals.out_of_service_at_most
            up_to = "up to " if any(c.uncertain for c in self.changes) else ""
            parts.append(
                f"{up_to}{runners_phrase(totals.recreated)} recreated, at most {at_once} out of service at once"
            )
        for count, words in (
            (totals.relabelled, "relabelled in place"),
            (totals.added, "added"),
            (totals.removed, "removed"),
            (totals.restarted, "that had ended restarted"),
        ):
            if count:
                parts.append(f"{runners_phrase(count)} {words}")
        if totals.tokens_renewed:
            parts.append(
                f"{totals.tokens_renewed} registration token{'s' if totals.tokens_renewed > 1 else ''} renewed"
            )
        line = "; ".join(parts) or "settings only: no runner is touched"
        if not self.live:
            return line + "."
        busy, unknown = self.busy, self.not_looked_up
        return Phrase(
            line,
            *(
                (". Busy now: ", joined(", ", map(Value, busy)), " (their jobs are waited for, never killed)")
                if busy
                else (
                    ". None of the runners it looked up is busy now"
                    if unknown
                    else ". None of the runners it takes down is busy now",
                )
            ),
            f"; {runners_phrase(unknown)} not looked up (see the notes)." if unknown else ".",
        )

    def to_json(self) -> dict[str, Any]:
        """For bots: a field is renamed, removed or changes meaning only with a new ``version``; schema.json
        describes this one exactly."""
        totals = self.totals
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "summary": self.summary(),
            "changes": bool(self.changes),
            "recreates": self.recreates,
            "totals": {
                "runners_before": totals.runners_before,
                "runners_after": totals.runners_after,
                "recreated": totals.recreated,
                "added": totals.added,
                "removed": totals.removed,
                "relabelled": totals.relabelled,
                "restarted": totals.restarted,
                "out_of_service_at_most": totals.out_of_service_at_most,
                "registration_tokens_renewed": totals.tokens_renewed,
                "github_writes": _writes_json(totals.writes),
                "shortest_seconds": totals.shortest_seconds,
            },
            "live": {"busy": self.busy, "not_looked_up": self.not_looked_up} if self.live else None,
            "notices": list(self.notices),
            "deprecated": [d.as_json() for d in self.deprecated],
            "resources": [
                {
                    "type": c.kind,
                    "name": c.name,
                    "action": c.action,
                    "what": c.what,
                    "reasons": c.reasons,
                    "github_url": c.github_url,
                    "runners_before": c.runners_before,
                    "runners_after": c.runners_after,
                    "recreated": c.recreated,
                    "added": c.added,
                    "removed": c.removed,
                    "relabelled": c.relabelled,
                    "restarted": c.restarted,
                    "out_of_service_at_most": c.out_of_service_at_most,
                    "github_writes": _writes_json(c.writes),
                    "busy": c.busy,
                }
                for c in self.changes
            ],
        }

    def json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2)


def build_report(preview: Mapping[str, Any] | str, *, parallel: int | None = None, now: float | None = None) -> Report:
    """The report of `pulumi preview --json`'s output (parsed, or its text): for the Automation API and bots.
    ``now`` (the clock's, unless given) judges which registration tokens fall due soon. PreviewUnreadable if it
    is not such output, or the preview failed."""
    parsed = json.loads(preview) if isinstance(preview, str) else preview
    now = time.time() if now is None else now
    deprecated = deprecations(parsed)
    notices = renewals_due(parsed, now) + [d.phrase(now) for d in deprecated] + unread(parsed)
    return Report(plan_changes(parsed), parallel, notices=notices, deprecated=deprecated)


def _writes_json(writes: GitHubWrites) -> dict[str, int]:
    return {
        "remove_runner": writes.removals,
        "generate_jitconfig": writes.jit_configs,
        "registration_token": writes.tokens,
        "set_labels": writes.relabels,
    }
