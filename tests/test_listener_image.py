"""The listener's OCI image (`make listener-image`, tools/listener-image/build.sh): what it runs, as whom, what
is in it and what is not, and that a second build of the same tree gives the same digest. Every simulator of the
suite runs the listener from this image (tests/conftest.py's listener_image, package_processes.py)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

from actions_runners_simulator.oci_image import read_image
from pulumi_actions_runners import __version__
from pulumi_actions_runners.kube.scale_set_manifests import LISTENER_COMMAND, ListenerSpec, listener_deployment
from tests.conftest import ROOT, listener_image

MAX_MEGABYTES = 60  # compressed, as a registry stores it (46.9 MB when it was written)


def members() -> set[str]:
    image = read_image(listener_image())
    names: set[str] = set()
    for layer in image.layers:
        with tarfile.open(image.blob(layer.digest)) as tar:
            names.update(m.name.removeprefix("./") for m in tar.getmembers())
    return names


def test_the_image_runs_the_listener_as_a_user_not_root_and_says_its_version() -> None:
    image = read_image(listener_image())
    assert list(image.config.entrypoint) == [LISTENER_COMMAND] and not image.config.cmd
    uid, gid = image.config.uid_gid()
    assert uid != 0 and gid != 0
    assert image.config.env["PATH"].startswith("/opt/listener/bin:")
    assert image.config.labels["org.opencontainers.image.version"] == __version__ == image.ref
    assert image.size < MAX_MEGABYTES * 1e6, f"{image.size / 1e6:.1f} MB"


def test_the_deployment_runs_the_image_s_own_entry_point() -> None:
    """No command in the pod: what the image says it runs is what runs (here and in a cluster)."""
    spec = ListenerSpec(
        scale_set_name="s", namespace="n", github_url="https://github.com/o", image="i", owner=None, credential={}
    )
    (container,) = listener_deployment(spec)["spec"]["template"]["spec"]["containers"]
    assert "command" not in container and "args" not in container


def test_nothing_the_listener_does_not_need_is_in_it() -> None:
    names = members()
    assert "opt/listener/bin/actions-runners-listener" in names
    assert any(n.startswith("opt/listener/lib/python3.11/site-packages/prometheus_client/") for n in names)
    for absent in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/dpkg", "usr/bin/apt", "usr/bin/pip"):
        assert absent not in names, absent
    for program in ("actions-runners-simulator", "pulumi-resource-actions-runners"):
        assert f"opt/listener/bin/{program}" not in names, program
    for left_out in ("pulumi/", "grpc/", "aiohttp/", "actions_runners_simulator/"):
        assert not [n for n in names if f"site-packages/{left_out}" in n], left_out


def test_a_second_build_of_the_same_tree_gives_the_same_digest(tmp_path: Path) -> None:
    """Reproducible: every date is SOURCE_DATE_EPOCH (build.sh); Debian's packages come from its cache here."""
    env = {**os.environ, "PYTHON": str(ROOT / ".venv" / "bin" / "python")}
    built = subprocess.run(
        [str(ROOT / "tools" / "listener-image" / "build.sh"), str(tmp_path / "again")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    path, digest, _size = built.stdout.strip().splitlines()[-1].split()
    assert digest == read_image(listener_image()).digest == read_image(path).digest
