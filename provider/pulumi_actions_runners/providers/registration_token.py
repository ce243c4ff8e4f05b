"""Dynamic provider of RegistrationToken: one registration token per scope, renewed only near its expiry."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
)

from ..github.auth import APP_INPUTS, auth_failures
from ..github.client import GitHubClient
from ..github.credentials import token_hash
from ..inputs import validation
from ..inputs.connections import Endpoint
from ..logs import log_to_stderr
from ..redaction import scrubbed_provider
from ..unknowns import is_unknown

RULES: dict[str, validation.Rule] = {
    "github_url": validation.github_url,
    "refresh_before_seconds": validation.seconds_between(0, 3000),
}


@scrubbed_provider
class RegistrationTokenProvider(ResourceProvider):
    def configure(self, _req: Any) -> None:
        log_to_stderr()

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = validation.failures(news, RULES) + auth_failures(news)
        return CheckResult(news, [CheckFailure(p, r) for p, r in failures])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Replace only when the token nears expiry (or its scope changes): no churn on an ordinary up."""
        replaces = ["github_url"] if validation.differs(olds.get("github_url"), news.get("github_url")) else []
        refresh_before = news.get("refresh_before_seconds")
        if is_unknown(refresh_before) or _expires_within(olds["expires_at"], refresh_before):
            replaces.append("expires_at")
        # Nothing else is worth an update: the settings act only through Diff and Create, which read them from the
        # new inputs. An update would make the token unknown in preview (the SDK's dynamic provider server passes
        # no stable outputs), and preview would show every runner of the token recreated.
        return DiffResult(changes=bool(replaces), replaces=replaces, delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        endpoint = Endpoint.of(props)
        with GitHubClient(endpoint.target, endpoint.credential()) as github:
            grant = github.create_registration_token()
        outs = {
            **_settings(props),
            "token": grant.token,
            "expires_at": grant.expires_at,
            "token_hash": token_hash(grant.token),
        }
        return CreateResult(uuid.uuid4().hex, outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        # A registration token cannot be looked up; expiry is judged by diff, so refresh keeps what it has.
        return ReadResult(id_, props)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """GitHub has no call to revoke a registration token; it expires by itself within the hour."""


def _expires_within(expires_at: str, seconds: float) -> bool:
    return datetime.fromisoformat(expires_at).timestamp() - time.time() < seconds


def _settings(props: dict[str, Any]) -> dict[str, Any]:
    return {
        "github_url": props["github_url"],
        "github_token": props.get("github_token"),
        **{k: props.get(k) for k in APP_INPUTS},
        "refresh_before_seconds": props["refresh_before_seconds"],
    }
