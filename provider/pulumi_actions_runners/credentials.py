"""Credentials reach the provider as (secret) inputs or from its environment at call time, never from the
pickled provider object, which Pulumi writes into the state."""

from __future__ import annotations

import hashlib
import os

GITHUB_TOKEN_ENV = "GITHUB_TOKEN"


class MissingCredential(Exception):
    pass


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def github_credential(explicit: str | None) -> str:
    credential = explicit or os.environ.get(GITHUB_TOKEN_ENV)
    if not credential:
        raise MissingCredential(
            f"no GitHub credential: set github_token on the resource (as a secret) or {GITHUB_TOKEN_ENV} "
            "in the environment of `pulumi`"
        )
    return credential
