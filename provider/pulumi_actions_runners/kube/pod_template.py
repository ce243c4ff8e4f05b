"""The pod template users shape runner pods with: its shape checked against Kubernetes' own models (no network
call), and its merge into the provider's pod by rules a user can predict (docs/how-to/pod-templates.md).

- The container named ``runner`` is the runner: its fields are the user's, except what the provider owns, its
  ``image`` (the ``image`` input), ``command`` and ``args`` (the runner's start), and its ``ACTIONS_RUNNER_*``
  environment (the registration; ``DOCKER_HOST`` in Docker mode). Without one, the provider's runner is added.
- Every other container, init container, volume and pod-spec field passes through unchanged; ``restartPolicy``
  is the provider's (it follows ``ephemeral``). Template labels and annotations are merged onto the pod's, apart
  from keys the provider marks its pods with.
- In Docker mode, a container named ``dind`` is merged key by key into the provider's Docker sidecar rather than
  added beside it, and a volume named like one of the provider's (``work``, ``dind-sock``) replaces it.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import re
from typing import Any

from ..unknowns import is_unknown
from .library import kubernetes

PROP = "pod_template"
RUNNER = "runner"
DIND = "dind"
OUR_KEY_PREFIX = "actions-runners.pulumi.io/"
OUR_KEYS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/name")
# config.sh's and run.sh's arguments (the registration) and the exit code the provider reads: the provider's. The
# image's other settings (job hooks, container hooks, ...) are the user's.
RUNNER_INPUT_PREFIX = "ACTIONS_RUNNER_INPUT_"
RUNNER_OWNED_ENV = ("ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE",)
DOCKER_ENV = ("DOCKER_HOST",)
# Fields whose values are Kubernetes quantities: strings such as "500m", or plain numbers.
_QUANTITIES = {
    ("V1ResourceRequirements", "limits"),
    ("V1ResourceRequirements", "requests"),
    ("V1VolumeResourceRequirements", "limits"),
    ("V1VolumeResourceRequirements", "requests"),
    ("V1EmptyDirVolumeSource", "size_limit"),
    ("V1PodSpec", "overhead"),
    ("V1ResourceFieldSelector", "divisor"),
}
# apimachinery's quantity grammar: a signed decimal, then a binary or decimal SI suffix or a decimal exponent.
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
WHAT_IS_ALLOWED = (
    "must be a pod template: a mapping with metadata and spec in Kubernetes' field names (as in a manifest), or "
    "a pulumi_kubernetes.core.v1.PodTemplateSpecArgs"
)


def conformed(template: dict[str, Any]) -> dict[str, Any]:
    """The template as the Kubernetes client's models take it: Pulumi hands every number over as a float (the API
    server refuses 1000.0 for an integer field), and a quantity written as a number (``cpu: 2``) is a string to
    the client."""
    return _conform(template, "V1PodTemplateSpec", quantity=False)


def template_json(template: dict[str, Any] | None) -> str:
    """What the template is, whatever its key order: what a runner's spec hash covers."""
    return json.dumps(conformed(template), sort_keys=True, separators=(",", ":")) if template else ""


def template_failures(template: Any, *, docker: Any) -> list[tuple[str, str]]:
    """(path, reason) for every part of the template that is malformed or sets what the provider owns."""
    if template is None or is_unknown(template):
        return []
    if not isinstance(template, dict):
        return [(PROP, WHAT_IS_ALLOWED)]
    found: list[tuple[str, str]] = []
    _check_shape(template, "V1PodTemplateSpec", PROP, found)
    _check_ownership(template, docker is True, found)
    return found


