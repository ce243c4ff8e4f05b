"""A GitHub credential is trimmed and checked before it is used, and no credential (the GitHub credential, a
registration token, a just-in-time config) reaches the state, the CLI's output, the provider's stderr or an error,
whatever fails: GitHub's and Kubernetes' errors, timeouts, an invalid credential, or a proxy or admission webhook
that quotes the request it refuses."""

from __future__ import annotations

import base64
import http.client
import io
import json
import logging
import os
import re
import ssl
import threading
import traceback
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pulumi.runtime
import pytest
import yaml

from actions_runners_simulator.engine import CheckFailed, DeploymentFailed, MiniEngine, ProviderError
from actions_runners_simulator.simulator import Simulator
from actions_runners_simulator.workspace import PulumiWorkspace
from pulumi_actions_runners import RegistrationToken, Runner, RunnerPool, RunnerPoolNotConverged, resources
from pulumi_actions_runners.redaction import (
    REDACTED,
    ProviderCallFailed,
    ScrubFilter,
    remember,
    scrub,
    scrubbed_provider,
)
from tests.conftest import ROOT
from tests.helpers import NAMESPACE, new_token, outputs

PROVIDER_METHODS = ("check", "diff", "create", "read", "update", "delete")


# --- doubles of a proxy and an admission webhook that quote what they refuse ---------------------------------


class EchoingProxy:
    """Forwards HTTP to a double, except the requests ``refuse(method, path)`` picks: those are answered 400 with
    an error quoting the request's headers and body (a Kubernetes Status from an admission webhook, or GitHub's
    error shape), as some proxies and webhooks do. ``refused`` records them, so a test knows what was quoted."""

    def __init__(
        self,
        upstream: str,
        refuse: Callable[[str, str], bool],
        *,
        kubernetes: bool = False,
        ca_file: Path | None = None,
    ) -> None:
        self.upstream = urlsplit(upstream)
        self.tls = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
        self.refuse = refuse
        self.kubernetes = kubernetes
        self.refused: list[dict[str, Any]] = []
        self._server = _QuietServer(("127.0.0.1", 0), _proxy_handler(self))
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict, bytes]:
        if self.refuse(method, path):
            self.refused.append({"method": method, "path": path, "headers": headers, "body": body.decode()})
            quoted = f"{method} {path} with headers {json.dumps(headers)} and body {body.decode()}"
            if self.kubernetes:
                reply = {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": f'admission webhook "deny.example.com" denied the request: {quoted}',
                    "reason": "BadRequest",
                    "code": 400,
                }
            else:
                reply = {"message": f"request refused by the proxy: {quoted}"}
            return 400, {"Content-Type": "application/json"}, json.dumps(reply).encode()
        connection = (
            http.client.HTTPSConnection(self.upstream.hostname, self.upstream.port, timeout=30, context=self.tls)
            if self.tls
            else http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        )
        try:
            connection.request(method, path, body=body or None, headers=headers)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def secrets_quoted(self, key: str) -> list[str]:
        """The values of ``stringData[key]`` in the Secrets it refused."""
        bodies = [json.loads(r["body"]) for r in self.refused if r["body"]]
        return [b["stringData"][key] for b in bodies if key in (b.get("stringData") or {})]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up on a kept-alive connection is no news."""


def _proxy_handler(proxy: EchoingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            status, reply_headers, payload = proxy.answer(self.command, self.path, headers, body)
            self.send_response(status)
            for name, value in reply_headers.items():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            """Silent."""

    return Handler


@pytest.fixture
def github_proxy(sim: Simulator) -> Iterator[EchoingProxy]:
    """GitHub behind a proxy that refuses every API request, quoting its Authorization header."""
    proxy = EchoingProxy(sim.github.url, lambda _method, path: path.startswith("/api/v3/"))
    yield proxy
    proxy.close()


@pytest.fixture
def webhook(sim: Simulator) -> Iterator[EchoingProxy]:
    """The Kubernetes API with an admission webhook that refuses every new Secret, quoting it."""
    proxy = EchoingProxy(
        sim.kube.url,
        lambda method, path: method == "POST" and path.split("?")[0].endswith("/secrets"),
        kubernetes=True,
        ca_file=sim.kube.api_server.ca_file,
    )
    yield proxy
    proxy.close()


def kubeconfig_through(sim: Simulator, proxy: EchoingProxy) -> Path:
    """The simulator's kubeconfig with the (plain HTTP) proxy as its server. Its CA stays (the client reads none
    for HTTP): the provider knows a cluster by its address or its CA, and this is the same cluster."""
    config = yaml.safe_load(Path(sim.kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = proxy.url
    path = sim.workdir / "kubeconfig-through-webhook"
    path.write_text(yaml.safe_dump(config))
    return path


# --- programs and what the tests read ----------------------------------------------------------------------


def fleet(
    sim: Simulator,
    *,
    github_token: str | None = None,
    token: str | None = None,
    github_url: str | None = None,
    kubeconfig: str | Path | None = None,
    unregister_timeout_seconds: float = 30,
    kinds: tuple[str, ...] = ("runner", "jit-runner", "pool"),
) -> Callable[[], None]:
    """A RegistrationToken (unless ``token`` is given), a Runner with the token, a just-in-time Runner and a
    RunnerPool of 2 (or the ``kinds`` of them asked for): every kind of credential and every provider.
    ``github_token`` None means GITHUB_TOKEN."""

    def program() -> None:
        settings: dict[str, Any] = {
            "github_url": github_url or sim.repo_url,
            "namespace": NAMESPACE,
            "github_token": github_token,
            "kubeconfig": str(kubeconfig or sim.kubeconfig),
            "grace_period_seconds": 0.2,
            "unregister_timeout_seconds": unregister_timeout_seconds,
        }
        registration_token: Any = token  # a plain token, whose expiry the provider does not know
        if registration_token is None:
            registration = RegistrationToken(
                "registration", github_url=settings["github_url"], github_token=github_token
            )
            registration_token = registration  # with its expiry: the runners start with this very token
        if "runner" in kinds:
            Runner("runner", registration_token=registration_token, **settings)
        if "jit-runner" in kinds:
            Runner("jit-runner", jit_config=True, **settings)
        if "pool" in kinds:
            RunnerPool("pool", registration_token=registration_token, replicas=2, pool_name="pool", **settings)

    return program


def environment(github_token: str | None) -> dict[str, str]:
    """This process's environment for the provider, with GITHUB_TOKEN set to ``github_token`` (or left out)."""
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}
    return env if github_token is None else {**env, "GITHUB_TOKEN": github_token}


