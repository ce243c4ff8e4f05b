#!/usr/bin/env python3
"""Writes the listener image's digest into the package before a release builds it:

    stamp-listener-digest.py DIGEST [FILE]

DIGEST is the built image's (build.sh's last line; the push then checks the registry stored that very
manifest), ``sha256:`` and 64 lowercase hex digits; FILE is the module whose ``DIGEST = ""`` line it rewrites
(default: the checkout's provider/pulumi_actions_runners/inputs/listener_image.py). The default listener image
then names the image by its digest as well as its tag, so that an installed release runs the very image its
release pushed.

It refuses (exit 1, saying why, the file untouched) a DIGEST of another form, and a FILE already stamped with
another digest: a release stamps a clean checkout once. The same digest again changes nothing (exit 0), so that a
re-run job can run it again. Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

FILE = Path(__file__).resolve().parents[2] / "provider" / "pulumi_actions_runners" / "inputs" / "listener_image.py"
WELL_FORMED = re.compile(r"sha256:[0-9a-f]{64}")
# The assignment on a line of its own, its comment kept: DIGEST = "" (or an earlier stamp's digest).
ASSIGNMENT = re.compile(r'^DIGEST = "(?P<value>[^"\n]*)"', re.MULTILINE)


def stamp(digest: str, path: Path = FILE) -> str:
    """What was done, for the log; ValueError (its message the reason) when it refuses."""
    if not WELL_FORMED.fullmatch(digest):
        raise ValueError(f"{digest!r} is not a digest: sha256: and 64 lowercase hex digits")
    text = path.read_text()
    found = list(ASSIGNMENT.finditer(text))
    if len(found) != 1:
        raise ValueError(f'{path} has {len(found)} lines `DIGEST = "..."`, not one')
    current = found[0]["value"]
    if current == digest:
        return f"{path} already names {digest}"
    if current:
        raise ValueError(f"{path} is stamped with {current} already, not {digest}: stamp a clean checkout")
    start, end = found[0].span("value")
    path.write_text(text[:start] + digest + text[end:])
    return f"{path}: DIGEST = {digest!r}"


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        print(stamp(argv[0], Path(argv[1]) if len(argv) == 2 else FILE))
    except ValueError as refused:
        print(f"stamp-listener-digest.py: {refused}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
