"""Where a runner registers: the config.sh ``--url`` form, and the REST API scope it implies."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

GITHUB_URL_FORMS = (
    "https://HOST/OWNER/REPO (repository), https://HOST/ORG (organization) or "
    "https://HOST/enterprises/ENTERPRISE (enterprise)"
)

_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,99})$")


@dataclass(frozen=True)
class GitHubTarget:
    """A parsed ``github_url``: the API base to call and the runner scope path under it."""

    url: str
    api_url: str
    scope: str  # "repos/OWNER/REPO", "orgs/ORG" or "enterprises/ENT"

    @property
    def runners_path(self) -> str:
        return f"/{self.scope}/actions/runners"


def parse_github_url(url: str) -> GitHubTarget:
    """Parse a config.sh ``--url``; raises ValueError saying which forms are allowed.

    github.com is served by api.github.com; any other host is taken as GitHub Enterprise Server
    (``SCHEME://HOST/api/v3``), which is also how a loopback double is reached.
    """
    if not isinstance(url, str):
        raise ValueError(f"must be a string of the form {GITHUB_URL_FORMS}")
    parts = urlsplit(url.strip())
    if parts.username is not None or parts.password is not None:
        # Never echo it: the part before '@' is a credential, and this input is not secret.
        raise ValueError("must not contain a user or password: give credentials as github_token")
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"{url!r} is not of the form {GITHUB_URL_FORMS}")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError(f"{url!r} uses http: use https (plain http is allowed only for a loopback address)")
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) == 2 and segments[0] == "enterprises":
        scope = f"enterprises/{segments[1]}"
    elif len(segments) == 2:
        scope = f"repos/{segments[0]}/{segments[1]}"
    elif len(segments) == 1:
        scope = f"orgs/{segments[0]}"
    else:
        raise ValueError(f"{url!r} is not of the form {GITHUB_URL_FORMS}")
    if not all(_NAME.match(s) for s in segments):
        raise ValueError(f"{url!r} has an owner, repository or enterprise name GitHub does not allow")
    default_port = {"https": 443, "http": 80}[parts.scheme]
    netloc = parts.hostname if parts.port in (None, default_port) else f"{parts.hostname}:{parts.port}"
    api_url = "https://api.github.com" if netloc == "github.com" else f"{parts.scheme}://{netloc}/api/v3"
    return GitHubTarget(url=f"{parts.scheme}://{netloc}/{'/'.join(segments)}", api_url=api_url, scope=scope)


def _is_loopback(hostname: str) -> bool:
    try:
        return hostname == "localhost" or ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False
