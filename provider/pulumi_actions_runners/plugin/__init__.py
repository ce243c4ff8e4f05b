"""The provider plugin ``pulumi-resource-actions-runners``: the runners for programs in any Pulumi language, over
the same core as the dynamic resources (server.py), with its schema (schema.py) from one property table."""
