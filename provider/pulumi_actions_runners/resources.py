"""The resources users declare in their programs."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi import Input, Output, ResourceOptions
from pulumi.dynamic import Resource

from .inputs import names
from .inputs.validation import MAX_SCALE_SET_NAME
from .providers.registration_token import RegistrationTokenProvider
from .providers.runner import RunnerProvider
from .providers.runner_pool import RunnerPoolProvider
from .providers.runner_scale_set import RunnerScaleSetProvider
from .redaction import scrub_all
from .wording import counted

if TYPE_CHECKING:
    from pulumi_kubernetes.core.v1 import PodTemplateSpecArgs

RESOURCE_MODULE = "actions-runners"


def _secret(value: Input[str] | None) -> Output[str] | None:
    """Mark a credential secret even when the program passed a plain string."""
    return None if value is None else Output.secret(value)


def default_runner_name(resource_name: str, max_length: int = 63) -> str:
    """See names.default_name: fixed by this program's project and stack."""
    return names.default_name(pulumi.get_project(), pulumi.get_stack(), resource_name, max_length)


def ownership_id(resource_type: str, resource_name: str) -> str:
    """See names.ownership_id: fixed by this program's project and stack."""
    return names.ownership_id(pulumi.get_project(), pulumi.get_stack(), resource_type, resource_name)


def _token_inputs(
    registration_token: Input[str] | RegistrationToken | None, expires_at: Input[str] | None
) -> dict[str, Any]:
    """A RegistrationToken passes its expiry along, so the provider can tell when it is too old to start with."""
    if isinstance(registration_token, RegistrationToken):
        return {
            "registration_token": _secret(registration_token.token),
            "registration_token_expires_at": registration_token.expires_at if expires_at is None else expires_at,
        }
    return {"registration_token": _secret(registration_token), "registration_token_expires_at": expires_at}


def _app_inputs(
    app_id: Input[str | int] | None, installation_id: Input[int] | None, private_key: Input[str] | None
) -> dict[str, Any]:
    """A GitHub App instead of a token: its id, its installation (else the one on the scope's repository or
    organization) and its private key (PEM), kept secret even when given as plain text."""
    return {
        "github_app_id": app_id,
        "github_app_installation_id": installation_id,
        "github_app_private_key": _secret(private_key),
    }


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
        github_app_id: Input[str | int] | None = None,
        github_app_installation_id: Input[int] | None = None,
        github_app_private_key: Input[str] | None = None,
        refresh_before_seconds: Input[float] = 1800,
        opts: ResourceOptions | None = None,
    ) -> None:
        props = {
            "github_url": github_url,
            "github_token": _secret(github_token),
            **_app_inputs(github_app_id, github_app_installation_id, github_app_private_key),
            "refresh_before_seconds": refresh_before_seconds,
            "token": None,
            "expires_at": None,
            "token_hash": None,
        }
        opts = _with_secret_outputs(opts, ["token", "github_token", "github_app_private_key"])
        super().__init__(RegistrationTokenProvider(), resource_name, props, opts)


