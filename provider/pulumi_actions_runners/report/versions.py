"""Runners the preview keeps on an actions/runner version GitHub stops sending jobs to, and by when.

Check records, in each Runner's and RunnerPool's inputs, the version its runners will run (``runner_version``)
and what GitHub's release list says of it (``runner_release``: the newest release and each version's last day of
jobs, 30 days after the release that followed it: inputs/runner_version.py). A tracked version is rotated by the
preview itself; a pinned image behind the newest release is named here, with the day, and `--fail-on
deprecated` fails a pipeline on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..unknowns import holds_unknown
from .phrase import Phrase, Value
from .plan import POOL, RUNNER, our_kind, read_steps, resource_name, step_state


@dataclass(frozen=True)
class Deprecation:
    """A resource whose runners will run a version GitHub stops (or stopped) sending jobs to."""

    kind: str
    name: str
    runner_version: str
    newest: str | None
    no_jobs_after: str  # RFC 3339

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "name": self.name,
            "runner_version": self.runner_version,
            "newest": self.newest,
            "no_jobs_after": self.no_jobs_after,
        }

    def phrase(self, now: float) -> Phrase:
        deadline = datetime.fromisoformat(self.no_jobs_after.replace("Z", "+00:00"))
        tense = "stopped" if deadline.timestamp() <= now else "stops"
        return Phrase(
            f"{self.kind} ",
            Value(self.name),
            " runs actions/runner ",
            Value(self.runner_version),
            ", behind the newest release ",
            Value(self.newest or "(unknown)"),
            f": GitHub {tense} sending it jobs after {deadline.astimezone(UTC):%Y-%m-%d}",
        )


def deprecations(preview: Mapping[str, Any]) -> list[Deprecation]:
    """Each Runner or RunnerPool the preview keeps or makes whose runners will run a version behind the newest."""
    found = []
    for step in read_steps(preview):
        kind = our_kind(step)
        if kind not in (RUNNER, POOL) or step.get("op") == "delete":
            continue
        new = step_state(step, "newState")
        version, release = new.get("runner_version"), new.get("runner_release")
        if not isinstance(version, str) or not isinstance(release, Mapping) or holds_unknown(release):
            continue
        deadline = (release.get("deadlines") or {}).get(version)
        if isinstance(deadline, str):
            found.append(Deprecation(kind, resource_name(step["urn"]), version, release.get("newest"), deadline))
    return found


def unread(preview: Mapping[str, Any]) -> list[Phrase]:
    """A note per resource tracking the newest release whose Check could not read GitHub's list: this preview
    kept its version, and the update, which reads the list again, may rotate its runners."""
    notes = []
    for step in read_steps(preview):
        if our_kind(step) not in (RUNNER, POOL) or step.get("op") == "delete":
            continue
        release = step_state(step, "newState").get("runner_release")
        if isinstance(release, Mapping) and release.get("tracking") is True and release.get("learned") is False:
            notes.append(
                Phrase(
                    f"{our_kind(step)} ",
                    Value(resource_name(step["urn"])),
                    " tracks the newest actions/runner release, but its preview could not read GitHub's list (see "
                    "the preview's warning): the update reads it again, and may rotate its runners",
                )
            )
    return notes


UNLISTED_SAMES = (
    "the preview lists none of the resources it keeps unchanged (`pulumi preview --json --show-sames` does): the "
    "runner versions they run were not checked"
)


def sames_unlisted(preview: Mapping[str, Any]) -> bool:
    """Whether the preview keeps resources it does not list: without --show-sames, a pinned image that is not
    changed is not in the preview's steps, and the report cannot judge it."""
    kept = (preview.get("changeSummary") or {}).get("same", 0)
    return kept > sum(step.get("op") == "same" for step in read_steps(preview))  # the stack's own is listed
