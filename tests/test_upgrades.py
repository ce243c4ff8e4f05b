"""Upgrades are quiet. Pulumi pickles the dynamic providers' classes by module path into every user's state, so a
stack made by an earlier release is then served by this code. Like Pulumi's own provider upgrade tests, each
fixture replays a recorded stack (tests/fixtures/upgrades/record.py: its state, and the pods, Secrets and GitHub
registrations that make it true) against today's code, through the real CLI, with the program unchanged: the
preview plans nothing, `up` writes nothing to GitHub or Kubernetes, and the next token renewal rotates the
runners the safe way, a busy runner waited for."""

from __future__ import annotations

import base64
import importlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners.inputs.runner import LATER_DEFAULTS, runner_spec
from tests.conftest import quick_simulator, wait_until
from tests.test_report import report

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "upgrades"
RELEASES = sorted(folder.name for folder in FIXTURES.iterdir() if (folder / "state.json").is_file())
WRITES = ("POST", "PUT", "PATCH", "DELETE")
TOKEN_LEFT_SECONDS = 1800  # what the recorded registration token has left once restored: not due at 0
DUE = "3000"  # tokenRefreshBeforeSeconds that makes it due
HELD_SECONDS = 1.0  # how long a busy runner's pod is watched, once RemoveRunner was refused, before its job ends
SPEC_HASH_ANNOTATION = "actions-runners.pulumi.io/spec-hash"


@dataclass
class Recorded:
    """One fixture, rewritten for this simulator: its state (as text, for `pulumi stack import`), its live world
    and its stack config."""

    about: dict[str, Any]
    state: str
    world: dict[str, Any]
    config: dict[str, str]


def load(release: str, sim: Simulator, now: float) -> Recorded:
    """The fixture with the recording run's loopback address and kubeconfig path replaced by this simulator's,
    the spec hashes that contain the address recomputed for the new one, and the registration token's expiry
    moved to ``TOKEN_LEFT_SECONDS`` from ``now`` (it was valid when recorded; the state is of that moment)."""
    folder = FIXTURES / release
    about = json.loads((folder / "stack.json").read_text())
    state = json.loads((folder / "state.json").read_text())
    world = json.loads((folder / "world.json").read_text())
    old_base, new_base = about["github_base_url"], sim.github.url
    replacements = {old_base + "/": new_base + "/", about["kubeconfig"]: str(sim.kubeconfig)}
    replacements |= _spec_hashes(state, world, old_base, new_base)
    replacements |= _expiries(state, now)
    for secret in world["secrets"]:
        _rewrite_jit_config(secret, old_base, new_base)

    def rewrite(text: str) -> str:
        for old, new in replacements.items():
            text = text.replace(old, new)
        return text

    config = {key: rewrite(value) for key, value in about["config"].items()}
    texts = [rewrite(json.dumps(state)), rewrite(json.dumps(world)), json.dumps(config)]
    assert not [text for text in texts if old_base in text or about["kubeconfig"] in text], "an address left"
    return Recorded(about, texts[0], json.loads(texts[1]), config)


def _resources(state: dict[str, Any], *suffixes: str) -> list[dict[str, Any]]:
    return [r for r in state["deployment"]["resources"] if any(s in r["urn"] for s in suffixes)]


def _spec_hashes(state: dict[str, Any], world: dict[str, Any], old_base: str, new_base: str) -> dict[str, str]:
    """A spec hash covers the GitHub URL. Each runner resource's is computed by today's code with the recorded
    URL, which must give every hash the release recorded (else today's code judges those runners out of date, an
    upgrade's finding), and then with the new one."""
    hashes = {}
    for resource in _resources(state, ":Runner::", ":RunnerPool::"):
        props = {**LATER_DEFAULTS, **resource["inputs"], "token_hash": ""}
        moved = {**props, "github_url": props["github_url"].replace(old_base + "/", new_base + "/", 1)}
        hashes[runner_spec(props, "").spec_hash] = runner_spec(moved, "").spec_hash
    recorded = {pod["metadata"].get("annotations", {}).get(SPEC_HASH_ANNOTATION) for pod in world["pods"]}
    recorded |= set(_values_of(state["deployment"]["resources"], ("spec_hash", "shape_hash")))
    unknown = recorded - {None} - set(hashes)
    assert not unknown, f"today's code computes other spec hashes than the release recorded: {sorted(unknown)}"
    return hashes


