"""The provider plugin's front door: Pulumi's ResourceProvider gRPC service over the same providers the dynamic
resources use (providers/), so both doors share every procedure below them.

What only this door does: it names properties the way Pulumi schemas do (``githubUrl``; properties.py), fills
in the defaults and the names a dynamic resource's constructor would (from the URN's project, stack and name),
keeps secrets secret on the wire, sends its progress to the engine on the resource's URN (progress.py), adopts
existing runners and pools on ``pulumi import`` (adopt.py), and turns a pool's unconverged update into the
engine's "resource initialization failed" (the state keeps what exists, the update fails).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import any_pb2, empty_pb2, struct_pb2
from google.rpc import status_pb2
from pulumi.dynamic import ResourceProvider
from pulumi.runtime import proto, rpc
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
from pulumi.runtime.proto import provider_pb2_grpc

from .. import __version__
from ..inputs import names, validation
from ..inputs.runner_version import InvalidQuery, ReleaseQuery, newest_release
from ..providers.registration_token import RegistrationTokenProvider
from ..providers.runner import RunnerProvider
from ..providers.runner_pool import RunnerPoolProvider
from ..providers.runner_scale_set import RunnerScaleSetProvider
from ..redaction import scrub
from ..resources import not_converged_message
from . import adopt
from .progress import working_on
from .properties import (
    BY_TOKEN,
    FUNCTIONS_BY_TOKEN,
    GET_RUNNER_RELEASE,
    ResourceKind,
    camel_case,
    core_names,
    schema_names,
    snake_case,
)
from .schema import schema_json

# The engine's --parallel bounds how many calls it makes at once; the server must only not bound them lower
# (the SDK's dynamic provider server runs 4). Threads are made as calls come.
MAX_CONCURRENT_CALLS = 1024
# A pool's runners add "-<index>"; a scale set's runners and listener objects add more (validation.scale_set_name).
NAME_LENGTH = {"Runner": 63, "RunnerPool": 57, "RunnerScaleSet": validation.MAX_SCALE_SET_NAME}


class Urn:
    """``urn:pulumi:STACK::PROJECT::TYPE::NAME``, the parts this door needs."""

    def __init__(self, urn: str) -> None:
        parts = urn.split("::")
        self.stack, self.project = parts[0].removeprefix("urn:pulumi:"), parts[1]
        self.type, self.name = parts[2].split("$")[-1], "::".join(parts[3:])


class _RichStatus(collections.namedtuple("_RichStatus", ("code", "details", "trailing_metadata")), grpc.Status):
    """A gRPC status with details (google.rpc.Status), as the engine reads ErrorResourceInitFailed."""


class ActionsRunnersProvider(provider_pb2_grpc.ResourceProviderServicer):
    def __init__(self) -> None:
        self._providers: dict[str, ResourceProvider] = {
            "RegistrationToken": RegistrationTokenProvider(),
            "Runner": RunnerProvider(),
            "RunnerPool": RunnerPoolProvider(),
            "RunnerScaleSet": RunnerScaleSetProvider(),
        }

    # Provider-level calls: no configuration.
    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return proto.PluginInfo(version=__version__)

    def GetSchema(self, request: Any, context: Any) -> Any:
        return proto.GetSchemaResponse(schema=schema_json())

    def CheckConfig(self, request: Any, context: Any) -> Any:
        return proto.CheckResponse(inputs=request.news)

    def DiffConfig(self, request: Any, context: Any) -> Any:
        return proto.DiffResponse(changes=proto.DiffResponse.DIFF_NONE)

    def Configure(self, request: Any, context: Any) -> Any:
        return proto.ConfigureResponse(acceptSecrets=True, supportsPreview=False, acceptResources=False)

    def Cancel(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()

    def Attach(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()

    # Functions: programs' look-ups.
    def Invoke(self, request: Any, context: Any) -> Any:
        """getRunnerRelease: bad arguments come back as failures naming them, GitHub's failure as an error."""
        if FUNCTIONS_BY_TOKEN.get(request.tok) is not GET_RUNNER_RELEASE:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown function {request.tok}")
        args, _ = _from_wire(request.args)
        try:
            found = newest_release(ReleaseQuery.of(args))
        except InvalidQuery as error:
            failures = [proto.CheckFailure(property=camel_case(p), reason=scrub(r)) for p, r in error.failures]
            return proto.InvokeResponse(failures=failures)
        except Exception as error:  # a message, never a traceback
            message = scrub(str(error))
        else:
            answer = {k: v for k, v in vars(found).items() if v is not None}
            return proto.InvokeResponse(**{"return": _serialize(schema_names(answer))})
        context.abort(grpc.StatusCode.UNKNOWN, message)

    # Resource calls.
    def Check(self, request: Any, context: Any) -> Any:
        kind, urn = self._kind(request.urn, context), Urn(request.urn)
        olds, _ = _from_wire(request.olds)
        news, secret = _from_wire(request.news)
        news = _with_defaults(kind, news, urn)
        result = self._call(context, lambda p: p.check(olds, news), kind, request.urn)
        failures = [proto.CheckFailure(property=camel_case(f.property), reason=f.reason) for f in result.failures]
        return proto.CheckResponse(inputs=_to_wire(kind, result.inputs, secret), failures=failures)

    def Diff(self, request: Any, context: Any) -> Any:
        kind = self._kind(request.urn, context)
        olds, _ = _from_wire(request.olds)
        news, _ = _from_wire(request.news)
        olds = adopt.proven_inputs(kind.name, olds, news)
        result = self._call(context, lambda p: p.diff(request.id, olds, news), kind, request.urn)
        replaces = [camel_case(k) for k in result.replaces or []]
        changed = proto.DiffResponse.DIFF_SOME if result.changes else proto.DiffResponse.DIFF_NONE
        return proto.DiffResponse(
            changes=changed, replaces=replaces, deleteBeforeReplace=bool(result.delete_before_replace)
        )

    def Create(self, request: Any, context: Any) -> Any:
        kind = self._kind(request.urn, context)
        props, secret = _from_wire(request.properties)
        result = self._call(context, lambda p: p.create(props), kind, request.urn)
        outs = _to_wire(kind, result.outs, secret)
        self._fail_unconverged(context, request.urn, result.id, outs, result.outs, request.properties)
        return proto.CreateResponse(id=result.id, properties=outs)

    def Update(self, request: Any, context: Any) -> Any:
        kind = self._kind(request.urn, context)
        olds, _ = _from_wire(request.olds)
        news, secret = _from_wire(request.news)
        olds = adopt.proven_inputs(kind.name, olds, news)
        result = self._call(context, lambda p: p.update(request.id, olds, news), kind, request.urn)
        outs = _to_wire(kind, result.outs, secret)
        self._fail_unconverged(context, request.urn, request.id, outs, result.outs, request.news)
        return proto.UpdateResponse(properties=outs)

    def Delete(self, request: Any, context: Any) -> Any:
        kind = self._kind(request.urn, context)
        props, _ = _from_wire(request.properties)
        props = adopt.for_teardown(kind.name, props, _from_wire(request.old_inputs)[0])
        self._call(context, lambda p: p.delete(request.id, props), kind, request.urn)
        return empty_pb2.Empty()

    def Read(self, request: Any, context: Any) -> Any:
        """A refresh reads what is; an import (no state yet) adopts what the id names, if provably this resource's:
        labelled with the ownership id its Check will fill in."""
        kind, urn = self._kind(request.urn, context), Urn(request.urn)
        props, secret = _from_wire(request.properties)
        if not props:
            importer = adopt.Importer(_ownership_id(kind, urn), urn.project, urn.stack, urn.name)
            adopted = self._call(context, lambda _p: adopt.adopt(kind.name, request.id, importer), kind, request.urn)
            return proto.ReadResponse(
                id=request.id,
                properties=_to_wire(kind, adopted.outputs, set()),
                inputs=_to_wire(kind, adopted.inputs, set()),
            )
        props = adopt.with_settings(kind.name, props, _from_wire(request.inputs)[0])
        result = self._call(context, lambda p: p.read(request.id, props), kind, request.urn)
        return proto.ReadResponse(id=result.id, properties=_to_wire(kind, result.outs, secret), inputs=request.inputs)

    def _kind(self, urn: str, context: Any) -> ResourceKind:
        kind = BY_TOKEN.get(Urn(urn).type)
        if kind is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown resource type {Urn(urn).type}")
        return kind

    def _call(self, context: Any, call: Callable[[ResourceProvider], Any], kind: ResourceKind, urn: str) -> Any:
        """The provider's answer; its error, scrubbed and without a traceback (the providers raise
        ProviderCallFailed with the message already scrubbed), else as the engine's error."""
        with working_on(urn):
            try:
                return call(self._providers[kind.name])
            except Exception as error:  # every error reaches the user as a message, never a traceback
                message = scrub(str(error))
        context.abort(grpc.StatusCode.UNKNOWN, message)

    def _fail_unconverged(
        self, context: Any, urn: str, id_: str, outs: Any, plain: dict[str, Any], inputs: Any
    ) -> None:
        """A pool whose update did not converge: the state takes what exists (outs), and the update fails with
        the problems, as the engine's ErrorResourceInitFailed says."""
        problems = plain.get("problems")
        if not problems:
            return
        message = not_converged_message(Urn(urn).name, problems)
        detail = any_pb2.Any()  # the engine shows the reasons, not the message: the message is the reason
        detail.Pack(proto.ErrorResourceInitFailed(id=id_, properties=outs, reasons=[message], inputs=inputs))
        status = status_pb2.Status(code=grpc.StatusCode.UNKNOWN.value[0], message=message, details=[detail])
        context.abort_with_status(
            _RichStatus(grpc.StatusCode.UNKNOWN, message, (("grpc-status-details-bin", status.SerializeToString()),))
        )


