"""The simulated runner and kubelet are as unkind as actions/runner and Kubernetes (runner.py cites where), and
the provider holds: sessions left behind, exits that hide their cause, removals the runner does not notice, runners
that die mid-job, signals its shell drops, a credential a job can read, and a kubelet's back-off."""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

from actions_runners_simulator.engine import MiniEngine
from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.kubelet import CrashLoopBackOff
from actions_runners_simulator.runner import SIGTERM_EXIT, RunnerTimings, SimulatedRunners, run_sh_exit
from actions_runners_simulator.simulator import OWNER, REPOSITORY, Simulator
from pulumi_actions_runners.kube.manifests import INPUT, JIT_RUNNER_COMMAND, RUNNER_COMMAND
from pulumi_actions_runners.kube.pod_state import UNREGISTERED, why_not_running
from tests.conftest import ROOT, quick_simulator, wait_until
from tests.fakes import FakePodProcess
from tests.helpers import NAMESPACE, core_api, new_token, outputs
from tests.programs import runner_with_token, token_and_pool

DEPRECATED = "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"


def runner_pod(sim: Simulator, name: str = "steady") -> dict:
    pod = core_api(sim).read_namespaced_pod(name, NAMESPACE).to_dict()
    return next(s for s in pod["status"]["container_statuses"] if s["name"] == "runner")


def registration(sim: Simulator, name: str = "steady") -> dict | None:
    return next((r for r in sim.github.runners() if r["name"] == name), None)


def remove_in_github(sim: Simulator, runner_id: int) -> None:
    """What an admin does in the repository's runner settings."""
    answer = requests.delete(
        f"{sim.github.api_url}/repos/{OWNER}/{REPOSITORY}/actions/runners/{runner_id}",
        headers={"Authorization": f"Bearer {sim.credential}"},
        timeout=10,
    )
    assert answer.status_code == 204, answer.text


@pytest.mark.parametrize(
    ("listener_code", "variable", "run_sh"),
    [
        *[(code, "1", 0) for code in (0, 1, 5, 6, 137)],
        *[(code, "1", None) for code in (2, 3, 4)],
        *[(7, "1", 7), (7, "true", 0), (7, "", 0)],
    ],
)
def test_run_sh_hides_the_listeners_exit_code_as_run_helper_does(listener_code, variable, run_sh) -> None:
    assert run_sh_exit(listener_code, {DEPRECATED: variable}) == run_sh


def test_kubelet_back_off_doubles_from_10_s_to_300_s_and_resets_after_10_minutes_of_running() -> None:
    back_off = CrashLoopBackOff()
    delays, previous = [], None
    for _ in range(7):
        previous = back_off.next_delay(previous, ran_seconds=1.0)
        delays.append(previous)
    assert delays == [10, 20, 40, 80, 160, 300, 300]
    assert back_off.next_delay(300, ran_seconds=601) == 10


@pytest.mark.alone  # it measures the back-off's gaps, tenths of a second at the test bed's speed
def test_a_crash_looping_runner_is_restarted_ever_later(sim: Simulator) -> None:
    """A persistent runner pod whose token is refused exits 1 at each start; the kubelet stand-in waits twice as
    long each time (at the suite's speed-up 0.1 s, 0.2 s, 0.4 s...), not a fixed delay."""
    env = [{"name": f"{INPUT}{key}", "value": value} for key, value in (("URL", sim.repo_url), ("NAME", "loop"))]
    env.append({"name": f"{INPUT}TOKEN", "value": "NOSUCHTOKEN" + "0" * 18})
    container = {"name": "runner", "image": "ghcr.io/actions/actions-runner:2.336.0", "env": env}
    manifest = {"metadata": {"name": "loop"}, "spec": {"restartPolicy": "Always", "containers": [container]}}
    core_api(sim).create_namespaced_pod(NAMESPACE, manifest)

    def starts() -> list[float]:
        return [e["at"] for e in sim.kube.events() if e["type"] == "container_started" and e["name"] == "loop"]

    wait_until(lambda: len(starts()) >= 5, "five starts", timeout=15)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts())]
    assert all(later > earlier * 1.5 for earlier, later in itertools.pairwise(gaps[:4])), gaps
    waiting = runner_pod(sim, "loop")["state"]["waiting"] or runner_pod(sim, "loop")["last_state"]["terminated"]
    assert waiting is not None


def test_a_persistent_runner_killed_whole_comes_back_after_its_stale_session_lapses(sim: Simulator) -> None:
    """OOM-killed, the container restarts and config.sh --replace keeps the id; the old session is still there,
    so the listener meets 409 until it gives up (exit 5, which run.sh makes 0). With restartPolicy OnFailure the
    pod would end Succeeded for good; with Always it restarts until its session opens."""
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, new_token(sim), runner_name="steady", ephemeral=False))
        first = registration(sim)
        assert first is not None
        sim.runners.crash(NAMESPACE, "steady")

        assert registration(sim)["status"] == "online"  # the stale session keeps it listed online
        wait_until(lambda: sim.runners.session_conflicts, "a 409 on the new session")
        wait_until(
            lambda: runner_pod(sim)["restart_count"] >= 2 and runner_pod(sim)["state"]["running"],
            "the runner to restart after its listener gave up",
            timeout=20,
        )
        wait_until(lambda: sim.runners.session_conflicts and _listening(sim, "steady"), "a session of its own", 20)
        engine.refresh()
        after = outputs(engine, "runner")

    assert registration(sim)["id"] == first["id"] and registration(sim)["status"] == "online"
    assert after.get("pod_problem") is None and after["pod_phase"] == "Running"
    assert core_api(sim).read_namespaced_pod("steady", NAMESPACE).spec.restart_policy == "Always"
    assert sim.runners.jobs_killed == []


