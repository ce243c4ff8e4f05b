"""The listener's HTTP endpoint, on one port (``:8080`` by default, as ARC's listener serves its metrics):

- ``/metrics``: the listener's registry, in Prometheus' text format (prometheus_client's own WSGI app);
- ``/healthz``, the liveness probe: 200 while the runners' loop makes progress, 503 once it has made no step for
  loop.STALLED_SECONDS (each step is one bounded call chain). Waiting for GitHub is not ill health: the message
  loop's back-off and its FAILING_SECONDS exit handle an outage, the pod's restarts showing it;
- ``/readyz``, the readiness probe: 200 once the session is open and the runners' loop has had its first turn
  (the set is served), 503 before and after (a lost session, a stop).

Each answer's body says why, in one line.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = ":8080"

Health = Callable[[], tuple[bool, str]]  # ok, and why, in one line


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    timeout = 30  # an idle connection's thread ends (a probe's connection is one request)


class _DualStackServer(_Server):
    """``:PORT`` on IPv6 and IPv4 both (IPV6_V6ONLY off): a pod of an IPv6-only or dual-stack cluster is probed
    at its IPv6 address."""

    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds would fill the log: not written."""


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (host "": every interface; port 0: any free one); raises
    ValueError saying which."""
    host, separator, port = address.rpartition(":")
    if not separator or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{address!r} is not HOST:PORT or :PORT")
    return host.strip("[]"), int(port)


def _bind(host: str, port: int, app: Callable[..., Any]) -> WSGIServer:
    """Every interface of both families for no host (IPv4 alone where this machine has no IPv6)."""
    if not host:
        if socket.has_ipv6:
            try:
                return make_server("::", port, app, server_class=_DualStackServer, handler_class=_QuietHandler)
            except OSError:
                pass  # IPv6 disabled in the kernel
        host = "0.0.0.0"
    server_class = _IPv6Server if ":" in host else _Server
    return make_server(host, port, app, server_class=server_class, handler_class=_QuietHandler)


class ListenerServer:
    """Serves until `close`; started in a thread of its own."""

    def __init__(self, address: str, registry: CollectorRegistry, live: Health, ready: Health) -> None:
        metrics = make_wsgi_app(registry)
        answers: dict[str, Health] = {"/healthz": live, "/readyz": ready}

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path == "/metrics":
                return metrics(environ, start_response)
            if path not in answers:
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"/metrics, /healthz or /readyz\n"]
            ok, why = answers[path]()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [f"{why}\n".encode()]

        self._server = _bind(*parse_address(address), app)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    def start(self) -> ListenerServer:
        self._thread.start()
        log.info("metrics on :%d/metrics, probes on /healthz and /readyz", self.port)
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
