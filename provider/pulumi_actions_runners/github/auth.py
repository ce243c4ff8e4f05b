"""Which GitHub credential a resource uses, and Check's rules for it.

A personal access token (``github_token``) or a GitHub App (``github_app_id``, ``github_app_private_key``, and
optionally ``github_app_installation_id``): given as inputs, else taken from the environment of `pulumi`
(``GITHUB_TOKEN``, or ``GITHUB_APP_ID`` / ``GITHUB_APP_PRIVATE_KEY`` / ``GITHUB_APP_INSTALLATION_ID``). Inputs win
over the environment; two credentials of the same source are refused rather than one guessed. No reason quotes a
credential.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from ..redaction import remember
from ..unknowns import is_unknown
from .app import GitHubApp, InstallationTokens, installation_tokens
from .credentials import (
    CREDENTIAL_RULE,
    GITHUB_TOKEN_ENV,
    GITHUB_TOKEN_INPUT,
    InvalidCredential,
    credential_problem,
    github_credential,
)
from .url import GitHubTarget, parse_github_url

APP_ID, INSTALLATION_ID, PRIVATE_KEY = "github_app_id", "github_app_installation_id", "github_app_private_key"
APP_INPUTS = (APP_ID, INSTALLATION_ID, PRIVATE_KEY)
APP_ENV = {
    APP_ID: "GITHUB_APP_ID",
    INSTALLATION_ID: "GITHUB_APP_INSTALLATION_ID",
    PRIVATE_KEY: "GITHUB_APP_PRIVATE_KEY",
}
_APP_ID_FORM = re.compile(r"^[0-9]{1,20}$|^Iv[0-9A-Za-z.]{4,60}$")  # an App id, or its client id
ENTERPRISE_REFUSAL = (
    "a GitHub App cannot manage enterprise runners: GitHub requires a personal access token (classic) with the "
    "manage_runners:enterprise scope; give github_token instead"
)


@dataclass(frozen=True)
class _Source:
    """An App's settings, and how to name each: the input, or the environment variable."""

    values: dict[str, Any]
    names: dict[str, str]


