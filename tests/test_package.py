"""The package as a user installs it: its wheel and its sdist, built from a copy of provider/, installed into a
clean virtualenv, and a program outside the checkout run with it against the simulator (so that a missing
package-data file or module shows here, not at a user's)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.workspace import PulumiWorkspace
from tests.conftest import ROOT, quick_simulator

PROGRAM = """\
import pulumi
from pulumi_actions_runners import RegistrationToken, RunnerPool

config = pulumi.Config()
token = RegistrationToken("registration", github_url=config.require("githubUrl"),
                          github_token=config.require_secret("githubToken"))
pool = RunnerPool("pool", github_url=config.require("githubUrl"), github_token=config.require_secret("githubToken"),
                  namespace="actions-runners", replicas=2, registration_token=token, grace_period_seconds=0.5)
pulumi.export("runners", pool.runners)
"""


def test_the_wheel_and_the_sdist_run_a_program_from_outside_the_checkout(
    cli_dir: Path, kube_api_server: KubeApiServer, tmp_path: Path
) -> None:
    source, dist, venv = tmp_path / "source", tmp_path / "dist", tmp_path / "venv"
    shutil.copytree(ROOT / "provider", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    build = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(dist), str(source)]  # as a user would
    subprocess.run(build, check=True, capture_output=True)
    [wheel], [sdist] = dist.glob("*.whl"), dist.glob("*.tar.gz")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # --no-compile: Python compiles what a program imports when it imports it; pip compiling every module of the
    # dependencies ahead (kubernetes' client alone has thousands) costs CPU and proves nothing here.
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
    subprocess.run([*pip, str(wheel), "-c", str(ROOT / "constraints.txt")], check=True)
    # Outside a checkout, with no binaries to be found: what the simulator needs, and how to get it.
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    serve = [str(venv / "bin" / "actions-runners-simulator"), "serve"]
    missing = subprocess.run(serve, env=bare, capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr, missing.stderr
    assert "kube-apiserver, kube-controller-manager and etcd" in missing.stderr and "KUBE_BIN_DIR" in missing.stderr

    program = tmp_path / "program"
    program.mkdir()
    (program / "__main__.py").write_text(PROGRAM)
    (program / "Pulumi.yaml").write_text(
        f"name: outside\nruntime:\n  name: python\n  options:\n    virtualenv: {venv}\n"
    )
    for installed in ("wheel", "sdist"):
        if installed == "sdist":
            subprocess.run([*pip, "--force-reinstall", "--no-deps", str(sdist)], check=True)
        with quick_simulator(kube_api_server) as sim, PulumiWorkspace(program, cli_dir, stack=installed) as ws:
            # Nothing from the checkout: the CLI, then the clean virtualenv.
            ws.env["PATH"] = f"{cli_dir}:{venv / 'bin'}:/usr/bin:/bin"
            ws.env["KUBECONFIG"] = str(sim.kubeconfig)
            ws.new_stack(config={"githubUrl": sim.repo_url}, secrets={"githubToken": sim.credential})
            up = ws.run("up", "--yes").stdout
            assert "3 created" in up, up
            assert len([r for r in sim.github.runners() if r["status"] == "online"]) == 2
            report = subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pulumi_actions_runners.report"],
                input=ws.run("preview", "--json").stdout,
                capture_output=True,
                text=True,
                check=False,
            )
            assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
            ws.run("destroy", "--yes")
            assert sim.github.runners() == []
