"""The kubelet stand-in's container probes (kubelet.py runs them): what one probe does, and the rules its worker
follows, as k8s.io/kubernetes runs them (the default worker, not the one of the MutableContainerProbes feature
gate). Each rule with its source, under pkg/kubelet/prober/ unless said otherwise:

- Workers are made when the node takes the pod (prober_manager.go AddPod), one per probe of each container and
  native sidecar. Each ticks every ``periodSeconds`` from then on (a Go ticker: a tick that comes while a probe
  runs waits for it, and others are dropped); a kubelet that started less than a period ago first waits a random
  part of a period (worker.go run). A container instance a worker meets for the first time gets the worker's
  initial result: not ready, alive, startup unknown (newWorker).
- A probe runs only if its container runs, ``initialDelaySeconds`` have passed since it started (whole seconds, as
  ``int32(time.Since(startedAt).Seconds())``), and, while the container has a ``startupProbe`` that has not
  succeeded, only that probe runs; once it has, it stops and the others begin (doProbe). A container not running
  has failed every probe; its workers end if it will not restart (``restartPolicy: Never``), as they do when the
  pod's phase is terminal or it is removed (RemovePod). Graceful deletion stops the liveness and startup probes
  (StopLivenessAndStartup; doProbe on a deletionTimestamp); readiness goes on meanwhile.
- A result counts once it comes ``successThreshold`` (default 1) or ``failureThreshold`` (default 3) times in a
  row (doProbe; defaults as the API server sets them, SetDefaults_Probe). A failing liveness probe, or a startup
  probe either way, then holds its worker until the container's next instance. A probe that errors is tried 3
  times (prober.go runProbeWithRetries), then its result is thrown away (worker.go: "Prober error, throw away the
  result").
- Readiness: a container is ready when running, started, and its readiness probe (if it has one) has succeeded
  (UpdatePodStatus); ContainersReady and Ready follow (kubelet.py, ``Kubelet._write_status``). Whenever the status
  is made while a started container's readiness is not a success, its readiness probe runs at once and its ticker
  starts over (UpdatePodStatus's manual trigger; worker.go resets the ticker).
- Liveness or startup failure: the kubelet kills the container as computePodActions and killContainer do: event
  Killing, "Container <name> failed liveness probe, will be restarted" (``restartPolicy`` other than Never; a
  native sidecar always restarts), SIGTERM through the runtime, SIGKILL after the probe's
  ``terminationGracePeriodSeconds``, else the pod's, at least 2 s (setTerminationGracePeriod,
  minimumGracePeriodInSeconds); then it restarts with the crash loop's back-off and restart count, whatever its
  exit code (``restart := shouldRestartOnFailure(pod)``).
- Handlers (prober.go runProbe): ``httpGet`` to ``host`` (default the pod IP), ``port`` a number or the name of
  one of the container's ``ports`` (findPortByName, then strconv.Atoi), ``path``, ``scheme`` (HTTPS without
  verifying the certificate), ``httpHeaders``, a "kube-probe/<minor>" User-Agent and ``Accept: */*`` unless given
  (pkg/probe/http/request.go), ``Connection: close``, within ``timeoutSeconds`` (default 1); 200-399 succeeds, a
  redirect to the same host is followed (10 at most) and one to another is a success with a ProbeWarning event,
  any other status or no answer fails, and at most 10 KB of the body is read (pkg/probe/http/http.go).
  ``tcpSocket``: a connection to ``host`` (default the pod IP) and port within the timeout succeeds
  (pkg/probe/tcp/tcp.go). A failed probe records an Unhealthy event, "<Kind> probe failed: <output>" (prober.go
  probe).
- ``exec`` and ``grpc`` probes are not supported: this node has no container to run a command in, and no gRPC
  client. Such a probe *errors* each period, as a kubelet's does when it cannot run one: an Unhealthy event
  "... probe errored ...: not supported", its result thrown away. So a container with such a readiness probe is
  never ready and one with such a startup probe never starts (loud, and harsher than a node that could run it),
  while such a liveness probe never kills (kinder: the events are the only sign).

The HTTP client is the standard library's (http.client), which differs from the kubelet's (Go's net/http) in three ways:

- ``timeoutSeconds`` bounds the whole exchange in Go (http.Client.Timeout). Here it bounds every wait (the
  connection's timeout, set to the time left before each step: connecting, sending, reading the head, each read
  of the body), and the time left is checked between steps; a server that dribbles its answer's head, or its TLS
  handshake, a few bytes at a time can hold a probe past its timeout (it fails as timed out all the same).
- An interim 1xx answer other than 100 Continue (102 Processing, 103 Early Hints) is taken for the answer, and
  fails the probe, where Go skips it and waits for the final one.
- An answer's head may hold 100 fields of 64 KiB at most (Go: 1 MiB in all); a larger one fails the probe.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin, urlsplit

if TYPE_CHECKING:
    from .kubelet import _Container, _PodRun, _Process

STARTUP, READINESS, LIVENESS = "Startup", "Readiness", "Liveness"  # the prober's names (prober_manager.go)
SUCCESS, FAILURE, WARNING = "Success", "Failure", "Warning"
# A worker's result for a container instance it has just met (worker.go, newWorker's initialValue): not ready,
# alive, and not known to have started.
INITIAL_RESULTS: dict[str, str | None] = {READINESS: FAILURE, LIVENESS: SUCCESS, STARTUP: None}
# What the kubelet's prober sends as its User-Agent, "kube-probe/<major>.<minor>" (k8s.io/kubernetes
# pkg/probe/http/request.go, userAgent): the minor of the kube-apiserver the test bed runs (tools/kube/build.sh).
PROBE_USER_AGENT = "kube-probe/1.37"
MAX_PROBE_BODY = 10 * 1024  # pkg/probe/http/http.go: maxRespBodyLength
MAX_REDIRECTS = 10  # pkg/probe/http/http.go: RedirectChecker, "stop after 10 redirects"
_REDIRECT_CODES = (301, 302, 303, 307, 308)  # the ones Go's http.Client follows
_PROBE_TRIES = 3  # pkg/kubelet/prober/prober.go: maxProbeRetries, tries while the probe errors
_DEADLINE = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"  # Go's words


@dataclass(frozen=True)
class ProbeTimings:
    """How fast the prober's clock runs. By default as a kubelet's: a probe's ``periodSeconds`` and
    ``initialDelaySeconds`` are seconds, as the pod spec gives them. ``faster`` divides them (and the start-up
    jitter, which is one period at most) for a test bed, as `CrashLoopBackOff.faster` does the restart delays.
    ``timeoutSeconds`` and the grace period of a container killed on a probe's failure stay real seconds: they
    are what a process is given to answer, or to stop, and a test bed's processes take real time for both."""

    speedup: float = 1.0

    def faster(self, speedup: float) -> ProbeTimings:
        return ProbeTimings(self.speedup * speedup)

    def real(self, probe_seconds: float) -> float:
        """The seconds of this machine's clock that ``probe_seconds`` of a probe's spec take."""
        return probe_seconds / self.speedup