def merge_template(pod: dict[str, Any], template: dict[str, Any] | None) -> dict[str, Any]:
    """The provider's pod (its runner container, and in Docker mode its sidecar and volumes) with the template
    applied; what the provider owns was kept out of the template by Check."""
    given = conformed(copy.deepcopy(template or {}))
    given_meta, given_spec = given.get("metadata") or {}, given.get("spec") or {}
    meta, spec = pod["metadata"], pod["spec"]
    meta["labels"] = {**(given_meta.get("labels") or {}), **meta["labels"]}
    meta["annotations"] = {**meta["annotations"], **(given_meta.get("annotations") or {})}

    ours_init = {c["name"]: c for c in spec.get("initContainers") or []}
    given_containers, given_init = given_spec.get("containers") or [], given_spec.get("initContainers") or []
    containers = [c for c in given_containers if c.get("name") not in (RUNNER, *ours_init)]
    init = [c for c in given_init if c.get("name") not in ours_init]
    named = {c.get("name"): c for c in [*given_containers, *given_init]}
    runner = _merged_runner(spec["containers"][0], named.get(RUNNER))
    sidecars = [_merged_sidecar(ours, named.get(name)) for name, ours in ours_init.items()]
    given_volumes = given_spec.get("volumes") or []
    replaced = {v.get("name") for v in given_volumes}
    volumes = [*given_volumes, *(v for v in spec.get("volumes") or [] if v["name"] not in replaced)]

    pod["spec"] = {
        **spec,
        **{k: v for k, v in given_spec.items() if k not in ("containers", "initContainers", "volumes")},
        "restartPolicy": spec["restartPolicy"],
        "containers": [runner, *containers],
        **({"initContainers": [*sidecars, *init]} if sidecars or init else {}),
        **({"volumes": volumes} if volumes else {}),
    }
    return pod


def _merged_runner(ours: dict[str, Any], given: dict[str, Any] | None) -> dict[str, Any]:
    """The user's runner container, with the provider's image, command and environment; the provider's variables
    come first, so that the user's may refer to them as $(NAME)."""
    if given is None:
        return ours
    merged = {**given, **ours, **_joined(ours, given)}
    merged["terminationMessagePolicy"] = given.get("terminationMessagePolicy", ours["terminationMessagePolicy"])
    return merged


def _merged_sidecar(ours: dict[str, Any], given: dict[str, Any] | None) -> dict[str, Any]:
    """The provider's sidecar with the user's fields replacing its own one key at a time (env and mounts are
    added to), so that its image and resources can be set without repeating the rest."""
    if given is None:
        return ours
    kept = {k: v for k, v in given.items() if k not in ("name", "restartPolicy")}
    return {**ours, **kept, **_joined(ours, given)}


