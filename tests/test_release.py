"""The release workflow (.github/workflows/release.yml) and what it would publish, as far as this machine allows:
the workflow is valid (actionlint), pins every action by commit, and gives each job only the permissions it needs
(the jobs that publish run none of the repository's code); the image it pushes is where the package looks for it;
and the wheel, the sdist and the plugin archive, built by the workflow's scripts from a copy of the tree stamped
as the workflow stamps it, install (into clean virtualenvs, and with the real pulumi CLI) and name that image by
tag and digest. Not verifiable here: GitHub's runners, the registry, PyPI and the release's upload themselves
(docs/how-to/install.md says what a maintainer sets up for them)."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from actions_runners_simulator.tools import tool_dirs
from pulumi_actions_runners.inputs import listener_image
from tests.conftest import ROOT
from tests.test_gitops_workflow import PINNED, lint, load

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
RELEASE_TOOLS = ROOT / "tools" / "release"
VERSION = version("pulumi-actions-runners")
DIGEST = "sha256:" + "0123456789abcdef" * 4  # what a push's --digestfile would hold
UV = Path(sys.executable).parent / "uv"  # requirements-dev.txt's (constraints.txt's pin)
# What the builds need from the tree: tools/package.sh builds from its own checkout's provider/.
BUILD_FILES = (
    "constraints.txt",
    "tools/package.sh",
    "tools/wheel.sh",
    "tools/plugin/build.sh",
    "tools/plugin/pulumi-resource-actions-runners",
    "tools/release/stamp-listener-digest.py",
)
# The permissions that publish, and the one job each belongs to; every other job may only read.
WRITES = {("id-token", "write"): "pypi", ("packages", "write"): "image-push", ("contents", "write"): "release"}


@pytest.fixture(scope="session")
def actionlint() -> Path:
    return tool_dirs("actionlint")["actionlint"] / "actionlint"


def run_script(name: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RELEASE_TOOLS / name), *map(str, args)], capture_output=True, text=True, check=False
    )


def test_the_workflow_passes_actionlint(actionlint: Path) -> None:
    result = lint(actionlint, WORKFLOW)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_it_runs_on_a_version_tag_only() -> None:
    workflow = load(WORKFLOW)
    assert workflow["on"] == {"push": {"tags": ["v*"]}}
    tag_step = next(s for s in workflow["jobs"]["image"]["steps"] if "check-tag.py" in s.get("run", ""))
    assert tag_step["run"].startswith('python3 tools/release/check-tag.py "$GITHUB_REF_NAME"'), tag_step["run"]


# Each check returns what is wrong with a workflow (parsed), so that the tests below can show it finds a fault.
def unpinned(workflow: dict[str, Any], text: str) -> list[str]:
    """Every action by a full commit, its release in a `# vX.Y.Z` comment beside it."""
    wrong = []
    for name, job in workflow["jobs"].items():
        wrong += [f"{name}: {s['uses']}" for s in job["steps"] if "uses" in s and not PINNED.match(s["uses"])]
    for line in text.splitlines():
        if re.match(r"\s*(- )?uses:", line) and not re.search(r"@[0-9a-f]{40}\s+# v\d+\.\d+\.\d+", line):
            wrong.append(f"no release named beside: {line.strip()}")
    return wrong


def overreaching(workflow: dict[str, Any], text: str) -> list[str]:
    """No permission at workflow level; each write in its one job; a job that publishes runs none of the
    repository's code (no checkout, no make, no tools/); the PyPI job in its environment."""
    wrong = [] if workflow.get("permissions") == {} else [f"workflow permissions: {workflow.get('permissions')}"]
    for name, job in workflow["jobs"].items():
        if "permissions" not in job:
            wrong.append(f"{name}: no permissions of its own (it would get the repository's default)")
            continue
        for access in job["permissions"].items():
            if access != ("contents", "read") and WRITES.get(access) != name:
                wrong.append(f"{name}: {access[0]}: {access[1]}")
        if any(access in WRITES for access in job["permissions"].items()):
            code = [s.get("uses") or s["run"] for s in job["steps"] if "checkout" in s.get("uses", "")]
            code += [s["run"] for s in job["steps"] if re.search(r"\bmake\b|tools/", s.get("run", ""))]
            wrong += [f"{name} publishes and runs the repository's code: {c}" for c in code]
        for step in job["steps"]:
            if "checkout" in step.get("uses", "") and step.get("with", {}).get("persist-credentials") is not False:
                wrong.append(f"{name}: a checkout that leaves its credentials in git's config")
    missing = [job for job in WRITES.values() if job not in workflow["jobs"]]
    wrong += [f"no job {job}" for job in missing]
    if "pypi" in workflow["jobs"] and workflow["jobs"]["pypi"].get("environment", {}).get("name") != "pypi":
        wrong.append("pypi: not in the environment pypi (PyPI's trusted publisher names it)")
    return wrong


