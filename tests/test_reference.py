"""docs/reference.md is what the provider runs: generated from the property table, Check's rules and Diff's lists
(plugin/reference.py). Stale, it fails here: regenerate it with the command on its first lines."""

from __future__ import annotations

from pulumi_actions_runners.inputs import scale_set, validation
from pulumi_actions_runners.plugin.properties import BY_TOKEN
from pulumi_actions_runners.plugin.reference import allowed, change, markdown
from tests.conftest import ROOT


def test_the_reference_page_is_current() -> None:
    assert (ROOT / "docs" / "reference.md").read_text() == markdown(), (
        "run `python -m pulumi_actions_runners.plugin.reference > docs/reference.md`"
    )


def test_what_is_allowed_is_checks_own_words() -> None:
    assert allowed(validation.seconds_between(0, 3600)) == "use a number of seconds from 0 to 3600"
    page = markdown()
    assert "0 to 3600" in page
    # Each count in its own rule's words: a pool may have no runners; a scale set's upper bound is at least one.
    assert "| `replicas` / `replicas` | integer | **required** | use a whole number from 0 to 1000 |" in page
    assert "| `max_runners` / `maxRunners` | integer | **required** | use a whole number from 1 to 1000 |" in page
    assert "| `scale_set_name` / `scaleSetName` | string |  | use 1 to 45 lowercase letters" in page


def test_a_scale_set_s_changes_are_what_its_diff_and_update_make_of_them() -> None:
    """Its Diff's lists (inputs/scale_set.py): where it is replaces it, its credential rolls its listener, its
    bounds and its runners' spec are handed to the listener."""
    kind = BY_TOKEN["actions-runners:index:RunnerScaleSet"]
    assert {p.name for p in kind.inputs if change(kind, p.name).startswith("replaces the scale set")} == set(
        scale_set.REPLACE_ON
    )
    assert {p.name for p in kind.inputs if "rolls the listener" in change(kind, p.name)} == set(scale_set.LISTENER)
    assert "hands the listener its new bounds" in change(kind, "max_runners")
    assert "replaces its idle runners" in change(kind, "pod_template")
    assert "leads to another cluster" in change(kind, "kubeconfig")