def _joined(ours: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The provider's environment and mounts, then the user's."""
    joined = {key: [*(ours.get(key) or []), *(given.get(key) or [])] for key in ("env", "volumeMounts")}
    return {key: items for key, items in joined.items() if items}


# --- the template against Kubernetes' models --------------------------------------------------------------------


def _conform(value: Any, kind: str, quantity: bool) -> Any:
    """``value`` with its numbers as ``kind`` has them; anything that does not fit is left for Check to name."""
    if match := _LIST.match(kind):
        return [_conform(item, match[1], quantity) for item in value] if isinstance(value, list) else value
    if match := _DICT.match(kind):
        return {k: _conform(v, match[1], quantity) for k, v in value.items()} if isinstance(value, dict) else value
    if _number(value):
        whole = int(value) if float(value).is_integer() else value
        return str(whole) if kind == "str" and quantity else whole if kind in ("int", "object") else value
    if not hasattr(kubernetes().client.models, kind) or not isinstance(value, dict):
        return value
    conformed_ = {}
    for key, item in value.items():
        if item is None:
            continue  # JSON's null is an absent field (kubectl writes creationTimestamp: null)
        field = _fields(kind).get(key)
        conformed_[key] = item if field is None else _conform(item, *field)
    return conformed_


def _check_shape(value: Any, kind: str, path: str, found: list[tuple[str, str]], quantity: bool = False) -> None:
    """The value against the Kubernetes client's model of ``kind``: field names, nesting and scalar types. What
    only the API server judges (names, quantities, label syntax) it judges at Create."""
    if value is None or is_unknown(value):
        return
    if match := _LIST.match(kind):
        if not isinstance(value, list):
            found.append((path, f"must be a list, not {_kind_of(value)}"))
            return
        for index, item in enumerate(value):
            if item is None:
                found.append((f"{path}[{index}]", "must not be null"))
            _check_shape(item, match[1], f"{path}[{_item_key(item, index)}]", found, quantity)
        return
    if match := _DICT.match(kind):
        if not isinstance(value, dict):
            found.append((path, f"must be a mapping, not {_kind_of(value)}"))
            return
        for key, item in value.items():
            _check_shape(item, match[1], f"{path}[{key}]", found, quantity)
        return
    if quantity and not _number(value) and not (isinstance(value, str) and _QUANTITY.match(value)):
        found.append((path, f'{value!r} is not a Kubernetes quantity: use e.g. "500m", "2", "512Mi" or "4Gi"'))
        return
    if kind in _SCALARS:
        if not _SCALARS[kind](value) and not quantity:
            found.append((path, f"must be {_SCALAR_WORDS[kind]}, not {_kind_of(value)}"))
        return
    if kind == "object":  # an int-or-string, or free-form
        return
    model = getattr(kubernetes().client.models, kind)
    if not isinstance(value, dict):
        found.append((path, f"must be a mapping (a Kubernetes {kind.removeprefix('V1')}), not {_kind_of(value)}"))
        return
    for key, item in value.items():
        field = _fields(kind).get(key)
        if field is None:
            found.append((f"{path}.{key}", _unknown_field(key, kind, model.attribute_map)))
            continue
        _check_shape(item, field[0], f"{path}.{key}", found, field[1])


@functools.cache
def _fields(kind: str) -> dict[str, tuple[str, bool]]:
    """A Kubernetes model's fields by their JSON name: each one's kind, and whether it holds quantities."""
    model = getattr(kubernetes().client.models, kind)
    return {
        json_name: (model.openapi_types[attribute], (kind, attribute) in _QUANTITIES)
        for attribute, json_name in model.attribute_map.items()
    }


def _unknown_field(key: str, kind: str, attribute_map: dict[str, str]) -> str:
    names = sorted(attribute_map.values())
    if key in attribute_map:  # a Python name: what pulumi_kubernetes' Args take, not what a manifest says
        hint = f"use Kubernetes' field name {attribute_map[key]!r}"
    elif close := difflib.get_close_matches(key, names, n=1):
        hint = f"did you mean {close[0]!r}?"
    else:
        hint = "its fields are " + ", ".join(names)
    return f"is not a field of a Kubernetes {kind.removeprefix('V1')}: {hint}"


def _check_ownership(template: dict[str, Any], docker: bool, found: list[tuple[str, str]]) -> None:
    """What the provider sets, asked of the template: judged on whatever part of it is well-formed."""
    meta, spec = _mapping(template.get("metadata")), _mapping(template.get("spec"))
    for key in (key for key, value in meta.items() if value is not None):  # kubectl writes creationTimestamp: null
        if key in ("name", "namespace", "generateName"):
            found.append(
                (
                    f"{PROP}.metadata.{key}",
                    "is the provider's: a runner's pod is named after runner_name (a pool's after pool_name) in "
                    "namespace; a template's metadata gives labels and annotations only",
                )
            )
        elif key not in ("labels", "annotations"):
            found.append((f"{PROP}.metadata.{key}", "is not used: a template's metadata gives labels and annotations"))
    for field in ("labels", "annotations"):
        for key in _mapping(meta.get(field)):
            if key.startswith(OUR_KEY_PREFIX) or key in OUR_KEYS:
                found.append(
                    (
                        f"{PROP}.metadata.{field}[{key}]",
                        f"is the provider's: keys under {OUR_KEY_PREFIX} and {', '.join(OUR_KEYS)} mark the pods "
                        "it manages; use another key",
                    )
                )
    if spec.get("restartPolicy") is not None:
        found.append(
            (
                f"{PROP}.spec.restartPolicy",
                "is the provider's: Never for an ephemeral runner, Always for a persistent one (see ephemeral)",
            )
        )
    containers, init = _dicts(spec.get("containers")), _dicts(spec.get("initContainers"))
    seen: set[str] = set()
    for field, index, each in _every_container(spec):
        name = each.get("name")
        if is_unknown(name):
            continue
        if not isinstance(name, str) or not name:
            found.append((f"{PROP}.spec.{field}[{index}].name", "is required: every container has a name"))
        elif name in seen:
            found.append(
                (f"{PROP}.spec.{field}[{name}]", "names a container twice: names are unique across all containers")
            )
        seen.add(str(name))
    for each in init:
        if each.get("name") == RUNNER:
            found.append(
                (f"{PROP}.spec.initContainers[runner]", "the runner is a regular container: put it in spec.containers")
            )
    for each in containers:
        if each.get("name") == RUNNER:
            _check_runner_container(each, docker, found)
    if docker:
        for field, _index, each in _every_container(spec):
            if each.get("name") == DIND and each.get("restartPolicy") is not None:
                found.append(
                    (
                        f"{PROP}.spec.{field}[dind].restartPolicy",
                        "is the provider's: with docker, dind runs as a sidecar beside the runner (Always)",
                    )
                )


def _check_runner_container(runner: dict[str, Any], docker: bool, found: list[tuple[str, str]]) -> None:
    path = f"{PROP}.spec.containers[runner]"
    starts = "is the provider's: it starts the runner (config.sh with the registration, then run.sh)"
    restarts = "is the provider's: the pod's restartPolicy follows ephemeral (an ephemeral runner never restarts)"
    owned = {
        "image": "is the provider's: set the image input (a change rotates the runners)",
        "command": starts,
        "args": starts,
        "restartPolicy": restarts,
        "restartPolicyRules": restarts,
    }
    found += [(f"{path}.{key}", reason) for key, reason in owned.items() if runner.get(key) is not None]
    registration = (
        f"is the provider's: {RUNNER_INPUT_PREFIX}* variables are the runner's registration; set it through the "
        "resource's inputs (labels, ephemeral, jit_config, ...)"
    )
    for variable in _dicts(runner.get("env")):
        name, value = variable.get("name"), variable.get("value")
        if not isinstance(name, str):
            continue
        if name.startswith(RUNNER_INPUT_PREFIX) or name in RUNNER_OWNED_ENV:
            found.append((f"{path}.env[{name}]", registration))
        elif docker and name in DOCKER_ENV:
            found.append((f"{path}.env[{name}]", "is the provider's with docker: the runner's Docker is the sidecar's"))
        elif isinstance(value, str) and f"$({RUNNER_INPUT_PREFIX}" in value:
            found.append(
                (
                    f"{path}.env[{name}]",
                    f"may not refer to {RUNNER_INPUT_PREFIX}* variables: they hold the registration's credential, "
                    "which jobs must never see",
                )
            )
    for index, source in enumerate(_dicts(runner.get("envFrom"))):
        prefix = source.get("prefix")
        if (
            isinstance(prefix, str)
            and prefix
            and (RUNNER_INPUT_PREFIX.startswith(prefix) or prefix.startswith(RUNNER_INPUT_PREFIX))
        ):
            found.append((f"{path}.envFrom[{index}].prefix", registration))


_SCALARS = {
    "str": lambda v: isinstance(v, str),
    "datetime": lambda v: isinstance(v, str),
    "bytes": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: _number(v) and float(v).is_integer(),
    "float": lambda v: _number(v),
}
_SCALAR_WORDS = {
    "str": "a string",
    "datetime": "an RFC 3339 time",
    "bytes": "a base64 string",
    "bool": "true or false",
    "int": "a whole number",
    "float": "a number",
}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _every_container(spec: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    return [
        (field, index, each)
        for field in ("containers", "initContainers")
        for index, each in enumerate(spec.get(field) or [] if isinstance(spec.get(field), list) else [])
        if isinstance(each, dict)
    ]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind_of(value: Any) -> str:
    if _number(value):
        return repr(value)
    words = {bool: "true/false", str: "a string", list: "a list", dict: "a mapping"}
    return words.get(type(value), type(value).__name__)


def _item_key(item: Any, index: int) -> str:
    """A list item by its name where it has one (containers[runner]), else by position."""
    name = item.get("name") if isinstance(item, dict) else None
    return name if isinstance(name, str) and name else str(index)