@dataclass(eq=False)
class ProbeWorker:
    """One probe of one container, as pkg/kubelet/prober/worker.go runs it (the module's docstring has the rules):
    its state between ticks. The kubelet schedules its ticks on its timers and runs its probes on its probe pool,
    never a thread of its own."""

    run: _PodRun
    container: _Container
    kind: str
    spec: dict[str, Any]
    token: int = 0  # the scheduled ticks that carry another token are void: the ticker was reset
    stopped: bool = False
    busy: bool = False  # a probe of this worker is running (one at a time, as in the worker's goroutine)
    pending: bool = False  # a tick or trigger came meanwhile: one more probe right after
    instance: _Process | None = None  # the container instance last met (worker.go's containerID)
    last_result: str = SUCCESS  # Go's zero value of results.Result
    result_run: int = 0
    on_hold: bool = False

    def _field(self, name: str, default: int) -> int:
        return int(self.spec.get(name) or default)  # the API server defaults a 0 to the default too

    @property
    def period(self) -> int:
        return self._field("periodSeconds", 10)

    @property
    def initial_delay(self) -> int:
        return int(self.spec.get("initialDelaySeconds") or 0)

    @property
    def success_threshold(self) -> int:
        return self._field("successThreshold", 1)

    @property
    def failure_threshold(self) -> int:
        return self._field("failureThreshold", 3)


class _ProbeError(Exception):
    """The probe could not be run (the prober's "errored": a port name the container lacks, a handler this node
    has not): an Unhealthy event, and its worker throws the result away, so the container's state does not
    change."""


class _HTTPFailure(Exception):
    """The request got no answer (refused, timed out, cut short): a failed probe, with Go's error text."""


def probe(spec: dict[str, Any], container: dict[str, Any], pod_ip: str) -> tuple[str, str, str | None]:
    """runProbeWithRetries: (result, output, None), or the error of the last of 3 tries that all errored."""
    error = ""
    for _ in range(_PROBE_TRIES):
        try:
            return (*_run_probe(spec, container, pod_ip), None)
        except _ProbeError as failed:
            error = str(failed)
    return FAILURE, "", error