def _with_defaults(kind: ResourceKind, news: dict[str, Any], urn: Urn) -> dict[str, Any]:
    """What a dynamic resource's constructor fills in (resources.py): defaults, the name, the ownership id."""
    filled = {**news}
    for prop in kind.inputs:
        if filled.get(prop.name) is None and prop.default is not None:
            filled[prop.name] = prop.default
    if kind.name_input is not None:
        if filled.get(kind.name_input) is None:
            filled[kind.name_input] = names.default_name(urn.project, urn.stack, urn.name, NAME_LENGTH[kind.name])
        filled["owner"] = _ownership_id(kind, urn)
    return filled


def _ownership_id(kind: ResourceKind, urn: Urn) -> str:
    """Fixed by the URN's project, stack and name, as the dynamic resources' (resources.ownership_id)."""
    return names.ownership_id(urn.project, urn.stack, kind.name, urn.name)


def _from_wire(struct: struct_pb2.Struct) -> tuple[dict[str, Any], set[str]]:
    """Properties in the core's names, secrets unwrapped; and which of them were secret."""
    # Unwrapped before deserializing: the SDK's deserializer turns a secret whose value is unknown into None.
    plain, secret = struct_pb2.Struct(), set()
    for key, value in struct.fields.items():
        inner = value.struct_value.fields if value.HasField("struct_value") else {}
        if inner.get(rpc._special_sig_key) == struct_pb2.Value(string_value=rpc._special_secret_sig):
            secret.add(snake_case(key))
            value = inner["value"]
        plain.fields[key].CopyFrom(value)
    wire = rpc.deserialize_properties(plain, keep_unknowns=True) or {}
    secret |= {snake_case(k) for k, v in wire.items() if rpc.is_rpc_secret(v)}
    return core_names({k: rpc.unwrap_rpc_secret(v) for k, v in wire.items()}), secret


def _to_wire(kind: ResourceKind, props: dict[str, Any], secret: set[str]) -> struct_pb2.Struct:
    """Properties in the schema's names; the kind's secrets, and whatever came in secret, wrapped as secrets."""
    hidden = {camel_case(k) for k in secret | kind.secrets}
    wire = {k: rpc.wrap_rpc_secret(v) if k in hidden and v is not None else v for k, v in schema_names(props).items()}
    return _serialize(wire)


def _serialize(wire: dict[str, Any]) -> struct_pb2.Struct:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(rpc.serialize_properties(wire, {}))
    finally:
        loop.close()


def serve() -> tuple[grpc.Server, int]:
    """Starts the service on a loopback port: the server (which stops when no longer referenced) and its port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=MAX_CONCURRENT_CALLS), options=_GRPC_CHANNEL_OPTIONS)
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(ActionsRunnersProvider(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port
