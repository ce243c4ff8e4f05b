"""The resources users declare in their programs."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from typing import Any

import pulumi
from pulumi import Input, Output, ResourceOptions
from pulumi.dynamic import Resource

from .manifests import DEFAULT_IMAGE
from .providers.registration_token import RegistrationTokenProvider
from .providers.runner import RunnerProvider
from .providers.runner_pool import RunnerPoolProvider

RESOURCE_MODULE = "actions-runners"


def _secret(value: Input[str] | None) -> Output[str] | None:
    """Mark a credential secret even when the program passed a plain string."""
    return None if value is None else Output.secret(value)


def default_runner_name(resource_name: str, max_length: int = 63) -> str:
    """The resource name made DNS-safe, plus a suffix fixed by project and stack.

    Deterministic rather than random, so that a runner dropped from state by a refresh comes back under the same
    name, and its finished pod and Secret are taken over instead of left behind.
    """
    prefix = re.sub(r"[^a-z0-9-]+", "-", resource_name.lower()).strip("-")[: max_length - 9] or "runner"
    suffix = hashlib.sha256(f"{pulumi.get_project()}/{pulumi.get_stack()}/{resource_name}".encode()).hexdigest()
    return f"{prefix}-{suffix[:8]}"


def _with_secret_outputs(opts: ResourceOptions | None, names: list[str]) -> ResourceOptions:
    return ResourceOptions.merge(opts, ResourceOptions(additional_secret_outputs=names))


class RegistrationToken(Resource, module=RESOURCE_MODULE, name="RegistrationToken"):
    """A runner registration token for a repository, organization or enterprise.

    It is renewed only when it expires within ``refresh_before_seconds``, so an ordinary ``pulumi up`` keeps it
    and keeps every runner that registered with it.
    """

    token: Output[str]
    expires_at: Output[str]
    token_hash: Output[str]

    def __init__(
        self,
        resource_name: str,
        *,
        github_url: Input[str],
        github_token: Input[str] | None = None,
        refresh_before_seconds: Input[float] = 1800,
        opts: ResourceOptions | None = None,
    ) -> None:
        props = {
            "github_url": github_url,
            "github_token": _secret(github_token),
            "refresh_before_seconds": refresh_before_seconds,
            "token": None,
            "expires_at": None,
            "token_hash": None,
        }
        opts = _with_secret_outputs(opts, ["token", "github_token"])
        super().__init__(RegistrationTokenProvider(), resource_name, props, opts)


class Runner(Resource, module=RESOURCE_MODULE, name="Runner"):
    """One self-hosted runner: a pod on Kubernetes registered with GitHub.

    A new registration token replaces it; the old runner is unregistered first (never while it runs a job),
    then given ``grace_period_seconds``, then its pod is deleted. With ``jit_config=True`` it needs no token:
    GitHub makes it a just-in-time config of its own (an ephemeral runner).
    """

    runner_name: Output[str]
    runner_id: Output[int]
    pod_name: Output[str]
    namespace: Output[str]
    token_hash: Output[str]

    def __init__(
        self,
        resource_name: str,
        *,
        github_url: Input[str],
        namespace: Input[str],
        registration_token: Input[str] | None = None,
        jit_config: Input[bool] = False,
        runner_name: Input[str] | None = None,
        labels: Input[Sequence[Input[str]]] = (),
        ephemeral: Input[bool] = True,
        image: Input[str] = DEFAULT_IMAGE,
        grace_period_seconds: Input[float] = 30,
        unregister_timeout_seconds: Input[float] = 600,
        register_timeout_seconds: Input[float] = 300,
        github_token: Input[str] | None = None,
        kubeconfig: Input[str] | None = None,
        opts: ResourceOptions | None = None,
    ) -> None:
        props = {
            "github_url": github_url,
            "namespace": namespace,
            "registration_token": _secret(registration_token),
            "jit_config": jit_config,
            "runner_name": default_runner_name(resource_name) if runner_name is None else runner_name,
            "labels": list(labels) if isinstance(labels, (list, tuple)) else labels,
            "ephemeral": ephemeral,
            "image": image,
            "grace_period_seconds": grace_period_seconds,
            "unregister_timeout_seconds": unregister_timeout_seconds,
            "register_timeout_seconds": register_timeout_seconds,
            "github_token": _secret(github_token),
            "kubeconfig": kubeconfig,
            "runner_id": None,
            "pod_name": None,
            "token_hash": None,
        }
        opts = _with_secret_outputs(opts, ["registration_token", "github_token"])
        super().__init__(RunnerProvider(), resource_name, props, opts)


class RunnerPoolNotConverged(pulumi.RunError):
    """Part of a pool's update failed; the state lists the runners as they are, and the next up continues.
    A RunError, so that the CLI shows the message without a Python traceback."""


class RunnerPool(Resource, module=RESOURCE_MODULE, name="RunnerPool"):
    """``replicas`` runners of one spec, named ``<pool_name>-<index>``, in one resource.

    A new token (or spec) rotates them all concurrently inside one update, each the safe way a Runner is
    replaced, with at most ``max_unavailable`` (a number, or a percentage of ``replicas``) out of service at
    once; runners busy with a job are waited for without holding up the others. Scaling down removes idle
    runners first and never a busy one. ``runners`` lists each runner (name, id, pod, token_hash); if part of
    an update fails, the state still lists exactly what exists and the program fails with ``problems``.
    """

    runners: Output[list[dict[str, Any]]]
    problems: Output[list[str]]
    pool_name: Output[str]
    token_hash: Output[str]

    def __init__(
        self,
        resource_name: str,
        *,
        github_url: Input[str],
        namespace: Input[str],
        replicas: Input[int],
        registration_token: Input[str] | None = None,
        jit_config: Input[bool] = False,
        max_unavailable: Input[int | str] = "25%",
        pool_name: Input[str] | None = None,
        labels: Input[Sequence[Input[str]]] = (),
        ephemeral: Input[bool] = True,
        image: Input[str] = DEFAULT_IMAGE,
        grace_period_seconds: Input[float] = 30,
        unregister_timeout_seconds: Input[float] = 600,
        register_timeout_seconds: Input[float] = 300,
        github_token: Input[str] | None = None,
        kubeconfig: Input[str] | None = None,
        opts: ResourceOptions | None = None,
    ) -> None:
        props = {
            "github_url": github_url,
            "namespace": namespace,
            "replicas": replicas,
            "registration_token": _secret(registration_token),
            "jit_config": jit_config,
            "max_unavailable": max_unavailable,
            "pool_name": default_runner_name(resource_name, 57) if pool_name is None else pool_name,
            "labels": list(labels) if isinstance(labels, (list, tuple)) else labels,
            "ephemeral": ephemeral,
            "image": image,
            "grace_period_seconds": grace_period_seconds,
            "unregister_timeout_seconds": unregister_timeout_seconds,
            "register_timeout_seconds": register_timeout_seconds,
            "github_token": _secret(github_token),
            "kubeconfig": kubeconfig,
            "runners": None,
            "problems": None,
            "token_hash": None,
        }
        opts = _with_secret_outputs(opts, ["registration_token", "github_token"])
        super().__init__(RunnerPoolProvider(), resource_name, props, opts)
        self.problems.apply(functools.partial(_fail_on_problems, resource_name))


def _fail_on_problems(resource_name: str, problems: list[str] | None) -> None:
    """After an update (not in preview, which shows the last update's outputs), problems fail the program."""
    if problems and not pulumi.runtime.is_dry_run():
        raise RunnerPoolNotConverged(
            f"RunnerPool {resource_name}: {len(problems)} runners did not converge (the state lists the runners as "
            "they are; run `pulumi up` again to continue):\n" + "\n".join(problems)
        )
