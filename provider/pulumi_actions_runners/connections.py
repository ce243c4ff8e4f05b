"""The clients one provider call works with, made from the resource's inputs at call time.

Nothing here is kept on a provider object, which Pulumi pickles into the state; what is shared between calls
(the API budget, the runner directory) is shared per process and holds no credential.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .credentials import github_credential
from .github_client import GitHubClient, JitConfig, RemoveOutcome
from .github_url import parse_github_url
from .kube_client import KubeClient
from .redaction import remember
from .registration_tokens import FreshTokens, shared_fresh_tokens
from .registrations import RunnerDirectory, shared_directory


class SharedRunners:
    """The GitHub calls the procedures make, with lookups by name answered from the listing that every caller
    in this process shares (see registrations.py)."""

    def __init__(self, github: GitHubClient, directory: RunnerDirectory) -> None:
        self._github = github
        self._directory = directory

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

    def remove_runner(self, runner_id: int) -> RemoveOutcome:
        return self._github.remove_runner(runner_id)

    def generate_jitconfig(self, name: str, labels: Sequence[str]) -> JitConfig:
        jit = self._github.generate_jitconfig(name, labels)
        remember(jit.encoded_jit_config)  # a credential of its runner: scrubbed from every message from now on
        return jit


@dataclass
class Connections:
    github: GitHubClient
    runners: SharedRunners
    kube: KubeClient
    fresh_tokens: FreshTokens  # registration tokens this process got for the scope, shared by its starts


@contextmanager
def connect(props: dict[str, Any]) -> Iterator[Connections]:
    target = parse_github_url(props["github_url"])
    credential = github_credential(props.get("github_token"))
    directory = shared_directory(target.api_url, target.runners_path, credential)
    fresh_tokens = shared_fresh_tokens(target.api_url, target.runners_path, credential)
    with GitHubClient(target, credential) as github, KubeClient(props.get("kubeconfig")) as kube:
        yield Connections(github, SharedRunners(github, directory), kube, fresh_tokens)
