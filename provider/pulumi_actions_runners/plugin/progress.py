"""The plugin's log lines go to the Pulumi engine, on the resource they are about.

A dynamic provider is never connected to the engine, so its lines land at stack level with timestamps. The plugin
is: each call runs with its resource's URN (``working_on``), and each line is sent with it, without a timestamp.
Steps (a grace period, runners coming online, busy runners waited for) are ephemeral status lines, replaced by
the next; warnings and errors stay, as messages the user must read. Every line is scrubbed of credentials first.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc

from ..logs import LOGGER, not_a_pool_step
from ..redaction import ScrubFilter

_urn: contextvars.ContextVar[str] = contextvars.ContextVar("urn", default="")
_SEVERITY = {
    logging.DEBUG: engine_pb2.DEBUG,
    logging.INFO: engine_pb2.INFO,
    logging.WARNING: engine_pb2.WARNING,
    logging.ERROR: engine_pb2.ERROR,
}


@contextmanager
def working_on(urn: str) -> Iterator[None]:
    """Lines logged inside (and in the threads the pool starts, see pool.concurrently) are about ``urn``."""
    token = _urn.set(urn)
    try:
        yield
    finally:
        _urn.reset(token)


class EngineLog(logging.Handler):
    def __init__(self, engine_address: str) -> None:
        super().__init__(logging.INFO)
        self._channel = grpc.insecure_channel(engine_address)
        self._engine = engine_pb2_grpc.EngineStub(self._channel)
        self.addFilter(not_a_pool_step)
        self.addFilter(ScrubFilter())

    def emit(self, record: logging.LogRecord) -> None:
        severity = max((level for level in _SEVERITY if level <= record.levelno), default=logging.DEBUG)
        request = engine_pb2.LogRequest(
            severity=_SEVERITY[severity],
            message=record.getMessage(),
            urn=_urn.get(),
            ephemeral=record.levelno < logging.WARNING,
        )
        try:
            self._engine.Log(request, timeout=10)
        except grpc.RpcError:
            self.handleError(record)


def log_to_engine(engine_address: str) -> None:
    logger = logging.getLogger(LOGGER)
    logger.addHandler(EngineLog(engine_address))
    logger.setLevel(logging.INFO)