class Runner(Resource, module=RESOURCE_MODULE, name="Runner"):
    """One self-hosted runner: a pod on Kubernetes registered with GitHub.

    A new registration token replaces it; the old runner is unregistered first (never while it runs a job),
    then given ``grace_period_seconds``, then its pod is deleted. With ``jit_config=True`` it needs no token:
    GitHub makes it a just-in-time config of its own (an ephemeral runner). Give ``registration_token`` a
    `RegistrationToken` (or its token and ``registration_token_expires_at``): a runner that starts when that
    token is too old to register with gets a fresh one from GitHub instead. ``pod_template`` shapes its pod
    (resources, node placement, volumes, sidecars; docs/how-to/pod-templates.md), and ``docker=True`` gives it
    a Docker-in-Docker sidecar; ``runner_group`` places an organization's runner in one of its runner groups. A
    change of any of them replaces the runner. GitHub is called with ``github_token``, or as a GitHub App
    (``github_app_id``, ``github_app_private_key``), else with what the environment of `pulumi` gives.
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
        registration_token: Input[str] | RegistrationToken | None = None,
        registration_token_expires_at: Input[str] | None = None,
        jit_config: Input[bool] = False,
        runner_name: Input[str] | None = None,
        labels: Input[Sequence[Input[str]]] = (),
        ephemeral: Input[bool] = True,
        image: Input[str] | None = None,
        runner_version: Input[str] | None = None,
        pod_template: Input[Mapping[str, Any]] | PodTemplateSpecArgs | None = None,
        docker: Input[bool] = False,
        runner_group: Input[str] | None = None,
        grace_period_seconds: Input[float] = 30,
        unregister_timeout_seconds: Input[float] = 600,
        register_timeout_seconds: Input[float] = 300,
        github_token: Input[str] | None = None,
        github_app_id: Input[str | int] | None = None,
        github_app_installation_id: Input[int] | None = None,
        github_app_private_key: Input[str] | None = None,
        kubeconfig: Input[str] | None = None,
        opts: ResourceOptions | None = None,
    ) -> None:
        props = {
            "github_url": github_url,
            "namespace": namespace,
            **_token_inputs(registration_token, registration_token_expires_at),
            "jit_config": jit_config,
            "runner_name": default_runner_name(resource_name) if runner_name is None else runner_name,
            "owner": ownership_id("Runner", resource_name),
            "labels": list(labels) if isinstance(labels, (list, tuple)) else labels,
            "ephemeral": ephemeral,
            "image": image,
            "runner_version": runner_version,
            "runner_release": None,
            "pod_template": pod_template,
            "docker": docker,
            "runner_group": runner_group,
            "grace_period_seconds": grace_period_seconds,
            "unregister_timeout_seconds": unregister_timeout_seconds,
            "register_timeout_seconds": register_timeout_seconds,
            "github_token": _secret(github_token),
            **_app_inputs(github_app_id, github_app_installation_id, github_app_private_key),
            "kubeconfig": kubeconfig,
            "runner_id": None,
            "pod_name": None,
            "token_hash": None,
        }
        opts = _with_secret_outputs(opts, ["registration_token", "github_token", "github_app_private_key"])
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
    ``pod_template``, ``docker`` and ``runner_group`` are a Runner's, for every runner; a change rotates them.

    With ``refill``, the runners are the pods of a Kubernetes Job (``job``), whose controller starts a fresh
    ephemeral runner in a slot as soon as its runner's one job has ended, between updates too; an update then
    changes the Job, with the same busy guard (see refill_pool.py). Its pods register with the token of the
    last update: an update at least every 30 minutes keeps new pods registering.
    """

    runners: Output[list[dict[str, Any]]]
    problems: Output[list[str]]
    job: Output[str | None]  # with refill: the Job whose pods the runners are
    pool_name: Output[str]
    token_hash: Output[str]

    def __init__(
        self,
        resource_name: str,
        *,
        github_url: Input[str],
        namespace: Input[str],
        replicas: Input[int],
        registration_token: Input[str] | RegistrationToken | None = None,
        registration_token_expires_at: Input[str] | None = None,
        jit_config: Input[bool] = False,
        max_unavailable: Input[int | str] = "25%",
        refill: Input[bool] = False,
        pool_name: Input[str] | None = None,
        labels: Input[Sequence[Input[str]]] = (),
        ephemeral: Input[bool] = True,
        image: Input[str] | None = None,
        runner_version: Input[str] | None = None,
        pod_template: Input[Mapping[str, Any]] | PodTemplateSpecArgs | None = None,
        docker: Input[bool] = False,
        runner_group: Input[str] | None = None,
        grace_period_seconds: Input[float] = 30,
        unregister_timeout_seconds: Input[float] = 600,
        register_timeout_seconds: Input[float] = 300,
        github_token: Input[str] | None = None,
        github_app_id: Input[str | int] | None = None,
        github_app_installation_id: Input[int] | None = None,
        github_app_private_key: Input[str] | None = None,
        kubeconfig: Input[str] | None = None,
        opts: ResourceOptions | None = None,
    ) -> None:
        props = {
            "github_url": github_url,
            "namespace": namespace,
            "replicas": replicas,
            **_token_inputs(registration_token, registration_token_expires_at),
            "jit_config": jit_config,
            "max_unavailable": max_unavailable,
            "refill": refill,
            "pool_name": default_runner_name(resource_name, 57) if pool_name is None else pool_name,
            "owner": ownership_id("RunnerPool", resource_name),
            "labels": list(labels) if isinstance(labels, (list, tuple)) else labels,
            "ephemeral": ephemeral,
            "image": image,
            "runner_version": runner_version,
            "runner_release": None,
            "pod_template": pod_template,
            "docker": docker,
            "runner_group": runner_group,
            "grace_period_seconds": grace_period_seconds,
            "unregister_timeout_seconds": unregister_timeout_seconds,
            "register_timeout_seconds": register_timeout_seconds,
            "github_token": _secret(github_token),
            **_app_inputs(github_app_id, github_app_installation_id, github_app_private_key),
            "kubeconfig": kubeconfig,
            "runners": None,
            "problems": None,
            "token_hash": None,
            "job": None,
            "parallelism": None,
        }
        opts = _with_secret_outputs(opts, ["registration_token", "github_token", "github_app_private_key"])
        super().__init__(RunnerPoolProvider(), resource_name, props, opts)
        self.problems.apply(functools.partial(_fail_on_problems, resource_name))


