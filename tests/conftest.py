"""Shared fixtures: the simulator (the GitHub double and a real Kubernetes API server on loopback, one per session)
and the engine stand-in; and how the suite runs several tests at once.

The suite runs on pytest-xdist's workers (``-n auto``, pyproject.toml): its tests mostly wait on processes that
start, poll and sleep, so one worker per core would leave the cores idle (WORKERS_PER_CORE says how many). Each
worker is a session of its own, with its own control plane (kube-apiserver, etcd and kube-controller-manager on
ports and folders of their own), its own simulators, and its own folders for what the simulator and pulumi keep
(``XDG_RUNTIME_DIR``; every workspace has its own ``PULUMI_HOME`` and backend already), so no test sees another's
pods, runners or stacks. A test marked ``alone`` (one that measures time, or an engine's ``--parallel``) runs with
no other test running, whatever the workers: every other test holds a shared lock while it runs, and an ``alone``
one an exclusive lock, taken after a turnstile that keeps new tests from starting meanwhile (so it is never
starved).
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.github_double import LISTING_ORDERS, GitHubDouble
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.tools import tool_dirs

ROOT = Path(__file__).resolve().parent.parent
PROGRAM_DIR = ROOT / "programs" / "runners"
# The suite's runners live this many times as fast as actions/runner's own durations (runner.RunnerTimings).
RUNNER_SPEEDUP = 100.0


# Workers per core: a test here waits (on a control plane, a runner's start, a pulumi CLI) more than it computes.
# With `up` previewing first, 4 workers on 2 cores were CPU-bound and no faster than 3; without that preview (the
# test bed's --skip-preview), 3 left a third of the CPU idle, and 4 keep it busy. docs/development.md has the figures.
WORKERS_PER_CORE = 2
# The modules whose tests take a minute or more each (measured: docs/development.md), slowest first.
SLOW_FIRST = tuple(
    f"tests.{name}"
    for name in (
        "test_walkthrough",
        "test_package",
        "test_cli_e2e",
        "test_plugin_yaml",
        "test_update_plans",
        "test_soak",
        "test_kubeconfig",
        "test_release",
        "test_cli_errors",
        "test_upgrades",
    )
)
ALONE = "alone"
LOCKS = "PYTEST_ALONE_LOCKS"  # the folder of the run's locks, made by its own process (pytest_configure)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: WORKERS_PER_CORE per core this process may use."""
    return max(1, int(WORKERS_PER_CORE * len(os.sched_getaffinity(0))))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{ALONE}: runs with no other test running (it measures time)")
    if config.getoption("dist", None) == "loadgroup" and pytest.version_tuple[:2] >= (9, 2):
        # pytest 9.2's node ids ignore the group pytest-xdist 3.8 writes into them (pytest-xdist#1386): nothing
        # would be grouped, and every module's stack brought up once per worker.
        raise pytest.UsageError("pytest 9.2 breaks --dist loadgroup (pytest-xdist#1386): use requirements-dev.txt's")
    if not hasattr(config, "workerinput"):  # the run's own process: its workers inherit the locks' folder
        locks = tempfile.mkdtemp(prefix="pytest-locks-")
        os.environ[LOCKS] = locks
        config.add_cleanup(lambda: shutil.rmtree(locks, ignore_errors=True))
    # What the simulator keeps while it runs, per session (each xdist worker is one), never the user's own.
    runtime = tempfile.mkdtemp(prefix="pytest-runtime-")
    os.environ["XDG_RUNTIME_DIR"] = runtime
    config.add_cleanup(lambda: shutil.rmtree(runtime, ignore_errors=True))
    config.stash[_STARTED] = time.monotonic()


