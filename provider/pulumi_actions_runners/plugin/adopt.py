"""``pulumi import`` of a runner or a pool: what the import id names, adopted only when provably ours (the other
kinds refuse, saying why: NOT_IMPORTABLE).

The id is ``NAMESPACE/NAME@GITHUB_URL`` (``ci/build-0@https://github.com/acme``): the runner's (or the pool's)
name, where its pods are, and where it registered. Ours means: every pod carries this provider's labels (managed
by it, the runner's name, the pool's name for a pool's runner) and the importing resource's own ownership id
(fixed by its project, stack, type and name, as its Check fills ``owner`` in), and every registration GitHub lists
under those names carries the same ownership label. Anything else is refused, saying why: a mistyped or
neighbouring id must not hand another stack's runners to this one, whose next up would rotate them to its token
and whose destroy would remove them. A read that fails is said as the rest of the provider says it.

An import cannot read back a program's inputs (a pod template is merged into the pod; a token is never shown
again by GitHub). What it records instead is what each pod says it was made of: the hashes of its token and spec
(its annotations). When the program's inputs hash the same (``proven_inputs``), the adopted state takes them,
and the next up changes nothing; when they do not, the runners are rotated the safe way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pulumi.output import Unknown

from ..github.auth import auth_failures
from ..github.registrations import by_preferred_name
from ..inputs import validation
from ..inputs.connections import Endpoint, connect
from ..inputs.runner import SETTINGS, SPEC_FIELDS, runner_spec
from ..kube.client import describe, unusable_namespace
from ..kube.manifests import (
    JOB_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    OWNER_LABEL,
    OWNER_LABEL_PREFIX,
    POOL_LABEL,
    RUNNER_LABEL,
    SPEC_HASH_ANNOTATION,
    TOKEN_HASH_ANNOTATION,
    owner_label,
)
from ..lifecycle.pool import runner_index
from ..lifecycle.teardown import RunnerLocation, owns
from ..unknowns import holds_unknown
from .properties import BY_TOKEN, PACKAGE

ADOPTED = "adopted"  # in an adopted state's outputs, until an update writes the program's inputs
ID_FORM = "NAMESPACE/NAME@GITHUB_URL (for example ci/build@https://github.com/acme)"
# Why the other kinds are not imported, and what to do instead.
NOT_IMPORTABLE = {
    "RegistrationToken": (
        "a RegistrationToken cannot be imported: GitHub never shows a registration token again. Let the program "
        "make a new one (its runners are then rotated, the safe way), or give the runners the token they hold"
    ),
    "RunnerScaleSet": (
        "a RunnerScaleSet cannot be imported: its runners are its listener's, which runs with a credential and a "
        "runner spec an import cannot read back or prove the program's. The stack that made it needs no import: "
        "its next `pulumi up` creates it, and that create takes over the scale set of its name on GitHub and its "
        "listener, whose ConfigMap carries this resource's ownership id (a hash of project/stack/type/name)"
    ),
}


class NotProvablyOurs(Exception):
    """What the import id names is not there, or not provably made by this provider for the importing resource."""


class ReadFailed(Exception):
    """The cluster or GitHub failed a read the import needs: what was read, and their answer (never the Kubernetes
    client's dump of headers and body)."""


@dataclass(frozen=True)
class Importer:
    """The resource an import adopts into: its ownership id, and what that id is a hash of, for a refusal to name."""

    owner: str
    project: str
    stack: str
    name: str


@dataclass(frozen=True)
class Adopted:
    inputs: dict[str, Any]
    outputs: dict[str, Any]


def adopt(kind: str, import_id: str, importer: Importer) -> Adopted:
    if kind == "Runner":
        return _adopt_runner(*_parse(import_id), importer)
    if kind == "RunnerPool":
        return _adopt_pool(*_parse(import_id), importer)
    raise NotProvablyOurs(NOT_IMPORTABLE[kind])


def proven_inputs(kind: str, olds: dict[str, Any], news: dict[str, Any]) -> dict[str, Any]:
    """An adopted state, as the program asks for where that changes no runner: its settings (a grace period, a
    credential; a pool's max_unavailable), which act only through the calls that read them (with the inputs the
    engine keeps, see with_settings), and its spec where the pods' hashes prove it the same."""
    wanted = _spec_hash(news) if olds.get(ADOPTED) else None
    if wanted is None or holds_unknown(wanted):
        return olds
    olds = with_settings(kind, olds, news)
    if olds.get("spec_hash") is None or olds.get("spec_hash") != wanted:
        return olds  # not proven: the spec's inputs stay absent, so the runners are rotated
    return {**{k: v for k, v in olds.items() if k != ADOPTED}, **{k: news.get(k) for k in SPEC_FIELDS}}


def with_settings(kind: str, props: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """An adopted state with the settings of the inputs the engine keeps for it (a Delete's or a refresh's old
    inputs: the program's, as the last update recorded them), where it has them; else the defaults it was
    adopted with."""
    if not props.get(ADOPTED):
        return props
    settings = (*SETTINGS, *(("max_unavailable",) if kind == "RunnerPool" else ()))
    return {**props, **{k: inputs[k] for k in settings if inputs.get(k) is not None}}


def for_teardown(kind: str, props: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """An adopted state that no update has completed yet: its settings from the old inputs, and the spec's
    defaults where it has nothing, for what a teardown reads of it (each runner's recorded ephemerality wins)."""
    if not props.get(ADOPTED):
        return props
    defaults = {p.name: p.default for p in BY_TOKEN[f"{PACKAGE}:index:{kind}"].inputs if p.default is not None}
    return with_settings(kind, {**defaults, **{k: v for k, v in props.items() if v is not None}}, inputs)


def _spec_hash(news: dict[str, Any]) -> Any:
    """What the program's runners are made of, hashed as their pods' annotations are: a pool's checked inputs
    carry it (Check adds it for the preview report), a Runner's is computed here. Unknown while a spec input is."""
    if "spec_hash" in news:
        return news["spec_hash"]
    if any(holds_unknown(news.get(k)) for k in (*SPEC_FIELDS, "runner_name")):
        return Unknown()
    return runner_spec(news, news["runner_name"]).spec_hash


class NoCredential(Exception):
    """An import has no inputs: GitHub is read with the environment's credential, and there is none."""


def _parse(import_id: str) -> tuple[str, str, str]:
    where, _, github_url = import_id.partition("@")
    namespace, _, name = where.partition("/")
    if not (namespace and name and github_url) or validation.github_url(github_url) is not None:
        raise NotProvablyOurs(f"the import id {import_id!r} is not of the form {ID_FORM}")
    if failures := auth_failures({"github_url": github_url}):
        raise NoCredential(
            "an import reads GitHub with the credential in the environment of `pulumi import` (it has no inputs): "
            "set GITHUB_TOKEN, or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY. "
            + "; ".join(f"{prop}: {reason}" for prop, reason in failures)
        )
    return namespace, name, github_url


def _settings() -> dict[str, Any]:
    """Defaults of the settings, until the program's are taken (proven_inputs) or written by an update."""
    defaults = {p.name: p.default for p in BY_TOKEN[f"{PACKAGE}:index:Runner"].inputs}
    return {k: defaults.get(k) for k in SETTINGS}


@contextmanager
def _reading(what: str, namespace: str | None = None) -> Iterator[None]:
    """A read the import needs; its failure said as ``what`` failed and how (the API server's status and message),
    or, refused in ``namespace``, as a namespace the provider cannot use."""
    try:
        yield
    except Exception as error:  # anything the read raises: the client's, the connection's
        if namespace is not None and (unusable := unusable_namespace(error, namespace)) is not None:
            raise unusable from None
        raise ReadFailed(f"{what}: {describe(error)}") from None


def _github_listing(github_url: str) -> str:
    return (
        f"the runners registered at {github_url} could not be listed with the credential in the environment of "
        "`pulumi import` (GITHUB_TOKEN, or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY)"
    )


def _ours(pod: Any, name: str, pool: str) -> str:
    """The pod's ownership id, if the pod is provably this provider's runner ``name`` (of ``pool``)."""
    labels = pod.metadata.labels or {}
    where = f"pod {pod.metadata.namespace}/{pod.metadata.name}"
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY or labels.get(RUNNER_LABEL) != name:
        raise NotProvablyOurs(f"{where} was not made by pulumi-actions-runners as runner {name}: not adopted")
    if labels.get(POOL_LABEL, "") != pool:
        whose = f"pool {labels[POOL_LABEL]}'s" if labels.get(POOL_LABEL) else "a lone Runner's"
        raise NotProvablyOurs(f"{where} is {whose} runner: import that resource instead")
    if labels.get(JOB_LABEL):
        raise NotProvablyOurs(f"{where} is a refilling pool's (a Job's pod): refilling pools cannot be imported yet")
    if not labels.get(OWNER_LABEL):
        raise NotProvablyOurs(
            f"{where} was made before ownership labels: its GitHub registration cannot be proven its own"
        )
    return labels[OWNER_LABEL]


def _not_the_importers(what: str, found: set[str], kind: str, importer: Importer) -> None:
    """Refuses runners that carry another resource's ownership id: the lost-state case (the same project, stack,
    type and name importing what it made) is the one whose ids match."""
    others = sorted(found - {importer.owner})
    if not others:
        return
    raise NotProvablyOurs(
        f"{what} ownership id {', '.join(others)}, not this resource's {importer.owner} (project "
        f"{importer.project}, stack {importer.stack}, {kind} {importer.name}): what the import id names belongs to "
        "another resource, of another stack or another resource name (an ownership id is a hash of "
        "project/stack/type/name). Import it from the stack that owns it, under that resource's name; nothing was "
        "adopted, so that this stack never rotates or removes another's runners"
    )


def _registration(location: RunnerLocation, registered: dict[str, dict[str, Any]]) -> int | None:
    found = registered.get(location.runner_name)
    if found is None:
        return None
    if not owns(location, found):
        labels = [label.get("name") or "" for label in found.get("labels") or ()]
        carried = [label for label in labels if label.startswith(OWNER_LABEL_PREFIX)]
        ours = f"this resource's ownership label {location.owner_label}"
        carries = f"with ownership label {', '.join(carried)}, not {ours}" if carried else f"without {ours}"
        raise NotProvablyOurs(
            f"GitHub lists runner {location.runner_name} (id {found['id']}) {carries}: that registration is another "
            "resource's (another stack's, or one of another name), so the runner is not adopted"
        )
    return int(found["id"])


def _adopt_runner(namespace: str, name: str, github_url: str, importer: Importer) -> Adopted:
    with connect(Endpoint.of({"github_url": github_url})) as clients:
        with _reading(f"pod {namespace}/{name} could not be read", namespace):
            pod = clients.kube.read_pod(namespace, name)
        if pod is None:
            raise NotProvablyOurs(f"there is no pod {namespace}/{name}: nothing to adopt")
        _not_the_importers(f"pod {namespace}/{name} carries", {_ours(pod, name, "")}, "Runner", importer)
        with _reading(_github_listing(github_url)):
            registered = by_preferred_name(clients.github.list_runners(name))
    ephemeral = pod.spec.restart_policy == "Never"
    location = RunnerLocation(
        namespace, name, f"{name}-registration", name, None, ephemeral, owner_label(importer.owner)
    )
    runner_id = _registration(location, registered)
    annotations = pod.metadata.annotations or {}
    inputs = {"github_url": github_url, "namespace": namespace, "runner_name": name}
    outputs = {
        **inputs,
        **_settings(),
        "owner": importer.owner,
        "ephemeral": ephemeral,
        "runner_id": runner_id,
        "pod_name": name,
        "secret_name": location.secret_name,
        "token_hash": annotations.get(TOKEN_HASH_ANNOTATION),
        "spec_hash": annotations.get(SPEC_HASH_ANNOTATION),
        ADOPTED: True,
    }
    return Adopted(inputs, outputs)


def _adopt_pool(namespace: str, name: str, github_url: str, importer: Importer) -> Adopted:
    with connect(Endpoint.of({"github_url": github_url})) as clients:
        with _reading(f"the pods of pool {name} in namespace {namespace} could not be listed", namespace):
            pods = clients.kube.list_pods(namespace, f"{POOL_LABEL}={name}")
        if not pods:
            raise NotProvablyOurs(f"there are no pods of pool {name} in namespace {namespace}: nothing to adopt")
        _not_the_importers(
            f"the pods of pool {name} in namespace {namespace} carry",
            {_ours(pod, pod.metadata.name, name) for pod in pods},
            "RunnerPool",
            importer,
        )
        with _reading(_github_listing(github_url)):
            registered = by_preferred_name(clients.github.list_runners())
    pods.sort(key=lambda pod: runner_index(name, pod.metadata.name))
    runners = []
    for pod in pods:
        ephemeral = pod.spec.restart_policy == "Never"
        runner = pod.metadata.name
        location = RunnerLocation(
            namespace, runner, f"{runner}-registration", runner, None, ephemeral, owner_label(importer.owner), name
        )
        annotations = pod.metadata.annotations or {}
        runners.append(
            {
                "name": runner,
                "id": _registration(location, registered),
                "pod": runner,
                "token_hash": annotations.get(TOKEN_HASH_ANNOTATION),
                "spec_hash": annotations.get(SPEC_HASH_ANNOTATION),
                "shape_hash": None,
                "ephemeral": ephemeral,
            }
        )
    inputs = {"github_url": github_url, "namespace": namespace, "pool_name": name, "replicas": len(runners)}
    outputs = {
        **inputs,
        **_settings(),
        "owner": importer.owner,
        "runners": runners,
        "problems": [],
        "token_hash": _common(r["token_hash"] for r in runners),
        "spec_hash": _common(r["spec_hash"] for r in runners),
        ADOPTED: True,
    }
    return Adopted(inputs, outputs)


def _common(values: Any) -> str | None:
    """The value all runners share; None (unknown: they are rotated) when they differ."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None
