"""The README and the documentation site say what the code does: links that lead somewhere, this version's
install line, a changelog entry for this version, a README short enough to read. (`make test` builds the site
with `mkdocs build --strict`, which fails on a broken link or anchor inside docs/.)"""

from __future__ import annotations

import re

from pulumi_actions_runners import __version__
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def prose(markdown: str) -> list[str]:
    """The lines a reader reads as text: not code (fenced or indented), headings or blank lines."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not (fenced or not line.strip() or line.startswith(("    ", "#"))):
            lines.append(line)
    return lines


def test_the_readme_is_a_screen_and_a_half_of_prose() -> None:
    assert len(prose(README)) <= 40, len(prose(README))


def test_every_link_of_the_readme_leads_to_a_file_of_the_repository() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links and all(not link.startswith("http") for link in links)
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_the_plugin_install_line_names_this_version_and_the_archive_make_plugin_builds() -> None:
    page = (ROOT / "docs" / "how-to" / "other-languages.md").read_text()
    archive = f"pulumi-resource-actions-runners-v{__version__}-linux-amd64.tar.gz"
    assert f"pulumi plugin install resource actions-runners {__version__} --file dist/{archive}" in page
    assert "pulumi-resource-actions-runners-v$version-$os-$arch.tar.gz" in (ROOT / "tools/plugin/build.sh").read_text()


def test_the_changelog_has_this_version_and_an_unreleased_section_above_it() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (\S+)", changelog, flags=re.MULTILINE)
    assert headings[:2] == ["Unreleased", __version__], headings
    assert re.search(rf"^## {re.escape(__version__)} — \d{{4}}-\d\d-\d\d$", changelog, flags=re.MULTILINE)