def _run_probe(spec: dict[str, Any], container: dict[str, Any], pod_ip: str) -> tuple[str, str]:
    timeout = float(spec.get("timeoutSeconds") or 1)
    if (action := spec.get("httpGet")) is not None:
        return http_probe(action, container, pod_ip, timeout)
    if (action := spec.get("tcpSocket")) is not None:
        port = _container_port(action.get("port"), container)
        address = _host_port(action.get("host") or pod_ip, port)
        try:
            socket.create_connection((action.get("host") or pod_ip, port), timeout=timeout).close()
        except OSError as error:
            return FAILURE, f"dial tcp {address}: {_dial_error(error)}"
        return SUCCESS, ""
    for handler in ("exec", "grpc"):
        if spec.get(handler) is not None:
            raise _ProbeError(f"{handler} probes are not supported by the test bed's kubelet stand-in")
    raise _ProbeError("missing probe handler")


def _container_port(port: Any, container: dict[str, Any]) -> int:
    """probe.ResolveContainerPort: a number, or the name of one of the container's ports, or a number as text."""
    if isinstance(port, bool) or not isinstance(port, int | str):
        raise _ProbeError(f"intOrString had no kind: {port!r}")
    number = port
    if isinstance(port, str):
        named = [p.get("containerPort") for p in container.get("ports") or [] if p.get("name") == port]
        if named:
            number = int(named[0])
        elif re.fullmatch(r"[+-]?[0-9]+", port):
            number = int(port)
        else:
            raise _ProbeError(f'strconv.Atoi: parsing "{port}": invalid syntax')
    assert isinstance(number, int)
    if 0 < number < 65536:
        return number
    raise _ProbeError(f"invalid port number: {number}")


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _dial_error(error: OSError) -> str:
    """Go's text for a failed dial: "connect: connection refused", "i/o timeout"."""
    if isinstance(error, TimeoutError):
        return "i/o timeout"
    if isinstance(error, socket.gaierror):
        return "no such host"
    text = error.strerror or str(error)
    return f"connect: {text[:1].lower()}{text[1:]}"


