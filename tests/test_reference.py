"""docs/reference.md is what the provider runs: generated from the property table, Check's rules and Diff's lists
(plugin/reference.py). Stale, it fails here: regenerate it with the command on its first lines."""

from __future__ import annotations

from pulumi_actions_runners.inputs import validation
from pulumi_actions_runners.plugin.reference import allowed, markdown
from tests.conftest import ROOT


def test_the_reference_page_is_current() -> None:
    assert (ROOT / "docs" / "reference.md").read_text() == markdown(), (
        "run `python -m pulumi_actions_runners.plugin.reference > docs/reference.md`"
    )


def test_what_is_allowed_is_checks_own_words() -> None:
    assert allowed(validation.seconds_between(0, 3600)) == "use a number of seconds from 0 to 3600"
    assert "0 to 3600" in markdown() and "from 1 to 1000" not in markdown()
