"""The RemoveRunner-guarded teardown as plain code, driven with a fake clock."""

from __future__ import annotations

import pytest

from pulumi_actions_runners.github.client import RemoveOutcome
from pulumi_actions_runners.lifecycle.teardown import (
    KeptRegistering,
    RegistrationNotProvablyOurs,
    RunnerLocation,
    RunnerStillBusy,
    TeardownState,
    TeardownTimeouts,
    WaitTimedOut,
    tear_down_runner,
)

from .fakes import OUR_LABEL, FakeClock, FakeGitHub, FakePods

TIMEOUTS = TeardownTimeouts(grace_period_seconds=30, unregister_timeout_seconds=600, pod_gone_timeout_seconds=90)


def location(runner_id: int | None = 7, ephemeral: bool = True, owner_label: str | None = OUR_LABEL) -> RunnerLocation:
    return RunnerLocation("ci", "runner-a", "runner-a-registration", "runner-a", runner_id, ephemeral, owner_label)


@pytest.fixture
def world() -> tuple[FakeClock, FakeGitHub, FakePods, list[str]]:
    clock, journal = FakeClock(), []
    github, pods = FakeGitHub(clock, journal), FakePods(clock, journal)
    pods.add("runner-a")
    return clock, github, pods, journal


def test_idle_runner_is_unregistered_then_given_its_grace_then_its_pod_is_deleted(world) -> None:
    clock, github, pods, journal = world
    github.add(7, "runner-a")
    start = clock.now

    report = tear_down_runner(location(), github, pods, clock, TIMEOUTS)

    assert journal[:2] == ["remove 7: 204", "delete secret runner-a-registration"]
    assert journal[2:4] == ["find runner-a", f"delete pod runner-a at {start + 30:.1f}"], "a look, then at once"
    assert journal[4:] == ["find runner-a"], "swept once the pod is gone"
    assert "runner-a" not in pods.pods
    assert report.states == [
        TeardownState.UNREGISTERING,
        TeardownState.GRACE,
        TeardownState.LAST_LOOK,
        TeardownState.DELETING_POD,
        TeardownState.SWEEPING,
        TeardownState.DONE,
    ]
    assert report.grace_waited_seconds == 30


def test_busy_runner_keeps_its_pod_until_removerunner_succeeds(world) -> None:
    clock, github, pods, journal = world
    github.add(7, "runner-a", busy_for=45)
    start = clock.now

    report = tear_down_runner(location(), github, pods, clock, TIMEOUTS)

    removals = [line for line in journal if line.startswith("remove")]
    assert removals == ["remove 7: 422", "remove 7: 204"], "watched in the listing, asked again once idle"
    assert report.busy_answers == 1
    watching = journal[journal.index("remove 7: 422") + 1 : journal.index("remove 7: 204")]
    assert len(watching) >= 3 and set(watching) == {"find runner-a"}
    deletion = next(line for line in journal if line.startswith("delete pod"))
    deleted_at = float(deletion.rsplit(" ", 1)[1])
    assert deleted_at >= start + 45 + 30, "pod deleted before the job ended plus the grace period"
    assert journal.index(deletion) > journal.index("remove 7: 204")


def test_runner_busy_past_the_timeout_fails_and_leaves_the_pod_alone(world) -> None:
    clock, github, pods, journal = world
    github.add(7, "runner-a", busy_for=10_000)
    start = clock.now

    with pytest.raises(RunnerStillBusy, match="still running a job after 600 s"):
        tear_down_runner(location(), github, pods, clock, TIMEOUTS)

    assert not any(line.startswith("delete") for line in journal)
    assert pods.pods["runner-a"]["gone_at"] is None
    assert 600 <= clock.now - start <= 600 + 1, "the busy wait must end at the timeout, not far after it"
    assert max(clock.sleeps) <= 30


def test_stale_id_in_state_falls_back_to_the_registration_under_that_name(world) -> None:
    clock, github, pods, journal = world
    github.add(12, "runner-a", busy_for=5)  # re-registered (config.sh --replace): id 7 no longer exists

    tear_down_runner(location(runner_id=7), github, pods, clock, TIMEOUTS)

    assert journal[:3] == ["remove 7: 404", "find runner-a", "remove 12: 422"]
    assert "remove 12: 204" in journal


def test_finished_pod_with_no_registration_is_deleted_without_a_grace_wait(world) -> None:
    clock, github, pods, journal = world
    pods.pods["runner-a"]["phase"] = "Succeeded"

    report = tear_down_runner(location(runner_id=7), github, pods, clock, TIMEOUTS)

    assert journal[:2] == ["remove 7: 404", "find runner-a"]
    assert report.grace_waited_seconds == 0
    assert "runner-a" not in pods.pods


