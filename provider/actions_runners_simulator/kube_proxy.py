"""A thin HTTPS proxy in front of the real API server: it records every request and injects chosen faults.

The API server itself never fails on demand; a cluster's load balancer, admission webhooks and overloaded
control planes do. This stages those moments without a second implementation of Kubernetes: an answer replaced
by an error status (with the API server's own Status body), a lost answer (the request reaches the API server
and takes effect, and the connection closes before the answer arrives, as when a load balancer drops it), or a
request held long enough for the client's timeout to fire (it still reaches the API server, late).
It presents the API server's own certificate, so a kubeconfig for it differs only in its address. Responses are
streamed, so watches (pulumi-kubernetes waits on them) pass through.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

LOST_ANSWER = 0  # a fault "status": the request reaches the API server, which acts on it; no answer comes back
DELAYED = -1  # a fault "status": the request is held for the fault's seconds, then served
_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError", 502: "BadGateway", 503: "ServiceUnavailable", 504: "Timeout",
}  # fmt: skip
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "proxy-connection", "te"}
UPSTREAM_TIMEOUT = (5, 120)


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    status: int
    remaining: int
    seconds: float = 0.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, proxy: FaultProxy, tls: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.proxy = proxy
        self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a provider process killed mid-request) is no proxy error worth a traceback."""
        if not isinstance(sys.exc_info()[1], OSError):  # reset, broken pipe, TLS cut short
            super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        """Every open connection cut, keep-alive ones included: a handler waiting on its client ends at once."""
        with self._connections_lock:
            for connection in list(self._connections):
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self.server.proxy._handle(self)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


class FaultProxy:
    """``FaultProxy(upstream, ca_file, tls_files).start()``; ``url`` is what a kubeconfig points at."""

    def __init__(self, upstream: str, ca_file: Path, tls_files: tuple[Path, Path]) -> None:
        self._upstream = upstream.rstrip("/")
        self._session = requests.Session()
        self._session.verify = str(ca_file)
        self._session.trust_env = False  # REQUESTS_CA_BUNDLE or HTTPS_PROXY must not redirect loopback traffic
        self._session.mount("https://", HTTPAdapter(pool_connections=4, pool_maxsize=128))
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._tls.load_cert_chain(*map(str, tls_files))
        self._lock = threading.Lock()
        self._open: set[requests.Response] = set()  # streaming answers (watches): closed by stop()
        self._faults: list[_Fault] = []
        self._served: list[tuple[str, str, int, float]] = []
        self._server: _Server | None = None

    def start(self) -> FaultProxy:
        self._server = _Server(self, self._tls)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name="kube-fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        """No new connection; then every handler is ended before it is waited for (server_close joins them): a
        watch streamed from the API server (pulumi-kubernetes waits on some) would otherwise hold it up to its
        own end, about a minute."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
        with self._lock:
            streams = list(self._open)
        for stream in streams:
            # Its socket shut first (urllib3's HTTPResponse.shutdown): close() alone waits for the read under way.
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                stream.raw.shutdown()
            stream.close()
        if server is not None:
            server.cut_connections()
            server.server_close()
        self._session.close()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the fault proxy is not running")
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def fail_next(self, method: str, path_regex: str, status: int, *, count: int = 1) -> None:
        """The next ``count`` requests of ``method`` whose path matches get ``status`` instead of their answer
        (they never reach the API server)."""
        with self._lock:
            self._faults.append(_Fault(method, re.compile(path_regex), status, count))

    def lose_next_answer(self, method: str, path_regex: str, *, count: int = 1) -> None:
        """The next ``count`` matching requests take effect, and their connection closes before any answer."""
        self.fail_next(method, path_regex, LOST_ANSWER, count=count)

    def delay_next(self, method: str, path_regex: str, seconds: float, *, count: int = 1) -> None:
        """The next ``count`` matching requests are held for ``seconds`` before they go on to the API server."""
        with self._lock:
            self._faults.append(_Fault(method, re.compile(path_regex), DELAYED, count, seconds))

    def clear_faults(self) -> int:
        """Forget every fault staged and not used yet; how many requests they were for."""
        with self._lock:
            unused = sum(fault.remaining for fault in self._faults)
            self._faults.clear()
        return unused

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request served, in order; 0 for an answer lost on purpose."""
        with self._lock:
            return [(method, path, status) for method, path, status, _ in self._served]

    def timeline(self) -> list[dict[str, Any]]:
        """Every request served, with its monotonic time: for a soak's account of what happened."""
        with self._lock:
            return [{"method": m, "path": p, "status": s, "at": at} for m, p, s, at in self._served]

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.method == method and fault.path.search(path):
                    fault.remaining -= 1
                    return fault
        return None

    def _handle(self, handler: _Handler) -> None:
        method, target = handler.command, handler.path
        url = urlsplit(target)
        # A dry run is told apart (it changes nothing): "/pods$" matches creations only, "dryRun" dry runs only.
        path = url.path + ("?dryRun=All" if "dryRun=All" in url.query else "")
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        taken = self._take_fault(method, path)
        fault = taken.status if taken else None
        if fault == DELAYED:
            time.sleep(taken.seconds)  # type: ignore[union-attr]
        elif fault not in (None, LOST_ANSWER):
            self._served_as(method, path, fault)
            self._answer_status(handler, fault)
            return
        named_in_connection = {h.strip().lower() for h in handler.headers.get("Connection", "").split(",")}
        headers: dict[str, str] = {}
        for key, value in handler.headers.items():
            if key.lower() not in _HOP_BY_HOP | named_in_connection | {"host"}:
                headers[key] = f"{headers[key]}, {value}" if key in headers else value  # repeated: one list
        try:
            upstream = self._session.request(
                method, self._upstream + target, headers=headers, data=body, stream=True, timeout=UPSTREAM_TIMEOUT
            )
        except requests.RequestException as error:
            self._served_as(method, path, 502)
            self._answer_status(handler, 502, f"the API server could not be reached: {error}")
            return
        with self._lock:
            self._open.add(upstream)
        try:
            if fault == LOST_ANSWER:
                self._served_as(method, path, LOST_ANSWER)
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            self._served_as(method, path, upstream.status_code)
            self._relay(handler, upstream, method)
        finally:
            with self._lock:
                self._open.discard(upstream)
            upstream.close()

    def _served_as(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self._served.append((method, path, status, time.monotonic()))

    @staticmethod
    def _answer_status(handler: _Handler, status: int, message: str | None = None) -> None:
        reason = _REASONS.get(status, "InternalError")
        status_body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
        status_body |= {"message": message or f"injected by the simulator: {reason}", "reason": reason, "code": status}
        body = json.dumps(status_body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    @staticmethod
    def _relay(handler: _Handler, upstream: requests.Response, method: str) -> None:
        """Status and headers as they came, the body decoded (a watch's as it arrives)."""
        handler.send_response_only(upstream.status_code)
        for key, value in upstream.headers.items():
            if key.lower() not in _HOP_BY_HOP and key.lower() != "content-encoding":
                handler.send_header(key, value)
        bodiless = method == "HEAD" or upstream.status_code in (204, 304) or upstream.status_code < 200
        if bodiless:
            if method == "HEAD" and "Content-Length" in upstream.headers:
                handler.send_header("Content-Length", upstream.headers["Content-Length"])
            handler.end_headers()
            return
        if upstream.headers.get("Content-Length") is not None:
            data = upstream.raw.read(decode_content=True)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            for chunk in upstream.iter_content(chunk_size=None):
                if chunk:
                    handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            handler.close_connection = True  # the client went away mid-stream (a watch it stopped)
