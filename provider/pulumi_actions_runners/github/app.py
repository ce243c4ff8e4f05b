"""GitHub App authentication: the App's JWT, exchanged for an installation access token.

The JWT is signed with the App's private key (RS256, issued 60 s in the past against clock drift, 9 minutes of
life, ``iss`` the App id). The installation is the one given, else the one GitHub names for the runner scope's
repository or organization. An installation token lives an hour, and a pool's rotation may last longer: one token
per installation is shared by every client of the process and renewed `RENEW_BEFORE_SECONDS` before it expires,
or at once when GitHub refuses it. Neither the key, a JWT nor a token is kept anywhere but in this process's
memory, and each is scrubbed from every message (redaction.remember).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import jwt
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from ..redaction import remember
from .url import GitHubTarget

log = logging.getLogger(__name__)

JWT_BACKDATE_SECONDS = 60
JWT_LIFETIME_SECONDS = 9 * 60  # GitHub allows at most 10 minutes
RENEW_BEFORE_SECONDS = 5 * 60
REQUEST_TIMEOUT_SECONDS = 10.0


class GitHubAppError(Exception):
    """GitHub refused the App (its JWT, or an installation); the message never quotes a credential."""


@dataclass(frozen=True)
class GitHubApp:
    app_id: str
    private_key: str = field(repr=False)
    installation_id: int | None = None


def app_jwt(app: GitHubApp, now: float) -> str:
    claims = {"iat": int(now) - JWT_BACKDATE_SECONDS, "exp": int(now) + JWT_LIFETIME_SECONDS, "iss": app.app_id}
    token = jwt.encode(claims, app.private_key, algorithm="RS256")
    remember(token)
    return token


class InstallationTokens:
    """The installation access token of one App installation, for every client of this process."""

    def __init__(
        self, target: GitHubTarget, app: GitHubApp, installation_id: int, wall_clock: Callable[[], float] = time.time
    ) -> None:
        self._target = target
        self._app = app
        self._now = wall_clock
        self._lock = threading.Lock()
        self.installation_id = installation_id
        self._token: str | None = None
        self._renew_at = 0.0
        self.issued = 0  # how many tokens this process was given, for logs and tests

    def __repr__(self) -> str:
        return f"InstallationTokens(app {self._app.app_id}, installation {self.installation_id})"

    @property
    def budget_key(self) -> str:
        """What GitHub counts the API budget by: the installation (an App's limits are its own)."""
        return f"github-app:{self._app.app_id}:installation:{self.installation_id}"

    def token(self) -> str:
        """The installation's token, renewed `RENEW_BEFORE_SECONDS` before it expires (or halfway through its
        life, if that is shorter)."""
        with self._lock:
            if self._token is None or self._now() >= self._renew_at:
                self._renew()
            return self._token  # type: ignore[return-value]

    def refused(self, token: str) -> None:
        """GitHub answered 401 to ``token``: the next `token` asks for a new one (unless another caller has)."""
        with self._lock:
            if token == self._token:
                self._token = None

    def _renew(self) -> None:
        path = f"/app/installations/{self.installation_id}/access_tokens"
        response = _app_call(self._target, self._app, "POST", path, self._now())
        if response.status_code != 201:
            raise GitHubAppError(
                f"GitHub App {self._app.app_id}: POST {path} answered {response.status_code}: {_message(response)}"
                + _hint(response.status_code)
            )
        body = response.json()
        remember(body["token"])
        issued_at = self._now()
        expires_at = datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00")).timestamp()
        self._token = body["token"]
        self._renew_at = max(expires_at - RENEW_BEFORE_SECONDS, issued_at + (expires_at - issued_at) / 2)
        self.issued += 1
        log.info(
            "GitHub App %s: installation token %d for installation %s, valid until %s",
            self._app.app_id,
            self.issued,
            self.installation_id,
            body["expires_at"],
        )


def find_installation(target: GitHubTarget, app: GitHubApp) -> int:
    """The installation on the scope's repository or organization (an enterprise scope is refused by Check): the
    repository's own, since an App may be installed on some repositories of an owner only."""
    kind, _, rest = target.scope.partition("/")
    path = f"/repos/{rest}/installation" if kind == "repos" else f"/orgs/{rest}/installation"
    response = _app_call(target, app, "GET", path, time.time())
    if response.status_code == 404:
        raise GitHubAppError(
            f"GitHub App {app.app_id} is not installed on {rest} (GET {path} answered 404): install it there, or "
            "give github_app_installation_id"
        )
    if response.status_code != 200:
        raise GitHubAppError(
            f"GitHub App {app.app_id}: GET {path} answered {response.status_code}: {_message(response)}"
            + _hint(response.status_code)
        )
    return int(response.json()["id"])


def _app_call(target: GitHubTarget, app: GitHubApp, method: str, path: str, now: float) -> requests.Response:
    """A call authenticated by the App's JWT (a rare one: no budget of the installation's)."""
    headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "pulumi-actions-runners",
        "Authorization": f"Bearer {app_jwt(app, now)}",
    }
    retry = Retry(total=4, backoff_factor=0.5, status_forcelist=(500, 502, 503, 504), allowed_methods=None)
    with requests.Session() as session:
        session.mount("http://", HTTPAdapter(max_retries=retry))
        session.mount("https://", HTTPAdapter(max_retries=retry))
        try:
            return session.request(method, target.api_url + path, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS)
        except requests.RequestException as error:
            raise GitHubAppError(f"GitHub App {app.app_id}: {method} {path} was not sent: {error}") from None


def _message(response: requests.Response) -> str:
    try:
        return str(response.json().get("message") or response.reason)
    except ValueError:
        return response.reason or f"HTTP {response.status_code}"


def _hint(status: int) -> str:
    if status == 401:
        return " (check github_app_id and github_app_private_key, and that this machine's clock is right)"
    return ""


_installations: dict[str, int] = {}  # installation id by App and scope
_per_installation: dict[str, InstallationTokens] = {}
_registry_lock = threading.Lock()
_lookup_lock = threading.Lock()


def installation_tokens(target: GitHubTarget, app: GitHubApp) -> InstallationTokens:
    """The process's one `InstallationTokens` for this App's installation: given, or looked up once per scope
    (owner and repository names are GitHub's case-insensitive ones). Keyed by hashes that cover the key, so a
    new key gets a token of its own, and no key holds a credential."""
    installation_id = app.installation_id
    if installation_id is None:
        scope_key = _key(target.api_url, app.app_id, target.scope.lower(), app.private_key)
        with _lookup_lock:  # one lookup of a scope, however many resources start at once
            installation_id = _installations.get(scope_key)
            if installation_id is None:
                installation_id = _installations[scope_key] = find_installation(target, app)
    tokens_key = _key(target.api_url, app.app_id, str(installation_id), app.private_key)
    with _registry_lock:
        tokens = _per_installation.get(tokens_key)
        if tokens is None:
            tokens = _per_installation[tokens_key] = InstallationTokens(target, app, installation_id)
        return tokens


def _key(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()