def test_a_rerun_after_a_crash_finishes_the_job(world) -> None:
    clock, github, pods, journal = world
    github.add(7, "runner-a")
    # A first run got RemoveRunner's 204 and then crashed during the grace period: the pod still runs.
    github.remove_runner(7)
    journal.clear()
    start = clock.now

    report = tear_down_runner(location(runner_id=7), github, pods, clock, TIMEOUTS)

    assert journal[:2] == ["remove 7: 404", "find runner-a"]
    # Nothing was removed this time: no grace is spent blind, the look just before the deletion decides.
    assert report.grace_waited_seconds == 0
    assert journal[2:5] == [
        "delete secret runner-a-registration",
        "find runner-a",
        f"delete pod runner-a at {start:.1f}",
    ]
    assert "runner-a" not in pods.pods
    # A further re-run, with everything already gone, succeeds and does nothing more.
    journal.clear()
    tear_down_runner(location(runner_id=7), github, pods, clock, TIMEOUTS)
    assert [line for line in journal if line.startswith("delete pod")] == [f"delete pod runner-a at {clock.now:.1f}"]


def test_pod_stuck_terminating_is_deleted_with_no_grace_once_unregistered(world) -> None:
    clock, github, pods, journal = world
    pods.terminating_for = 10_000  # its node is gone: the kubelet never confirms

    tear_down_runner(location(runner_id=None), github, pods, clock, TIMEOUTS)

    deletions = [line for line in journal if line.startswith("delete pod")]
    assert len(deletions) == 2 and deletions[1].endswith("with no grace")
    assert "runner-a" not in pods.pods


def test_pod_that_never_goes_away_fails_with_what_was_awaited(world) -> None:
    clock, github, pods, _ = world
    pods.terminating_for = 10_000
    pods.force_works = False

    with pytest.raises(WaitTimedOut, match=r"pod ci/runner-a is still terminating after 30 s"):
        tear_down_runner(location(runner_id=None), github, pods, clock, TIMEOUTS)


def test_a_job_taken_between_the_listing_and_removerunner_gets_another_422(world) -> None:
    clock, github, pods, journal = world
    github.add(7, "runner-a", busy_for=5)

    listing = github.find_runner

    def listed_idle_then_takes_a_job(name: str, max_age: float = 0.0, *, newer_than: int | None = None) -> dict | None:
        found = listing(name, max_age, newer_than=newer_than)
        if found is not None and not found["busy"] and journal.count("remove 7: 422") == 1:
            github.busy_until[7] = clock.now + 20  # busy again by the time RemoveRunner is asked
        return found

    github.find_runner = listed_idle_then_takes_a_job
    start = clock.now

    report = tear_down_runner(location(), github, pods, clock, TIMEOUTS)

    assert [line for line in journal if line.startswith("remove")][-1] == "remove 7: 204"
    assert report.busy_answers == 2
    deletion = next(line for line in journal if line.startswith("delete pod"))
    assert float(deletion.rsplit(" ", 1)[1]) >= start + 5 + 20 + 30


def test_persistent_runner_that_restarted_and_took_a_job_during_the_grace_keeps_its_pod(world) -> None:
    clock, github, pods, journal = world
    github.add(7, "runner-a")

    def restart_during_grace(seconds: float) -> None:
        if clock.sleeps == [TIMEOUTS.grace_period_seconds]:  # the container restarted, registered, took a job
            github.add(9, "runner-a", busy_for=seconds + 40)

    clock.on_sleep.append(restart_during_grace)

    report = tear_down_runner(location(runner_id=7, ephemeral=False), github, pods, clock, TIMEOUTS)

    removals = [line for line in journal if line.startswith("remove 9")]
    assert removals[0] == "remove 9: 422" and removals[-1] == "remove 9: 204"
    deletion = next(line for line in journal if line.startswith("delete pod"))
    assert journal.index(deletion) > journal.index("remove 9: 204"), "pod deleted while its runner ran a job"
    assert report.busy_answers >= 1
    assert journal.index("delete secret runner-a-registration") < journal.index("find runner-a")


def test_persistent_runner_registration_left_behind_is_swept(world) -> None:
    clock, github, pods, journal = world
    github.add(7, "runner-a")
    github.add(8, "runner-a")  # an idle, second registration under the same name (config.sh --replace)

    report = tear_down_runner(location(runner_id=7, ephemeral=False), github, pods, clock, TIMEOUTS)

    assert TeardownState.SWEEPING in report.states
    assert journal.index("remove 8: 204") < journal.index(next(x for x in journal if x.startswith("delete pod")))
    assert github.runners == {}


