"""GitHub Apps as GitHub serves them to the GitHub double: App JWTs checked, installations found, installation
access tokens issued that really expire.

A JWT is checked as GitHub checks it: RS256 against the App's public key, ``iss`` an App it knows, ``iat`` not in
the future and ``exp`` in the future but at most 10 minutes after ``iat``; a refusal is GitHub's 401 with its
words. An installation token (``ghs_`` and 36 characters) is good for ``token_lifetime`` seconds, for the scopes of
its installation's account only; afterwards GitHub answers 401 "Bad credentials", as for any unknown token.
"""

from __future__ import annotations

import re
import secrets
import string
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

_APP_DOCS = "https://docs.github.com/rest/apps/apps"
_AUTH_DOCS = "https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app"
MAX_JWT_LIFETIME_SECONDS = 600
_TOKEN_ALPHABET = string.ascii_letters + string.digits
Answer = tuple[int, Any]  # (status, JSON body)
_INSTALLATION_OF = re.compile(r"/(?:repos/(?P<owner>[^/]+)/[^/]+|orgs/(?P<org>[^/]+))/installation")
_ACCESS_TOKENS = re.compile(r"/app/installations/(?P<id>\d+)/access_tokens")


@dataclass
class _Installation:
    id: int
    app_id: int
    account: str
    account_type: str  # "Organization" or "User"


@dataclass
class _App:
    id: int
    slug: str
    public_key: rsa.RSAPublicKey
    installations: dict[str, _Installation] = field(default_factory=dict)  # by account login


@dataclass(frozen=True)
class InstallationGrant:
    """Who a valid installation token speaks for: a principal of its own for the API budget."""

    installation_id: int
    account: str

    @property
    def principal(self) -> str:
        return f"installation:{self.installation_id}"