def pushes_elsewhere(workflow: dict[str, Any], text: str) -> list[str]:
    """The image goes where RunnerScaleSet's default looks: the repository the workflow pushes to is the one
    check-tag.py reads from inputs/listener_image.py, and no registry or repository is written in the workflow."""
    wrong = []
    host = listener_image.REPOSITORY.split("/")[0]
    wrong += [f"the workflow names {name} itself" for name in (listener_image.REPOSITORY, host) if name in text]
    outputs = workflow["jobs"]["image"].get("outputs", {})
    if outputs.get("repository") != "${{ steps.tag.outputs.repository }}":
        wrong.append(f"the image job's repository is {outputs.get('repository')}, not check-tag.py's")
    push = [s for s in workflow["jobs"]["image-push"]["steps"] if "skopeo copy" in s.get("run", "")]
    if len(push) != 1 or push[0].get("env", {}).get("REPOSITORY") != "${{ needs.image.outputs.repository }}":
        wrong.append("the push does not take REPOSITORY from the image job")
    elif not re.search(r'"docker://\$REPOSITORY:\$VERSION"', push[0]["run"]) or "--digestfile" not in push[0]["run"]:
        wrong.append(f"the push is not to docker://$REPOSITORY:$VERSION with --digestfile: {push[0]['run']}")
    for name in ("python", "plugin"):  # both build the package: both stamp the image's digest first
        runs = [s.get("run", "") for s in workflow["jobs"][name]["steps"]]
        stamp = next((i for i, r in enumerate(runs) if "stamp-listener-digest.py" in r), None)
        build = next((i for i, r in enumerate(runs) if re.search(r"make (wheel|plugin)", r)), None)
        if stamp is None or build is None or stamp > build:
            wrong.append(f"{name}: does not stamp the digest before it builds")
    return wrong


CHECKS: dict[str, Callable[[dict[str, Any], str], list[str]]] = {
    "pinned": unpinned,
    "permissions": overreaching,
    "image": pushes_elsewhere,
}


@pytest.mark.parametrize("check", CHECKS)
def test_the_workflow_holds(check: str) -> None:
    assert CHECKS[check](load(WORKFLOW), WORKFLOW.read_text()) == []


def _job(workflow: dict[str, Any], name: str) -> dict[str, Any]:
    return workflow["jobs"][name]