def credentials_known(sim: Simulator, engine: MiniEngine, **more: str) -> dict[str, str]:
    """Every credential of the run: the GitHub credential, the registration tokens and just-in-time configs that
    the state or the cluster holds, and ``more``."""
    known = {"GitHub credential": sim.credential}
    for urn, resource in engine.state.items():
        for key in ("token", "registration_token"):
            if isinstance(resource.outputs.get(key), str):
                known[f"{key} of {urn.rsplit('::', 1)[-1]}"] = resource.outputs[key]
    for secret in sim.kube.secrets(NAMESPACE):
        for key, value in (secret.get("data") or {}).items():
            known[f"{key} in Secret {secret['metadata']['name']}"] = base64.b64decode(value).decode()
    return known | more


def everything_written(engine: MiniEngine, error: BaseException | None = None) -> dict[str, str]:
    """What a user or anyone reading the state can see: the state as exported, the provider's stderr, and the
    errors (with the provider's whole report, traceback included)."""
    errors = error.errors if isinstance(error, DeploymentFailed) else [error] if error else []
    return {
        "state": json.dumps(engine.export()),
        "provider stderr": "\n".join(engine.provider.stderr_lines),
        "errors": "\n".join(f"{e}\n{getattr(e, 'details', '')}\n{getattr(e, 'failures', '')}" for e in errors),
    }


def assert_nothing_leaked(written: dict[str, str], credentials: dict[str, str]) -> None:
    for what, credential in credentials.items():
        forms = {credential.strip(), credential.encode("unicode_escape").decode(), *credential.split()}
        forms = {form for form in forms if len(form) >= 5}  # "ghp_simu\nlator_x": "lator_x" is a part to look for
        for where, text in written.items():
            for form in forms:
                assert form not in text, f"{what} in plain text in the {where}:\n{text[-3000:]}"


# --- a credential with a trailing newline works ------------------------------------------------------------


