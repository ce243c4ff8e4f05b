"""Docker mode's pod (a privileged dind sidecar that the runner waits for), and runners whose version GitHub
deprecates: exit code 7, reported as such by refresh for a Runner and a pool, and by a Create that meets it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actions_runners_simulator.engine import DeploymentFailed, MiniEngine
from pulumi_actions_runners.github.releases import KNOWN_IMAGE
from pulumi_actions_runners.kube.manifests import DIND_IMAGE, DOCKER_HOST
from tests.conftest import ROOT, wait_until
from tests.helpers import NAMESPACE, new_token, outputs
from tests.programs import runner_and_pool, token_and_runners

OLD_IMAGE = "ghcr.io/actions/actions-runner:2.330.0"


def _mounts(container: dict) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}


def test_docker_mode_gives_the_runner_a_privileged_dind_sidecar_that_it_waits_for(sim) -> None:
    dind_resources = {"limits": {"cpu": "2", "memory": "2Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}}
    template = {"spec": {"containers": [{"name": "dind", "resources": dind_resources}]}}
    with MiniEngine(ROOT) as engine:
        engine.up(token_and_runners(sim, 1, docker=True, pod_template=template))
        out = outputs(engine, "runner-0")
        pod = sim.kube.pod(NAMESPACE, out["pod_name"])

        init = {c["name"]: c for c in pod["spec"]["initContainers"]}
        assert list(init) == ["init-dind-externals", "dind"]
        dind = init["dind"]
        assert dind["image"] == DIND_IMAGE and dind["securityContext"]["privileged"] is True
        assert dind["restartPolicy"] == "Always"  # a native sidecar: it stops once the runner has exited
        assert dind["resources"] == dind_resources  # the template's dind, merged into the sidecar
        assert [c["name"] for c in pod["spec"]["containers"]] == ["runner"]  # not added beside it
        runner = pod["spec"]["containers"][0]
        assert {"name": "DOCKER_HOST", "value": DOCKER_HOST} in runner["env"]
        assert {"work": "/home/runner/_work", "dind-sock": "/var/run"}.items() <= _mounts(runner).items()
        assert {"work": "/home/runner/_work", "dind-sock": "/var/run"}.items() <= _mounts(dind).items()
        assert _mounts(dind)["dind-externals"] == "/home/runner/externals"
        assert {"work", "dind-sock", "dind-externals"} <= {v["name"] for v in pod["spec"]["volumes"]}
        assert "until [ -S /var/run/docker.sock ]" in runner["command"][-1]

        # The simulated runner, as the command does, registered only once the sidecar's Docker answered.
        waits = [seconds for pod_name, seconds in sim.runners.docker_waits if pod_name == out["pod_name"]]
        assert len(waits) == 1 and waits[0] >= 0.1, sim.runners.docker_waits
        assert {r["status"] for r in sim.github.runners()} == {"online"}
        engine.destroy()
    assert sim.kube.pods(NAMESPACE) == [] and sim.github.runners() == []


def test_a_docker_sidecar_whose_image_cannot_be_pulled_fails_the_create_saying_so(sim) -> None:
    template = {"spec": {"initContainers": [{"name": "dind", "image": "registry.invalid/docker:dind"}]}}
    with MiniEngine(ROOT) as engine, pytest.raises(DeploymentFailed) as raised:
        engine.up(token_and_runners(sim, 1, docker=True, pod_template=template))
    message = str(raised.value)
    assert "container dind: the image registry.invalid/docker:dind could not be pulled" in message, message
    assert sim.kube.pods(NAMESPACE) == [] and sim.kube.secrets(NAMESPACE) == []


def test_a_runner_version_github_deprecates_is_reported_by_refresh_and_rolled_by_a_new_image(sim) -> None:
    token = new_token(sim)
    old_image = runner_and_pool(sim, token, image=OLD_IMAGE)

    with MiniEngine(ROOT) as engine:
        engine.up(old_image)
        # A release after theirs, published 31 days ago: GitHub refuses them jobs from now on.
        sim.github.releases.publish("2.331.0", datetime.now(UTC) - timedelta(days=31))
        wait_until(
            lambda: all(p["status"].get("phase") == "Failed" for p in sim.kube.pods(NAMESPACE)),
            "the deprecated runners to exit",
        )
        engine.refresh()

        lone = outputs(engine, "runner-0")
        assert lone["pod_phase"] == "Failed"
        assert "version (ghcr.io/actions/actions-runner:2.330.0) is deprecated" in lone["pod_problem"]
        assert "exited with code 7" in lone["pod_problem"]
        engine.refresh()  # a second refresh replaces what the first one saw
        problems = outputs(engine, "pool")["problems"]
        assert len(problems) == 2 and all("is deprecated" in problem for problem in problems), problems
        assert all(problem.startswith("seen by refresh: runner pool-") for problem in problems), problems
        steps = {step.name: step.op for step in engine.preview(old_image)}
        assert (steps["runner-0"], steps["pool"]) == ("replace", "update")  # the next up starts them again

        # Started again with the same image, a runner meets the refusal at once: the Create says why.
        with pytest.raises(DeploymentFailed) as raised:
            engine.up(old_image)
        assert "is deprecated: GitHub sends it no jobs" in str(raised.value), raised.value

        # The image rolled: a spec change, which replaces the Runner and rotates the pool.
        engine.up(runner_and_pool(sim, token, image=KNOWN_IMAGE))
        assert outputs(engine, "pool")["problems"] == []
        assert {r["status"] for r in sim.github.runners()} == {"online"} and len(sim.github.runners()) == 3
        assert sim.runners.jobs_killed == []
        engine.destroy()
