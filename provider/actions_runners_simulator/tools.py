"""The binaries of the test bed: the pulumi CLI, kube-apiserver with etcd, pulumi-resource-kubernetes,
actionlint (for the workflow in programs/gitops), Pulumi's YAML language host (for programs/yaml), and our own
Node.js, Go and .NET hosts (for programs/typescript and `pulumi package gen-sdk`).

Each comes from an environment variable naming its folder, else from its tools/*/build.sh in a checkout (found
on PATH or built once into a cache), else from PATH. Those named in one call are built concurrently, so a fresh
machine waits once, for the slowest (`python -m actions_runners_simulator tools`, which `make` runs first, names
them all).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]


# The versions the language hosts report (tools/pulumi-yaml/build.sh, tools/pulumi-languages/build.sh), under
# which a workspace installs them as plugins.
YAML_HOST_VERSION = "1.25.0"
NODEJS_HOST_VERSION = "3.260.0"


class ToolMissing(Exception):
    pass


# name: (environment variable, build script in a checkout, a file the folder must hold)
TOOLS = {
    "pulumi": ("PULUMI_CLI_DIR", "tools/pulumi/build.sh", "pulumi"),
    "kube": ("KUBE_BIN_DIR", "tools/kube/build.sh", "kube-apiserver"),
    "pulumi-kubernetes": ("PULUMI_KUBERNETES_DIR", "tools/pulumi-kubernetes/build.sh", "pulumi-resource-kubernetes"),
    "actionlint": ("ACTIONLINT_DIR", "tools/actionlint/build.sh", "actionlint"),
    "pulumi-yaml": ("PULUMI_YAML_DIR", "tools/pulumi-yaml/build.sh", "pulumi-language-yaml"),
    "pulumi-languages": ("PULUMI_LANGUAGES_DIR", "tools/pulumi-languages/build.sh", "pulumi-language-nodejs"),
}


def tool_dirs(*names: str) -> dict[str, Path]:
    """The folder of each named tool; build.sh's progress (a cold build takes minutes) goes to our stderr."""
    found: dict[str, Path] = {}
    building: dict[str, subprocess.Popen[str]] = {}
    for name in names:
        variable, script, binary = TOOLS[name]
        if os.environ.get(variable):
            found[name] = Path(os.environ[variable])
        elif (PROJECT_DIR / script).is_file():
            building[name] = subprocess.Popen([str(PROJECT_DIR / script)], stdout=subprocess.PIPE, text=True)
        elif on_path := shutil.which(binary):
            found[name] = Path(on_path).parent
        else:
            raise ToolMissing(
                f"{binary} is not on PATH and ${variable} is not set (nor is this a checkout with {script})"
            )
    failed = []
    for name, process in building.items():  # every build runs to its end, so none is left behind
        output, _ = process.communicate()
        if process.returncode == 0:
            found[name] = Path(output.strip().splitlines()[-1])
        else:
            failed.append(f"{TOOLS[name][1]} (exit {process.returncode})")
    if failed:
        raise ToolMissing(f"{', '.join(failed)} failed; the output is above")
    return found
