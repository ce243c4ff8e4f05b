"""The provider plugin from source: what `python <this folder> ENGINE_ADDRESS` runs (PulumiPlugin.yaml)."""

from pulumi_actions_runners.plugin.__main__ import main

main()
