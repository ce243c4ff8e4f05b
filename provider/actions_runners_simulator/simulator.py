"""GitHub double, Kubernetes double and simulated runners, wired together as one local stand-in."""

from __future__ import annotations

import tempfile
from pathlib import Path

from kubernetes import client, config

from pulumi_actions_runners.github_budget import WINDOW_ENV

from .github_double import GitHubDouble
from .kube_double import KubeDouble
from .runner import SimulatedRunners

CREDENTIAL = "ghp_simulator"
OWNER, REPOSITORY = "octo-org", "ci"


class Simulator:
    """Everything a runner needs, on loopback: ``with Simulator() as sim: ...``."""

    def __init__(
        self,
        *,
        token_lifetime: float = 3600.0,
        schedule_delay: float = 0.1,
        boot_seconds: float = 0.05,
        stop_seconds: float = 0.05,
        namespaces: tuple[str, ...] = ("actions-runners",),
        workdir: str | Path | None = None,
        time_scale: float = 1.0,
    ) -> None:
        """``time_scale`` shrinks GitHub's rate-limit minute and hour (the limits stay GitHub's), so that a
        benchmark with grace periods scaled down by the same factor meets the budget as a real fleet would."""
        self.github = GitHubDouble(
            credentials=(CREDENTIAL,),
            token_lifetime=token_lifetime,
            window_seconds=60.0 / time_scale,
            rate_limit_window_seconds=3600.0 / time_scale,
        )
        self.provider_env = {WINDOW_ENV: str(60.0 / time_scale)}  # the provider paces itself to the same minute
        self.runners = SimulatedRunners(self.github, boot_seconds=boot_seconds, stop_seconds=stop_seconds)
        self.kube = KubeDouble(self.runners, schedule_delay=schedule_delay)
        self.credential = CREDENTIAL
        self._namespaces = namespaces
        self._tempdir = None if workdir else tempfile.TemporaryDirectory(prefix="actions-runners-sim-")
        self.workdir = Path(workdir or self._tempdir.name)  # type: ignore[union-attr]

    @property
    def repo_url(self) -> str:
        """The config.sh ``--url`` of the simulated repository."""
        return f"{self.github.url}/{OWNER}/{REPOSITORY}"

    def stack_config(self, *, runners: int, grace_period_seconds: float, pool: bool = False) -> dict[str, str]:
        """The `pulumi config` of programs/runners for this simulator. Its namespace exists already, and the
        program leaves the pulumi_kubernetes namespace out: that provider's plugin cannot be fetched here."""
        return {
            "githubUrl": self.repo_url,
            "kubeconfig": str(self.kubeconfig),
            "namespace": self._namespaces[0],
            "createNamespace": "false",
            "runners": str(runners),
            "gracePeriodSeconds": str(grace_period_seconds),
            "tokenRefreshBeforeSeconds": "0",
            "pool": str(pool).lower(),
        }

    def start(self) -> Simulator:
        self.github.start()
        self.kube.start()
        self.kubeconfig = self.kube.write_kubeconfig(self.workdir / "kubeconfig")
        seed = config.new_client_from_config(config_file=str(self.kubeconfig), persist_config=False)
        with seed:
            for namespace in self._namespaces:
                client.CoreV1Api(seed).create_namespace({"metadata": {"name": namespace}})
        return self

    def stop(self) -> None:
        self.kube.stop()
        self.github.stop()
        if self._tempdir is not None:
            self._tempdir.cleanup()

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
