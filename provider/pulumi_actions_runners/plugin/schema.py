"""The package schema of the provider plugin, from the property table (properties.py): what `pulumi package
gen-sdk` makes the SDKs of, and what Pulumi YAML checks programs with."""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from .properties import FUNCTIONS, KINDS, PACKAGE, POOL_RUNNER, FunctionKind, Property, ResourceKind


def package_schema() -> dict[str, Any]:
    return {
        "name": PACKAGE,
        "version": __version__,
        "displayName": "GitHub Actions runners",
        "description": "Self-hosted GitHub Actions runners on Kubernetes, replaced without killing a job.",
        "keywords": ["pulumi", "github", "actions", "runners", "kubernetes", "category/infrastructure"],
        "license": "Apache-2.0",
        "repository": "https://github.com/pulumi-actions-runners/pulumi-actions-runners",
        "types": {f"{PACKAGE}:index:PoolRunner": {**POOL_RUNNER, "description": "One runner of a RunnerPool."}},
        "resources": {kind.token: _resource(kind) for kind in KINDS},
        "functions": {function.token: _function(function) for function in FUNCTIONS},
        "language": {
            "nodejs": {"packageName": "@pulumi-actions-runners/actions-runners"},
            "python": {"packageName": "pulumi_actions_runners_sdk"},
            "go": {"importBasePath": "github.com/pulumi-actions-runners/pulumi-actions-runners/sdk/go/actionsrunners"},
            "csharp": {"rootNamespace": "PulumiActionsRunners"},
        },
    }


def schema_json() -> str:
    return json.dumps(package_schema(), indent=2, sort_keys=True) + "\n"


def _resource(kind: ResourceKind) -> dict[str, Any]:
    inputs = {p.camel: _property(p) for p in kind.inputs}
    return {
        "description": kind.description,
        "inputProperties": inputs,
        "requiredInputs": sorted(p.camel for p in kind.inputs if p.required),
        "properties": {**inputs, **{p.camel: _property(p) for p in kind.outputs}},
        "required": sorted(p.camel for p in kind.inputs if p.required),
    }


def _function(function: FunctionKind) -> dict[str, Any]:
    def of(props: tuple[Property, ...]) -> dict[str, Any]:
        return {
            "properties": {p.camel: _property(p) for p in props},
            "required": sorted(p.camel for p in props if p.required),
        }

    return {"description": function.description, "inputs": of(function.inputs), "outputs": of(function.outputs)}


def _property(prop: Property) -> dict[str, Any]:
    spec: dict[str, Any] = {**prop.schema, "description": prop.description}
    # Check fills in every default (server.py); the schema says the scalar ones, which SDKs can hold (not a
    # union's: Go's generator cannot).
    if prop.default is not None and not isinstance(prop.default, list) and "oneOf" not in prop.schema:
        spec["default"] = prop.default
    if prop.secret:
        spec["secret"] = True
    return spec


if __name__ == "__main__":
    print(schema_json(), end="")
