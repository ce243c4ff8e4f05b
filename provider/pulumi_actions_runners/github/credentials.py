"""Credentials reach the provider as (secret) inputs or from its environment at call time, never from the
pickled provider object, which Pulumi writes into the state.

A token read from a file or a Kubernetes Secret often ends in a newline, which an HTTP header cannot carry (and
the HTTP library's refusal would quote the token): whitespace around a credential is trimmed, and what is left
must be what a header value and a GitHub token may hold. A credential is never quoted in an error.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

GITHUB_TOKEN_ENV = "GITHUB_TOKEN"
GITHUB_APP_PRIVATE_KEY_ENV = "GITHUB_APP_PRIVATE_KEY"
GITHUB_TOKEN_INPUT = "github_token"
CREDENTIAL_RULE = (
    "use a GitHub token: printable ASCII letters, digits and punctuation, with no space, tab, newline or other "
    "control character inside (whitespace around it, such as a trailing newline, is ignored)"
)


class MissingCredential(Exception):
    pass


class InvalidCredential(ValueError):
    """A credential that cannot be sent; the message names where it came from, never its value."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def credential_problem(value: Any) -> str | None:
    """What is wrong with a credential once trimmed, in words that never quote it; None if nothing is."""
    if not isinstance(value, str):
        return "is not a string"
    credential = value.strip()
    if not credential:
        return "is empty"
    if any(c.isspace() for c in credential):
        return "has whitespace inside"
    if any(not c.isascii() for c in credential):
        return "has a non-ASCII character"
    if any(not c.isprintable() for c in credential):
        return "has a control character"
    return None


def github_credential(explicit: str | None) -> str:
    """The trimmed credential to send: the ``github_token`` input if given, else GITHUB_TOKEN of the environment.
    `InvalidCredential` if it cannot be sent, naming its source but not quoting it."""
    if explicit:
        return _checked(explicit, GITHUB_TOKEN_INPUT)
    from_environment = os.environ.get(GITHUB_TOKEN_ENV)
    if not from_environment:
        raise MissingCredential(
            f"no GitHub credential: set github_token on the resource (as a secret) or {GITHUB_TOKEN_ENV} "
            "in the environment of `pulumi`"
        )
    return _checked(from_environment, f"{GITHUB_TOKEN_ENV} in the environment")


def trimmed_credential_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs with ``github_token`` trimmed if it is a string (for Check, so that state keeps what is used)."""
    value = inputs.get(GITHUB_TOKEN_INPUT)
    if isinstance(value, str) and value != value.strip():
        return {**inputs, GITHUB_TOKEN_INPUT: value.strip()}
    return inputs


def _checked(value: str, source: str) -> str:
    problem = credential_problem(value)
    if problem is not None:
        raise InvalidCredential(f"{source} {problem}: {CREDENTIAL_RULE}")
    return value.strip()