class RunnerScaleSet(Resource, module=RESOURCE_MODULE, name="RunnerScaleSet"):
    """A GitHub runner scale set: runners that follow the job queue, between updates too.

    Workflows ask for it with ``runs-on: <scale_set_name>``. Its listener (a Deployment of one pod in
    ``namespace``) holds the set's session with GitHub and keeps ``min(max_runners, min_runners + assigned jobs)``
    runners, each a pod with a just-in-time config of its own; it removes only idle runners, the seed's way
    (RemoveRunner first, refused for a busy runner; then ``grace_period_seconds``; then the pod). An update hands
    the listener new bounds or a new runner spec (idle runners of the old spec are replaced, busy ones finish on
    it); a new listener image or credential rolls the listener. ``labels`` are sent to GitHub with the set, as
    ARC's scaleSetLabels are: GitHub Enterprise Server 3.18+ with ``DistributedTask.AllowRunnerScaleSetCustomLabels``
    routes jobs by them, github.com has been reported to target a set by its name alone (ARC #4425, #4579), so
    ``runs-on: <scale_set_name>`` is the form that works everywhere. After a refresh, ``statistics`` are GitHub's
    counts for the set and ``runners`` its runners' pods.
    """

    scale_set_id: Output[int]
    scale_set_name: Output[str]
    listener: Output[str]
    statistics: Output[dict[str, int]]
    runners: Output[list[dict[str, Any]]]
    update_kind: Output[list[str]]

    def __init__(
        self,
        resource_name: str,
        *,
        github_url: Input[str],
        namespace: Input[str],
        max_runners: Input[int],
        min_runners: Input[int] = 0,
        scale_set_name: Input[str] | None = None,
        runner_group: Input[str] | None = None,
        labels: Input[Sequence[Input[str]]] = (),
        image: Input[str] | None = None,
        runner_version: Input[str] | None = None,
        pod_template: Input[Mapping[str, Any]] | PodTemplateSpecArgs | None = None,
        docker: Input[bool] = False,
        listener_image: Input[str] | None = None,
        grace_period_seconds: Input[float] = 30,
        unregister_timeout_seconds: Input[float] = 600,
        register_timeout_seconds: Input[float] = 300,
        github_token: Input[str] | None = None,
        github_app_id: Input[str | int] | None = None,
        github_app_installation_id: Input[int] | None = None,
        github_app_private_key: Input[str] | None = None,
        kubeconfig: Input[str] | None = None,
        opts: ResourceOptions | None = None,
    ) -> None:
        props = {
            "github_url": github_url,
            "namespace": namespace,
            "scale_set_name": default_runner_name(resource_name, MAX_SCALE_SET_NAME)
            if scale_set_name is None
            else scale_set_name,
            "owner": ownership_id("RunnerScaleSet", resource_name),
            "min_runners": min_runners,
            "max_runners": max_runners,
            "runner_group": runner_group,
            "labels": list(labels) if isinstance(labels, (list, tuple)) else labels,
            "image": image,
            "runner_version": runner_version,
            "runner_release": None,
            "pod_template": pod_template,
            "docker": docker,
            "listener_image": listener_image,
            "grace_period_seconds": grace_period_seconds,
            "unregister_timeout_seconds": unregister_timeout_seconds,
            "register_timeout_seconds": register_timeout_seconds,
            "github_token": _secret(github_token),
            **_app_inputs(github_app_id, github_app_installation_id, github_app_private_key),
            "kubeconfig": kubeconfig,
            "scale_set_id": None,
            "listener": None,
            "statistics": None,
            "runners": None,
            "update_kind": None,
            "spec_hash": None,
        }
        opts = _with_secret_outputs(opts, ["github_token", "github_app_private_key"])
        super().__init__(RunnerScaleSetProvider(), resource_name, props, opts)


def _fail_on_problems(resource_name: str, problems: list[str] | None) -> None:
    """After an update (not in preview, which shows the last update's outputs), problems fail the program."""
    if problems and not pulumi.runtime.is_dry_run():
        raise RunnerPoolNotConverged(not_converged_message(resource_name, problems))


def not_converged_message(resource_name: str, problems: list[str]) -> str:
    return (
        f"RunnerPool {resource_name} did not converge, {counted(len(problems), 'problem')} (the state lists the "
        "runners as they are; run `pulumi up` again to continue):\n" + "\n".join(scrub_all(problems))
    )
