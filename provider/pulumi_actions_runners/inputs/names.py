"""The names a resource gets when the program gives none, and its ownership id: fixed by project, stack and
resource name, so that both front doors (the dynamic resources and the provider plugin) agree on them."""

from __future__ import annotations

import hashlib
import re


def default_name(project: str, stack: str, resource_name: str, max_length: int = 63) -> str:
    """The resource name made DNS-safe, plus a suffix fixed by project and stack.

    Deterministic rather than random, so that a runner dropped from state by a refresh comes back under the same
    name, and its finished pod and Secret are taken over instead of left behind.
    """
    prefix = re.sub(r"[^a-z0-9-]+", "-", resource_name.lower()).strip("-")[: max_length - 9] or "runner"
    suffix = hashlib.sha256(f"{project}/{stack}/{resource_name}".encode()).hexdigest()
    return f"{prefix}-{suffix[:8]}"


def ownership_id(project: str, stack: str, resource_type: str, resource_name: str) -> str:
    """What the ownership label of a resource's runners' registrations says (see manifests.owner_label). Another
    stack asking for the same runner name gets another id, so neither can take the other's registration over; the
    same resource after a crash gets the same one, and adopts its own."""
    identity = f"{project}/{stack}/{resource_type}/{resource_name}"
    return hashlib.sha256(identity.encode()).hexdigest()[:16]
