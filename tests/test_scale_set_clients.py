"""Clients of the runner scale set protocol that no one here wrote, against `actions-runners-simulator serve`: a
walk through the protocol on the `scaleset` crate (tools/scaleset-client/src/main.rs), and the crate's own
example autoscaler, unmodified, starting `actions-runners-simulator runner` processes for a burst of jobs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from actions_runners_simulator.tools import tool_dirs
from tests.conftest import wait_until
from tests.test_simulator_settings import Serve, environment, run

LONG_POLL = "2"  # seconds: the example autoscaler acts on messages and on empty polls only


def control(serve: Serve, path: str, payload: dict[str, Any] | None = None) -> Any:
    url = serve.info["github_api_url"].removesuffix("/api/v3") + f"/_simulator/{path}"
    answer = requests.post(url, json=payload, timeout=10) if payload is not None else requests.get(url, timeout=10)
    answer.raise_for_status()
    return answer.json()


def client_env(serve: Serve, name: str, **more: str) -> dict[str, str]:
    return {
        **os.environ,
        "SCALESET_URL": serve.info["github_url"],
        "SCALESET_NAME": name,
        "GITHUB_TOKEN": serve.info["github_token"],
        "SCALESET_ALLOW_HTTP": "1",  # the simulator serves plain HTTP on loopback
        **more,
    }


def test_the_scaleset_crate_walks_the_protocol_against_the_simulator(tmp_path: Path) -> None:
    program = tool_dirs("scaleset-client")["scaleset-client"] / "scaleset-client"
    env = environment(tmp_path)
    serve = Serve(env, tmp_path, "--github-only", "--long-poll-seconds", LONG_POLL)
    try:
        walk = subprocess.Popen(
            [str(program)],
            env=client_env(serve, "crate-walk"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        steps: dict[str, Any] = {}
        messages = []
        for line in walk.stdout:  # type: ignore[union-attr]
            step = json.loads(line)
            if step["step"] == "message":
                messages.append(step["detail"])
            steps[step["step"]] = step["detail"]
            if step["step"] == "session":  # the listener listens: a workflow queues a job for the set
                said = run(env, "job", "queue", "--labels", "crate-walk", "--seconds", "1")
                assert said.returncode == 0 and "1 job(s) queued with runs-on [crate-walk]" in said.stdout, said
                queued = [json.loads(line) for line in run(env, "job", "list").stdout.splitlines()]
        _, stderr = walk.communicate(timeout=60)
        assert walk.returncode == 0, stderr
        assert steps["group"] == {"id": 1, "name": "Default"}
        assert steps["scale_set"]["labels"] == ["crate-walk"]
        assert steps["session"]["statistics"] == dict.fromkeys(
            ("available", "acquired", "assigned", "running", "registered", "busy", "idle"), 0
        )
        assert (
            steps["second_session"]["conflict"]
            and "RunnerScaleSetSessionConflictException" in (steps["second_session"]["error"])
        )
        assert [m["jobs"] for m in messages if m["jobs"]] == [["JobAvailable"], ["JobAssigned"]]
        assert messages[0]["labels"] == [["crate-walk"]] and messages[0]["statistics"]["available"] == 1
        assert messages[-1]["statistics"]["assigned"] == 1
        assert steps["acquired"] == {
            "offered": [queued[0]["runner_request_id"]],
            "acquired": [queued[0]["runner_request_id"]],
        }
        assert steps["jit_config"]["runner_name"] == "crate-walk-runner-1" and steps["jit_config"]["config_length"] > 40
        assert steps["jit_config_again"] == {"runner_exists": True}
        assert steps["done"]["acquired"] == [queued[0]["runner_request_id"]]
        assert control(serve, "scale-sets") == [] and control(serve, "runners") == []
        assert serve.info["github_token"] not in json.dumps(steps) + stderr  # no credential in its output
        jobs = control(serve, "jobs")
        assert [(job["status"], job["scale_set_id"]) for job in jobs] == [("queued", None)]  # back in the queue
    finally:
        serve.stop()


def test_the_crates_example_autoscaler_runs_a_burst_on_simulated_runner_processes(tmp_path: Path) -> None:
    autoscaler = tool_dirs("scaleset-client")["scaleset-client"] / "scaleset-autoscaler"
    serve = Serve(environment(tmp_path), tmp_path, "--github-only", "--long-poll-seconds", LONG_POLL)
    log = tmp_path / "autoscaler.log"
    try:
        with log.open("w") as out:
            process = subprocess.Popen(
                [str(autoscaler)],
                env=client_env(
                    serve,
                    "burst",
                    MIN_RUNNERS="0",
                    MAX_RUNNERS="3",
                    RUNNER_COMMAND=f"{sys.executable} -m actions_runners_simulator runner",
                    ACTIONS_RUNNERS_SIMULATOR_SPEEDUP="60",
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: control(serve, "scale-sets"), "the autoscaler to register its scale set", 30)
        queued = control(
            serve,
            "jobs/queue",
            {"labels": ["burst"], "duration_seconds": 1, "count": 7, "url": serve.info["github_url"]},
        )
        wait_until(
            lambda: all(job["status"] == "completed" for job in control(serve, "jobs")),
            f"the burst to run (autoscaler log: {log})",
            120,
        )
        process.send_signal(signal.SIGINT)  # its Ctrl-C: stop runners, close the session, delete the set
        assert process.wait(timeout=60) == 0, log.read_text()
        jobs = control(serve, "jobs")
        assert [job["id"] for job in jobs] == [job["id"] for job in queued]
        assert all(job["conclusion"] == "success" and not job["lost"] for job in jobs), jobs
        assert len({job["runner_name"] for job in jobs}) == 7  # ephemeral: one runner per job
        assert (
            max(len([j for j in jobs if j["started_at"] <= job["started_at"] < j["finished_at"]]) for job in jobs) <= 3
        )
        assert control(serve, "scale-sets") == [] and control(serve, "runners") == []
    finally:
        if process.poll() is None:
            process.kill()
        said = serve.stop()
    assert "Traceback" not in said
