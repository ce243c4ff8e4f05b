"""A stand-in for the Pulumi engine's deployment loop, over the real provider protocol.

It runs a program under the SDK's mock monitor, and hands each dynamic resource to the SDK's own dynamic-provider
gRPC server (``python -m pulumi.dynamic``, started the way the engine starts it), following the engine's rules:
Check, then Diff, then create / same / update / replace (delete-before-replace when Diff asks), deletes of what
the program dropped, preview with no side effects (Check and Diff only), refresh through Read, destroy in
reverse order, and outputs marked secret where the engine marks them (same-named secret inputs and
``additional_secret_outputs``). Tests and the demo use it; it is not a replacement for ``pulumi``.
"""

from __future__ import annotations

import logging
import runpy
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pulumi
import yaml
from google.protobuf import json_format, struct_pb2
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc, resource_pb2

DYNAMIC_TYPE_PREFIX = "pulumi-python:dynamic"
PROVIDER_KEY = "__provider"
SECRET_MARK = {rpc._special_sig_key: rpc._special_secret_sig, "ciphertext": "[encrypted]"}
START_TIMEOUT_SECONDS = 30
STEPS_END_TIMEOUT_SECONDS = 3600  # the provider's own waits end long before: its timeouts are minutes


class ProviderError(Exception):
    """A provider call failed; ``str()`` is the provider's own message, ``details`` the full traceback."""

    def __init__(self, method: str, urn: str, details: str) -> None:
        lines = [line for line in details.strip().splitlines() if line.strip()]
        super().__init__(f"{method} {urn.split('::')[-1]}: {lines[-1] if lines else details}")
        self.details = details


class CheckFailed(Exception):
    def __init__(self, urn: str, failures: list[tuple[str, str]]) -> None:
        listed = "; ".join(f"{prop}: {reason}" for prop, reason in failures)
        super().__init__(f"{urn.split('::')[-1]} has invalid inputs: {listed}")
        self.failures = failures