def _values_of(tree: Any, keys: tuple[str, ...]) -> Iterator[Any]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in keys and isinstance(value, str):
                yield value
            yield from _values_of(value, keys)
    elif isinstance(tree, list):
        for item in tree:
            yield from _values_of(item, keys)


def _expiries(state: dict[str, Any], now: float) -> dict[str, str]:
    """Each RegistrationToken's expiry (in its outputs, and in every input that passed it along), moved."""
    moved = datetime.fromtimestamp(now + TOKEN_LEFT_SECONDS, UTC).isoformat(timespec="milliseconds")
    return {r["outputs"]["expires_at"]: moved for r in _resources(state, ":RegistrationToken::")}


def _rewrite_jit_config(secret: dict[str, Any], old_base: str, new_base: str) -> None:
    """A just-in-time config names the server that issued it (the simulated one, as GitHub's names its own)."""
    encoded = secret.get("data", {}).get("jitconfig")
    if encoded is None:
        return
    config = json.loads(base64.b64decode(base64.b64decode(encoded)))
    assert config["server"] == old_base, config["server"]
    config["server"] = new_base
    inner = base64.b64encode(json.dumps(config).encode())
    secret["data"]["jitconfig"] = base64.b64encode(inner).decode()


def _secret_values(world: dict[str, Any], key: str) -> dict[str, str]:
    """Secret name: its ``key``, decoded."""
    return {
        s["metadata"]["name"]: base64.b64decode(s["data"][key]).decode() for s in world["secrets"] if key in s["data"]
    }


def _runs_here(pod: dict[str, Any]) -> bool:
    """Whether today's simulated runner runs this pod: it reads the runner image's ACTIONS_RUNNER_INPUT_*
    settings. A release's pods that gave config.sh its settings as arguments (56482d3's) are runners elsewhere to
    the double: listed online, with no process here that a job could be lost in."""
    [runner] = [c for c in pod["spec"]["containers"] if c["name"] == "runner"]
    return any(variable["name"] == "ACTIONS_RUNNER_INPUT_URL" for variable in runner.get("env", []))


def recreate(sim: Simulator, recorded: Recorded) -> None:
    """The recorded registrations first (a runner the simulator runs takes its own over when its pod starts, as
    config.sh --replace does, or connects with its just-in-time config), then the Secrets and the pods."""
    world = recorded.world
    pods = {pod["metadata"]["name"]: pod for pod in world["pods"]}
    jit_secrets = {
        name.removesuffix("-registration"): json.loads(base64.b64decode(config))["secret"]
        for name, config in _secret_values(world, "jitconfig").items()
    }
    runners = []
    for registration in world["registrations"]:
        here = _runs_here(pods[registration["name"]])
        runners.append(
            {**registration, "online": not here, "jit_secret": jit_secrets.get(registration["name"]) if here else None}
        )
    tokens = dict.fromkeys(_secret_values(world, "token").values(), float(TOKEN_LEFT_SECONDS))
    sim.github.restore(github_url=sim.repo_url, tokens=tokens, runners=runners)
    with sim.kube.api_server.admin_client() as admin:
        core = client.CoreV1Api(admin)
        for secret in world["secrets"]:
            core.create_namespaced_secret(world["namespace"], secret)
        for pod in world["pods"]:
            core.create_namespaced_pod(world["namespace"], pod)

    def running() -> bool:
        phases = [pod.get("status", {}).get("phase") for pod in sim.kube.pods(world["namespace"])]
        online = [r["status"] for r in sim.github.runners()]
        return phases == ["Running"] * len(pods) and online == ["online"] * len(runners)

    wait_until(running, "the recorded pods to run and their runners to be online")
    assert _registrations(sim.github.runners()) == _registrations(world["registrations"])


def _registrations(registrations: list[dict[str, Any]]) -> list[tuple]:
    return sorted(
        (
            r["id"],
            r["name"],
            r["ephemeral"],
            r["status"],
            r["busy"],
            r["runner_group_id"],
            sorted((label["name"], label["type"]) for label in r["labels"]),
        )
        for r in registrations
    )