def test_a_registration_of_the_name_that_is_not_ours_is_never_removed(world) -> None:
    clock, github, pods, journal = world
    github.add(12, "runner-a", labels=("pulumi-owner-00000000000000bb",))  # another stack's, idle

    report = tear_down_runner(location(runner_id=7, ephemeral=False), github, pods, clock, TIMEOUTS)

    assert not any(line.startswith("remove 12") for line in journal)
    assert 12 in github.runners
    assert report.foreign is not None and report.foreign["id"] == 12
    assert "runner-a" not in pods.pods, "our own pod still goes"


@pytest.mark.parametrize("busy_for", [0, 40])
def test_a_runner_made_before_ownership_labels_keeps_its_pod_beside_a_registration_it_cannot_prove(
    world, busy_for
) -> None:
    """Without a label, that registration might be this pod's runner (and take a job during the grace): the pod
    stays, nothing is removed, and the error says what to do."""
    clock, github, pods, journal = world
    github.add(12, "runner-a", busy_for=busy_for, labels=())

    with pytest.raises(RegistrationNotProvablyOurs, match=r"registration of its name \(id 12.*was left running"):
        tear_down_runner(location(runner_id=None, owner_label=None), github, pods, clock, TIMEOUTS)

    assert not any(line.startswith(("remove", "delete pod")) for line in journal)
    assert pods.pods["runner-a"]["gone_at"] is None


def _removals_per_minute(journal: list[str], clock: FakeClock, start: float) -> float:
    return sum(1 for line in journal if line.startswith("remove")) / ((clock.now - start) / 60)


def test_a_busy_runner_missing_from_the_listings_tail_is_looked_up_by_name_not_asked_again_and_again(world) -> None:
    """GitHub documents no order for its listings: a tail read that does not show the runner proves nothing, so
    before RemoveRunner is asked again the runner is looked up by name (and found busy)."""
    clock, github, pods, journal = world
    github.add(7, "runner-a", busy_for=120)
    by_name = github.find_runner

    def tail_misses_it(name: str, max_age: float = 0.0, *, newer_than: int | None = None) -> dict | None:
        return None if max_age > 0 else by_name(name)

    github.find_runner = tail_misses_it
    start = clock.now

    tear_down_runner(location(), github, pods, clock, TIMEOUTS)

    removals = [line for line in journal if line.startswith("remove")]
    assert removals == ["remove 7: 422", "remove 7: 204"], "the by-name lookup saw it busy: no RemoveRunner meanwhile"
    assert float(next(x for x in journal if x.startswith("delete pod")).rsplit(" ", 1)[1]) >= start + 120 + 30


def test_removerunner_is_asked_at_a_bounded_rate_whatever_the_listing_says(world) -> None:
    """A listing that calls a busy runner idle (stale, or a runner taking job after job) must not turn the wait into
    RemoveRunner twice a second: each costs 5 points of the pool's budget."""
    clock, github, pods, journal = world
    github.add(7, "runner-a", busy_for=300)
    by_name = github.find_runner

    def always_idle(name: str, max_age: float = 0.0, *, newer_than: int | None = None) -> dict | None:
        found = by_name(name, max_age, newer_than=newer_than)
        return None if found is None else {**found, "busy": False}

    github.find_runner = always_idle
    start = clock.now

    report = tear_down_runner(location(), github, pods, clock, TIMEOUTS)

    assert report.busy_answers >= 2
    assert _removals_per_minute(journal, clock, start) <= 15, journal  # 5 s apart once the polls have grown


def test_a_runner_that_registers_and_takes_a_job_after_the_first_look_keeps_its_pod(world) -> None:
    """Its state's id answers 404 and the name finds nothing (the pod's runner is still in config.sh): the pod is
    not deleted on the strength of that look. The runner registers and takes a job meanwhile; the look just
    before the deletion finds it, RemoveRunner's 422 keeps the pod until the job is done, and only a removal
    that succeeded earns the grace."""
    clock, github, pods, journal = world
    remove = github.remove_runner

    def config_sh_finishes_meanwhile(runner_id: int) -> RemoveOutcome:
        outcome = remove(runner_id)
        if runner_id == 7:
            github.add(9, "runner-a", busy_for=50)  # registered with the old, valid token, and given a job
        return outcome

    github.remove_runner = config_sh_finishes_meanwhile
    start = clock.now

    report = tear_down_runner(location(runner_id=7), github, pods, clock, TIMEOUTS)

    assert journal[:2] == ["remove 7: 404", "find runner-a"]
    assert [line for line in journal if line.startswith("remove 9")] == ["remove 9: 422", "remove 9: 204"]
    deletion = next(line for line in journal if line.startswith("delete pod"))
    assert journal.index(deletion) > journal.index("remove 9: 204")
    assert float(deletion.rsplit(" ", 1)[1]) >= start + 50 + 30, "the job ran to its end, then the grace"
    assert report.grace_waited_seconds == 30 and report.busy_answers == 1