# A fault of each kind, made in a copy, and the check that must find it.
FAULTS: dict[str, tuple[str, Callable[[dict[str, Any]], object]]] = {
    "an action by its tag": ("pinned", lambda w: _job(w, "python")["steps"][0].update(uses="actions/checkout@v7")),
    "workflow-level permissions": ("permissions", lambda w: w.update(permissions={"contents": "read"})),
    "a job with no permissions of its own": ("permissions", lambda w: _job(w, "plugin").pop("permissions")),
    "id-token in a build job": (
        "permissions",
        lambda w: _job(w, "python")["permissions"].update({"id-token": "write"}),
    ),
    "packages: write where the image is built": (
        "permissions",
        lambda w: _job(w, "image")["permissions"].update({"packages": "write"}),
    ),
    "contents: write for PyPI": ("permissions", lambda w: _job(w, "pypi")["permissions"].update({"contents": "write"})),
    "a checkout where PyPI's token is": (
        "permissions",
        lambda w: _job(w, "pypi")["steps"].insert(0, copy.deepcopy(_job(w, "image")["steps"][0])),
    ),
    "no environment for PyPI": ("permissions", lambda w: _job(w, "pypi").pop("environment")),
    "a repository of its own": (
        "image",
        lambda w: _job(w, "image")["outputs"].update(repository="ghcr.io/someone/listener"),
    ),
    "no stamp before the plugin's build": (
        "image",
        lambda w: _job(w, "plugin")["steps"].sort(key=lambda s: "stamp-listener-digest" in s.get("run", "")),
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_each_check_finds_its_fault(fault: str) -> None:
    check, make = FAULTS[fault]
    workflow = load(WORKFLOW)
    make(workflow)
    assert CHECKS[check](workflow, WORKFLOW.read_text()) != [], fault


def test_the_checks_read_the_text_too() -> None:
    """What parsing loses: the release beside a commit, and a repository written into a comment or a script."""
    workflow, text = load(WORKFLOW), WORKFLOW.read_text()
    assert unpinned(workflow, text.replace("  # v7.0.1", "", 1)) != []
    assert pushes_elsewhere(workflow, text + f"\n# {listener_image.REPOSITORY}\n") != []


def test_check_tag_gives_the_version_and_the_package_s_image_repository() -> None:
    good = run_script("check-tag.py", f"v{VERSION}")
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines() == [f"version={VERSION}", f"repository={listener_image.REPOSITORY}"]
    for tag in (VERSION, f"v{VERSION}.1", "v0.0.0", f"refs/tags/v{VERSION}"):
        refused = run_script("check-tag.py", tag)
        assert refused.returncode == 1 and refused.stdout == "", tag
        assert f"is not v{VERSION}" in refused.stderr, refused.stderr


def test_the_checkout_is_never_stamped() -> None:
    """Only a release's copy names a digest: a commit of a stamped file would pin every later build to it."""
    assert listener_image.DIGEST == "" and '\nDIGEST = ""' in Path(listener_image.__file__).read_text()
    assert listener_image.default_listener_image() == f"{listener_image.REPOSITORY}:{VERSION}"


def test_the_stamp_refuses_a_malformed_or_another_digest_and_repeats_itself(tmp_path: Path) -> None:
    module = tmp_path / "listener_image.py"
    shutil.copy(Path(listener_image.__file__), module)
    clean = module.read_text()
    malformed = [
        "",
        "sha256:",
        DIGEST[:-1],
        DIGEST + "0",
        DIGEST.upper(),
        DIGEST.replace("sha256:", "sha512:"),
        DIGEST.removeprefix("sha256:"),
        DIGEST + "\n",
        f'{DIGEST}"  # injected',
    ]
    for digest in malformed:
        refused = run_script("stamp-listener-digest.py", digest, module)
        assert refused.returncode == 1 and "is not a digest" in refused.stderr, (digest, refused.stderr)
        assert module.read_text() == clean

    stamped = run_script("stamp-listener-digest.py", DIGEST, module)
    assert stamped.returncode == 0, stamped.stderr
    assert module.read_text() == clean.replace('DIGEST = ""', f'DIGEST = "{DIGEST}"', 1)  # that line alone
    again = run_script("stamp-listener-digest.py", DIGEST, module)
    assert again.returncode == 0 and "already" in again.stdout, again.stderr
    other = "sha256:" + "f" * 64
    refused = run_script("stamp-listener-digest.py", other, module)
    assert refused.returncode == 1 and f"stamped with {DIGEST} already" in refused.stderr, refused.stderr
    assert module.read_text() == clean.replace('DIGEST = ""', f'DIGEST = "{DIGEST}"', 1)
    usage = run_script("stamp-listener-digest.py")
    assert usage.returncode == 2 and "DIGEST" in usage.stderr


# The artifacts, built once for the tests below (the tests of this module run on one worker: conftest.py), from a
# copy of the tree stamped as the workflow stamps it, by the scripts the workflow's make targets run, both at once.
@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tree, dist = tmp_path_factory.mktemp("tree"), tmp_path_factory.mktemp("dist")
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT / "provider", tree / "provider", ignore=ignore)
    for name in BUILD_FILES:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)  # copy2: the scripts stay executable
    stamp = subprocess.run(
        [sys.executable, str(tree / "tools/release/stamp-listener-digest.py"), DIGEST], capture_output=True, text=True
    )
    # Its default FILE is its own tree's: the checkout's stays as it is.
    assert stamp.returncode == 0 and str(tree.resolve()) in stamp.stdout, stamp.stderr
    env = {**os.environ, "PYTHON": sys.executable}
    builds = {
        script: subprocess.Popen(
            [str(tree / script), str(dist)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for script in ("tools/wheel.sh", "tools/plugin/build.sh")
    }
    last_lines = {}
    for script, build in builds.items():
        out, err = build.communicate(timeout=300)
        assert build.returncode == 0, f"{script}: {err}"
        last_lines[script] = Path(out.strip().splitlines()[-1])
    [sdist] = dist.glob("pulumi_actions_runners-*.tar.gz")
    return {"wheel": last_lines["tools/wheel.sh"], "sdist": sdist, "archive": last_lines["tools/plugin/build.sh"]}


def venv_with(package: Path, folder: Path) -> Path:
    """A clean virtualenv with the package and its pinned dependencies, as an infrastructure repository's
    `pip install -r requirements.txt -c constraints.txt` makes it (uv: the same files, from its cache)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    install = [str(UV), "pip", "install", "--quiet", "--python", str(folder / "bin" / "python"), str(package)]
    subprocess.run([*install, "-c", str(ROOT / "constraints.txt")], check=True, capture_output=True)
    return folder / "bin"


def default_image_in(bin_dir: Path) -> str:
    code = "from pulumi_actions_runners.inputs.listener_image import default_listener_image as d; print(d())"
    return subprocess.run(
        [str(bin_dir / "python"), "-c", code], cwd=bin_dir, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_wheel_installs_names_the_released_image_and_brings_the_listener(
    artifacts: dict[str, Path], tmp_path: Path
) -> None:
    wheel = artifacts["wheel"]
    assert wheel.name == f"pulumi_actions_runners-{VERSION}-py3-none-any.whl"
    bin_dir = venv_with(wheel, tmp_path / "venv")
    assert default_image_in(bin_dir) == f"{listener_image.REPOSITORY}:{VERSION}@{DIGEST}"
    # The listener image's command, on the virtualenv's PATH; given none of its Deployment's settings, it says so.
    bare = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    listener = subprocess.run(["actions-runners-listener"], env=bare, capture_output=True, text=True, timeout=60)
    assert listener.returncode == 1 and "is not set" in listener.stderr, listener.stderr
    assert "Traceback" not in listener.stderr


def test_the_sdist_holds_the_stamped_source_and_installs(artifacts: dict[str, Path], tmp_path: Path) -> None:
    sdist = artifacts["sdist"]
    top = f"pulumi_actions_runners-{VERSION}"
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
        module = archive.extractfile(f"{top}/pulumi_actions_runners/inputs/listener_image.py")
        assert module is not None and f'DIGEST = "{DIGEST}"' in module.read().decode()
    assert {f"{top}/pyproject.toml", f"{top}/PKG-INFO", f"{top}/pulumi_actions_runners/__init__.py"} <= names
    assert default_image_in(venv_with(sdist, tmp_path / "venv")) == f"{listener_image.REPOSITORY}:{VERSION}@{DIGEST}"


def test_the_publisher_reads_the_wheel_and_the_sdist(artifacts: dict[str, Path]) -> None:
    """`uv publish` (the workflow's PyPI step) checks both files' metadata (Metadata-Version 2.4, which older
    twine refuses); --dry-run uploads nothing and contacts no one (the URL is a closed port)."""
    publish = [str(UV), "publish", "--dry-run", "--trusted-publishing", "never", "--token", "unused"]
    result = subprocess.run(
        [*publish, "--publish-url", "http://127.0.0.1:9/legacy/", str(artifacts["wheel"]), str(artifacts["sdist"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("Checking pulumi_actions_runners-") == 2, result.stderr


def test_the_plugin_archive_holds_the_stamped_wheel_and_installs_with_pulumi(
    artifacts: dict[str, Path], cli_dir: Path, tmp_path: Path
) -> None:
    archive = artifacts["archive"]
    assert re.fullmatch(
        rf"pulumi-resource-actions-runners-v{re.escape(VERSION)}-linux-(amd64|arm64)\.tar\.gz", archive.name
    )
    with tarfile.open(archive) as plugin:
        names = set(plugin.getnames())
        inner = plugin.extractfile(f"./wheels/pulumi_actions_runners-{VERSION}-py3-none-any.whl")
        assert inner is not None
        with zipfile.ZipFile(inner) as wheel:
            assert f'DIGEST = "{DIGEST}"' in wheel.read("pulumi_actions_runners/inputs/listener_image.py").decode()
    assert "./pulumi-resource-actions-runners" in names

    env = {
        "PATH": f"{cli_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }

    def pulumi(*args: str) -> str:
        result = subprocess.run(["pulumi", *args], env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    pulumi("plugin", "install", "resource", "actions-runners", VERSION, "--file", str(archive))
    listed = pulumi("plugin", "ls")
    assert re.search(rf"^actions-runners\s+resource\s+{re.escape(VERSION)}\b", listed, re.MULTILINE), listed
    installed = tmp_path / "pulumi-home" / "plugins" / f"resource-actions-runners-v{VERSION}"
    assert os.access(installed / "pulumi-resource-actions-runners", os.X_OK)


def test_the_uv_that_publishes_is_constraints_txt_s_by_its_hash() -> None:
    """The PyPI job installs uv with --require-hashes from tools/release/uv-requirements.txt: the version
    constraints.txt pins, and a sha256 hash (a bump of one without the other fails here)."""
    requirement = next(
        line
        for line in (ROOT / "tools" / "release" / "uv-requirements.txt").read_text().splitlines()
        if line.startswith("uv==")
    )
    pinned = next(line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("uv=="))
    version, _, hashed = requirement.partition(" --hash=sha256:")
    assert version == pinned and re.fullmatch(r"[0-9a-f]{64}", hashed), requirement
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    assert "--require-hashes" in workflow and "tools/release/uv-requirements.txt" in workflow
