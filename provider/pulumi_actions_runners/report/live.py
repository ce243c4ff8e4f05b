"""Which runners a change would take down run a job right now: one read-only listing per GitHub scope.

A moment's answer, for the reviewer: the update itself never trusts it, and waits on RemoveRunner's 422.
"""

from __future__ import annotations

from collections import defaultdict

from ..github_auth import github_auth
from ..github_client import GitHubClient
from ..github_url import parse_github_url
from .summary import Report


class LiveLookFailed(Exception):
    pass


def look_live(report: Report) -> Report:
    """Fills each change's ``busy`` with those of its runners at risk that GitHub lists as busy. The credential
    is the provider's from the environment: GITHUB_TOKEN, or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY."""
    by_scope: dict[str, set[str]] = defaultdict(set)
    for change in report.changes:
        if change.at_risk and change.github_url:
            by_scope[change.github_url].update(change.at_risk)
    busy: set[str] = set()
    for url, names in by_scope.items():
        try:
            with GitHubClient(parse_github_url(url), github_auth({"github_url": url})) as github:
                busy |= {r["name"] for r in github.list_runners() if r.get("busy") and r.get("name") in names}
        except Exception as error:
            raise LiveLookFailed(f"could not list the runners of {url}: {error}") from error
    for change in report.changes:
        change.busy = sorted(name for name in change.at_risk if name in busy)
    report.live = True
    return report
