"""The preview report where the preview hides a value: a pool whose image is a secret, and one whose pod template
holds a secret (Pulumi then hides its whole containers list), recorded from the real CLI in this run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners.report import build_report
from tests.conftest import ROOT, quick_simulator
from tests.test_report import report, step_of

PROJECT = ROOT / "tests" / "projects" / "hidden_inputs"
OLD_IMAGE, NEW_IMAGE = "ghcr.io/actions/actions-runner:2.336.0", "ghcr.io/actions/actions-runner:2.335.0"


@pytest.fixture(scope="module")
def previews(kube_api_server: KubeApiServer, cli_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The stack up once, then `pulumi preview --json` of a new (secret) image, and of new labels alone."""
    folder = tmp_path_factory.mktemp("hidden")
    with quick_simulator(kube_api_server) as sim, PulumiWorkspace(PROJECT, cli_dir) as stack:
        config = {"githubUrl": sim.repo_url, "namespace": sim.namespace, "kubeconfig": str(sim.kubeconfig)}
        stack.new_stack(
            config=config | {"labels": "pulumi", "image": OLD_IMAGE},
            secrets={"githubToken": sim.credential, "npmToken": "npm_not_a_real_one"},
        )
        stack.run("up", "--yes")
        files = {}
        for scenario, changes in (("image", {"image": NEW_IMAGE}), ("labels", {"labels": "pulumi,gpu"})):
            for key, value in changes.items():
                stack.run("config", "set", key, value)
            files[scenario] = folder / f"{scenario}.json"
            files[scenario].write_text(stack.run("preview", "--json").stdout)
            stack.run("config", "set", "image", OLD_IMAGE)
            stack.run("config", "set", "labels", "pulumi")
        yield files


def pools(path: Path) -> dict[str, dict]:
    document = json.loads(report(path, "--format", "json").stdout)
    return {r["name"]: r for r in document["resources"] if r["type"] == "RunnerPool"}


def test_a_secret_image_s_change_is_reported_as_the_rotation_it_is(previews: dict[str, Path]) -> None:
    preview = json.loads(previews["image"].read_text())
    assert step_of(preview, "image")["newState"]["inputs"]["image"] == "[secret]"  # what the report is given
    result = report(previews["image"], "--fail-on", "recreate")
    assert result.returncode == 1, result.stdout  # a rotation: the gate holds
    changed = pools(previews["image"])
    assert list(changed) == ["image"]  # the other pool's inputs did not change
    assert (changed["image"]["action"], changed["image"]["recreated"]) == ("rotate", 2)
    assert changed["image"]["reasons"] == ["a hidden input changed (image: the preview hides it as a secret)"]
    assert "[secret]" not in result.stdout


def test_a_labels_change_beside_a_hidden_pod_template_is_a_relabel(previews: dict[str, Path]) -> None:
    preview = json.loads(previews["labels"].read_text())
    assert step_of(preview, "env")["newState"]["inputs"]["pod_template"] == {"spec": {"containers": "[secret]"}}
    changed = pools(previews["labels"])
    for name in ("env", "image"):
        assert (changed[name]["action"], changed[name]["recreated"], changed[name]["relabelled"]) == ("relabel", 0, 2)
    assert report(previews["labels"], "--fail-on", "recreate").returncode == 2


def test_what_cannot_be_compared_is_reported_as_the_worst_that_can_happen(previews: dict[str, Path]) -> None:
    """A preview without the hashes the provider's Check records (one made by an earlier version): a hidden
    spec input may have changed, so every runner may rotate, and it counts as a recreation."""
    for scenario in ("image", "labels"):
        preview = json.loads(previews[scenario].read_text())
        for step in preview["steps"]:
            for key in ("spec_hash", "shape_hash"):
                (step.get("newState") or {}).get("inputs", {}).pop(key, None)
        built = build_report(preview)
        [image] = [c for c in built.changes if c.name == "image"]
        assert (image.recreated, image.what) == (2, "may rotate 2 of 2 runners, at most 1 at a time"), scenario
        assert "a hidden input changed or cannot be compared (image: the preview hides it as a secret)" in (
            image.reasons
        )
        assert built.recreates
        result = report("-", "--fail-on", "recreate", stdin=json.dumps(preview))
        assert result.returncode == 1 and "may rotate 2 of 2 runners" in result.stdout
