"""A crash loop caught between back-offs, as plain code: a container running again after a failure, and not
running a job, counts as crash-looping for ``register_timeout_seconds`` after its restart, whatever GitHub's
listing says of a registration a dead process left online."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from pulumi_actions_runners.kube.pod_state import crash_looping, pod_phase, retrying

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
AFTER = 300.0


def pod(*, restarts: int = 1, last_exit: int | None = 1, started_ago: float = 5.0, running: bool = True):
    state = SimpleNamespace(
        running=SimpleNamespace(started_at=NOW - timedelta(seconds=started_ago)) if running else None,
        waiting=None if running else SimpleNamespace(reason="CrashLoopBackOff", message=""),
        terminated=None,
    )
    last = SimpleNamespace(terminated=SimpleNamespace(exit_code=last_exit) if last_exit is not None else None)
    status = SimpleNamespace(name="runner", state=state, last_state=last, restart_count=restarts, image="i")
    return SimpleNamespace(
        metadata=SimpleNamespace(deletion_timestamp=None),
        spec=SimpleNamespace(restart_policy="Always"),
        status=SimpleNamespace(phase="Running", container_statuses=[status], init_container_statuses=[]),
    )


@pytest.mark.parametrize(
    ("the_pod", "expected"),
    [
        (pod(), True),  # config.sh's retry after exit 1
        (pod(last_exit=137), True),  # after an OOM kill
        (pod(last_exit=0), False),  # run.sh's exit 0 (a session conflict, a removal): not a failure
        (pod(restarts=0, last_exit=None), False),  # its first start
        (pod(started_ago=AFTER + 1), False),  # running long since: a ghost is runs_unregistered's to judge
        (pod(running=False), False),  # waiting in CrashLoopBackOff: pod_stuck says so
    ],
)
def test_a_container_running_again_after_a_failure_is_retrying(the_pod, expected) -> None:
    assert retrying(the_pod, NOW, AFTER) is expected


@pytest.mark.parametrize(
    ("registration", "looping"),
    [
        (None, True),
        ({"status": "offline", "busy": False}, True),
        ({"status": "online", "busy": False}, True),  # a dead process's session, listed online for minutes
        ({"status": "online", "busy": True}, False),  # running a job: it serves
    ],
)
def test_only_a_job_proves_a_retrying_runner_serves(registration, looping) -> None:
    assert crash_looping(pod(), registration, NOW, AFTER) is looping
    assert pod_phase(pod(), looping=crash_looping(pod(), registration, NOW, AFTER)) == (
        "CrashLoopBackOff" if looping else "Running"
    )
