"""The clients one provider call works with, made from its Endpoint at call time.

Nothing here is kept on a provider object, which Pulumi pickles into the state; what is shared between calls
(the API budget, the runner directory) is shared per process and holds no credential.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..github.app import InstallationTokens
from ..github.auth import APP_INPUTS, github_auth
from ..github.client import DEFAULT_RUNNER_GROUP_ID, GitHubClient, JitConfig, RemoveOutcome, RunnerGroupNotFound
from ..github.credentials import GITHUB_TOKEN_INPUT
from ..github.registration_tokens import FreshTokens
from ..github.registrations import RunnerDirectory
from ..github.url import GitHubTarget, parse_github_url
from ..kube.client import KubeClient


class SharedRunners:
    """The GitHub calls the procedures make, with lookups by name answered from the listing that every caller
    in this process shares (see registrations.py)."""

    def __init__(self, github: GitHubClient, directory: RunnerDirectory, groups: dict[str, int] | None = None) -> None:
        """``groups``: the runner groups' ids by name, as the process knows them for this scope."""
        self._github = github
        self._directory = directory
        self._groups = {} if groups is None else groups

    def runner_group_id(self, name: str) -> int:
        """A runner group's id by its name: looked up once per process and scope (again for a name not found, as
        the group may have been made meanwhile). `RunnerGroupNotFound` lists the groups there are."""
        if name == "Default":
            return DEFAULT_RUNNER_GROUP_ID
        if name not in self._groups:
            self._groups.update(self._github.runner_groups())
        if name not in self._groups:
            raise RunnerGroupNotFound(name, self._github.target.scope, sorted(self._groups))
        return self._groups[name]

    def find_runner(self, name: str, max_age: float = 0.0, *, newer_than: int | None = None) -> dict[str, Any] | None:
        if max_age <= 0:
            # Filtered by name: pages of the whole scope shift while other runners are removed, so a runner
            # missing from them is no proof that it is not registered.
            return self._github.find_runner(name)
        return self._directory.find(self._github, name, max_age=max_age, newer_than=newer_than)

    def registration_mark(self) -> int | None:
        """An id below that of every runner registered from now on (None: none known cheaply)."""
        return self._directory.mark(self._github)

    def list_runners(self) -> Iterator[dict[str, Any]]:
        return self._github.list_runners()

    def registrations_of(self, names: list[str]) -> list[dict[str, Any]]:
        return self._directory.registrations_of(self._github, names)

    def remove_runner(self, runner_id: int) -> RemoveOutcome:
        outcome = self._github.remove_runner(runner_id)
        if outcome is RemoveOutcome.REMOVED:
            self._directory.removed()
        return outcome

    def set_labels(self, runner_id: int, labels: Sequence[str]) -> bool:
        return self._github.set_labels(runner_id, labels)

    def generate_jitconfig(self, name: str, labels: Sequence[str], runner_group_id: int) -> JitConfig:
        return self._github.generate_jitconfig(name, labels, runner_group_id=runner_group_id)


@dataclass
class Connections:
    github: GitHubClient
    runners: SharedRunners
    kube: KubeClient
    fresh_tokens: FreshTokens  # registration tokens this process got for the scope, shared by its starts


@dataclass
class _ScopeShared:
    """What every call of this process shares for one runner scope and credential: what one credential may
    list, it lists once, and a fresh registration token serves every start."""

    directory: RunnerDirectory = field(default_factory=RunnerDirectory)
    fresh_tokens: FreshTokens = field(default_factory=FreshTokens)
    runner_groups: dict[str, int] = field(default_factory=dict)  # id by name


_per_scope: dict[tuple[str, str, str], _ScopeShared] = {}
_per_scope_lock = threading.Lock()


def _shared_for(api_url: str, runners_path: str, credential: str | InstallationTokens) -> _ScopeShared:
    """Keyed by a hash of the credential (an App's: its installation), never by the credential itself."""
    identity = credential if isinstance(credential, str) else credential.budget_key
    key = (api_url, runners_path, hashlib.sha256(identity.encode()).hexdigest())
    with _per_scope_lock:
        return _per_scope.setdefault(key, _ScopeShared())


@dataclass(frozen=True)
class Endpoint:
    """Where one call goes: the GitHub scope and the credential inputs to call it with (else the environment's:
    resolved as the call connects, see connections.connect), and the cluster's kubeconfig."""

    target: GitHubTarget
    credential_inputs: Mapping[str, Any] = field(repr=False)  # github_token, or the App's, as given
    kubeconfig: str | None = None

    @classmethod
    def of(cls, props: Mapping[str, Any]) -> Endpoint:
        credential_inputs = {k: props.get(k) for k in (GITHUB_TOKEN_INPUT, *APP_INPUTS)}
        return cls(parse_github_url(props["github_url"]), credential_inputs, props.get("kubeconfig"))

    def credential(self) -> str | InstallationTokens:
        """A trimmed token, or the App's installation tokens; InvalidCredential says what is missing."""
        return github_auth({**self.credential_inputs, "github_url": self.target.url}, self.target)


@contextmanager
def connect(endpoint: Endpoint) -> Iterator[Connections]:
    credential = endpoint.credential()
    shared = _shared_for(endpoint.target.api_url, endpoint.target.runners_path, credential)
    with GitHubClient(endpoint.target, credential) as github, KubeClient(endpoint.kubeconfig) as kube:
        runners = SharedRunners(github, shared.directory, shared.runner_groups)
        yield Connections(github, runners, kube, shared.fresh_tokens)
