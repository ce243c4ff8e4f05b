"""Words of ours with values from the preview between them, kept apart so that Markdown can quote each value.

A pull request's branch chooses its inputs (names, labels, an image, a group) and, since its code writes the
preview, any value in it. In a comment, such a value could open a link, an image, a mention, raw HTML (``<!--``
hides the rows after it) or a table cell. A ``Phrase`` is the text the text and JSON forms print, and remembers
which of its parts are ``Value``s, which ``render.markdown`` sets as code spans that no value can close.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

# Characters that do not show, or change what is around them: controls (a newline would start a line that a CI log
# reads as a workflow command), bidirectional overrides and zero-width marks, line and paragraph separators.
_UNSHOWN = {"Cc", "Cf", "Zl", "Zp"}


class Value(str):
    """A value from the preview (an input, a name, a state's output), or a property's name: code in Markdown."""


class Phrase(str):
    """A str, as the text and JSON forms show it, made of words of ours and ``Value``s."""

    parts: tuple[str, ...]

    def __new__(cls, *parts: str) -> Phrase:
        flat = tuple(p for part in parts for p in (part.parts if isinstance(part, Phrase) else (part,)) if p)
        phrase = super().__new__(cls, "".join(flat))
        phrase.parts = flat
        return phrase


def joined(separator: str, items: Iterable[str]) -> Phrase:
    """``separator.join(items)``, keeping which parts are values."""
    parts: list[str] = []
    for index, item in enumerate(items):
        parts += [separator, item] if index else [item]
    return Phrase(*parts)


def shown(text: str) -> str:
    """The text with each character that would not show as itself written out, as [U+202E]."""
    return "".join(f"[U+{ord(c):04X}]" if unicodedata.category(c) in _UNSHOWN else c for c in text)