@pytest.mark.parametrize("source", ["input", "environment"])
def test_a_credential_with_a_trailing_newline_works_end_to_end_and_state_keeps_it_trimmed_and_secret(
    sim: Simulator, source: str
) -> None:
    raw = sim.credential + "\r\n"
    program = fleet(sim, github_token=raw if source == "input" else None)
    with MiniEngine(ROOT, env=environment(raw if source == "environment" else None)) as engine:
        engine.up(program)

        online = {r["name"] for r in sim.github.runners() if r["status"] == "online"}
        assert len(online) == 4 and {"pool-0", "pool-1"} <= online, sim.github.runners()
        for resource in engine.state.values():
            expected = sim.credential if source == "input" else None
            assert resource.inputs.get("github_token") == expected, resource.urn
            assert source == "environment" or "github_token" in resource.secret_inputs
        assert {s.op for s in engine.up(program)} == {"same"}, "a trimmed credential is no change"
        engine.refresh()
        assert_nothing_leaked(everything_written(engine), credentials_known(sim, engine))

        engine.destroy()
    assert sim.github.runners() == [] and sim.kube.pods(NAMESPACE) == []


# --- an invalid credential is refused without being quoted ---------------------------------------------------


@pytest.mark.parametrize(
    ("source", "credential", "problem"),
    [
        ("input", "ghp_simu\nlator_x", "has whitespace inside"),
        ("input", "ghp_simu lator_x", "has whitespace inside"),
        ("input", "ghp_simu\x07lator_x", "has a control character"),
        ("input", "ghp_simulatör_x", "has a non-ASCII character"),
        ("input", " \n", "is empty"),
        ("environment", "ghp_simu\nlator_x", "has whitespace inside"),
        ("environment", "ghp_simu\x7flator_x", "has a control character"),
    ],
)
def test_an_invalid_credential_fails_check_naming_its_source_and_what_is_allowed_without_quoting_it(
    sim: Simulator, source: str, credential: str, problem: str
) -> None:
    program = fleet(sim, github_token=credential if source == "input" else None)
    with MiniEngine(ROOT, env=environment(credential if source == "environment" else None)) as engine:
        with pytest.raises(DeploymentFailed) as failed:
            engine.preview(program)

        errors = failed.value.errors
        assert errors and all(isinstance(e, CheckFailed) for e in errors), errors
        for error in errors:
            reason = dict(error.failures)["github_token"]
            assert problem in reason and "printable ASCII letters, digits and punctuation" in reason, reason
            assert ("GITHUB_TOKEN" in reason) == (source == "environment"), reason
        assert sim.github.calls() == []
        assert_nothing_leaked(everything_written(engine, failed.value), {"the credential": credential})


def test_an_invalid_credential_in_the_environment_fails_refresh_and_destroy_naming_it_without_quoting_it(
    sim: Simulator,
) -> None:
    """Refresh and destroy call no Check: the credential is checked again where it is used."""
    bad = "ghp_simu\nlator_x"
    with MiniEngine(ROOT, env=environment(sim.credential)) as engine:
        engine.up(fleet(sim))
        state = engine.state
    with MiniEngine(ROOT, env=environment(bad)) as engine:
        engine.state = state
        for operation in (engine.refresh, engine.destroy):
            with pytest.raises(ProviderError) as failed:
                operation()
            assert "GITHUB_TOKEN in the environment has whitespace inside" in str(failed.value), failed.value
            written = everything_written(engine, failed.value)
            assert_nothing_leaked(written, {"the invalid credential": bad} | credentials_known(sim, engine))
    assert sim.github.runners(), "nothing may be taken down with a credential that was refused"


# --- failures on every path show no credential ---------------------------------------------------------------