_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its own pytest_collection_modifyitems)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of a module whose fixtures are the module's (a stack brought up once for all of them) run on one
    worker (``--dist loadgroup``), so that its fixtures are made once, not once per worker. The modules of the
    slowest tests come first, so that workers start them first (xdist hands out a module's group before lone
    tests, then lone tests in this order), rather than end the run with one of them."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(_module_name(item), len(rank)))
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        scopes = {d.scope for defs in (fixtures.name2fixturedefs.values() if fixtures else ()) for d in defs}
        if scopes & {"module", "class", "package"}:
            item.add_marker(pytest.mark.xdist_group(_module_name(item) or item.nodeid))


def _module_name(item: pytest.Item) -> str:
    return item.module.__name__ if item.module else ""


def _lock_file(name: str) -> int:
    return os.open(os.path.join(os.environ[LOCKS], f"{name}.lock"), os.O_CREAT | os.O_RDWR, 0o600)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """A test marked ``alone`` runs with no other: see the module's docstring."""
    turnstile, tests = _lock_file("turnstile"), _lock_file("tests")
    alone = item.get_closest_marker(ALONE) is not None
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if alone:
            fcntl.flock(tests, fcntl.LOCK_EX)  # once every test under way has ended; none starts meanwhile
        else:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(tests, fcntl.LOCK_SH)
        return (yield)
    finally:
        os.close(tests)  # releases its locks
        os.close(turnstile)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The run's wall time and how many tests ran at once, last: what a change to the suite is measured by."""
    workers = getattr(config.option, "numprocesses", None) or 1  # an int once xdist chose; None with -n 0
    seconds = round(time.monotonic() - config.stash[_STARTED])
    cores = len(os.sched_getaffinity(0))
    ran = f"{workers} worker{'s' * (workers != 1)} on {cores} cores"
    terminalreporter.write_line(f"suite: {ran}, wall time {seconds // 60} min {seconds % 60} s")


@pytest.fixture(scope="session")
def cli_dir() -> Path:
    """The folder with pulumi and its Python host: PULUMI_CLI_DIR, or what build.sh builds (cached) or finds."""
    return tool_dirs("pulumi")["pulumi"]


@pytest.fixture(scope="session")
def yaml_dir() -> Path:
    """The folder with Pulumi's YAML language host (tools/pulumi-yaml)."""
    return tool_dirs("pulumi-yaml")["pulumi-yaml"]


@pytest.fixture(scope="session")
def plugin_dir() -> Path:
    """The folder with pulumi-resource-kubernetes, for programs/runners' own Namespace."""
    return tool_dirs("pulumi-kubernetes")["pulumi-kubernetes"]


@pytest.fixture
def github() -> Iterator[GitHubDouble]:
    """A GitHub double of its own, on loopback: the double's contract tests and its version policy's."""
    double = GitHubDouble().start()
    yield double
    double.stop()


@pytest.fixture(scope="session")
def kube_api_server() -> Iterator[KubeApiServer]:
    """One real API server for the session (it takes seconds to start); each simulator resets it at its end."""
    with KubeApiServer(tool_dirs("kube")["kube"]) as server:
        yield server


@functools.cache
def listener_image() -> Path:
    """The listener's OCI image layout of this tree (`make listener-image`, cached by what goes in): every
    simulator of the suite runs the listener from it, so the image is what the tests exercise."""
    return tool_dirs("listener-image")["listener-image"]


def quick_simulator(kube_api_server: KubeApiServer, **overrides: Any) -> Simulator:
    """A simulator on the session's API server whose runners live RUNNER_SPEEDUP times as fast as actions/runner
    (registered in hundredths of a second; a stale session lapses in 3 s, a dead runner's job in 6 s), and whose
    node runs the listener's image."""
    settings = {
        "token_lifetime": 2000,
        "schedule_delay": 0.05,
        "runner_speedup": RUNNER_SPEEDUP,
        "listener_image": listener_image(),
    }
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
    """The condition's first true value, looked for every 20 ms at first, then less often (100 ms at most: no
    state a test waits for lasts less), so that a long wait does not take the CPU that other workers need."""
    deadline, delay = time.monotonic() + timeout, 0.02
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(delay)
        delay = min(delay * 1.25, 0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
