"""The GitHub double, a real Kubernetes API server with its kubelet stand-in, and simulated runners, wired
together as one local stand-in."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import requests

from pulumi_actions_runners.github.budget import WINDOW_ENV

from .cluster import SimulatedCluster
from .github_apps import new_private_key
from .github_double import JOB_ABANDON_SECONDS, SESSION_EXPIRY_SECONDS, GitHubDouble, ListingOrder
from .kube_apiserver import KubeApiServer
from .kubelet import CrashLoopBackOff
from .runner import RunnerTimings, SimulatedRunners
from .tools import TOOLS

CREDENTIAL = "ghp_simulator"
# A fine-grained token with the runners' read permission only: what a pipeline's preview job holds.
READ_ONLY_CREDENTIAL = "github_pat_simulator_read_only"
OWNER, REPOSITORY = "octo-org", "ci"
APP_ID = 424242  # the simulated GitHub App, installed on the simulated organization


def program_credentials(token: str, app: tuple[int, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """programs/runners' credential settings, (config, secrets): a token, or an App's id and private key."""
    if app is not None:
        return {"githubAppId": str(app[0])}, {"githubAppPrivateKey": app[1]}
    return {}, {"githubToken": token}


class Simulator:
    """Everything a runner needs, on loopback: ``with Simulator() as sim: ...``."""

    def __init__(
        self,
        *,
        token_lifetime: float = 3600.0,
        schedule_delay: float = 0.1,
        runner_speedup: float = 1.0,
        docker_boot_seconds: float = 0.2,
        namespaces: tuple[str, ...] = ("actions-runners",),
        workdir: str | Path | None = None,
        time_scale: float = 1.0,
        api_server: KubeApiServer | None = None,
        fault_proxy: bool = True,
        app_token_lifetime: float = 3600.0,
        listing_order: ListingOrder = "id",
        runner_releases: list[tuple[str, str]] | None = None,
        kubernetes: bool = True,
        listener_image: Path | None = None,
    ) -> None:
        """``namespaces`` are made at start (a program that makes its own namespace needs none); ``api_server``
        is a running one to borrow (reset at stop), else the simulator starts its own. Without ``fault_proxy``
        the kubeconfig points at the API server itself (no faults to stage, no request log: benchmarks, and
        users trying the simulator). ``time_scale`` shrinks
        GitHub's rate-limit minute and hour (the limits stay GitHub's), so that a benchmark with grace periods
        scaled down by the same factor meets the budget as a real fleet would. A GitHub App (``app_id``,
        ``app_private_key``) is installed on the simulated organization; its installation tokens live
        ``app_token_lifetime`` seconds. ``listing_order``: how GitHub's runner listings are ordered (GitHub
        documents none). ``runner_speedup`` runs the runners' clock, and the kubelet's restart back-off and
        GitHub's session and job-lock expiries with it, that many times as fast: every behaviour of actions/runner
        stays (runner.py), only sooner, so that a test bed need not wait minutes for a stale session to lapse.
        ``runner_releases``: the actions/runner releases GitHub lists, (version, published_at) pairs (see
        runner_releases.py; more are published with ``github.releases.publish``). Without ``kubernetes`` only
        GitHub runs (no API server, no kubeconfig): enough for an autoscaler whose runners are processes.
        ``listener_image``: the OCI layout of the RunnerScaleSet listener's image, which the node runs (else the
        one ``LISTENER_IMAGE_DIR`` names; with neither, the listener's program of this environment)."""
        self.github = GitHubDouble(
            credentials=(CREDENTIAL,),
            read_only_credentials=(READ_ONLY_CREDENTIAL,),
            token_lifetime=token_lifetime,
            window_seconds=60.0 / time_scale,
            rate_limit_window_seconds=3600.0 / time_scale,
            listing_order=listing_order,
            session_expiry_seconds=SESSION_EXPIRY_SECONDS / runner_speedup,
            job_abandon_seconds=JOB_ABANDON_SECONDS / runner_speedup,
            runner_releases=runner_releases,
        )
        self.github.apps.token_lifetime = app_token_lifetime
        self.app_id, self.app_private_key = APP_ID, new_private_key()
        installations = self.github.apps.add_app(APP_ID, self.app_private_key, installed_on={OWNER: "Organization"})
        self.app_installation_id = installations[OWNER]
        self.provider_env = {WINDOW_ENV: str(60.0 / time_scale)}  # the provider paces itself to the same minute
        self._tempdir = None if workdir else tempfile.TemporaryDirectory(prefix="actions-runners-sim-")
        self.workdir = Path(workdir or self._tempdir.name)  # type: ignore[union-attr]
        self.runners = SimulatedRunners(
            self.github, timings=RunnerTimings().faster(runner_speedup), docker_boot_seconds=docker_boot_seconds
        )
        self.kube = SimulatedCluster(
            self.runners,
            api_server=api_server,
            namespaces=namespaces,
            schedule_delay=schedule_delay,
            crash_loop=CrashLoopBackOff().faster(runner_speedup),
            fault_proxy=fault_proxy,
            workdir=self.workdir,
            listener_image=listener_image or _listener_image_from_environment(),
        )
        self.kubernetes = kubernetes
        self.kubeconfig: Path | None = None
        self.credential = CREDENTIAL
        self.read_only_credential = READ_ONLY_CREDENTIAL
        self.namespace = namespaces[0] if namespaces else "actions-runners"

    @property
    def repo_url(self) -> str:
        """The config.sh ``--url`` of the simulated repository."""
        return f"{self.github.url}/{OWNER}/{REPOSITORY}"

    def register_other_team(self, count: int, *, prefix: str = "other-team") -> list[int]:
        """``count`` runners of another team registered in the simulated repository as config.sh registers them
        (online; no resource manages them, so none may be touched); their ids."""
        if not count:
            return []
        answer = requests.post(
            f"{self.github.api_url}/repos/{OWNER}/{REPOSITORY}/actions/runners/registration-token",
            headers={"Authorization": f"Bearer {self.credential}", "Accept": "application/vnd.github+json"},
            timeout=10,
        )
        answer.raise_for_status()
        token = answer.json()["token"]
        return [
            self.github.register_runner(
                github_url=self.repo_url,
                token=token,
                name=f"{prefix}-{index}",
                labels=[prefix],
                ephemeral=False,
                replace=False,
            )
            for index in range(count)
        ]

    def stack_config(
        self,
        *,
        runners: int,
        grace_period_seconds: float,
        pool: bool = False,
        refill: bool = False,
        create_namespace: bool = False,
    ) -> dict[str, str]:
        """The `pulumi config` of programs/runners for this simulator (the credential apart: see `credentials`).
        With ``create_namespace`` the program makes the namespace with pulumi_kubernetes (its plugin is on the
        CLI's PATH: tools/pulumi-kubernetes)."""
        return {
            "githubUrl": self.repo_url,
            "kubeconfig": str(self.kubeconfig),
            "namespace": self.namespace,
            "createNamespace": str(create_namespace).lower(),
            "runners": str(runners),
            "gracePeriodSeconds": str(grace_period_seconds),
            "tokenRefreshBeforeSeconds": "0",
            "pool": str(pool).lower(),
            **({"refill": "true"} if refill else {}),
        }

    def credentials(self, *, github_app: bool = False) -> tuple[dict[str, str], dict[str, str]]:
        """programs/runners' credential settings, (config, secrets): the token, or the App."""
        return program_credentials(self.credential, (self.app_id, self.app_private_key) if github_app else None)

    def start(self) -> Simulator:
        self.github.start()
        if not self.kubernetes:
            return self
        try:
            self.kube.start()
        except BaseException:
            self.github.stop()
            raise
        self.kubeconfig = self.kube.write_kubeconfig(self.workdir / "kubeconfig")
        return self

    def stop(self) -> None:
        try:
            if self.kubernetes:
                self.kube.stop()
        finally:
            self.github.stop()
            if self._tempdir is not None:
                self._tempdir.cleanup()

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _listener_image_from_environment() -> Path | None:
    """The layout `python -m actions_runners_simulator tools` names (tools.py's listener-image)."""
    folder = os.environ.get(TOOLS["listener-image"].variable)
    return Path(folder) if folder else None