def _insecure_tls() -> ssl.SSLContext:
    """HTTPS probes do not verify the server's certificate (pkg/probe/http/http.go: InsecureSkipVerify)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


_INSECURE_TLS = _insecure_tls()


def http_probe(action: dict[str, Any], container: dict[str, Any], pod_ip: str, timeout: float) -> tuple[str, str]:
    """DoHTTPProbe through NewRequestForHTTPGetAction (pkg/probe/http): redirects included, within ``timeout``
    (the module's docstring says how closely)."""
    deadline = time.monotonic() + timeout
    scheme = str(action.get("scheme") or "HTTP").lower()
    host = str(action.get("host") or pod_ip)
    port = _container_port(action.get("port"), container)
    path = urlsplit(str(action.get("path") or ""))
    target = quote(path.path, safe="/%:@!$&'()*+,;=-._~") or "/"
    query = quote(path.query, safe="/?%:@!$&'()*+,;=-._~")  # as given, but what http.client refuses to send
    target = (target if target.startswith("/") else "/" + target) + (f"?{query}" if query else "")
    headers = [(_canonical(h["name"]), str(h.get("value", ""))) for h in action.get("httpHeaders") or []]
    names = [name for name, _ in headers]
    if "User-Agent" not in names:
        headers.append(("User-Agent", PROBE_USER_AGENT))
    if "Accept" not in names:
        headers.append(("Accept", "*/*"))
    elif next(v for n, v in headers if n == "Accept") == "":  # Go's Header.Get: the first value
        headers = [(n, v) for n, v in headers if n != "Accept"]  # given empty: no Accept at all
    first_host, requests = host, 0
    while True:
        url = f"{scheme}://{_host_port(host, port)}{target}"
        requests += 1
        try:
            status, location, body = _get(scheme, host, port, target, headers, deadline)
        except _HTTPFailure as error:
            return FAILURE, f'Get "{url}": {error}'
        if status not in _REDIRECT_CODES or not location:
            break
        following = urlsplit(urljoin(url, location))
        if (following.hostname or "").lower() != first_host.lower():
            break  # another host's redirect is not followed: the 3xx answers (RedirectChecker)
        if requests >= MAX_REDIRECTS:
            return FAILURE, f'Get "{following.geturl()}": stopped after {MAX_REDIRECTS} redirects'
        scheme = following.scheme or scheme
        host = following.hostname or host
        port = following.port or (443 if scheme == "https" else 80)
        target = (following.path or "/") + (f"?{following.query}" if following.query else "")
    if 200 <= status < 300:
        return SUCCESS, body
    if 300 <= status < 400:
        return WARNING, f"Probe terminated redirects, Response body: {body}"
    return FAILURE, f"HTTP probe failed with statuscode: {status}"  # never the body (issue 99425)


def _canonical(name: str) -> str:
    """Go's http.CanonicalHeaderKey: "x-forwarded-for" is sent as "X-Forwarded-For"."""
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def _time_left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _get(
    scheme: str, host: str, port: int, target: str, headers: list[tuple[str, str]], deadline: float
) -> tuple[int, str | None, str]:
    """One GET on a connection of its own (DisableKeepAlives): the status, the Location, the body's first 10 KB."""
    try:
        if scheme == "https":
            connection = http.client.HTTPSConnection(host, port, timeout=_time_left(deadline), context=_INSECURE_TLS)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=_time_left(deadline))
    except TimeoutError:
        raise _HTTPFailure(_DEADLINE) from None
    except http.client.InvalidURL as error:
        raise _HTTPFailure(str(error)) from None
    with contextlib.closing(connection):
        try:
            connection.connect()
        except TimeoutError:
            raise _HTTPFailure(_DEADLINE) from None
        except OSError as error:
            if connection.sock is None:  # no TCP connection; else the TLS handshake failed
                raise _HTTPFailure(f"dial tcp {_host_port(host, port)}: {_dial_error(error)}") from None
            raise _HTTPFailure(_read_error(error)) from None
        sock = connection.sock  # the response may take the connection's over, and keep it open while read
        try:
            _send(connection, sock, target, headers, _host_port(host, port), deadline)
            sock.settimeout(_time_left(deadline))
            response = connection.getresponse()
            _time_left(deadline)  # a head that came too slowly, a few bytes at a time
        except TimeoutError:
            raise _HTTPFailure(_DEADLINE) from None
        except http.client.RemoteDisconnected:  # before OSError: it is a ConnectionResetError too
            raise _HTTPFailure("EOF") from None
        except http.client.BadStatusLine as error:
            raise _HTTPFailure(f'malformed HTTP response "{error.line.strip()}"') from None
        except http.client.HTTPException as error:
            raise _HTTPFailure(str(error)) from None
        except OSError as error:
            raise _HTTPFailure(_read_error(error)) from None
        with contextlib.closing(response):
            try:
                body = _read_body(response, sock, deadline)
            except (OSError, ValueError, http.client.HTTPException) as error:  # ReadAtMost's error: it errors
                raise _ProbeError(f"reading the response body: {str(error) or 'timeout'}") from None
    return response.status, response.headers.get("Location"), body.decode(errors="replace")


def _send(
    connection: http.client.HTTPConnection,
    sock: socket.socket,
    target: str,
    headers: list[tuple[str, str]],
    host_port: str,
    deadline: float,
) -> None:
    """The request's head as the kubelet's sends it: Host first (a given one sets it), then the headers in their
    order (an empty User-Agent is none), no Accept-Encoding (the prober's transport disables compression)."""
    connection.putrequest("GET", target, skip_host=True, skip_accept_encoding=True)
    given_host = next((v for n, v in headers if n == "Host"), "")
    fields = [("Host", given_host or host_port)]
    fields += [(n, v) for n, v in headers if n != "Host" and not (n == "User-Agent" and v == "")]
    for name, value in [*fields, ("Connection", "close")]:
        try:
            connection.putheader(name, value.encode("latin-1", errors="replace"))
        except ValueError:
            raise _HTTPFailure(f'net/http: invalid header field value for "{name}"') from None
    sock.settimeout(_time_left(deadline))
    connection.endheaders()


def _read_error(error: OSError) -> str:
    return f"read: {_dial_error(error).removeprefix('connect: ')}"


def _read_body(response: http.client.HTTPResponse, sock: socket.socket, deadline: float) -> bytes:
    """At most MAX_PROBE_BODY bytes (ReadAtMost: a longer body is cut, not an error), each read within the time
    left."""
    body = b""
    while len(body) < MAX_PROBE_BODY:
        sock.settimeout(_time_left(deadline))
        chunk = response.read1(MAX_PROBE_BODY - len(body))
        if not chunk:
            break
        body += chunk
    return body
