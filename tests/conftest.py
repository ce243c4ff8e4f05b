"""Shared fixtures: the simulator (the GitHub double and a real Kubernetes API server on loopback, one per session)
and the engine stand-in."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.github_double import LISTING_ORDERS
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.tools import tool_dirs

ROOT = Path(__file__).resolve().parent.parent
PROGRAM_DIR = ROOT / "programs" / "runners"
# The suite's runners live this many times as fast as actions/runner's own durations (runner.RunnerTimings).
RUNNER_SPEEDUP = 100.0


@pytest.fixture(scope="session")
def cli_dir() -> Path:
    """The folder with pulumi and its Python host: PULUMI_CLI_DIR, or what build.sh builds (cached) or finds."""
    return tool_dirs("pulumi")["pulumi"]


@pytest.fixture(scope="session")
def plugin_dir() -> Path:
    """The folder with pulumi-resource-kubernetes, for programs/runners' own Namespace."""
    return tool_dirs("pulumi-kubernetes")["pulumi-kubernetes"]


@pytest.fixture(scope="session")
def kube_api_server() -> Iterator[KubeApiServer]:
    """One real API server for the session (it takes seconds to start); each simulator resets it at its end."""
    with KubeApiServer(tool_dirs("kube")["kube"]) as server:
        yield server


def quick_simulator(kube_api_server: KubeApiServer, **overrides: Any) -> Simulator:
    """A simulator on the session's API server whose runners live RUNNER_SPEEDUP times as fast as actions/runner
    (registered in hundredths of a second; a stale session lapses in 3 s, a dead runner's job in 6 s)."""
    settings = {"token_lifetime": 2000, "schedule_delay": 0.05, "runner_speedup": RUNNER_SPEEDUP}
    return Simulator(api_server=kube_api_server, **{**settings, **overrides})


@pytest.fixture
def sim(kube_api_server: KubeApiServer, request: pytest.FixtureRequest) -> Iterator[Simulator]:
    """Parametrized indirectly (``LISTED_IN_EVERY_ORDER``), a test runs once per order GitHub might list runners in."""
    with quick_simulator(kube_api_server, listing_order=getattr(request, "param", "id")) as simulator:
        yield simulator


# For tests whose waits read runner listings: GitHub documents no order for them (see LISTING_ORDERS).
LISTED_IN_EVERY_ORDER = pytest.mark.parametrize("sim", LISTING_ORDERS, indirect=True)


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
