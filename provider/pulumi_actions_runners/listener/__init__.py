"""The listener: one process per RunnerScaleSet, in its cluster, that keeps the set's runners to what GitHub's
queue asks for between updates (loop.py). It shares the GitHub client, the runners' procedures and redaction
with the provider, and imports none of the provider's front doors. Its entry point: ``actions-runners-listener``
(``python -m pulumi_actions_runners.listener``)."""