def test_a_registration_made_during_the_grace_is_removed_before_the_pod_goes_and_none_is_left(world) -> None:
    """A rotation cut short and redone (or a destroy after it): the id in state was removed by the first run, so
    RemoveRunner answers 404 and the name finds nothing, yet the pod registers again (a container restarted before
    its Secret went): neither its pod is deleted over it nor its registration left behind."""
    clock, github, pods, journal = world
    github.add(7, "runner-a")

    def registers_during_the_grace(seconds: float) -> None:
        if clock.sleeps == [TIMEOUTS.grace_period_seconds]:
            github.add(9, "runner-a")  # idle: it took no job yet

    clock.on_sleep.append(registers_during_the_grace)

    report = tear_down_runner(location(runner_id=7), github, pods, clock, TIMEOUTS)

    deletion = next(line for line in journal if line.startswith("delete pod"))
    assert journal.index("remove 9: 204") < journal.index(deletion)
    assert report.grace_waited_seconds == 60, "each removal that succeeded earned its grace"
    assert github.runners == {}, "no registration left behind"


def test_a_registration_config_sh_makes_as_the_pod_is_deleted_is_swept_whatever_the_state_recorded(world) -> None:
    """The trap ends the shell once config.sh returns: its registration is offline, and removed once the pod is
    gone, also for a runner whose id the state recorded (and which answered 404)."""
    clock, github, pods, journal = world
    delete_pod = pods.delete_pod

    def registers_as_it_goes(
        namespace: str, name: str, grace_seconds: int | None = None, *, once: bool = False
    ) -> None:
        delete_pod(namespace, name, grace_seconds, once=once)
        github.add(11, "runner-a")

    pods.delete_pod = registers_as_it_goes

    report = tear_down_runner(location(runner_id=7, ephemeral=True), github, pods, clock, TIMEOUTS)

    assert report.states[-2:] == [TeardownState.SWEEPING, TeardownState.DONE]
    assert "remove 11: 204" in journal and github.runners == {}


def test_a_runner_that_keeps_registering_keeps_its_pod(world) -> None:
    clock, github, pods, journal = world
    github.add(7, "runner-a")
    ids = iter(range(20, 40))
    remove = github.remove_runner

    def registers_again(runner_id: int) -> RemoveOutcome:
        outcome = remove(runner_id)
        github.add(next(ids), "runner-a")
        return outcome

    github.remove_runner = registers_again

    with pytest.raises(KeptRegistering, match="registered anew 3 times while its pod ci/runner-a was being taken down"):
        tear_down_runner(location(runner_id=7), github, pods, clock, TIMEOUTS)

    assert not any(line.startswith("delete pod") for line in journal)


def test_a_deletion_refused_is_tried_again_only_after_another_look(world) -> None:
    """A throttled API server refuses the deletion: the client's own retries would wait between them blind, while
    the runner could register and take a job; each try is one request, and the next follows a look."""
    clock, github, pods, journal = world
    delete_pod = pods.delete_pod
    refusals = iter([True, True])

    def throttled(namespace: str, name: str, grace_seconds: int | None = None, *, once: bool = False) -> None:
        assert once, "a deletion after a look is one request"
        if next(refusals, False):
            journal.append("delete pod refused: 429")
            raise RuntimeError("Kubernetes answered 429 Too Many Requests")
        delete_pod(namespace, name, grace_seconds, once=once)

    def registers_while_throttled(seconds: float) -> None:
        if journal.count("delete pod refused: 429") == 1 and not journal.count("registered"):
            journal.append("registered")
            github.add(9, "runner-a", busy_for=20)  # config.sh ended meanwhile, and GitHub gave it a job

    pods.delete_pod = throttled
    clock.on_sleep.append(registers_while_throttled)

    tear_down_runner(location(runner_id=None), github, pods, clock, TIMEOUTS)

    after_refusal = journal[journal.index("delete pod refused: 429") + 1 :]
    assert after_refusal[:2] == ["registered", "find runner-a"], "a look before the next try"
    assert [line for line in journal if line.startswith("remove 9")] == ["remove 9: 422", "remove 9: 204"]
    deletion = next(line for line in journal if line.startswith("delete pod runner-a"))
    assert journal.index(deletion) > journal.index("remove 9: 204"), "the busy runner's pod was deleted"