def import_stack(stack: PulumiWorkspace, recorded: Recorded, credential: str) -> None:
    """A new stack of the same project and name, its config the recorded one, then the recorded state."""
    stack.run("stack", "init", recorded.about["stack"])
    stack.run("config", "set-all", *(f"--plaintext={key}={value}" for key, value in recorded.config.items()))
    for key in recorded.about["secret_config"]:
        stack.run("config", "set", "--secret", key, stdin=credential)
    state_file = stack.root / "state.json"
    state_file.write_text(recorded.state)
    stack.run("stack", "import", "--file", str(state_file))


def writes(sim: Simulator, github_from: int, kube_from: int) -> list[Any]:
    """GitHub and Kubernetes writes since those positions in the double's and the fault proxy's records."""
    github = [(c["method"], c["path"]) for c in sim.github.calls()[github_from:] if c["method"] in WRITES]
    return github + [r for r in sim.kube.requests()[kube_from:] if r[0] in WRITES]


def planned_changes(stack: PulumiWorkspace) -> list[dict[str, Any]]:
    """The preview's steps that would change something, with what it says of each."""
    preview = json.loads(stack.run("preview", "--json").stdout)
    keys = ("op", "urn", "diffReasons", "replaceReasons", "detailedDiff")
    changed = [{k: s.get(k) for k in keys} for s in preview["steps"] if s["op"] != "same"]
    assert changed or set(preview["changeSummary"]) == {"same"}, preview["changeSummary"]
    return changed


@pytest.mark.parametrize("release", RELEASES)
def test_the_provider_classes_a_recorded_state_pickles_are_where_it_names_them(release: str) -> None:
    """The state names each provider class by module path (record.py read them from its pickles): one moved or
    renamed breaks every stack of that release, with an unpickling error in the user's preview."""
    pickled = json.loads((FIXTURES / release / "stack.json").read_text())["pickled"]
    for resource_type, names in pickled.items():
        for name in names:
            module, _, class_name = name.rpartition(".")
            assert hasattr(importlib.import_module(module), class_name), (resource_type, name)


@pytest.mark.parametrize("release", RELEASES)
def test_a_stack_of_an_earlier_release_upgrades_quietly_and_rotates_safely(
    release: str, sim: Simulator, cli_dir: Path
) -> None:
    """A user upgrades the package and runs their pipeline: nothing may change until a change is due, and the
    first one due (the token's renewal) must treat the old release's runners as safely as its own."""
    recorded = load(release, sim, time.time())
    recreate(sim, recorded)
    namespace = recorded.world["namespace"]
    with PulumiWorkspace(FIXTURES / "project", cli_dir, stack=recorded.about["stack"]) as stack:
        import_stack(stack, recorded, sim.credential)

        # The program unchanged: nothing to do, and nothing written.
        github_from, kube_from = len(sim.github.calls()), len(sim.kube.requests())
        changed = planned_changes(stack)
        assert changed == [], f"{changed}\n{stack.run('preview', '--diff').stdout}"
        up = stack.run("up", "--yes")
        assert not re.search(r"\d+ (created|updated|replaced|deleted)", up.stdout), up.stdout
        assert writes(sim, github_from, kube_from) == []

        # The token falls due: every token runner is replaced, unregistered first; busy ones are waited for.
        jit_runners = _jit_runners(recorded)
        token_runners = {r["name"]: r["id"] for r in recorded.world["registrations"] if r["name"] not in jit_runners}
        jit_pods = _pod_uids(sim, namespace, jit_runners)
        busy = _lone_and_pool_runner(recorded)
        since = time.monotonic()
        for name in busy:
            sim.github.start_job(name, None)  # held until the update has been seen waiting on it
        stack.run("config", "set", "tokenRefreshBeforeSeconds", DUE)
        update = stack.start("up", "--yes")
        wait_until(
            lambda: all(_refusals(sim, token_runners[name]) for name in busy), f"RemoveRunner to refuse {busy}", 60
        )
        _untouched_for(HELD_SECONDS, sim, namespace, busy)
        finished = time.monotonic()
        for name in busy:
            sim.github.finish_job(name)
        update.wait()

        terminations = [e for e in sim.kube.events() if e["type"] == "pod_terminating" and e["at"] > since]
        for name, runner_id in token_runners.items():
            removals = sim.github.calls("DELETE", rf"/actions/runners/{runner_id}$")
            unregistered = [c["at"] for c in removals if c["status"] in (204, 404)]
            terminating = min((e["at"] for e in terminations if e["name"] == name), default=None)
            assert unregistered and terminating, (name, removals, terminating)
            assert terminating > unregistered[0], f"{name}'s pod was deleted before it was unregistered"
            if name in busy:
                assert removals[0]["status"] == 422, removals
                assert terminating > finished, f"{name}'s pod was deleted while it ran a job"
        assert sim.runners.jobs_killed == []
        registered = {r["name"]: r["id"] for r in sim.github.runners()}
        assert sorted(registered) == sorted(r["name"] for r in recorded.world["registrations"])
        assert not set(token_runners.values()) & set(registered.values())  # each registered anew
        assert _pod_uids(sim, namespace, jit_runners) == jit_pods  # no token: nothing to rotate

        # Converged: with the new token fresh, nothing more to do.
        stack.run("config", "set", "tokenRefreshBeforeSeconds", "0")
        changed = planned_changes(stack)
        assert changed == [], f"{changed}\n{stack.run('preview', '--diff').stdout}"


