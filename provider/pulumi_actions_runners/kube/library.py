"""The official ``kubernetes`` client library, imported when first used.

Importing any part of it imports all of it (its package imports every API and model class): about 0.3 s of CPU.
Most processes that import this package never call Kubernetes: a Pulumi program only declares its resources,
and the test suite starts some 300 of those. So nothing here imports it at module level; code that calls the
API asks for it, and code that only has to recognise its errors asks whether it was ever imported.
"""

from __future__ import annotations

import functools
import importlib
import sys
from types import ModuleType


@functools.cache
def kubernetes() -> ModuleType:
    """The ``kubernetes`` package, with its ``client`` and ``config`` (imported now, once)."""
    return importlib.import_module("kubernetes")


def api_exception() -> type[Exception]:
    """The client's ApiException, for an ``except`` clause around a call that used the client."""
    exception: type[Exception] = kubernetes().client.exceptions.ApiException
    return exception


def is_api_exception(error: BaseException) -> bool:
    """Whether ``error`` is the client's ApiException; never imports the library (no import, no such error)."""
    return "kubernetes" in sys.modules and isinstance(error, api_exception())
