"""Small inline programs for scenarios the example program does not configure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actions_runners_simulator.simulator import Simulator
from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool, RunnerScaleSet
from tests.helpers import expiry_of


def token_and_runners(sim: Simulator, count: int = 1, **runner_args: Any) -> Callable[[], None]:
    """RegistrationToken plus ``count`` Runners named ``runner-N``, reaching the simulator."""

    def program() -> None:
        token = RegistrationToken("registration", github_url=sim.repo_url, github_token=sim.credential)
        for index in range(count):
            Runner(
                f"runner-{index}",
                github_url=sim.repo_url,
                namespace="actions-runners",
                registration_token=token,
                github_token=sim.credential,
                kubeconfig=str(sim.kubeconfig),
                **{"grace_period_seconds": 0.5, **runner_args},
            )

    return program


def runner_with_token(sim: Simulator, registration_token: str, **runner_args: Any) -> Callable[[], None]:
    """One Runner with a token the test obtained itself (to rotate it at will), and its expiry if known."""

    def program() -> None:
        Runner(
            "runner",
            github_url=sim.repo_url,
            registration_token=registration_token,
            github_token=sim.credential,
            kubeconfig=str(sim.kubeconfig),
            **{
                "namespace": "actions-runners",
                "grace_period_seconds": 0.5,
                "registration_token_expires_at": expiry_of(registration_token),
                **runner_args,
            },
        )

    return program


def token_and_pool(sim: Simulator, token: str | None = None, **pool_args: Any) -> Callable[[], None]:
    """One RunnerPool named ``pool``: with ``token`` given, it registers with it (to rotate it at will)."""

    def program() -> None:
        RunnerPool(
            "pool",
            github_url=sim.repo_url,
            registration_token=token,
            github_token=sim.credential,
            kubeconfig=str(sim.kubeconfig),
            **{
                "namespace": "actions-runners",
                "pool_name": "pool",
                "grace_period_seconds": 0.3,
                "replicas": 3,
                "max_unavailable": "100%",
                "registration_token_expires_at": expiry_of(token),
                **pool_args,
            },
        )

    return program


def jit_runner(sim: Simulator, **runner_args: Any) -> Callable[[], None]:
    """One just-in-time Runner: no registration token, a config of its own from GitHub."""

    def program() -> None:
        Runner(
            "runner",
            github_url=sim.repo_url,
            namespace="actions-runners",
            jit_config=True,
            github_token=sim.credential,
            kubeconfig=str(sim.kubeconfig),
            **{"grace_period_seconds": 0.5, **runner_args},
        )

    return program


def runner_and_pool(sim: Simulator, token: str, **args: Any) -> Callable[[], None]:
    """A Runner (``runner-0``, with a RegistrationToken) and a RunnerPool of 2 (``pool``, with ``token``), both
    made with ``args``: the lone and the fleet path side by side."""

    def program() -> None:
        token_and_runners(sim, 1, **args)()
        token_and_pool(sim, token, replicas=2, **args)()

    return program


def credentials_from_environment(sim: Simulator) -> Callable[[], None]:
    """A RegistrationToken and a Runner given no GitHub credential: the provider's environment has it."""

    def program() -> None:
        token = RegistrationToken("registration", github_url=sim.repo_url)
        Runner(
            "runner",
            github_url=sim.repo_url,
            namespace="actions-runners",
            registration_token=token,
            kubeconfig=str(sim.kubeconfig),
            grace_period_seconds=0,
        )

    return program


def scale_set(sim: Simulator, **args: Any) -> Callable[[], None]:
    """One RunnerScaleSet named ``scale-set`` (its set ``linux-set`` unless told), reaching the simulator."""

    def program() -> None:
        RunnerScaleSet(
            "scale-set",
            github_url=sim.repo_url,
            namespace="actions-runners",
            github_token=sim.credential,
            kubeconfig=str(sim.kubeconfig),
            **{
                "scale_set_name": "linux-set",
                "max_runners": 4,
                "grace_period_seconds": 0.5,
                "register_timeout_seconds": 30,
                "unregister_timeout_seconds": 60,
                **args,
            },
        )

    return program