def new_private_key() -> str:
    """A PEM RSA key such as GitHub lets an App owner download."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()


class GitHubApps:
    """The Apps GitHub knows, their installations, and the installation tokens it has handed out."""

    def __init__(self, api_url: str = "", *, token_lifetime: float = 3600.0) -> None:
        self.api_url = api_url
        self.token_lifetime = token_lifetime  # changeable, so that a test can make the next token expire soon
        self._lock = threading.Lock()
        self._apps: dict[int, _App] = {}
        self._tokens: dict[str, tuple[InstallationGrant, float]] = {}  # token -> (grant, expiry on the wall clock)
        self._ids = iter(range(1_000_001, 2_000_000))
        self.issued: list[str] = []

    def add_app(self, app_id: int, private_key_pem: str, *, installed_on: dict[str, str]) -> dict[str, int]:
        """An App with the public half of ``private_key_pem``, installed on the accounts given (login: "Organization"
        or "User"); the installation id of each account."""
        key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
        assert isinstance(key, rsa.RSAPrivateKey)
        with self._lock:
            app = self._apps[app_id] = _App(app_id, f"runners-app-{app_id}", key.public_key())
            for login, kind in installed_on.items():
                app.installations[login] = _Installation(next(self._ids), app_id, login, kind)
            return {login: installation.id for login, installation in app.installations.items()}

    # --- the REST side ---

    def answer(self, method: str, path: str, bearer: str) -> Answer | None:
        """The App endpoints (JWT-authenticated), or None for a path that is not one of them."""
        account = _INSTALLATION_OF.fullmatch(path) if method == "GET" else None
        access = _ACCESS_TOKENS.fullmatch(path) if method == "POST" else None
        if account is None and access is None:
            return None
        app = self._verified(bearer)
        if not isinstance(app, _App):
            return app
        if account is not None:
            login = (account["owner"] or account["org"]).lower()  # GitHub's logins are case-insensitive
            installation = next((i for name, i in app.installations.items() if name.lower() == login), None)
            if installation is None:
                return 404, _error("Not Found", f"{_APP_DOCS}#get-a-repository-installation-for-the-authenticated-app")
            return 200, self._installation_json(app, installation)
        installation = next((i for i in app.installations.values() if str(i.id) == access["id"]), None)
        if installation is None:
            return 404, _error("Not Found", f"{_APP_DOCS}#create-an-installation-access-token-for-an-app")
        return 201, self._issue(installation)

    def revoke_tokens(self) -> int:
        """Every installation token handed out stops working (as after DELETE /installation/token); how many."""
        with self._lock:
            count = len(self._tokens)
            self._tokens.clear()
        return count

    def grant(self, token: str) -> InstallationGrant | None:
        """What a bearer token is, if it is an installation token still valid."""
        with self._lock:
            found = self._tokens.get(token)
        if found is None or time.time() >= found[1]:
            return None
        return found[0]

    def _verified(self, bearer: str) -> _App | Answer:
        try:
            header_claims = jwt.decode(bearer, options={"verify_signature": False})
        except jwt.PyJWTError:
            return 401, _error("A JSON web token could not be decoded", _AUTH_DOCS)
        issuer = header_claims.get("iss")
        with self._lock:
            app = self._apps.get(int(issuer)) if str(issuer).isdigit() else None
        if app is None:
            return 401, _error(f"Integration {issuer!r} not found", _AUTH_DOCS)
        try:
            claims = jwt.decode(
                bearer, app.public_key, algorithms=["RS256"], options={"require": ["iat", "exp", "iss"]}, leeway=0
            )
        except jwt.ExpiredSignatureError:
            return 401, _error(
                "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the "
                "assertion expires",
                _AUTH_DOCS,
            )
        except jwt.ImmatureSignatureError:
            return 401, _error(
                "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
                _AUTH_DOCS,
            )
        except jwt.PyJWTError:
            return 401, _error("A JSON web token could not be decoded", _AUTH_DOCS)
        if claims["exp"] - claims["iat"] > MAX_JWT_LIFETIME_SECONDS:
            return 401, _error("'Expiration time' claim ('exp') is too far in the future", _AUTH_DOCS)
        return app

    def _issue(self, installation: _Installation) -> dict[str, Any]:
        token = "ghs_" + "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(36))
        expires = datetime.now(UTC) + timedelta(seconds=self.token_lifetime)
        with self._lock:
            self._tokens[token] = (InstallationGrant(installation.id, installation.account), expires.timestamp())
            self.issued.append(token)
        return {
            "token": token,
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "permissions": {"administration": "write", "organization_self_hosted_runners": "write"},
            "repository_selection": "all",
        }

    def _installation_json(self, app: _App, installation: _Installation) -> dict[str, Any]:
        base = self.api_url
        login = installation.account
        account = {
            "login": login,
            "id": installation.id + 5_000_000,
            "node_id": f"O_{installation.id}",
            "avatar_url": f"{base}/avatars/{login}",
            "gravatar_id": "",
            "url": f"{base}/users/{login}",
            "html_url": f"{base}/{login}",
            "followers_url": f"{base}/users/{login}/followers",
            "following_url": f"{base}/users/{login}/following{{/other_user}}",
            "gists_url": f"{base}/users/{login}/gists{{/gist_id}}",
            "starred_url": f"{base}/users/{login}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{base}/users/{login}/subscriptions",
            "organizations_url": f"{base}/users/{login}/orgs",
            "repos_url": f"{base}/users/{login}/repos",
            "events_url": f"{base}/users/{login}/events{{/privacy}}",
            "received_events_url": f"{base}/users/{login}/received_events",
            "type": installation.account_type,
            "site_admin": False,
        }
        return {
            "id": installation.id,
            "account": account,
            "repository_selection": "all",
            "access_tokens_url": f"{base}/app/installations/{installation.id}/access_tokens",
            "repositories_url": f"{base}/installation/repositories",
            "html_url": f"{base}/organizations/{login}/settings/installations/{installation.id}",
            "app_id": app.id,
            "app_slug": app.slug,
            "target_id": account["id"],
            "target_type": installation.account_type,
            "permissions": {"administration": "write", "organization_self_hosted_runners": "write"},
            "events": [],
            "created_at": "2026-01-05T09:00:00Z",
            "updated_at": "2026-01-05T09:00:00Z",
            "single_file_name": None,
            "suspended_by": None,
            "suspended_at": None,
        }


def _error(message: str, documentation_url: str) -> dict[str, str]:
    return {"message": message, "documentation_url": documentation_url}
