"""The plugin's property table (plugin/properties.py) and the dynamic resources' constructors (resources.py) say
the same: every input under the same name (snake_case there, camelCase in the schema), with the same default."""

from __future__ import annotations

import inspect

import pytest

from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool, RunnerScaleSet
from pulumi_actions_runners.plugin.properties import BY_TOKEN, camel_case, snake_case

RESOURCES = {
    "RegistrationToken": RegistrationToken,
    "Runner": Runner,
    "RunnerPool": RunnerPool,
    "RunnerScaleSet": RunnerScaleSet,
}


@pytest.mark.parametrize("kind", sorted(RESOURCES))
def test_every_input_and_default_of_the_plugin_is_the_dynamic_resources(kind: str) -> None:
    table = BY_TOKEN[f"actions-runners:index:{kind}"].inputs
    parameters = inspect.signature(RESOURCES[kind].__init__).parameters
    keywords = {name: p.default for name, p in parameters.items() if name not in ("self", "resource_name", "opts")}

    assert {p.name for p in table} == set(keywords)
    for prop in table:
        given = keywords[prop.name]
        expected = () if prop.default == [] else prop.default  # a list default is a tuple in a signature
        assert given in (expected, inspect.Parameter.empty if prop.required else expected), prop.name
        assert snake_case(camel_case(prop.name)) == prop.name
