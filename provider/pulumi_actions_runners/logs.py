"""Progress lines from the provider process go to its stderr, which the Pulumi engine shows the user."""

from __future__ import annotations

import logging
import sys

LOGGER = "pulumi_actions_runners"
POOL_THREAD_PREFIX = "pool-worker"
# A routine step of one runner (a grace period, a pod going, a runner coming online) is worth a line for a lone
# Runner; in a pool of hundreds the pool sums them up instead. Log such lines with ``extra=ROUTINE``.
ROUTINE = {"routine": True}


def _not_a_pool_step(record: logging.LogRecord) -> bool:
    return not (getattr(record, "routine", False) and record.threadName.startswith(POOL_THREAD_PREFIX))


def log_to_stderr() -> None:
    logger = logging.getLogger(LOGGER)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        handler.addFilter(_not_a_pool_step)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
