"""A runner's Secret, written and deleted only when it is this runner's own.

The Secret is named after its runner (``<name>-registration``) in a namespace that other tools, stacks and people
share. One of that name that does not carry this runner's labels is someone else's: never overwritten (an error
naming it) or deleted (left alone, and said). Whose it is comes from its metadata alone (the API server's
PartialObjectMetadata form), so that judging never reads another Secret's data; a replace or delete is
preconditioned on what was read (resourceVersion, uid), so a Secret made in between under the name is judged
anew rather than clobbered.
"""

from __future__ import annotations

import logging
from typing import Protocol

from .client import SecretMetadata
from .manifests import MANAGED_BY, MANAGED_BY_LABEL, OWNER_LABEL, POOL_LABEL, RUNNER_LABEL, RunnerSpec, secret_manifest

log = logging.getLogger(__name__)

ATTEMPTS = 3  # a Secret that changes under the name between our read and our write this often is no race but a fight


class SecretNotOurs(Exception):
    """A Secret of the runner's name exists that this runner's resource did not make."""

    def __init__(self, namespace: str, name: str, labels: dict[str, str]) -> None:
        shown = ", ".join(f"{key}={value}" for key, value in sorted(labels.items())) or "no labels"
        super().__init__(
            f"Secret {namespace}/{name} exists and is not this runner's: it carries no ownership label of this "
            f"resource ({shown}), so it was left as it is and nothing was started. Choose another runner_name (or "
            "pool_name), or remove that Secret if it is a leftover of yours."
        )


class SecretApi(Protocol):
    def create_secret(self, manifest: dict) -> bool: ...
    def replace_secret(self, manifest: dict, resource_version: str) -> bool: ...
    def read_secret_metadata(self, namespace: str, name: str) -> SecretMetadata | None: ...
    def delete_secret(self, namespace: str, name: str, uid: str | None = None) -> bool: ...


def is_runners_secret(labels: dict[str, str], runner_name: str, pool: str, owner: str | None) -> bool:
    """Made for this runner by its resource: managed by us, its runner's (and pool's) label, and the resource's
    ownership label. A Secret made by a version from before ownership labels has none: the runner label was then
    the mark, as it is for pods (manifests.made_by)."""
    ours = labels.get(MANAGED_BY_LABEL) == MANAGED_BY and labels.get(RUNNER_LABEL) == runner_name
    return ours and labels.get(POOL_LABEL, "") == pool and labels.get(OWNER_LABEL) in (None, owner)


def write_runner_secret(secrets: SecretApi, spec: RunnerSpec, credential: str) -> None:
    """The runner's Secret with ``credential``: made, or replaced if it is this runner's; SecretNotOurs if not."""
    manifest = secret_manifest(spec, credential)
    for _ in range(ATTEMPTS):
        if secrets.create_secret(manifest):
            return
        existing = secrets.read_secret_metadata(spec.namespace, spec.secret_name)
        if existing is None:
            continue  # deleted since: made anew
        if not is_runners_secret(existing.labels, spec.runner_name, spec.pool, spec.owner):
            raise SecretNotOurs(spec.namespace, spec.secret_name, existing.labels)
        if secrets.replace_secret(manifest, existing.resource_version):
            return
    raise RuntimeError(
        f"Secret {spec.namespace}/{spec.secret_name} changed each time it was about to be written ({ATTEMPTS} "
        "times): something else writes it too"
    )


def delete_runner_secret(
    secrets: SecretApi, namespace: str, name: str, runner_name: str, pool: str, owner: str | None
) -> None:
    """Gone afterwards if it was this runner's; another's is left alone, and said."""
    for _ in range(ATTEMPTS):
        existing = secrets.read_secret_metadata(namespace, name)
        if existing is None:
            return
        if not is_runners_secret(existing.labels, runner_name, pool, owner):
            log.warning(
                "Secret %s/%s is not runner %s's (it carries no ownership label of its resource): left alone",
                namespace,
                name,
                runner_name,
            )
            return
        if secrets.delete_secret(namespace, name, uid=existing.uid):
            return
    log.warning("Secret %s/%s kept being made anew while it was deleted; left as it is", namespace, name)
