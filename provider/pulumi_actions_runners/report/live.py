"""Which runners a change would take down run a job right now: one read-only listing per GitHub scope.

A moment's answer, for the reviewer: the update itself never trusts it, and waits on RemoveRunner's 422.

The credential goes only where the runners are registered now: the scopes the deployed state names (the
preview's old state), never a ``github_url`` that the new inputs bring (a pull request's branch chooses those),
and, when the caller names its GitHub hosts, only scopes on those. What is not looked up is said in a notice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from urllib.parse import urlsplit

from ..github.auth import github_auth
from ..github.client import GitHubClient
from ..github.url import parse_github_url
from .phrase import Phrase, Value
from .plan import ResourceChange
from .summary import Report

# The most scopes one look lists: a preview a branch wrote may name thousands, to spend the token's budget.
MAX_SCOPES = 20


class LiveLookFailed(Exception):
    pass


def github_host(url: str) -> str:
    """``SCHEME://HOST[:PORT]`` of a github_url, or of a host given as ``HOST``, ``https://HOST`` or a URL.
    ValueError for one that is neither."""
    parts = urlsplit(url.strip() if "://" in url else f"https://{url.strip()}")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{url!r} is not a GitHub host: give HOST or https://HOST (https://github.com, say)")
    default_port = {"https": 443, "http": 80}[parts.scheme]
    port = "" if parts.port in (None, default_port) else f":{parts.port}"
    return f"{parts.scheme}://{parts.hostname.lower()}{port}"


def look_live(report: Report, github_hosts: Sequence[str] | None = None) -> Report:
    """Fills each change's ``busy`` with those of its runners at risk that GitHub lists as busy. The credential
    is the provider's from the environment: GITHUB_TOKEN, or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY.
    ``github_hosts``, if given, are the only hosts to contact. A change not looked up keeps ``busy`` None."""
    allowed = None if github_hosts is None else {github_host(host) for host in github_hosts}
    by_scope: dict[str, set[str]] = defaultdict(set)
    scopes: dict[int, str] = {}  # a change's index: the scope its runners are listed in
    for index, change in enumerate(report.changes):
        _note_new_host(report, change)
        if not change.at_risk:
            change.busy = []
        elif (scope := _scope_to_list(report, change, allowed)) is not None:
            if scope not in by_scope and len(by_scope) == MAX_SCOPES:
                report.notices.append(_not_looked_up(change, f"a look lists at most {MAX_SCOPES} GitHub scopes"))
                continue
            scopes[index] = scope
            by_scope[scope].update(change.at_risk)
    busy: set[str] = set()
    for url, names in by_scope.items():
        try:
            with GitHubClient(parse_github_url(url), github_auth({"github_url": url})) as github:
                busy |= {r["name"] for r in github.list_runners() if r.get("busy") and r.get("name") in names}
        except Exception as error:
            raise LiveLookFailed(f"could not list the runners of {url}: {error}") from error
    for index, change in enumerate(report.changes):
        if index in scopes:
            change.busy = sorted(name for name in change.at_risk if name in busy)
    report.live = True
    return report


def _scope_to_list(report: Report, change: ResourceChange, allowed: set[str] | None) -> str | None:
    """The deployed scope whose listing says which of the change's runners are busy, if it may be contacted."""
    deployed = change.deployed_github_url
    try:
        host = github_host(parse_github_url(deployed).url) if isinstance(deployed, str) else None
    except ValueError:
        host = None
    if host is None:
        report.notices.append(_not_looked_up(change, "its deployed state names no GitHub scope that can be read"))
        return None
    if allowed is not None and host not in allowed:
        report.notices.append(
            _not_looked_up(change, Phrase("its GitHub host ", Value(host), " is not a --github-host"))
        )
        return None
    return parse_github_url(deployed).url


def _note_new_host(report: Report, change: ResourceChange) -> None:
    """A github_url whose host the deployed state does not name: said, never contacted."""
    new, deployed = change.github_url, change.deployed_github_url
    if not isinstance(new, str) or new == deployed:
        return
    try:
        host = github_host(parse_github_url(new).url)
        known = isinstance(deployed, str) and github_host(parse_github_url(deployed).url) == host
    except ValueError:
        return
    if not known:
        report.notices.append(
            Phrase(
                f"{change.kind} ",
                Value(change.name),
                " is to register on the GitHub host ",
                Value(host),
                ", which its deployed state does not name: --live did not contact it",
            )
        )


def _not_looked_up(change: ResourceChange, why: str) -> Phrase:
    return Phrase(f"{change.kind} ", Value(change.name), ": which of its runners are busy was not looked up: ", why)
