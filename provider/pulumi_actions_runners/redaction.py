"""One scrubber for every message that can reach Pulumi state, logs or the CLI.

Credentials are kept out of messages in the first place (they are trimmed and checked before any request); this
is the second line: whatever slips through anyway (a library that quotes a header it refuses, a proxy or an
admission webhook that echoes a request) is scrubbed on its way out. The process remembers each credential as
it sees it (the GitHub credential, registration tokens, just-in-time configs) with `remember`; `scrub` removes
them, in the forms an error message quotes them (as is, escaped, base64), and whatever looks like a bearer
header or a GitHub token. The provider classes are wrapped with `scrubbed_provider`, so that no exception leaves
a provider method (the SDK sends its traceback to the engine) with anything else than scrubbed text.

This module's name may be pickled into users' state along with the providers: never rename it.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .github.credentials import GITHUB_APP_PRIVATE_KEY_ENV, GITHUB_TOKEN_ENV, trimmed_credential_inputs
from .kube.client import describe

REDACTED = "[redacted]"
# Shorter values are no credential, and scrubbing them would mangle ordinary words of a message.
MIN_SECRET_LENGTH = 6
# Of a credential with whitespace inside (which is refused, yet may be quoted while being refused), each part
# this long is scrubbed on its own too, in case a message quotes one line of it.
MIN_PART_LENGTH = 8
# Inputs and outputs of our resources that hold a credential: remembered whenever a provider method sees them.
SECRET_PROPERTIES = ("github_token", "github_app_private_key", "registration_token", "token")
PROVIDER_METHODS = ("check", "diff", "create", "read", "update", "delete")

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "Authorization: Bearer X", "'Authorization': 'token X'", "authorization=X"
    (
        re.compile(r"(?i)(\bauthorization\b['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|token|basic)\s+)?[^\s'\",;}]+"),
        r"\1" + REDACTED,
    ),
    (re.compile(r"(?i)(\bbearer\s+)[^\s'\",;}]+"), r"\1" + REDACTED),
    # GitHub's token formats: ghp_, gho_, ghu_, ghs_, ghr_ and fine-grained github_pat_.
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
)

_lock = threading.Lock()
_known: set[str] = set()
_longest_first: tuple[str, ...] = ()

P = TypeVar("P", bound=type)


class ProviderCallFailed(Exception):
    """A provider method failed. The message is the original error's type and message, scrubbed; the original is
    not chained, so that no traceback the SDK reports carries its text."""


def remember(*secrets: object) -> None:
    """Scrub these values from every message of this process from now on (values that are no string, or too
    short to be a credential, are passed over)."""
    forms: set[str] = set()
    for secret in secrets:
        if isinstance(secret, str):
            forms |= _forms(secret)
    global _longest_first
    with _lock:
        if forms <= _known:
            return
        _known.update(forms)
        _longest_first = tuple(sorted(_known, key=len, reverse=True))


def scrub(text: str) -> str:
    """``text`` without any credential this process knows of, or any that looks like a bearer header or a
    GitHub token. The environment's GITHUB_TOKEN is looked at each time, since it may change."""
    remember(os.environ.get(GITHUB_TOKEN_ENV), os.environ.get(GITHUB_APP_PRIVATE_KEY_ENV))
    for secret in _longest_first:
        if secret in text:
            text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def scrub_all(texts: Iterable[str] | None) -> list[str]:
    """Each message of a list (as a pool's ``problems``), scrubbed; None is an empty list."""
    return [scrub(str(text)) for text in texts or ()]


def scrubbed_error(error: BaseException) -> str:
    """The error's type and message, scrubbed: what a user needs, and nothing of a credential (nor, for an
    error of the Kubernetes client, its dump of headers and body)."""
    return scrub(f"{type(error).__name__}: {describe(error) if isinstance(error, Exception) else error}")


def scrubbed_provider(cls: P) -> P:
    """Class decorator for a dynamic provider: each of its methods remembers the credentials among the
    properties it is given, and any exception it raises leaves it as a `ProviderCallFailed` with the scrubbed
    message and no chained original (the SDK reports a traceback, chained exceptions included, to the engine).
    Check also gets its ``github_token`` trimmed, so that state keeps the credential that is used. Inherited
    methods (ResourceProvider's defaults) are wrapped too, so that every method is, whichever the class defines."""
    for name in PROVIDER_METHODS:
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "_scrubbed", False):
            setattr(cls, name, _scrubbed_method(method, trim_credentials=name == "check"))
    return cls


def _scrubbed_method(method: Callable[..., Any], *, trim_credentials: bool) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Any, *args: Any) -> Any:
        for arg in args:
            if isinstance(arg, dict):
                remember(*(arg.get(key) for key in SECRET_PROPERTIES))
        if trim_credentials:
            args = tuple(trimmed_credential_inputs(a) if isinstance(a, dict) else a for a in args)
        try:
            return method(self, *args)
        except Exception as error:  # every error leaves scrubbed
            message = scrubbed_error(error)
        # Raised outside the except block: the original is then not even the implicit context.
        raise ProviderCallFailed(message) from None

    call._scrubbed = True  # type: ignore[attr-defined]
    return call


class ScrubFilter(logging.Filter):
    """For a log handler: formats each record's message, exception and stack, then scrubs them."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage()), None
        if record.exc_info:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


def _pem_armour(part: str) -> bool:
    """A PEM key's "-----BEGIN", "KEY-----" lines' words: no secret, and in every certificate's message too."""
    return part.startswith("-----") or part.endswith("-----")


def _forms(secret: str) -> set[str]:
    """How a message may quote the secret: as is, trimmed, escaped (repr, JSON) and base64 (Kubernetes data)."""
    parts = {part for part in secret.split() if len(part) >= MIN_PART_LENGTH and not _pem_armour(part)}
    values = {secret, secret.strip()} | parts
    forms: set[str] = set()
    for value in values:
        if len(value) < MIN_SECRET_LENGTH:
            continue
        forms |= {
            value,
            value.encode("unicode_escape").decode("ascii"),
            json.dumps(value)[1:-1],
            base64.b64encode(value.encode()).decode("ascii"),
        }
    return forms
