"""docs/getting-started/your-program.md, run as written: its bash blocks, in order, in one `bash -e` session,
from a clean environment (no virtualenv of the checkout on PATH, an empty home), against the simulator it starts
itself. What it shows is then read from its output and from the simulator's own last word."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path

from actions_runners_simulator.tools import TOOLS, tool_dirs
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "getting-started" / "your-program.md"
SESSION_SECONDS = 600


def bash_blocks(markdown: str) -> str:
    return "\n".join(re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL))


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    script = bash_blocks(PAGE.read_text())
    assert script.count("pulumi up --yes") == 4 and "job start fleet-0" in script and "release 2.337.0" in script
    home = tmp_path / "home"
    home.mkdir()
    tools = {TOOLS[name].variable: str(folder) for name, folder in tool_dirs(*TOOLS).items()}  # found: nothing to build
    env = {
        **tools,
        "PATH": "/usr/local/bin:/usr/bin:/bin",  # not the checkout's .venv: the walkthrough's own virtualenv serves
        "HOME": str(home),
        "TMPDIR": str(tmp_path),
        "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),  # this machine's downloads, not the empty home's
        "PIP_NO_COMPILE": "1",  # modules compiled when imported, not all ahead by pip: CPU this run need not spend
        "CHECKOUT": str(ROOT),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "NO_COLOR": "1",
    }
    log = tmp_path / "session.log"
    with log.open("w") as out:  # a file, not a pipe: the simulator it starts in the background holds it too
        session = subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            session.wait(timeout=SESSION_SECONDS)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(session.pid, signal.SIGTERM)  # whatever it left running, the simulator above all
    output = log.read_text()
    assert session.returncode == 0, output[-6000:]
    # Created, then relabelled in place: an update of the pool, no replacement.
    assert "3 created" in output, output[-6000:]
    assert re.search(r"~ +pulumi-python:dynamic/actions-runners:RunnerPool fleet update.*\[diff: ~labels", output)
    # The rotation: previewed, fleet-0 named busy by the report, waited for by the update, its job never lost.
    assert re.search(r"RunnerPool fleet +rotate 3 of 3 runners", output), output[-6000:]
    assert "busy now: fleet-0" in output, output[-6000:]
    assert "within refresh_before_seconds, now 3000 (was 1800)" in output, output[-6000:]  # the setting, not a cause
    assert "runner fleet-0 is running a job (RemoveRunner answered 422)" in output, output[-6000:]
    assert "RemoveRunner of fleet-0 was answered 422 (busy)" in output, output[-6000:]
    # The release: published now, so 2.336.0 gets jobs for 30 more days; the preview and the report say so.
    released = re.search(r"actions/runner 2\.337\.0 was released on \S+; 2\.336\.0 stops receiving jobs after", output)
    assert released and output.count(released[0]) >= 2, output[-6000:]
    assert len(re.findall(r"RunnerPool fleet +rotate 3 of 3 runners", output)) == 2, output[-6000:]
    last_word = json.loads(output.strip().splitlines()[-1])
    assert last_word["jobs_killed"] == [], last_word
    assert "Traceback" not in output, output[-6000:]