def auth_failures(inputs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(property, reason) for a credential that is missing, doubled, incomplete or malformed."""
    given = {k: inputs.get(k) for k in (GITHUB_TOKEN_INPUT, *APP_INPUTS) if inputs.get(k) is not None}
    if any(is_unknown(value) for value in given.values()):
        return []  # judged once known
    app_inputs = [k for k in APP_INPUTS if k in given]
    if GITHUB_TOKEN_INPUT in given and app_inputs:
        reason = "is not used with github_token: give a personal access token or a GitHub App, not both"
        return [(app_inputs[0], reason)]
    if GITHUB_TOKEN_INPUT in given:
        problem = credential_problem(given[GITHUB_TOKEN_INPUT])
        return [] if problem is None else [(GITHUB_TOKEN_INPUT, f"{problem}: {CREDENTIAL_RULE}")]
    if app_inputs:
        return _app_failures(_Source(given, {k: k for k in APP_INPUTS}), inputs.get("github_url"))
    environment = _app_environment()
    token = os.environ.get(GITHUB_TOKEN_ENV)
    if token and environment:
        return [
            (
                GITHUB_TOKEN_INPUT,
                f"is not set, and both {GITHUB_TOKEN_ENV} and {', '.join(APP_ENV[k] for k in environment)} are in the "
                "environment of `pulumi`: unset one of them, or give the credential as an input",
            )
        ]
    if environment:
        source = _Source(environment, {k: f"{APP_ENV[k]} in the environment" for k in APP_INPUTS})
        return _app_failures(source, inputs.get("github_url"))
    if not token:
        return [
            (
                GITHUB_TOKEN_INPUT,
                f"is not set and {GITHUB_TOKEN_ENV} is not in the environment: give a GitHub token, or a GitHub App "
                f"({APP_ID} and {PRIVATE_KEY})",
            )
        ]
    problem = credential_problem(token)
    return (
        []
        if problem is None
        else [
            (GITHUB_TOKEN_INPUT, f"is not set, and {GITHUB_TOKEN_ENV} in the environment {problem}: {CREDENTIAL_RULE}")
        ]
    )


def github_auth(props: Mapping[str, Any], target: GitHubTarget | None = None) -> str | InstallationTokens:
    """The credential to call GitHub with: a trimmed token, or the process's installation tokens of the App.
    Refresh and destroy run no Check: the environment of `pulumi` is judged here by the same rules. ``target``:
    the parsed ``github_url``, when the caller has it."""
    if failures := auth_failures(props):
        raise InvalidCredential("; ".join(f"{prop}: {reason}" for prop, reason in failures))
    # No ambiguity is left: a token beside an App, of the same source, failed above.
    app = {k: props[k] for k in APP_INPUTS if props.get(k) is not None} or _app_environment()
    if props.get(GITHUB_TOKEN_INPUT) is None and app:
        return app_tokens(target or parse_github_url(props["github_url"]), app)
    return github_credential(props.get(GITHUB_TOKEN_INPUT))


def app_tokens(target: GitHubTarget, settings: Mapping[str, Any]) -> InstallationTokens:
    installation = settings.get(INSTALLATION_ID)
    private_key = _pem(str(settings[PRIVATE_KEY]))
    remember(private_key)  # as it is used: a key from the environment had its \n written out
    app = GitHubApp(
        app_id=str(settings[APP_ID]).strip().removesuffix(".0"),
        private_key=private_key,
        installation_id=int(float(installation)) if installation is not None else None,
    )
    return installation_tokens(target, app)


def _app_environment() -> dict[str, str]:
    return {k: os.environ[name] for k, name in APP_ENV.items() if os.environ.get(name)}


def _app_failures(source: _Source, github_url: Any) -> list[tuple[str, str]]:
    found = []
    values, names = source.values, source.names
    for key in (APP_ID, PRIVATE_KEY):
        if key not in values:
            given = " and ".join(names[k] for k in APP_INPUTS if k in values)
            found.append((key, f"{names[key]} is required with {given}: a GitHub App needs its id and its key"))
    app_id = values.get(APP_ID)
    if app_id is not None and not _APP_ID_FORM.match(str(app_id).strip().removesuffix(".0")):
        found.append((APP_ID, f"{names[APP_ID]} is not a GitHub App id: use the App's numeric id (or client id)"))
    installation = values.get(INSTALLATION_ID)
    if installation is not None and not _positive_whole(installation):
        found.append((INSTALLATION_ID, f"{names[INSTALLATION_ID]} is not an installation id: use a whole number"))
    key = values.get(PRIVATE_KEY)
    if key is not None and not _rsa_private_key(key):
        found.append(
            (
                PRIVATE_KEY,
                f"{names[PRIVATE_KEY]} is not a PEM RSA private key: give the App's private key as GitHub made it "
                "(the .pem file's text, -----BEGIN RSA PRIVATE KEY----- ...)",
            )
        )
    if isinstance(github_url, str) and not is_unknown(github_url):
        try:
            enterprise = parse_github_url(github_url).scope.startswith("enterprises/")
        except ValueError:
            enterprise = False  # the github_url rule says why
        if enterprise:
            found.append((APP_ID, ENTERPRISE_REFUSAL))
    return found


def _positive_whole(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool) and number.is_integer() and number >= 1


def _pem(value: str) -> str:
    """A key from an environment variable or a CI secret often has its newlines written as \\n."""
    value = value.strip()
    return value.replace("\\n", "\n") if "\n" not in value else value


def _rsa_private_key(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        key = load_pem_private_key(_pem(value).encode(), password=None)
    except (ValueError, TypeError):
        return False
    return isinstance(key, RSAPrivateKey)