def _jit_runners(recorded: Recorded) -> set[str]:
    state = json.loads(recorded.state)
    return {r["name"] for pool in _resources(state, ":RunnerPool::jit-pool") for r in pool["outputs"]["runners"]}


def _lone_and_pool_runner(recorded: Recorded) -> list[str]:
    """The runners to keep busy: the lone ephemeral Runner, and the token pool's first runner."""
    state = json.loads(recorded.state)
    [lone] = [r["outputs"]["runner_name"] for r in _resources(state, ":Runner::runner-0")]
    [pool] = [r["outputs"]["runners"][0]["name"] for r in _resources(state, ":RunnerPool::pool")]
    return [lone, pool]


def _pod_uids(sim: Simulator, namespace: str, names: set[str]) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["metadata"]["uid"] for p in sim.kube.pods(namespace) if p["metadata"]["name"] in names
    }


def _untouched_for(seconds: float, sim: Simulator, namespace: str, pod_names: list[str]) -> None:
    """The pods of runners running a job stay, not deleted, while the update waits on them."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in pod_names:
            pod = sim.kube.pod(namespace, name)
            assert pod is not None and "deletionTimestamp" not in pod["metadata"], f"{name} was deleted mid-job"
        time.sleep(0.05)


def _refusals(sim: Simulator, runner_id: int) -> int:
    return sum(c["status"] == 422 for c in sim.github.calls("DELETE", rf"/actions/runners/{runner_id}$"))


@pytest.mark.parametrize("newest", ["2.329.0", "2.337.0"])
def test_a_program_that_names_no_image_tracks_the_newest_release_from_the_first_preview(
    newest: str, kube_api_server: KubeApiServer, cli_dir: Path
) -> None:
    """The recorded stack, its program naming no image (0.2.0's default image, as a user wrote it): from the
    upgrade on, the runners track the newest release. The recorded 2.329.0 still the newest, nothing changes; a
    newer one (published 5 days ago) makes the first preview rotate every runner, with GitHub's deadline for
    2.329.0 as the reason."""
    published = datetime.now(UTC) - timedelta(days=5)
    releases = [(newest, published.strftime("%Y-%m-%dT%H:%M:%SZ"))]
    with quick_simulator(kube_api_server, runner_releases=releases) as sim:
        recorded = load("0a30489", sim, time.time())
        del recorded.config["image"]
        recreate(sim, recorded)
        with PulumiWorkspace(FIXTURES / "project", cli_dir, stack=recorded.about["stack"]) as stack:
            import_stack(stack, recorded, sim.credential)
            changed = planned_changes(stack)
            assert {c["status"] for c in sim.github.calls("GET", "/repos/actions/runner/releases$")} == {200}
            if newest == "2.329.0":
                assert changed == [], f"{changed}\n{stack.run('preview', '--diff').stdout}"
                return
            ops = {step["urn"].rsplit("::", 1)[-1]: step["op"] for step in changed}
            assert ops == {"runner-0": "replace", "runner-1": "replace", "pool": "update", "jit-pool": "update"}, ops
            deadline = published + timedelta(days=30)
            said = (
                f"actions/runner 2.337.0 was released on {published:%Y-%m-%d}; 2.329.0 stops receiving jobs after "
                f"{deadline:%Y-%m-%d}"
            )
            preview = stack.run("preview")
            assert said in preview.stdout + preview.stderr, preview.stdout
            text = report("-", stdin=stack.run("preview", "--json").stdout).stdout
            assert text.count(f"because: {said}") == 4, text
