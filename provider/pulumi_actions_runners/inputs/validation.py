"""Input rules, checked before anything is created: each failure names the property and what is allowed.

During preview, values computed by other resources are unknown; a rule only judges values that are known.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..github.releases import MINIMUM_VERSION, parse_version
from ..github.url import parse_github_url
from ..unknowns import is_unknown

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_LABEL_RULE = "1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit"
MAX_LABELS = 100

Rule = Callable[[Any], "str | None"]


def differs(old: Any, new: Any) -> bool:
    """For Diff: an input that is not known yet may differ, so it counts as changed."""
    return is_unknown(new) or old != new


def github_url(value: Any) -> str | None:
    try:
        parse_github_url(value)
    except ValueError as error:
        return str(error)
    return None


def dns_label(value: Any) -> str | None:
    if isinstance(value, str) and DNS_LABEL.match(value):
        return None
    return f"{value!r} is not allowed: use {DNS_LABEL_RULE} (a Kubernetes name that GitHub accepts too)"


def secret_string(value: Any) -> str | None:
    if isinstance(value, str) and value.strip() and not any(c.isspace() for c in value):
        return None
    return "must be a non-empty string without whitespace"


def kubeconfig_path(value: Any) -> str | None:
    """A path, judged as a path only: whether a kubeconfig is there is judged by the call that needs the cluster
    (kube.client.kubeconfig_file), since a pipeline's preview runs where there is none."""
    if value is None or (isinstance(value, str) and value.strip()):
        return None
    return (
        "must be the path of a kubeconfig file, read when a call needs the cluster (a preview needs none), or left "
        "out for KUBECONFIG / ~/.kube/config / in-cluster"
    )


def image_reference(value: Any) -> str | None:
    if isinstance(value, str) and value and len(value) <= 512 and not any(c.isspace() for c in value):
        return None
    return f"{value!r} is not an image reference: use e.g. ghcr.io/actions/actions-runner:2.329.0"


def optional(rule: Rule) -> Rule:
    """The rule, or no value at all."""

    def allowed(value: Any) -> str | None:
        return None if value is None else rule(value)

    return allowed


def optional_timestamp(value: Any) -> str | None:
    """An RFC 3339 time with its zone, as GitHub's ``expires_at`` (a RegistrationToken's)."""
    if value is None:
        return None
    try:
        if isinstance(value, str) and datetime.fromisoformat(value).tzinfo is not None:
            return None
    except ValueError:
        pass
    return f"{value!r} is not allowed: use an RFC 3339 time with its zone, such as a RegistrationToken's expires_at"


def owner_id(value: Any) -> str | None:
    """Set by the resource (see resources.py), not by users: a hash naming the resource in its stack."""
    if value is None or (isinstance(value, str) and re.fullmatch(r"[0-9a-f]{16}", value)):
        return None
    return f"{value!r} is not allowed: it is set by the resource itself, as 16 hexadecimal digits"


def runner_group(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip() == value and 0 < len(value) <= 100):
        return None
    return f"{value!r} is not allowed: use the name of a runner group, 1 to 100 characters, or leave it out"


def runner_version(value: Any) -> str | None:
    """What an image contains: an actions/runner version GitHub registers."""
    if value is None:
        return None
    parsed = parse_version(value) if isinstance(value, str) else None
    if parsed is None:
        return f"{value!r} is not a runner version: use MAJOR.MINOR.PATCH, as 2.337.0, or leave it out"
    if parsed < parse_version(MINIMUM_VERSION):  # type: ignore[operator]
        return f"{value} is not allowed: GitHub registers runners from {MINIMUM_VERSION} on"
    return None


def seconds_between(minimum: float, maximum: float) -> Rule:
    def rule(value: Any) -> str | None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and minimum <= value <= maximum:
            return None
        return f"{value!r} is not allowed: use a number of seconds from {minimum:g} to {maximum:g}"

    return rule


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"{value!r} is not allowed: use true or false"


def runner_labels(value: Any) -> str | None:
    allowed = f"use a list of at most {MAX_LABELS} labels, each 1 to 100 characters without commas"
    if not isinstance(value, (list, tuple)) or len(value) > MAX_LABELS:
        return f"{value!r} is not allowed: {allowed}"
    for label in value:
        if is_unknown(label):
            continue
        if not isinstance(label, str) or not label.strip() or "," in label or len(label) > 100:
            return f"label {label!r} is not allowed: {allowed}"
    return None


def failures(inputs: dict[str, Any], rules: dict[str, Rule]) -> list[tuple[str, str]]:
    """(property, reason) for every known input that breaks its rule."""
    found = []
    for prop, rule in rules.items():
        value = inputs.get(prop)
        if is_unknown(value):
            continue
        reason = rule(value)
        if reason is not None:
            found.append((prop, reason))
    return found


def count_between(minimum: int, maximum: int) -> Rule:
    """A whole number (protobuf hands numbers over as floats: 3.0 is 3)."""

    def rule(value: Any) -> str | None:
        if _whole(value) and minimum <= value <= maximum:
            return None
        return f"{value!r} is not allowed: use a whole number from {minimum} to {maximum}"

    return rule


def count_or_percent(value: Any) -> str | None:
    """A number of runners (at least 1), or a percentage of them such as "25%"."""
    if _whole(value) and value >= 1:
        return None
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit() and 1 <= int(value[:-1]) <= 100:
        return None
    return f'{value!r} is not allowed: use a whole number of runners (at least 1) or a percentage such as "25%"'


def name_prefix(value: Any) -> str | None:
    """A pool's name, to which its runners' names add "-<index>": a DNS label with room for the index."""
    reason = dns_label(value)
    if reason is None and len(value) > 57:
        return f'{value!r} is too long: use at most 57 characters, leaving room for the runners\' "-<index>"'
    return reason


def _whole(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()


MAX_SCALE_SET_NAME = 45  # ARC's limit too (gha-runner-scale-set's chart): room for what is named after it


def scale_set_name(value: Any) -> str | None:
    """The ``runs-on`` name of a scale set, which its runners' names ("<name>-<5 letters>", at most 64 characters
    for GitHub) and its listener's objects ("<name>-listener-github") start with."""
    if isinstance(value, str) and DNS_LABEL.match(value) and len(value) <= MAX_SCALE_SET_NAME:
        return None
    return (
        f"{value!r} is not allowed: use 1 to {MAX_SCALE_SET_NAME} lowercase letters, digits or '-', starting and "
        "ending with a letter or digit (a Kubernetes name that GitHub accepts too, with room for its runners' and "
        "its listener's names)"
    )


def listener_image(value: Any) -> str | None:
    """An image reference, as for a runner's image; the example is a listener's."""
    if image_reference(value) is None:
        return None
    return f"{value!r} is not an image reference: use e.g. ghcr.io/pulumi-actions-runners/listener:0.2.0"
