#!/usr/bin/env python3
"""What a release tag releases, for the release workflow's $GITHUB_OUTPUT:

    check-tag.py TAG

prints ``version=X.Y.Z`` (provider/pyproject.toml's) and ``repository=`` the listener image's repository (the
REPOSITORY of provider/pulumi_actions_runners/inputs/listener_image.py, which RunnerScaleSet's default names: the
workflow pushes where the package will look, and names it nowhere itself). It refuses (exit 1) a TAG that is not
``v`` and that version: a tag pushed before the version was bumped would publish the previous version's package
again under another name. Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "provider" / "pyproject.toml"
LISTENER_IMAGE = ROOT / "provider" / "pulumi_actions_runners" / "inputs" / "listener_image.py"


def version() -> str:
    with PYPROJECT.open("rb") as file:
        return tomllib.load(file)["project"]["version"]


def repository() -> str:
    """REPOSITORY's literal value, read without importing the package (none of its dependencies is installed)."""
    for node in ast.parse(LISTENER_IMAGE.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["REPOSITORY"]:
            return ast.literal_eval(node.value)
    raise SystemExit(f"check-tag.py: no REPOSITORY = ... in {LISTENER_IMAGE}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    tag, released = argv[0], version()
    if tag != f"v{released}":
        print(f"check-tag.py: the tag {tag} is not v{released}, provider/pyproject.toml's version", file=sys.stderr)
        return 1
    print(f"version={released}")
    print(f"repository={repository()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