FAULTS: dict[str, Callable[[Simulator], object]] = {
    "GitHub 501 for the registration token": lambda sim: sim.github.fail_next(
        501, method="POST", path_regex="registration-token$"
    ),
    "GitHub 404 for the runner listing": lambda sim: sim.github.fail_next(
        404, count=1000, method="GET", path_regex="/actions/runners$"
    ),
    "GitHub 422 for generate-jitconfig": lambda sim: sim.github.fail_next(
        422, count=10, method="POST", path_regex="generate-jitconfig$"
    ),
    "Kubernetes 403 for new Secrets": lambda sim: sim.kube.fail_next("POST", r"/secrets$", 403, count=100),
    "Kubernetes 422 for new pods": lambda sim: sim.kube.fail_next("POST", r"/pods$", 422, count=100),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_failure_on_any_path_shows_no_credential(sim: Simulator, fault: str) -> None:
    """With GITHUB_TOKEN read from a file (a trailing newline), as in a cluster: the run fails for the fault only,
    and neither state, errors nor stderr show a credential."""
    token = None if "registration token" in fault else new_token(sim)
    program = fleet(sim, token=token)
    with MiniEngine(ROOT, env=environment(sim.credential + "\n")) as engine:
        FAULTS[fault](sim)
        with pytest.raises(DeploymentFailed) as failed:
            engine.up(program)

        errors = str(failed.value)
        assert "GITHUB_TOKEN" not in errors and "InvalidHeader" not in errors, errors
        assert re.search(r"\d{3}", fault).group() in errors, errors  # type: ignore[union-attr]
        more = {"registration token": token} if token else {}
        assert_nothing_leaked(everything_written(engine, failed.value), credentials_known(sim, engine, **more))


def test_a_timeout_waiting_for_busy_runners_shows_no_credential(sim: Simulator) -> None:
    """A new token while the runners run jobs, with RemoveRunner slow to answer: the waits time out."""
    first, second = new_token(sim), new_token(sim)
    with MiniEngine(ROOT, env=environment(sim.credential + "\n")) as engine:
        engine.up(fleet(sim, token=first, kinds=("runner", "pool"), unregister_timeout_seconds=1))
        for name in (outputs(engine, "runner")["runner_name"], "pool-0"):
            sim.github.start_job(name, 30.0)
        sim.github.delay_next(0.3, count=100, method="DELETE")
        with pytest.raises(DeploymentFailed) as failed:
            engine.up(fleet(sim, token=second, kinds=("runner", "pool"), unregister_timeout_seconds=1))

        assert "still running a job after 1 s" in str(failed.value), failed.value  # the Runner's
        assert "still running a job after 1 s" in outputs(engine, "pool")["problems"][0]
        more = {"first token": first, "second token": second}
        assert_nothing_leaked(everything_written(engine, failed.value), credentials_known(sim, engine, **more))


# --- what a proxy or an admission webhook quotes is scrubbed --------------------------------------------------


def test_a_proxy_that_quotes_the_authorization_header_it_refuses_leaks_no_credential(
    sim: Simulator, github_proxy: EchoingProxy
) -> None:
    token = new_token(sim)
    proxied = {"github_token": sim.credential, "github_url": f"{github_proxy.url}/octo-org/ci"}
    with MiniEngine(ROOT, env=environment(None)) as engine:
        failures = []
        # Each provider's Create (the RegistrationToken's, a Runner's, a just-in-time Runner's), then a pool
        # alone, so that the program fails with RunnerPoolNotConverged.
        for program in (
            fleet(sim, **proxied, kinds=("jit-runner",)),
            fleet(sim, token=token, **proxied, kinds=("runner",)),
            fleet(sim, token=token, **proxied, kinds=("pool",)),
        ):
            with pytest.raises(DeploymentFailed) as failed:
                engine.up(program)
            failures.append(failed.value)

        assert github_proxy.refused and sim.credential in json.dumps(github_proxy.refused[0]["headers"])
        pool = outputs(engine, "pool")
        assert pool["problems"] and all(REDACTED in p for p in pool["problems"]), pool["problems"]
        errors = "\n".join(str(f) for f in failures)
        assert errors.count("request refused by the proxy") >= 3 and "did not converge" in errors, errors
        assert REDACTED in errors, errors
        written = everything_written(engine)
        written["errors"] = "\n".join(everything_written(engine, f)["errors"] for f in failures)
        assert_nothing_leaked(written, credentials_known(sim, engine, registration_token=token))


def test_a_cleanup_that_fails_is_logged_without_a_credential(sim: Simulator) -> None:
    """A just-in-time runner whose pod is refused is unregistered again; a proxy that refuses that RemoveRunner,
    quoting the request, fails the cleanup, which the provider logs."""
    proxy = EchoingProxy(sim.github.url, lambda method, _path: method == "DELETE")
    try:
        sim.kube.fail_next("POST", r"/pods$", 403)
        with MiniEngine(ROOT, env=environment(sim.credential + "\n")) as engine:
            with pytest.raises(DeploymentFailed) as failed:
                engine.up(fleet(sim, github_url=f"{proxy.url}/octo-org/ci", kinds=("jit-runner",)))

            log = "\n".join(engine.provider.stderr_lines)
            assert "could not clean up" in log and "request refused by the proxy" in log and REDACTED in log, log
            assert sim.credential in json.dumps(proxy.refused[0]["headers"])
            assert_nothing_leaked(everything_written(engine, failed.value), credentials_known(sim, engine))
    finally:
        proxy.close()


def test_an_admission_webhook_that_quotes_the_secret_it_refuses_leaks_no_token_or_jit_config(
    sim: Simulator, webhook: EchoingProxy
) -> None:
    with MiniEngine(ROOT, env=environment(sim.credential)) as earlier:
        earlier.up(fleet(sim, kinds=()))  # the token, made by an earlier `pulumi up` (another provider process)
    with MiniEngine(ROOT, env=environment(sim.credential)) as engine:
        engine.state = earlier.state
        with pytest.raises(DeploymentFailed) as failed:
            engine.up(fleet(sim, kubeconfig=kubeconfig_through(sim, webhook)))

        token = outputs(engine, "registration")["token"]
        jit_configs = webhook.secrets_quoted("jitconfig")
        assert set(webhook.secrets_quoted("token")) == {token} and jit_configs, webhook.refused
        errors = str(failed.value)
        assert "denied the request" in errors and REDACTED in errors, errors
        assert all(REDACTED in problem for problem in outputs(engine, "pool")["problems"])
        quoted = {f"JIT config {index}": config for index, config in enumerate(jit_configs)}
        assert_nothing_leaked(everything_written(engine, failed.value), credentials_known(sim, engine, **quoted))


def test_a_registration_token_the_provider_gets_for_itself_is_never_shown(
    sim: Simulator, webhook: EchoingProxy
) -> None:
    """A token given without its expiry cannot be relied on to outlast a registration: the provider starts the
    runners with a fresh one from GitHub, which the webhook quotes back."""
    given = new_token(sim)
    with MiniEngine(ROOT, env=environment(sim.credential)) as engine:
        with pytest.raises(DeploymentFailed) as failed:
            engine.up(fleet(sim, token=given, kubeconfig=kubeconfig_through(sim, webhook), kinds=("runner", "pool")))

        fresh = set(webhook.secrets_quoted("token")) - {given}
        assert fresh, webhook.refused
        more = {"given token": given} | {f"fresh token {token}": token for token in fresh}
        assert_nothing_leaked(everything_written(engine, failed.value), credentials_known(sim, engine, **more))


# --- the real CLI ------------------------------------------------------------------------------------------


def test_with_the_real_cli_a_token_file_credential_works_and_nothing_is_leaked_by_a_failed_up(
    cli_dir: Path,
    sim: Simulator,
    webhook: EchoingProxy,
) -> None:
    with PulumiWorkspace(ROOT, cli_dir) as stack:
        stack.env["GITHUB_TOKEN"] = sim.credential + "\n"  # as read from a file: no githubToken in the config
        config = sim.stack_config(runners=2, grace_period_seconds=0.2, pool=True) | {"maxUnavailable": "100%"}
        stack.new_stack(config=config, secrets={})
        up = stack.run("up", "--yes")
        assert len([r for r in sim.github.runners() if r["status"] == "online"]) == 2, up.stdout

        # Now as a secret input (an argument keeps the newline; stdin would lose it), and a failing update.
        del stack.env["GITHUB_TOKEN"]
        stack.run("config", "set", "--secret", "githubToken", sim.credential + "\n")
        stack.run("config", "set", "kubeconfig", str(kubeconfig_through(sim, webhook)))
        stack.run("config", "set", "runners", "3")
        failed = stack.run("up", "--yes", check=False)
        exported = stack.run("stack", "export").stdout

        output = failed.stdout + failed.stderr
        assert failed.returncode != 0 and "did not converge" in output and REDACTED in output, output
        tokens = set(webhook.secrets_quoted("token"))
        assert tokens, webhook.refused
        written = {"CLI output": output, "up's output": up.stdout + up.stderr, "stack export": exported}
        assert_nothing_leaked(written, {"GitHub credential": sim.credential} | {f"token {t}": t for t in tokens})
        # Check trimmed the secret input: the state keeps the trimmed credential, still a secret.
        revealed = json.loads(stack.run("stack", "export", "--show-secrets").stdout)["deployment"]["resources"]
        pool_token = next(r for r in revealed if r["type"].endswith(":RunnerPool"))["inputs"]["github_token"]
        assert json.loads(pool_token["plaintext"]) == sim.credential, pool_token


# --- the scrubber itself -----------------------------------------------------------------------------------


def test_scrub_removes_remembered_credentials_in_every_quoted_form_and_anything_like_a_bearer_header() -> None:
    remember("s3cret-registration-TOKEN", "jit\nconfig-value", None, "short")
    encoded = base64.b64encode(b"s3cret-registration-TOKEN").decode()
    text = (
        f"token s3cret-registration-TOKEN, its base64 {encoded}, an escaped 'jit\\nconfig-value', "
        "Authorization: token abcdef123456, 'Authorization': 'Bearer xyz987654', ghp_" + "A" * 36 + ", "
        "InvalidHeader: header value 'Bearer never-remembered-5c9e\\n'"
    )

    scrubbed = scrub(text)

    for secret in ("s3cret-registration-TOKEN", "czNjcmV0", "config-value", "abcdef123456", "xyz987654", "ghp_AAAA"):
        assert secret not in scrubbed, scrubbed
    assert scrubbed.endswith("header value 'Bearer [redacted]'"), scrubbed
    assert scrubbed.startswith("token [redacted], its base64 [redacted]"), scrubbed
    assert scrub("a short token and a registration token") == "a short token and a registration token"


def test_the_log_filter_scrubs_messages_their_arguments_and_exceptions() -> None:
    secret = "log-secret-8f2a9c"
    remember(secret)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ScrubFilter())
    logger = logging.getLogger("tests.test_credentials.scrubbed")
    logger.addHandler(handler)
    try:
        logger.warning("could not clean up: %s", ValueError(f"header {secret!r}"))
        try:
            raise RuntimeError(f"refused {secret}")
        except RuntimeError:
            logger.exception("create failed for %s", secret)
    finally:
        logger.removeHandler(handler)

    logged = stream.getvalue()
    assert secret not in logged and "RuntimeError: refused [redacted]" in logged, logged
    assert "could not clean up: header '[redacted]'" in logged and "create failed for [redacted]" in logged


