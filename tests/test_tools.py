"""tools/pulumi/build.sh takes a Pulumi installation already on PATH when it can serve: any v3 release at or
above the pinned SDK's, with its Python host beside it, so a user with Pulumi installed builds no pulumi."""

from __future__ import annotations

import os
import subprocess
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
