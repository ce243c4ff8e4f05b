"""The just-in-time config the GitHub double hands out (REST's generate-jitconfig and a scale set's
generatejitconfig alike) and its runners read back: opaque to everyone else, as GitHub's is. It is base64 of a
JSON object naming the server and scope that issued it, the registration it connects, and its secret; GitHub's
own is base64 of the runner's files (.runner, .credentials), which autoscalers pass on unread as well."""

from __future__ import annotations

import base64
import json
from typing import Any

_SHAPE = {"server": str, "scope": str, "runner_id": int, "secret": str}


def encode(server: str, scope: str, runner_id: int, secret: str) -> str:
    config = {"server": server, "scope": scope, "runner_id": runner_id, "secret": secret}
    return base64.b64encode(json.dumps(config).encode()).decode()


def decode(encoded: str) -> dict[str, Any]:
    """What `encode` made; ValueError, never quoting it, if it is not."""
    try:
        config = json.loads(base64.b64decode(encoded, validate=True))
    except ValueError:
        raise ValueError("malformed JIT config") from None
    if not isinstance(config, dict) or not all(isinstance(config.get(key), kind) for key, kind in _SHAPE.items()):
        raise ValueError("malformed JIT config")
    return config