def _listening(sim: Simulator, name: str) -> bool:
    """The runner holds a session: GitHub gives it a job (a stale session takes none)."""
    try:
        sim.github.start_job(name, 0.01)
    except LookupError:
        return False
    return True


def test_a_runner_removed_in_github_that_does_not_notice_is_reported_and_replaced(sim: Simulator) -> None:
    """The removal's slow path, for ever (actions/runner#3328): the pod runs on with no registration. A refresh
    reports it once it has run longer than a registration takes, and the next up replaces it."""
    program = runner_with_token(sim, new_token(sim), runner_name="steady", ephemeral=False, register_timeout_seconds=1)
    with MiniEngine(ROOT) as engine:
        engine.up(program)
        first = registration(sim)
        sim.runners.linger_after_removal(forever=True)
        remove_in_github(sim, first["id"])
        time.sleep(1.5)
        assert runner_pod(sim)["state"]["running"] and registration(sim) is None
        engine.refresh()
        seen = outputs(engine, "runner")
        steps = engine.up(program)

    assert seen["pod_phase"] == UNREGISTERED
    assert "GitHub lists no registration of it" in seen["pod_problem"]
    assert [s.op for s in steps if s.type.endswith(":Runner")] == ["replace"]
    assert runner_pod(sim)["state"]["running"] and registration(sim)["status"] == "online"
    assert registration(sim)["id"] != first["id"] and sim.runners.jobs_killed == []


def test_an_ephemeral_runner_that_lost_its_job_assignment_is_reported_and_replaced(sim: Simulator) -> None:
    """actions/runner#4617: GitHub assigns a job to an idle ephemeral runner, which consumes its registration,
    and the job is gone before the runner acquires it; the runner polls on, registered nowhere, its pod Running.
    A refresh reports it once it has run longer than a registration takes, and the next up replaces it."""
    program = token_and_pool(sim, None, jit_config=True, replicas=2, register_timeout_seconds=1)
    with MiniEngine(ROOT) as engine:
        engine.up(program)
        lost_id = sim.github.lose_job_assignment("pool-0")
        time.sleep(1.5)
        assert runner_pod(sim, "pool-0")["state"]["running"] and registration(sim, "pool-0") is None
        engine.refresh()
        seen = outputs(engine, "pool")
        engine.up(program)
        after = outputs(engine, "pool")

    assert {r["name"]: r["pod_phase"] for r in seen["runners"]} == {"pool-0": UNREGISTERED, "pool-1": "Running"}
    assert any("pool-0" in p and "GitHub lists no registration of it" in p for p in seen["problems"])
    assert after["problems"] == []
    assert registration(sim, "pool-0")["status"] == "online" and registration(sim, "pool-0")["id"] != lost_id
    assert runner_pod(sim, "pool-0")["state"]["running"] and sim.runners.jobs_killed == []


def test_a_runner_whose_stale_session_keeps_its_registration_online_is_registered_anew(
    kube_api_server: KubeApiServer,
) -> None:
    """A runner killed whole leaves its session, and its registration listed online, for minutes (30 s here);
    its pod lost with its node, the state lost too. The Create that follows finds the registration (ours, by
    its label) with no pod running it: it removes it first, so that "online" is the new runner's own session,
    under an id of its own (with config.sh --replace alone the new runner would keep the id and meet 409 for
    minutes, while the listing called it online). Slower runners than the suite's: the session must outlive
    the Create."""
    with quick_simulator(kube_api_server, runner_speedup=10) as slow:
        program = runner_with_token(slow, new_token(slow), runner_name="steady", ephemeral=False)
        with MiniEngine(ROOT, stack="lost") as first:
            first.up(program)
        stale = registration(slow)
        slow.runners.crash(NAMESPACE, "steady")
        core_api(slow).delete_namespaced_pod("steady", NAMESPACE, grace_period_seconds=0)
        wait_until(lambda: not slow.kube.pods(NAMESPACE), "the pod to go")
        assert registration(slow)["status"] == "online"  # the stale session
        conflicts_before = len(slow.runners.session_conflicts)  # had the old pod restarted before it went
        with MiniEngine(ROOT, stack="lost") as again:  # the same stack, its state lost
            again.up(program)
            out = outputs(again, "runner")
        listening = _listening(slow, "steady")
        removed = [c["path"] for c in slow.github.calls("DELETE")]
        session_conflicts = slow.runners.session_conflicts[conflicts_before:]

    assert out["runner_id"] != stale["id"] and removed == [f"/repos/{OWNER}/{REPOSITORY}/actions/runners/{stale['id']}"]
    assert listening, "the runner Create returned did not hold a session"
    assert session_conflicts == []


