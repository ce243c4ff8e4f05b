"""The binaries of the test bed: the pulumi CLI, kube-apiserver with etcd, pulumi-resource-kubernetes,
actionlint (for the workflow in programs/gitops), Pulumi's YAML language host (for programs/yaml), and our own
Node.js, Go and .NET hosts (for programs/typescript and `pulumi package gen-sdk`), and two programs on the
`scaleset` crate (a client of the runner scale set protocol no one here wrote, and the crate's example
autoscaler) that the tests point at the simulator's Actions service; and the RunnerScaleSet listener's OCI image,
built from Debian's packages and the tree's own wheel, which the test bed's node runs (package_processes.py).

Each comes from an environment variable naming its folder, else from its tools/*/build.sh in a checkout (found
on PATH or built once into a cache), else from PATH. Those named in one call are built concurrently, so a fresh
machine waits once, for the slowest (`python -m actions_runners_simulator tools`, which `make` runs first, names
them all).
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]


# The versions the language hosts report (tools/pulumi-yaml/build.sh, tools/pulumi-languages/build.sh), under
# which a workspace installs them as plugins.
YAML_HOST_VERSION = "1.25.0"
NODEJS_HOST_VERSION = "3.260.0"


class ToolMissing(Exception):
    pass


@dataclass(frozen=True)
class Tool:
    variable: str  # the environment variable that names its folder
    script: str  # its build script in a checkout
    binary: str  # a file the folder must hold
    what: str  # what it is, for a user who has to find it
    # How long its cold build took on 2 cores with empty Go caches, which a first run says before it starts.
    # pulumi, kube and pulumi-kubernetes were built together, as a first `make demo` or `make test` builds them (a
    # fresh machine, 2026-12); the others alone (`tools/NAME/build.sh` with GOCACHE and GOMODCACHE empty).
    cold_build_seconds: int


# The simulator (`serve`, `demo`) needs kube; the demo pulumi and pulumi-yaml too; the tests all of them.
TOOLS = {
    "pulumi": Tool(
        "PULUMI_CLI_DIR",
        "tools/pulumi/build.sh",
        "pulumi",
        "the pulumi CLI, v3.260.0 or a later v3, with its Python language host beside it (a Pulumi installation)",
        552,
    ),
    "kube": Tool(
        "KUBE_BIN_DIR",
        "tools/kube/build.sh",
        "kube-apiserver",
        "kube-apiserver, kube-controller-manager and etcd (Kubernetes v1.37, etcd v3.7), in one folder",
        673,
    ),
    "pulumi-kubernetes": Tool(
        "PULUMI_KUBERNETES_DIR",
        "tools/pulumi-kubernetes/build.sh",
        "pulumi-resource-kubernetes",
        "pulumi-resource-kubernetes, the plugin of the pulumi_kubernetes SDK in requirements.txt",
        810,
    ),
    "actionlint": Tool("ACTIONLINT_DIR", "tools/actionlint/build.sh", "actionlint", "actionlint", 10),
    "pulumi-yaml": Tool(
        "PULUMI_YAML_DIR",
        "tools/pulumi-yaml/build.sh",
        "pulumi-language-yaml",
        "Pulumi's YAML language host, pulumi-language-yaml v1.25.0",
        70,
    ),
    "pulumi-languages": Tool(
        "PULUMI_LANGUAGES_DIR",
        "tools/pulumi-languages/build.sh",
        "pulumi-language-nodejs",
        "the Node.js and Go language hosts",
        67,
    ),
    "scaleset-client": Tool(
        "SCALESET_CLIENT_DIR",
        "tools/scaleset-client/build.sh",
        "scaleset-client",
        "scaleset-client and scaleset-autoscaler, two programs on the scaleset crate (tools/scaleset-client)",
        97,
    ),
    # A folder too: the image's OCI layout. Its script's last line is "PATH DIGEST SIZE".
    "listener-image": Tool(
        "LISTENER_IMAGE_DIR",
        "tools/listener-image/build.sh",
        "index.json",
        "the listener's OCI image layout (`make listener-image`; it needs mmdebstrap and umoci: apt-get install "
        "mmdebstrap umoci)",
        40,
    ),
}
# A build script that builds says so on its first line (tools/cache.sh's build_into); one that finds its tool
# prints nothing there and exits within a second or two.
BUILDING = re.compile(r"^building (?P<what>.*) into (?P<cache>\S+) \(once")
DECIDE_SECONDS = 30.0  # for every script together to say whether it builds
STOP_SECONDS = 10.0


@dataclass
class _Build:
    """A build script running, and what its first stderr line said (whether and what it builds)."""

    process: subprocess.Popen[str]
    first_line: queue.Queue[str | None] = field(default_factory=queue.Queue)
    settled: threading.Event = field(default_factory=threading.Event)  # the announcement is made, or given up
    announced: bool = False
    passing_on: threading.Thread | None = None


class ToolBuilds:
    """The tools named, each found at once or built by its script, all scripts started together; `get` waits for
    one tool alone, so a caller can start what needs only the tools that are ready."""

    def __init__(self, *names: str) -> None:
        self._names = names
        self.found: dict[str, Path] = {}
        self._builds: dict[str, _Build] = {}
        for name in names:
            tool = TOOLS[name]
            if os.environ.get(tool.variable):
                self.found[name] = Path(os.environ[tool.variable])
            elif (PROJECT_DIR / tool.script).is_file():
                self._start(name, PROJECT_DIR / tool.script)
            elif on_path := shutil.which(tool.binary):
                self.found[name] = Path(on_path).parent
            else:
                self.stop()
                raise ToolMissing(
                    f"this needs {tool.what}: {tool.binary} is not on PATH, and {tool.variable} does not name its "
                    f"folder. Put it on PATH or set {tool.variable}; or run this from a checkout of "
                    f"pulumi-actions-runners, where {tool.script} builds it once (`make demo` does; then "
                    "`python -m actions_runners_simulator tools --shell` prints the settings for elsewhere)"
                )
        self._announce()

    def _start(self, name: str, script: Path) -> None:
        process = subprocess.Popen(
            _one_at_a_time(name, script), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        build = _Build(process)
        build.passing_on = threading.Thread(target=_pass_on, args=(build,), name=f"build-{name}", daemon=True)
        build.passing_on.start()
        self._builds[name] = build

    def _announce(self) -> None:
        """One message for every build about to run, with how long each took cold, before any build's own output
        (held until then); a build whose script had not said within DECIDE_SECONDS says so itself."""
        builds = []
        deadline = time.monotonic() + DECIDE_SECONDS
        try:
            for name, build in self._builds.items():
                try:
                    line = build.first_line.get(timeout=max(deadline - time.monotonic(), 0.0))
                except queue.Empty:
                    continue
                if line is not None and (match := BUILDING.match(line)):
                    build.announced = True
                    builds.append((name, match["what"], Path(match["cache"]).parent))
            if builds:
                listed = ", ".join(
                    f"{what} (cold: {_minutes(TOOLS[name].cold_build_seconds)})" for name, what, _ in builds
                )
                longest = max(TOOLS[name].cold_build_seconds for name, _, _ in builds)
                together = " for them all (they build at once)" if len(builds) > 1 else ""
                print(
                    f"Building from Go modules, Rust crates and Debian packages, once, into {builds[0][2]}: {listed}. "
                    f"With empty Go and Cargo caches on 2 cores, expect about {_minutes(longest)}{together}; less "
                    "with the caches warm. Later runs find them in under a second.",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            for build in self._builds.values():
                build.settled.set()

    def get(self, name: str) -> Path:
        """The tool's folder, once its build (if any) has ended."""
        if name not in self.found:
            build = self._builds[name]
            output = build.process.stdout.read() if build.process.stdout is not None else ""
            build.process.wait()
            if build.passing_on is not None:
                build.passing_on.join()  # its last lines ("built … in N s") before whatever comes next
            if build.process.returncode != 0:
                raise ToolMissing(f"{TOOLS[name].script} failed (exit {build.process.returncode}); its output is above")
            self.found[name] = Path(output.strip().splitlines()[-1].split()[0])
        return self.found[name]

    def all(self) -> dict[str, Path]:
        """Every tool's folder; every build runs to its end, so none is left behind when one fails."""
        failed = []
        for name in self._names:
            try:
                self.get(name)
            except ToolMissing as error:
                failed.append(str(error))
        if failed:
            raise ToolMissing("; ".join(failed))
        return {name: self.found[name] for name in self._names}

    def stop(self) -> None:
        """Builds still running are stopped (a caller that failed will not wait for them); a stopped build leaves
        nothing in the cache (tools/cache.sh builds into a folder of its own first)."""
        for build in self._builds.values():
            if build.process.poll() is None:
                build.process.terminate()
                build.process.wait(timeout=STOP_SECONDS)


