"""tools/pulumi/build.sh takes a Pulumi installation already on PATH when it can serve: any v3 release at or
above the pinned SDK's, with its Python host beside it, so a user with Pulumi installed builds no pulumi. What
still has to be built is said once, with how long it takes, before it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BUILD = ROOT / "tools" / "pulumi" / "build.sh"
BESIDE = ("pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python")


def installation(folder: Path, version: str, *, hosts: bool = True) -> Path:
    """A stand-in for a Pulumi installation: a `pulumi` that answers `pulumi version` as the real one does."""
    folder.mkdir()
    (folder / "pulumi").write_text(f'#!/bin/sh\n[ "$1" = version ] && echo {version}\n')
    for name in ("pulumi", *(BESIDE if hosts else ())):
        path = folder / name
        if not path.exists():
            path.write_text("#!/bin/sh\nexit 1\n")
        path.chmod(0o755)
    return folder


def chosen(folder: Path) -> Path:
    env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}
    built = subprocess.run([str(BUILD)], env=env, capture_output=True, text=True, check=True)
    return Path(built.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("version", ["v3.260.0", "v3.261.4", "v3.300.0"])
def test_an_installed_pulumi_at_or_above_the_sdk_is_used(tmp_path: Path, version: str) -> None:
    folder = installation(tmp_path / "pulumi", version)
    assert chosen(folder) == folder


@pytest.mark.parametrize(("version", "hosts"), [("v3.259.0", True), ("v2.25.2", True), ("v3.270.0", False)])
def test_an_older_pulumi_or_one_without_its_python_host_is_not(
    cli_dir: Path, tmp_path: Path, version: str, hosts: bool
) -> None:
    """``cli_dir`` first: the build this falls back on is then in the cache, found in milliseconds."""
    folder = installation(tmp_path / "pulumi", version, hosts=hosts)
    fallback = chosen(folder)
    assert fallback != folder and (fallback / "pulumi").is_file()


def test_a_first_run_says_once_what_it_builds_and_how_long_it_took_cold(tmp_path: Path) -> None:
    """tools.py, not each build script, says it: one line naming every build about to run, with its measured
    cold build, before any starts; the scripts' own "building" lines are not passed on, their "built" lines are.
    A second run finds the tool and says nothing. (actionlint: the quickest cold build, seconds here.)"""
    find = [
        sys.executable,
        "-c",
        "from actions_runners_simulator.tools import tool_dirs; tool_dirs('actionlint', 'kube')",
    ]
    env = {**os.environ, "ACTIONLINT_CACHE": str(tmp_path)}
    env.pop("ACTIONLINT_DIR", None)
    first = subprocess.run(find, env=env, capture_output=True, text=True, check=True).stderr
    said = [line for line in first.splitlines() if line.startswith("Building from Go modules")]
    assert len(said) == 1 and f"into {tmp_path}: actionlint (cold: 10 s)" in said[0], first
    assert "kube" not in said[0] and "building actionlint into" not in first and "built actionlint in" in first
    assert first.index("Building from Go modules") < first.index("built actionlint in")
    again = subprocess.run(find, env=env, capture_output=True, text=True, check=True).stderr
    assert again == "", again
