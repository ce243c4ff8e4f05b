"""Progress lines from the provider process go to its stderr, which the Pulumi engine shows the user."""

from __future__ import annotations

import logging
import sys

LOGGER = "pulumi_actions_runners"


def log_to_stderr() -> None:
    logger = logging.getLogger(LOGGER)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
