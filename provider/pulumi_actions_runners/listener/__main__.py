"""``actions-runners-listener``: the listener's process, as its Deployment runs it (kube/scale_set_manifests.py).

Its environment says which scale set it serves and holds its GitHub credential (``GITHUB_TOKEN``, or
``GITHUB_APP_ID`` and ``GITHUB_APP_PRIVATE_KEY``, from its Secret); its Kubernetes access is the pod's service
account (or the kubeconfig ``KUBECONFIG`` names, as for any client). It serves its metrics and probes on
``ACTIONS_RUNNERS_METRICS_ADDRESS`` (default ``:8080``; server.py). Exit 0 after SIGTERM (its session deleted);
1 when it cannot carry on, for the Deployment to start it again.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType

from ..clock import SystemClock
from ..github.auth import github_auth
from ..github.client import GitHubClient
from ..github.scale_sets import ActionsServiceClient
from ..github.url import parse_github_url
from ..kube.client import KubeClient
from ..kube.scale_set_manifests import (
    ENV_CONFIG_MAP,
    ENV_GITHUB_URL,
    ENV_METRICS_ADDRESS,
    ENV_NAMESPACE,
    ENV_POD_NAME,
    ENV_SCALE_SET_NAME,
)
from ..logs import log_to_stderr
from .loop import RATE_LIMIT_WAIT_SECONDS, Listener, ListenerSettings
from .metrics import ListenerMetrics, scale_set_labels
from .server import DEFAULT_ADDRESS, ListenerServer
from .session import SessionNotOpened

log = logging.getLogger("pulumi_actions_runners.listener")


def main() -> int:
    log_to_stderr()
    try:
        settings = ListenerSettings(
            scale_set_name=os.environ[ENV_SCALE_SET_NAME],
            namespace=os.environ[ENV_NAMESPACE],
            config_map=os.environ[ENV_CONFIG_MAP],
            pod_name=os.environ.get(ENV_POD_NAME) or os.environ.get("HOSTNAME", "listener"),
        )
        target = parse_github_url(os.environ[ENV_GITHUB_URL])
    except KeyError as missing:
        log.error("%s is not set: the listener runs from its RunnerScaleSet's Deployment, which sets it", missing)
        return 1
    credential = github_auth({"github_url": target.url}, target)  # the environment's, from the Secret
    metrics = ListenerMetrics(scale_set_labels(target, settings.scale_set_name, settings.namespace))
    rest_client = GitHubClient(target, credential, max_rate_limit_wait=RATE_LIMIT_WAIT_SECONDS)
    with rest_client as rest, ActionsServiceClient(rest) as github, KubeClient(None) as kube:
        listener = Listener(settings, github, kube, SystemClock(), metrics)
        address = os.environ.get(ENV_METRICS_ADDRESS) or DEFAULT_ADDRESS
        try:
            server = ListenerServer(address, metrics.registry, listener.alive, listener.ready).start()
        except (OSError, ValueError) as error:
            log.error("cannot serve metrics and probes on %s (%s): %s", address, ENV_METRICS_ADDRESS, error)
            return 1

        def stop(signum: int, _frame: FrameType | None) -> None:
            log.info("%s: stopping", signal.Signals(signum).name)
            listener.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        log.info("listener of scale set %s in namespace %s starting", settings.scale_set_name, settings.namespace)
        try:
            listener.run()
        except SessionNotOpened as error:
            if listener.stop_requested:
                log.info("listener of scale set %s stopped before its session opened", settings.scale_set_name)
                return 0
            log.error("%s", error)
            return 1
        except Exception:
            log.exception("the listener of scale set %s failed", settings.scale_set_name)
            return 1
        finally:
            server.close()
    log.info("listener of scale set %s stopped", settings.scale_set_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
