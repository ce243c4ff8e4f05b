"""During a preview, values other resources compute are not known yet: every layer's judgement of an input
(Check's rules, Diff, the report) asks these first.

An unknown is the Pulumi SDK's ``Unknown``: no value can be one in a process that has not imported the SDK (a
RunnerScaleSet's listener), which so need not import it for this question.
"""

from __future__ import annotations

import sys
from typing import Any


def is_unknown(value: Any) -> bool:
    output = sys.modules.get("pulumi.output")
    return output is not None and isinstance(value, output.Unknown)


def holds_unknown(value: Any) -> bool:
    if isinstance(value, dict):
        return any(map(holds_unknown, value.values()))
    if isinstance(value, (list, tuple)):
        return any(map(holds_unknown, value))
    return is_unknown(value)