def _one_at_a_time(name: str, script: Path) -> list[str]:
    """The build script's command, run under a lock of its own (util-linux's flock, where there is one): two
    callers at once (two test runs, a test run and a demo) would each build the same tool from scratch, and on 2
    cores each take several times as long; the second waits for the first, saying so, then finds its build."""
    if shutil.which("flock") is None:
        return [str(script)]
    locks = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pulumi-actions-runners"
    locks.mkdir(parents=True, exist_ok=True)
    lock = locks / f"{name}.build.lock"
    waiting = f"waiting for another build of {name} to end (it holds {lock})"
    wrapper = 'exec 9>>"$3"; flock -n 9 || { echo "$1" >&2; flock 9; }; exec "$2"'  # the script holds fd 9
    return ["bash", "-c", wrapper, "build", waiting, str(script), str(lock)]


def _pass_on(build: _Build) -> None:
    """A build script's progress to our stderr, after the announcement; its first line, what it builds if it
    builds, goes to the announcement, or to stderr as it is if the announcement left it out."""
    stderr = build.process.stderr
    assert stderr is not None
    line = stderr.readline()
    build.first_line.put(line or None)
    build.settled.wait(timeout=DECIDE_SECONDS + STOP_SECONDS)
    if line and not build.announced:
        sys.stderr.write(line)
    for line in stderr:
        sys.stderr.write(line)
    sys.stderr.flush()


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def tool_dirs(*names: str) -> dict[str, Path]:
    """The folder of each named tool, found or built (a cold build takes minutes; it says so once, first)."""
    return ToolBuilds(*names).all()
