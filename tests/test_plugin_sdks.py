"""The provider plugin's schema and the SDKs generated from it: current (regenerated and compared, as `make sdk`
writes them), and what the plugin itself serves to `pulumi package get-schema`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actions_runners_simulator.tools import tool_dirs
from tests.conftest import ROOT

SDK = ROOT / "sdk"


@pytest.fixture(scope="session")
def path(cli_dir: Path) -> str:
    """The CLI, the language hosts gen-sdk calls, and the plugin's source install (this environment's bin)."""
    folders = [tool_dirs("pulumi-languages")["pulumi-languages"], cli_dir, Path(sys.executable).parent]
    return os.pathsep.join([*map(str, folders), os.environ["PATH"]])


BUILT = ("nodejs/bin/", "nodejs/node_modules/", "nodejs/package-lock.json")  # tools/plugin/build-nodejs-sdk.sh


def files(root: Path) -> dict[str, bytes]:
    found = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    return {name: path.read_bytes() for name, path in found.items() if not name.startswith(BUILT)}


def test_the_checked_in_sdks_are_what_gen_sdk_makes_of_the_current_schema(path: str, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": path, "PYTHON": sys.executable}
    subprocess.run([str(ROOT / "tools" / "plugin" / "gen-sdk.sh"), str(tmp_path)], env=env, check=True)

    generated, checked_in = files(tmp_path), files(SDK)
    assert set(generated) == set(checked_in), "run `make sdk`: the SDKs' files differ"
    stale = [name for name in generated if generated[name] != checked_in[name]]
    assert stale == [], f"run `make sdk`: stale {stale}"
    for language in ("nodejs", "go", "python"):
        assert any(name.startswith(f"{language}/") for name in generated), language


def test_the_plugin_serves_the_schema_the_sdks_are_made_of(path: str, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": path, "PULUMI_HOME": str(tmp_path), "PULUMI_SKIP_UPDATE_CHECK": "true"}
    plugin = Path(sys.executable).parent / "pulumi-resource-actions-runners"
    served = subprocess.run(
        ["pulumi", "package", "get-schema", str(plugin)], env=env, capture_output=True, text=True, check=True
    ).stdout
    schema = json.loads(served)
    assert {**schema, "config": {}} == {
        **json.loads((SDK / "schema.json").read_text()),
        "config": {},
    }  # the CLI adds it
    pool = schema["resources"]["actions-runners:index:RunnerPool"]
    assert {"githubUrl", "registrationToken", "gracePeriodSeconds", "maxUnavailable", "podTemplate"} <= set(
        pool["inputProperties"]
    )
    assert pool["inputProperties"]["registrationToken"]["secret"] is True
    assert schema["resources"]["actions-runners:index:RegistrationToken"]["properties"]["token"]["secret"] is True
    scale_set = schema["resources"]["actions-runners:index:RunnerScaleSet"]
    assert scale_set["requiredInputs"] == ["githubUrl", "maxRunners", "namespace"]
    assert scale_set["inputProperties"]["minRunners"]["default"] == 0
    assert all(scale_set["inputProperties"][k]["secret"] is True for k in ("githubToken", "githubAppPrivateKey"))
    assert {"scaleSetId", "listener", "statistics", "runners", "updateKind", "specHash"} <= set(scale_set["properties"])
    assert scale_set["properties"]["statistics"]["additionalProperties"] == {"type": "integer"}
