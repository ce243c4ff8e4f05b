"""What the tests do as an administrator would: get tokens, look at pods, touch things behind Pulumi's back."""

from __future__ import annotations

import base64
import hashlib
import http.server
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, config

from actions_runners_simulator.engine import DeploymentFailed, MiniEngine
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners.github.client import RUNNER_RELEASES_PATH, GitHubClient
from pulumi_actions_runners.github.url import parse_github_url
from tests.conftest import wait_until

NAMESPACE = "actions-runners"


# When GitHub said each token the tests asked for expires: passed along with it, as a RegistrationToken does.
_EXPIRY: dict[str, str] = {}


def new_token(sim: Simulator) -> str:
    with GitHubClient(parse_github_url(sim.repo_url), sim.credential) as github:
        grant = github.create_registration_token()
    _EXPIRY[grant.token] = grant.expires_at
    return grant.token


def calls_but_the_release_list(sim: Simulator, since: int = 0) -> list[dict[str, Any]]:
    """GitHub calls since position ``since`` of the double's log, but for Check's look-ups of actions/runner's
    releases (one per provider process, read-only: inputs/runner_version.py), each also checked to be just that."""
    calls = sim.github.calls()[since:]
    lookups = [c for c in calls if c["path"] == RUNNER_RELEASES_PATH]
    assert all(c["method"] == "GET" for c in lookups), lookups
    return [c for c in calls if c["path"] != RUNNER_RELEASES_PATH]


def expiry_of(token: str | None) -> str | None:
    """The expiry of a token from `new_token`; None (unknown) for any other."""
    return _EXPIRY.get(token) if token is not None else None


def owner_id(engine: MiniEngine, resource_type: str, resource_name: str) -> str:
    """The resource's ownership id (see resources.ownership_id)."""
    return sha256(f"{engine.project}/{engine.stack}/{resource_type}/{resource_name}")[:16]


def owner_label(engine: MiniEngine, resource_type: str, resource_name: str) -> str:
    """The ownership label the resource's registrations carry."""
    return "pulumi-owner-" + owner_id(engine, resource_type, resource_name)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def core_api(sim: Simulator) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig), persist_config=False))


def outputs(engine: MiniEngine, name: str) -> dict[str, Any]:
    return next(r.outputs for urn, r in engine.state.items() if urn.endswith(f"::{name}"))


def secret_token(sim: Simulator, secret_name: str) -> str:
    secret = sim.kube.secret(NAMESPACE, secret_name)
    assert secret is not None, f"secret {secret_name} missing"
    return base64.b64decode(secret["data"]["token"]).decode()


def events_for(sim: Simulator, pod_name: str, *types: str) -> list[dict[str, Any]]:
    return [e for e in sim.kube.events() if e.get("name") == pod_name and e["type"] in types]


class RecordingHost:
    """A host on loopback that a hostile input may point at: it records every request that reaches it (method,
    path, headers) and answers 404, so a test can show that no credential was sent there."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        host = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _record(self) -> None:
                host.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers)})
                self.send_error(404)

            do_GET = do_POST = do_PUT = do_DELETE = _record

            def log_message(self, *_args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingHost:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class Once:
    """``action``, done in the background the first time ``condition`` holds (looked at every 5 ms): the world's
    move at the moment a procedure reaches a step. ``done``: whether it came."""

    def __init__(self, condition: Callable[[], object], action: Callable[[], object]) -> None:
        self._condition, self._action, self._stop = condition, action, threading.Event()
        self.done = False
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.005):
            if self._condition():
                self._action()
                self.done = True
                return

    def __enter__(self) -> Once:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def up_killed_when(
    engine: MiniEngine, program: Callable[[], None], condition: Callable[[], object], what: str, timeout: float = 10.0
) -> None:
    """`up` whose provider is SIGKILLed once ``condition`` holds, as when the CI job running `pulumi up` is
    cancelled: the calls under way fail, and the engine keeps the state it had."""
    provider = engine.new_provider_process()

    def kill() -> None:
        wait_until(condition, what, timeout)
        provider.kill()

    killer = threading.Thread(target=kill)
    killer.start()
    with pytest.raises(DeploymentFailed):
        engine.up(program)
    killer.join()


REFUSAL_WAIT_SECONDS = 120.0
HELD_AFTER_REFUSAL_SECONDS = 1.0


def grace_after(removal: dict[str, Any], grace_seconds: float = 1.0) -> float:
    """The grace period a pod gets after its runner's last RemoveRunner: one that succeeded (204) earns it; a 404
    (GitHub removed the ephemeral runner after its job) leaves nothing to be graceful to, and nothing is waited
    blind."""
    return grace_seconds if removal["status"] == 204 else 0.0


def up_while_busy(stack: PulumiWorkspace, sim: Simulator, runner_name: str, runner_id: int) -> str:
    """`pulumi up` while a job runs on the runner: the job is held until GitHub has refused the runner's
    RemoveRunner with 422 (the update seen waiting on it), then a second more, then finished; so the busy guard
    is met on any machine, however slow. The update's output."""
    sim.github.start_job(runner_name, None)
    update = stack.start("up", "--yes")
    try:
        wait_until(
            lambda: any(c["status"] == 422 for c in sim.github.calls("DELETE", rf"/actions/runners/{runner_id}$")),
            f"RemoveRunner of {runner_name} answered 422",
            timeout=REFUSAL_WAIT_SECONDS,
        )
        time.sleep(HELD_AFTER_REFUSAL_SECONDS)
    except BaseException:
        update.stop()  # not left running past the test
        raise
    finally:
        sim.github.finish_job(runner_name)
    return update.wait().stdout
