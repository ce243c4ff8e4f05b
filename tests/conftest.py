"""Shared fixtures: the simulator (GitHub and Kubernetes doubles on loopback) and the engine stand-in."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
PROGRAM_DIR = ROOT / "programs" / "runners"


@pytest.fixture(scope="session")
def cli_dir() -> Path:
    """The folder with pulumi and its Python host: PULUMI_CLI_DIR, or what build.sh builds (cached) or finds."""
    if os.environ.get("PULUMI_CLI_DIR"):
        return Path(os.environ["PULUMI_CLI_DIR"])
    built = subprocess.run([str(ROOT / "tools" / "pulumi" / "build.sh")], capture_output=True, text=True, check=False)
    if built.returncode != 0:
        pytest.fail(f"tools/pulumi/build.sh failed:\n{built.stderr}")
    return Path(built.stdout.strip())


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator(token_lifetime=2000, schedule_delay=0.05, boot_seconds=0.02, stop_seconds=0.02) as simulator:
        yield simulator


@pytest.fixture
def engine(sim: Simulator) -> Iterator[MiniEngine]:
    """The engine stand-in, with the stack config a user would set for the program in programs/runners."""
    config = sim.stack_config(runners=2, grace_period_seconds=0.5)
    with MiniEngine(ROOT, config=config, secret_config={"githubToken": sim.credential}) as mini_engine:
        yield mini_engine


def wait_until(condition: Callable[[], object], what: str, timeout: float = 10.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
