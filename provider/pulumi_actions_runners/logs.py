"""Progress lines from the provider process go to its stderr, which the Pulumi engine shows the user; every line,
with its exception if it has one, is scrubbed of credentials first (see redaction.py)."""

from __future__ import annotations

import logging
import sys

from .redaction import ScrubFilter

LOGGER = "pulumi_actions_runners"
POOL_THREAD_PREFIX = "pool-worker"
# A routine step of one runner (a grace period, a pod going, a runner coming online) is worth a line for a lone
# Runner; in a pool of hundreds the pool sums them up instead. Log such lines with ``extra=ROUTINE``.
ROUTINE = {"routine": True}
# A pool's progress as it stands ("3 of 20 rotated"): the plugin's status line on the resource (plugin/progress.py),
# replaced by the next; on stderr it would be a line per step, so the dynamic providers leave it out.
STATUS = {"status": True}


def not_a_status(record: logging.LogRecord) -> bool:
    return not getattr(record, "status", False)


def not_a_pool_step(record: logging.LogRecord) -> bool:
    return not (getattr(record, "routine", False) and record.threadName.startswith(POOL_THREAD_PREFIX))


def log_to_stderr() -> None:
    logger = logging.getLogger(LOGGER)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        handler.addFilter(not_a_pool_step)
        handler.addFilter(not_a_status)
        handler.addFilter(ScrubFilter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    # What other libraries log at WARNING and above reaches stderr through logging's last resort: scrubbed too.
    if logging.lastResort is not None and not any(isinstance(f, ScrubFilter) for f in logging.lastResort.filters):
        logging.lastResort.addFilter(ScrubFilter())
