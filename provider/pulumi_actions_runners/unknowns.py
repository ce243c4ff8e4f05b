"""During a preview, values other resources compute are not known yet: every layer's judgement of an input
(Check's rules, Diff, the report) asks these first."""

from __future__ import annotations

from typing import Any

from pulumi.output import Unknown


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown)


def holds_unknown(value: Any) -> bool:
    if isinstance(value, dict):
        return any(map(holds_unknown, value.values()))
    if isinstance(value, (list, tuple)):
        return any(map(holds_unknown, value))
    return is_unknown(value)