def test_an_error_leaves_a_provider_method_scrubbed_with_no_original_to_show_in_a_traceback() -> None:
    secret, registration = "method-secret-3e7d1b", "registration-7c1f0e"

    @scrubbed_provider
    class Provider:
        def check(self, _olds: dict, news: dict) -> dict:
            return news

        def create(self, props: dict) -> None:
            try:
                raise OSError(f"cannot send header 'Bearer {props['github_token']}'")
            except OSError as error:
                raise RuntimeError(f"create failed: {error} ({props['registration_token']})") from error

    provider = Provider()
    with pytest.raises(ProviderCallFailed) as raised:
        provider.create({"github_token": secret, "registration_token": registration})

    report = "".join(traceback.format_exception(raised.value))
    assert secret not in report and registration not in report, report
    assert "RuntimeError: create failed: cannot send header 'Bearer [redacted]' ([redacted])" in report, report
    assert raised.value.__cause__ is None and raised.value.__context__ is None
    trimmed = provider.check({}, {"github_token": " token-from-a-file\n", "x": 1})
    assert trimmed == {"github_token": "token-from-a-file", "x": 1}
    assert all(hasattr(getattr(Provider, m, None), "__wrapped__") for m in ("check", "create"))


def test_every_method_of_every_provider_is_scrubbed() -> None:
    from pulumi_actions_runners.providers.registration_token import RegistrationTokenProvider
    from pulumi_actions_runners.providers.runner import RunnerProvider
    from pulumi_actions_runners.providers.runner_pool import RunnerPoolProvider

    for provider in (RegistrationTokenProvider, RunnerProvider, RunnerPoolProvider):
        for method in PROVIDER_METHODS:
            assert hasattr(getattr(provider, method), "__wrapped__"), f"{provider.__name__}.{method} is not scrubbed"


def test_the_program_scrubs_a_pools_problems_before_failing_with_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The program's process knows the environment's GITHUB_TOKEN: problems stored by an older provider version
    (or anything that slipped through) do not show it in the error either."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_program-side-4d2a\n")
    # After an update, whatever this process ran before (a worker's earlier test may have left the SDK previewing).
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    problems = ["pool-0: GitHub refused header 'Authorization: Bearer ghp_program-side-4d2a'", "ghp_program-side-4d2a"]

    with pytest.raises(RunnerPoolNotConverged) as raised:
        resources._fail_on_problems("pool", problems)

    assert "ghp_program-side-4d2a" not in str(raised.value), raised.value
    assert str(raised.value).endswith("pool-0: GitHub refused header 'Authorization: [redacted]'\n[redacted]")
