"""What a preview does not do but an update soon will: a registration token that falls due within the hour.

A token's Diff reads the clock (it is renewed once it expires within ``refresh_before_seconds``), so a preview
that renews nothing can be followed, minutes later, by an update that renews the token and rotates every runner
registered with it. The reviewer of a pull request is told when that moment is near.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .phrase import Phrase, Value
from .plan import POOL, RUNNER, TOKEN, our_kind, read_steps, resource_name, runners_phrase, step_state

HORIZON_SECONDS = 3600


def renewals_due(preview: Mapping[str, Any], now: float) -> list[Phrase]:
    """A notice per registration token this preview keeps that falls due within HORIZON_SECONDS of ``now``."""
    steps = read_steps(preview)
    notices = []
    for step in steps:
        if our_kind(step) != TOKEN or step.get("op") != "same":
            continue
        token = step_state(step, "oldState")
        due = _due_at(token)
        if due is None or not now < due <= now + HORIZON_SECONDS:
            continue
        registered = _runners_registered_with(steps, token.get("token_hash"))
        when = datetime.fromtimestamp(due, UTC).strftime("%Y-%m-%d %H:%M UTC")
        notices.append(
            Phrase(
                "registration token ",
                Value(resource_name(step["urn"])),
                f" falls due for renewal at {when}, in {max(1, round((due - now) / 60))} min: an update from then on "
                f"renews it and rotates the {runners_phrase(registered)} registered with it, whatever this preview "
                "says",
            )
        )
    return notices


def _due_at(token: Mapping[str, Any]) -> float | None:
    expires_at, before = token.get("expires_at"), token.get("refresh_before_seconds")
    if not isinstance(expires_at, str) or isinstance(before, bool) or not isinstance(before, int | float):
        return None
    try:
        return datetime.fromisoformat(expires_at).timestamp() - before
    except ValueError:
        return None


def _runners_registered_with(steps: list[dict[str, Any]], token_hash: Any) -> int:
    """Runners kept or updated by the preview whose recorded token is this one."""
    count = 0
    for step in steps:
        kind = our_kind(step)
        if kind not in (RUNNER, POOL) or step.get("op") in ("create", "delete") or not token_hash:
            continue
        state = step_state(step, "oldState")
        if kind == RUNNER:
            count += state.get("token_hash") == token_hash
        else:
            count += sum(1 for r in state.get("runners") or () if r.get("token_hash") == token_hash)
    return count
