"""In-memory stand-ins for the procedures' ports, with a clock that only moves when someone sleeps, and for a
container the kubelet stand-in hands to the simulated runners.

They serve the plain-code tests of the teardown and startup procedures and of the simulated runner; the provider
itself is tested through the real clients against the HTTP doubles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from pulumi_actions_runners.github.client import RemoveOutcome
from pulumi_actions_runners.kube.client import SecretMetadata
from pulumi_actions_runners.kube.manifests import MANAGED_BY, MANAGED_BY_LABEL, OWNER_LABEL, RUNNER_LABEL

OUR_OWNER = "00000000000000aa"
OUR_LABEL = f"pulumi-owner-{OUR_OWNER}"  # what the runners under test were made with


@dataclass
class FakePodProcess:
    """One start of a container, as the kubelet stand-in hands it to the simulated runners; records its exits."""

    name: str = "runner-pod"
    env: dict[str, str] = field(default_factory=dict)
    namespace: str = "actions-runners"
    container: str = "runner"
    image: str = "ghcr.io/actions/actions-runner:2.329.0"
    restart_policy: str = "Never"
    command: tuple[str, ...] = ()
    exit_codes: list[int] = field(default_factory=list)
    last_log_lines: list[str] = field(default_factory=list)

    def exited(self, exit_code: int, last_log_line: str = "") -> None:
        self.exit_codes.append(exit_code)
        self.last_log_lines.append(last_log_line)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep: list[Callable[[float], None]] = []  # what happens in the world while the procedure waits

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        for event in self.on_sleep:
            event(seconds)
        self.now += seconds


class FakeGitHub:
    """Runners by id; RemoveRunner answers BUSY while ``busy_until`` (fake time) has not passed."""

    def __init__(self, clock: FakeClock, journal: list[str]) -> None:
        self.clock = clock
        self.journal = journal
        self.runners: dict[int, dict[str, Any]] = {}
        self.busy_until: dict[int, float] = {}

    def add(self, runner_id: int, name: str, busy_for: float = 0.0, labels: tuple[str, ...] = (OUR_LABEL,)) -> None:
        self.runners[runner_id] = {"id": runner_id, "name": name, "labels": [{"name": label} for label in labels]}
        self.busy_until[runner_id] = self.clock.now + busy_for

    def registration_mark(self) -> int | None:
        return None

    def find_runner(self, name: str, max_age: float = 0.0, *, newer_than: int | None = None) -> dict[str, Any] | None:
        self.journal.append(f"find {name}")
        found = next((r for r in self.runners.values() if r["name"] == name), None)
        return None if found is None else {**found, "busy": self.clock.now < self.busy_until[found["id"]]}

    def remove_runner(self, runner_id: int) -> RemoveOutcome:
        if runner_id not in self.runners:
            self.journal.append(f"remove {runner_id}: 404")
            return RemoveOutcome.NOT_FOUND
        if self.clock.now < self.busy_until[runner_id]:
            self.journal.append(f"remove {runner_id}: 422")
            return RemoveOutcome.BUSY
        del self.runners[runner_id]
        self.journal.append(f"remove {runner_id}: 204")
        return RemoveOutcome.REMOVED


class FakePods:
    """Pods that, once deleted, stay Terminating for ``terminating_for`` fake seconds."""

    def __init__(self, clock: FakeClock, journal: list[str], terminating_for: float = 0.5) -> None:
        self.clock = clock
        self.journal = journal
        self.terminating_for = terminating_for
        self.force_works = True
        self.pods: dict[str, dict[str, Any]] = {}
        self.secrets: dict[str, dict[str, str]] = {}  # labels by name

    def add(self, name: str, phase: str = "Running") -> None:
        """A runner's pod, and its Secret as the provider makes it."""
        self.pods[name] = {"phase": phase, "gone_at": None}
        labels = {MANAGED_BY_LABEL: MANAGED_BY, RUNNER_LABEL: name, OWNER_LABEL: OUR_OWNER}
        self.secrets[f"{name}-registration"] = labels

    def read_pod(self, namespace: str, name: str) -> Any:
        pod = self.pods.get(name)
        if pod is None or (pod["gone_at"] is not None and self.clock.now >= pod["gone_at"]):
            self.pods.pop(name, None)
            return None
        return SimpleNamespace(
            status=SimpleNamespace(phase=pod["phase"], container_statuses=[], init_container_statuses=[]),
            spec=SimpleNamespace(restart_policy="Never"),
            metadata=SimpleNamespace(deletion_timestamp=pod["gone_at"], annotations={}),
        )

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None, *, once: bool = False) -> None:
        forced = " with no grace" if grace_seconds == 0 else ""
        self.journal.append(f"delete pod {name} at {self.clock.now:.1f}{forced}")
        pod = self.pods.get(name)
        if pod is not None and forced and self.force_works:
            pod["gone_at"] = self.clock.now
        elif pod is not None and pod["gone_at"] is None:
            pod["gone_at"] = self.clock.now + (0 if pod["phase"] != "Running" else self.terminating_for)

    def release_from_job(self, namespace: str, name: str) -> None:
        self.journal.append(f"release pod {name} from its Job")

    def read_secret_metadata(self, namespace: str, name: str) -> SecretMetadata | None:
        labels = self.secrets.get(name)
        return None if labels is None else SecretMetadata(name, f"uid-{name}", "1", labels)

    def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> bool:
        self.journal.append(f"delete secret {name}")
        self.secrets.pop(name, None)
        return True
