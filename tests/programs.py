"""Small inline programs for scenarios the example program does not configure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners import RegistrationToken, Runner


def token_and_runners(sim: Simulator, count: int = 1, **runner_args: Any) -> Callable[[], None]:
    """RegistrationToken plus ``count`` Runners named ``runner-N``, reaching the simulator."""

    def program() -> None:
        token = RegistrationToken("registration", github_url=sim.repo_url, github_token=sim.credential)
        for index in range(count):
            Runner(
                f"runner-{index}",
                github_url=sim.repo_url,
                namespace="actions-runners",
                registration_token=token.token,
                github_token=sim.credential,
                kubeconfig=str(sim.kubeconfig),
                **{"grace_period_seconds": 0.5, **runner_args},
            )

    return program


def runner_with_token(sim: Simulator, registration_token: str, **runner_args: Any) -> Callable[[], None]:
    """One Runner with a token the test obtained itself (to rotate it at will)."""

    def program() -> None:
        Runner(
            "runner",
            github_url=sim.repo_url,
            namespace="actions-runners",
            registration_token=registration_token,
            github_token=sim.credential,
            kubeconfig=str(sim.kubeconfig),
            **{"grace_period_seconds": 0.5, **runner_args},
        )

    return program
