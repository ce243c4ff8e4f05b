"""What a preview's step means for a RunnerScaleSet: which of its three kinds of update it is (bounds, runners,
listener: the provider's own `update_kind`), what that does to capacity, and how many runners it touches, as
many as its state's last refresh saw. Its runners are its listener's: the preview cannot know how many there will
be when the update runs, and says so."""

from __future__ import annotations

from typing import Any

from ..providers.runner_scale_set import update_kind
from ..wording import counted
from .phrase import Phrase, Value, joined


def scale_set_change(change: Any, op: str, old: dict, new: dict, why: Any) -> Any:
    """``change``: the ResourceChange to fill in (plan.py's); ``why``: plan.py's words for a changed input."""
    runners = list(old.get("runners") or [])
    seen = f"{counted(len(runners), 'runner')} at its last refresh"
    bounds = Phrase("min ", Value(_number(new.get("min_runners"), 0)), ", max ", Value(_number(new.get("max_runners"))))
    change.runners_before = len(runners)
    if op == "create":
        change.what = Phrase("create a scale set of ", bounds, " runners, following the queue")
        return change
    if op == "delete":
        change.what = Phrase("delete the scale set: its listener stopped, then its runners (", seen, ") taken down")
        change.removed, change.at_risk = len(runners), [r["name"] for r in runners if r.get("name")]
        change.out_of_service_at_most = len(runners)
        change.writes.removals = len(runners)
        return change
    if op == "replace":
        change.action = "recreate"
        change.what = Phrase("recreate the scale set: its runners (", seen, ") taken down first, then ", bounds)
        change.removed, change.at_risk = len(runners), [r["name"] for r in runners if r.get("name")]
        change.out_of_service_at_most = len(runners)
        return change
    kinds = update_kind(old, new)
    parts: list[Any] = []
    if "bounds" in kinds:
        parts.append(
            Phrase(
                "capacity from min ",
                Value(_number(old.get("min_runners"), 0)),
                ", max ",
                Value(_number(old.get("max_runners"))),
                " to ",
                bounds,
                " (no runner is replaced for it)",
            )
        )
        change.reasons += [
            why(k, old, new) for k in ("min_runners", "max_runners", "labels") if old.get(k) != new.get(k)
        ]
    if "runners" in kinds:
        idle = [r for r in runners if not r.get("retiring")]
        parts.append(
            Phrase(
                "hand the listener a new runner spec: it replaces its idle runners, busy ones finish their jobs on "
                "the old one (",
                seen,
                ")",
            )
        )
        change.recreated = len(idle)
        change.reasons.append("what its runners are made of changed")
    if "listener" in kinds:
        parts.append("roll its listener (a new pod; its runners are not touched)")
        change.reasons.append("its listener's image or credential changed")
    change.action = "update" if kinds != ["runners"] else "rotate"
    change.what = joined("; ", parts) if parts else "update settings; no runner is touched"
    return change


def _number(value: Any, default: int | None = None) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return default if value is None else value