def test_a_rotation_meeting_a_runner_that_died_mid_job_says_so_and_waits_for_github_to_let_go(sim: Simulator) -> None:
    """OOM-killed mid-job (the job is lost, not by the provider): GitHub lists the runner online and busy until
    it abandons the job (6 s at the suite's speed-up). The replacement says why it waits, then goes on."""
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, new_token(sim), runner_name="steady", unregister_timeout_seconds=60))
        sim.github.start_job("steady", None)
        wait_until(lambda: _busy_process(sim, "steady"), "the runner to hold its job")
        sim.runners.crash(NAMESPACE, "steady")
        assert registration(sim)["busy"] and registration(sim)["status"] == "online"
        steps = engine.up(runner_with_token(sim, new_token(sim), runner_name="steady", unregister_timeout_seconds=60))
        log = "\n".join(engine.provider.stderr_lines)

    assert [s.op for s in steps if s.type.endswith(":Runner")] == ["replace"]
    assert "it died mid-job, and GitHub holds that job until it abandons it" in log, log
    assert runner_pod(sim)["state"]["running"] and registration(sim)["status"] == "online"
    assert sim.runners.jobs_killed == ["steady"]  # the one the crash lost, no other


def _busy_process(sim: Simulator, name: str) -> bool:
    found = registration(sim, name)
    return found is not None and found["busy"]


def test_sigterm_to_run_sh_cancels_the_job_and_the_container_exits_143(sim: Simulator) -> None:
    runners = SimulatedRunners(sim.github, timings=RunnerTimings().faster(200))
    env = {f"{INPUT}URL": sim.repo_url, f"{INPUT}NAME": "busy", f"{INPUT}TOKEN": new_token(sim)}
    process = FakePodProcess(name="busy", env=env)
    runners.start(process)
    wait_until(lambda: _listening_with(runners, sim, "busy"), "a session")

    runners.terminate(process)

    wait_until(lambda: process.exit_codes, "the container to exit")
    assert process.exit_codes == [SIGTERM_EXIT] and runners.jobs_killed == ["busy"]
    assert registration(sim, "busy")["status"] == "offline"  # the listener ended its session


def _listening_with(runners: SimulatedRunners, sim: Simulator, name: str) -> bool:
    found = registration(sim, name)
    if found is None or found["status"] != "online":
        return False
    sim.github.start_job(name, None)
    return True


def test_a_runner_stopped_from_outside_is_reported_as_stopped_not_as_failed() -> None:
    def pod(code: int, reason: str = "Error") -> SimpleNamespace:
        terminated = SimpleNamespace(exit_code=code, reason=reason, message="")
        runner = SimpleNamespace(
            name="runner", image="i", state=SimpleNamespace(waiting=None, terminated=terminated), last_state=None
        )
        return SimpleNamespace(status=SimpleNamespace(container_statuses=[runner], init_container_statuses=[]))

    assert why_not_running(pod(143)).startswith("the runner was stopped (SIGTERM, exit 143)")
    assert why_not_running(pod(137)).startswith("the runner was killed (SIGKILL, exit 137)")
    assert why_not_running(pod(137, "OOMKilled")) == "the runner was killed for memory (OOMKilled, exit 137)"


def _environ_of_run_sh(command: str, env: dict[str, str], tmp_path: Path) -> str:
    """Run the provider's runner command in bash with stand-ins for config.sh and run.sh; run.sh prints what
    /proc/self/environ holds once the command has exec'd it (what a job running as the same user can read of
    PID 1)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.sh").write_text("#!/bin/sh\nexit 0\n")
    (home / "run.sh").write_text("#!/bin/sh\ntr '\\0' '\\n' < /proc/self/environ\n")
    for script in ("config.sh", "run.sh"):
        (home / script).chmod(0o755)
    script = command.replace("cd /home/runner", f"cd {home}")
    run = subprocess.run(
        ["/bin/bash", "-c", script], env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, timeout=10
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_registration_token_is_gone_from_pid_1_once_run_sh_runs(tmp_path: Path) -> None:
    environ = _environ_of_run_sh(RUNNER_COMMAND, {f"{INPUT}TOKEN": "AREGISTRATIONTOKEN"}, tmp_path)
    assert "AREGISTRATIONTOKEN" not in environ and "PATH=" in environ


def test_a_just_in_time_config_stays_readable_in_pid_1_as_the_docs_say(tmp_path: Path) -> None:
    """The listener drops it from its own environment, but run.sh keeps it: docs/operations/security.md says what
    that exposes."""
    environ = _environ_of_run_sh(JIT_RUNNER_COMMAND, {f"{INPUT}JITCONFIG": "AJITCONFIG"}, tmp_path)
    assert f"{INPUT}JITCONFIG=AJITCONFIG" in environ
    security = (ROOT / "docs" / "operations" / "security.md").read_text()
    assert "/proc/1/environ" in security and "What a job can read" in security
