"""Numbers in the provider's sentences: "1 runner", "3 runners"."""

from __future__ import annotations


def counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