class DeploymentFailed(Exception):
    def __init__(self, errors: list[Exception]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


class ProviderProcess:
    """The SDK's dynamic-provider server in its own process, and a gRPC stub speaking to it."""

    def __init__(self, cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-u", "-m", "pulumi.dynamic", "127.0.0.1:0"],
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr_lines: list[str] = []
        self.on_stderr: Callable[[str], None] | None = None
        self._in_flight: Counter[str] = Counter()
        self._in_flight_lock = threading.Lock()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        port = _read_line_within(self._process, START_TIMEOUT_SECONDS)
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self._stub = provider_pb2_grpc.ResourceProviderStub(self._channel)
        self._stub.Configure(provider_pb2.ConfigureRequest(acceptSecrets=True, acceptResources=True))

    def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self.stderr_lines.append(line.rstrip("\n"))
            if self.on_stderr is not None:
                self.on_stderr(line.rstrip("\n"))

    def _call(self, method: str, urn: str, request: Any) -> Any:
        with self._in_flight_lock:
            self._in_flight[method] += 1
        try:
            return getattr(self._stub, method)(request)
        except grpc.RpcError as error:
            raise ProviderError(method, urn, error.details() or str(error)) from None
        finally:
            with self._in_flight_lock:
                self._in_flight[method] -= 1

    def in_flight(self, method: str) -> int:
        """How many calls of ``method`` (Create, Delete, Update, ...) are under way now."""
        with self._in_flight_lock:
            return self._in_flight[method]

    def kill(self) -> None:
        """SIGKILL, as when the CI job running `pulumi up` is cancelled: the calls under way fail."""
        self._process.send_signal(signal.SIGKILL)

    def check(self, urn: str, olds: dict, news: dict) -> tuple[dict, list[tuple[str, str]]]:
        response = self._call("Check", urn, provider_pb2.CheckRequest(urn=urn, olds=_struct(olds), news=_struct(news)))
        return _dict(response.inputs), [(f.property, f.reason) for f in response.failures]

    def diff(self, id_: str, urn: str, olds: dict, news: dict) -> provider_pb2.DiffResponse:
        return self._call(
            "Diff", urn, provider_pb2.DiffRequest(id=id_, urn=urn, olds=_struct(olds), news=_struct(news))
        )

    def create(self, urn: str, properties: dict) -> tuple[str, dict]:
        response = self._call("Create", urn, provider_pb2.CreateRequest(urn=urn, properties=_struct(properties)))
        return response.id, _dict(response.properties)

    def update(self, id_: str, urn: str, olds: dict, news: dict) -> dict:
        request = provider_pb2.UpdateRequest(id=id_, urn=urn, olds=_struct(olds), news=_struct(news))
        return _dict(self._call("Update", urn, request).properties)

    def delete(self, id_: str, urn: str, properties: dict) -> None:
        self._call("Delete", urn, provider_pb2.DeleteRequest(id=id_, urn=urn, properties=_struct(properties)))

    def read(self, id_: str, urn: str, properties: dict) -> tuple[str, dict]:
        response = self._call("Read", urn, provider_pb2.ReadRequest(id=id_, urn=urn, properties=_struct(properties)))
        return response.id, _dict(response.properties)

    def close(self) -> None:
        self._channel.close()
        if self._process.poll() is None:
            self._process.terminate()
        self._process.wait(timeout=10)
        self._stderr_reader.join(10)  # stderr_lines is whole from here on


@dataclass
class ResourceState:
    urn: str
    type: str
    id: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    secret_inputs: frozenset[str]
    secret_outputs: frozenset[str]


@dataclass(frozen=True)
class Step:
    op: str  # create, same, update, replace, delete, refresh, gone
    urn: str
    reasons: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.urn.split("::")[-1]

    @property
    def type(self) -> str:
        return self.urn.split("::")[-2].rsplit("$", 1)[-1]


@dataclass
class _Run:
    preview: bool
    steps: list[Step] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)


Program = Path | Callable[[], object]


class MiniEngine:
    def __init__(
        self,
        program_dir: Path,
        *,
        project: str = "actions-runners",
        stack: str = "dev",
        config: Mapping[str, Any] | None = None,
        secret_config: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.project, self.stack = project, stack
        self.config = dict(config or {})
        self.secret_config = dict(secret_config or {})
        self.state: dict[str, ResourceState] = {}
        self._env = env
        self.provider = ProviderProcess(program_dir, env)
        self._program_dir = program_dir
        self._lock = threading.Lock()
        self._steps_under_way = 0
        self._steps_ended = threading.Condition(self._lock)

    def close(self) -> None:
        self.provider.close()

    def new_provider_process(self) -> ProviderProcess:
        """A provider process of its own for the next operation, as `pulumi up` starts one per run (nothing
        of the last one's memory carries over)."""
        self.provider.close()
        self.provider = ProviderProcess(self._program_dir, self._env)
        return self.provider

    def __enter__(self) -> MiniEngine:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- operations ------------------------------------------------------------------------------------------

    def preview(self, program: Program | None = None) -> list[Step]:
        return self._run(program, preview=True)

    def up(self, program: Program | None = None) -> list[Step]:
        return self._run(program, preview=False)

    def refresh(self) -> list[Step]:
        steps = []
        for urn, resource in list(self.state.items()):
            if not resource.type.startswith(DYNAMIC_TYPE_PREFIX):
                continue
            id_, outputs = self.provider.read(resource.id, urn, resource.outputs)
            if not id_:
                del self.state[urn]
                steps.append(Step("gone", urn))
            else:
                resource.outputs = outputs
                steps.append(Step("refresh", urn))
        return steps

    def destroy(self) -> list[Step]:
        steps = []
        for urn in reversed(list(self.state)):
            resource = self.state[urn]
            if resource.type.startswith(DYNAMIC_TYPE_PREFIX):
                self.provider.delete(resource.id, urn, resource.outputs)
            del self.state[urn]
            steps.append(Step("delete", urn))
        return steps

    def export(self) -> dict[str, Any]:
        """The state as ``pulumi stack export`` shows it: secret values are ciphertext, never plain text."""
        return {
            "resources": [
                {
                    "urn": r.urn,
                    "type": r.type,
                    "id": r.id,
                    "inputs": _masked(r.inputs, r.secret_inputs | {PROVIDER_KEY}),
                    "outputs": _masked(r.outputs, r.secret_outputs | {PROVIDER_KEY}),
                }
                for r in self.state.values()
            ]
        }

    # -- the deployment loop --------------------------------------------------------------------------------

    def _run(self, program: Program | None, *, preview: bool) -> list[Step]:
        # As the SDK's own program runner does: a failed registration leaves futures nobody awaits, by design.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        run = _Run(preview=preview)
        monitor = _EngineMonitor(self, run)
        pulumi.runtime.set_mocks(monitor.mocks, self.project, self.stack, preview=preview, monitor=monitor)
        config = {f"{self.project}:{k}": str(v) for k, v in {**self.config, **self.secret_config}.items()}
        pulumi.runtime.set_all_config(config, [f"{self.project}:{k}" for k in self.secret_config])
        try:
            pulumi.runtime.test(lambda: self._execute(program))()
        except Exception as error:
            if not run.errors:
                run.errors.append(error)
        self._wait_for_steps_under_way()
        if not run.errors and not preview:
            for urn in reversed([u for u in self.state if u not in run.registered]):
                self._delete(urn, run)
        if run.errors:
            raise DeploymentFailed(run.errors)
        return run.steps

    def _wait_for_steps_under_way(self) -> None:
        """As the engine does, a failed run still lets the steps under way end: the program's failure ends its
        wait as soon as one resource fails, while other resources' provider calls may still be running."""
        with self._steps_ended:
            if not self._steps_ended.wait_for(lambda: self._steps_under_way == 0, STEPS_END_TIMEOUT_SECONDS):
                raise RuntimeError(
                    f"{self._steps_under_way} resource steps were still under way after {STEPS_END_TIMEOUT_SECONDS} s"
                )

    def _execute(self, program: Program | None) -> None:
        target = program if program is not None else _main_program(self._program_dir)
        if isinstance(target, Path):
            runpy.run_path(str(target / "__main__.py"), run_name="__main__")
        else:
            target()

    def _delete(self, urn: str, run: _Run) -> None:
        resource = self.state[urn]
        if resource.type.startswith(DYNAMIC_TYPE_PREFIX):
            try:
                self.provider.delete(resource.id, urn, resource.outputs)
            except ProviderError as error:
                run.errors.append(error)
                return
        del self.state[urn]
        run.steps.append(Step("delete", urn))

    def register(
        self, run: _Run, urn: str, type_: str, raw_inputs: struct_pb2.Struct, secret_output_names: list[str]
    ) -> tuple[str, dict[str, Any]]:
        """One resource of the program: returns its id and the outputs the program will see."""
        news, secret_inputs = _plain(raw_inputs)
        secret_outputs = frozenset(secret_inputs | set(secret_output_names))
        with self._lock:
            run.registered.append(urn)
            old = self.state.get(urn)
            self._steps_under_way += 1
        try:
            if not type_.startswith(DYNAMIC_TYPE_PREFIX):
                # A resource of another provider (e.g. pulumi_kubernetes): no plugin here, its inputs stand in.
                self._record(run, Step("same" if old else "create", urn))
                if not run.preview:
                    self.state[urn] = ResourceState(urn, type_, urn, news, news, secret_inputs, secret_outputs)
                return urn, _for_program(news, secret_outputs)
            return self._deploy(run, urn, type_, old, news, secret_inputs, secret_outputs)
        except Exception as error:
            with self._lock:
                run.errors.append(error)
            raise
        finally:
            with self._lock:
                self._steps_under_way -= 1
                self._steps_ended.notify_all()

    def _deploy(
        self,
        run: _Run,
        urn: str,
        type_: str,
        old: ResourceState | None,
        news: dict[str, Any],
        secret_inputs: frozenset[str],
        secret_outputs: frozenset[str],
    ) -> tuple[str, dict[str, Any]]:
        inputs, failures = self.provider.check(urn, old.inputs if old else {}, news)
        if failures:
            raise CheckFailed(urn, failures)

        def save(id_: str, outputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            self.state[urn] = ResourceState(urn, type_, id_, inputs, outputs, secret_inputs, secret_outputs)
            return id_, _for_program(outputs, secret_outputs)

        if old is None:
            self._record(run, Step("create", urn))
            if run.preview:
                return "", _for_program(_known(inputs), secret_outputs)
            return save(*self.provider.create(urn, inputs))
        diff = self.provider.diff(old.id, urn, old.outputs, inputs)
        if diff.changes != provider_pb2.DiffResponse.DIFF_SOME:
            self._record(run, Step("same", urn))
            return old.id, _for_program(old.outputs, old.secret_outputs)
        if diff.replaces:
            # As the engine does (pkg/resource/deploy/step_generator.go): a replacement is a new resource, checked
            # anew without the old inputs.
            inputs, failures = self.provider.check(urn, {}, news)
            if failures:
                raise CheckFailed(urn, failures)
            self._record(run, Step("replace", urn, tuple(diff.replaces)))
            if run.preview:
                return old.id, _for_program(_known(inputs), secret_outputs)
            if diff.deleteBeforeReplace:
                self.provider.delete(old.id, urn, old.outputs)
                del self.state[urn]
                return save(*self.provider.create(urn, inputs))
            replacement = save(*self.provider.create(urn, inputs))
            self.provider.delete(old.id, urn, old.outputs)  # if this fails, the new one is already in state
            return replacement
        self._record(run, Step("update", urn, tuple(k for k in inputs if inputs.get(k) != old.inputs.get(k))))
        if run.preview:
            return old.id, _for_program({**old.outputs, **_known(inputs)}, secret_outputs)
        return save(old.id, self.provider.update(old.id, urn, old.outputs, inputs))

    def _record(self, run: _Run, step: Step) -> None:
        with self._lock:
            run.steps.append(step)


class _NoMocks(Mocks):
    """Registration goes to the engine loop; nothing is left for mocks to answer."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict]:
        raise NotImplementedError("registration is handled by MiniEngine")

    def call(self, args: MockCallArgs) -> dict:
        raise NotImplementedError(f"MiniEngine serves no invokes ({args.token})")


class _EngineMonitor(MockMonitor):
    """The SDK's mock monitor, with resource registration handed to the engine loop above."""

    def __init__(self, engine: MiniEngine, run: _Run) -> None:
        super().__init__(_NoMocks())
        self._engine, self._run = engine, run

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        id_, outputs = self._engine.register(
            self._run, urn, request.type, request.object, list(request.additionalSecretOutputs)
        )
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=_struct(outputs))


def _main_program(project_dir: Path) -> Path:
    """The program directory, from ``main:`` in Pulumi.yaml as the CLI reads it."""
    project_file = project_dir / "Pulumi.yaml"
    if project_file.exists():
        main = (yaml.safe_load(project_file.read_text()) or {}).get("main")
        if main:
            return project_dir / main
    return project_dir


def _plain(raw: struct_pb2.Struct) -> tuple[dict[str, Any], frozenset[str]]:
    """Inputs as the engine sends them to a provider that does not accept secrets, and which were secret."""
    secret = set()
    plain = {}
    for key, value in rpc.deserialize_properties(raw, keep_unknowns=True).items():
        if rpc.is_rpc_secret(value):
            secret.add(key)
            value = rpc.unwrap_rpc_secret(value)
        plain[key] = _unknowns_as_sentinel(value)
    return plain, frozenset(secret)


def _unknowns_as_sentinel(value: Any) -> Any:
    if isinstance(value, Unknown):
        return rpc.UNKNOWN
    if rpc.is_rpc_secret(value):
        return _unknowns_as_sentinel(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: _unknowns_as_sentinel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unknowns_as_sentinel(v) for v in value]
    return value


def _known(values: dict[str, Any]) -> dict[str, Any]:
    """Preview outputs: what is known; what is left out stays unknown to the program."""
    return {k: v for k, v in values.items() if v is not None and v != rpc.UNKNOWN}


def _for_program(outputs: dict[str, Any], secret: frozenset[str]) -> dict[str, Any]:
    return {k: rpc.wrap_rpc_secret(v) if k in secret else v for k, v in outputs.items()}


def _masked(values: dict[str, Any], secret: frozenset[str] | set[str]) -> dict[str, Any]:
    return {k: dict(SECRET_MARK) if k in secret and v is not None else v for k, v in values.items()}


def _struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


def _dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(struct)


def _read_line_within(process: subprocess.Popen, seconds: float) -> str:
    """The server's first stdout line is its port; a server that dies or hangs must not hang the caller."""
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(seconds)
    if not result or not result[0].strip():
        process.kill()
        raise RuntimeError(f"the dynamic-provider server printed no port within {seconds:.0f} s")
    return result[0].strip()
