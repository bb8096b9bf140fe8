"""The gRPC channel to a CRI endpoint (grpclib over a unix socket) and the mapping of gRPC status codes to the
runtime's errors.

grpclib reports a failed connection as the OSError of the socket, a connection lost mid-call as
StreamTerminatedError and its own deadline (`timeout=`) as TimeoutError; `rpc` turns them into the statuses a
gRPC core client reports (UNAVAILABLE, DEADLINE_EXCEEDED), so every caller sees one error type, GRPCError.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any, NoReturn, TypeVar

from grpclib.client import Channel as _GrpcChannel
from grpclib.client import UnaryStreamMethod
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError
from h2.connection import H2Connection
from h2.exceptions import H2Error

from cri.errors import NotFoundError, RuntimeError_, RuntimeUnavailableError
from cri.remote.containerd import events_grpc
from cri.remote.v1 import api_grpc

T = TypeVar("T")
Req = TypeVar("Req")
Resp = TypeVar("Resp")

# The kubelet's CRI client accepts messages up to 16 MiB (pkg/kubelet/cri/remote: maxMsgSize).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

# h2 remembers how each of the last 65 536 closed streams of a connection ended (~60 bytes each), and every CRI
# call is a stream of the one connection: with 30 idle pods on containerd 1.6 (~750 calls a minute) the record
# fills in ~90 minutes to ~4 MiB. It only serves frames that arrive after their stream closed (a late
# WINDOW_UPDATE or RST_STREAM), which come within the few calls in flight. grpclib builds its H2Connection itself,
# so the bound is h2's class attribute (the agent's other h2 user, the grpc probe, makes one call a connection).
CLOSED_STREAMS_KEPT = 1024
H2Connection.MAX_CLOSED_STREAMS = CLOSED_STREAMS_KEPT


def socket_path(endpoint: str) -> str:
    """`unix:///run/containerd/containerd.sock` (or a bare absolute path) -> the socket's path."""
    if endpoint.startswith("unix://"):
        path = endpoint[len("unix://"):]
    elif endpoint.startswith("/"):
        path = endpoint
    else:
        raise ValueError(f"unsupported CRI endpoint {endpoint!r}: only unix:// sockets are supported")
    if not path.startswith("/"):
        raise ValueError(f"CRI endpoint {endpoint!r} must name an absolute socket path")
    return path


class _BoundedCodec(ProtoCodec):
    """Protobuf with the kubelet's message size limit both ways (RESOURCE_EXHAUSTED past it)."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        data: bytes = super().encode(message, message_type)
        if len(data) > MAX_MESSAGE_BYTES:
            raise GRPCError(Status.RESOURCE_EXHAUSTED,
                            f"trying to send message larger than max ({len(data)} vs. {MAX_MESSAGE_BYTES})")
        return data

    def decode(self, data: bytes, message_type: Any) -> Any:
        if len(data) > MAX_MESSAGE_BYTES:
            raise GRPCError(Status.RESOURCE_EXHAUSTED,
                            f"received message larger than max ({len(data)} vs. {MAX_MESSAGE_BYTES})")
        return super().decode(data, message_type)


class Channel:
    """One connection, both services, as the kubelet's remote runtime and image service share one endpoint.
    Made inside the event loop that uses it; it connects on the first call and again after a lost connection."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._channel = _GrpcChannel(path=socket_path(endpoint), codec=_BoundedCodec())
        self.runtime = api_grpc.RuntimeServiceStub(self._channel)
        self.images = api_grpc.ImageServiceStub(self._channel)
        # containerd serves its own API on the CRI socket; other runtimes answer Unimplemented
        self.containerd_events = events_grpc.EventsStub(self._channel)

    async def close(self) -> None:
        self._channel.close()


def _as_status(exc: BaseException) -> GRPCError | None:
    if isinstance(exc, GRPCError):
        return exc
    if isinstance(exc, TimeoutError):  # grpclib's deadline (a subclass of OSError: tested first)
        return GRPCError(Status.DEADLINE_EXCEEDED, "Deadline Exceeded")
    if isinstance(exc, OSError | StreamTerminatedError | ProtocolError | H2Error):
        return GRPCError(Status.UNAVAILABLE, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    return None


_CALL_FAILURES = (GRPCError, OSError, StreamTerminatedError, ProtocolError, H2Error)


def _raise_as_status(exc: BaseException) -> NoReturn:
    status = _as_status(exc)
    assert status is not None
    if status is exc:
        raise exc
    raise status from None


async def rpc(request: Awaitable[T]) -> T:
    """One unary call; any failure of it is a GRPCError."""
    try:
        return await request
    except _CALL_FAILURES as exc:
        _raise_as_status(exc)


async def server_stream(method: UnaryStreamMethod[Req, Resp], request: Req) -> AsyncIterator[Resp]:
    """The responses of a server-streaming call until the server ends it; any failure is a GRPCError."""
    try:
        async with method.open() as stream:
            await stream.send_message(request, end=True)
            async for response in stream:
                yield response
    except _CALL_FAILURES as exc:
        _raise_as_status(exc)


def details(exc: GRPCError) -> str:
    """The status message, or the code's name when the server sent none."""
    return exc.message or exc.status.name


def translate(exc: GRPCError, kind: type[RuntimeError_] = RuntimeError_) -> RuntimeError_:
    """NotFound and Unavailable keep their meaning; anything else becomes `kind` with the runtime's text."""
    if exc.status is Status.NOT_FOUND:
        return NotFoundError(details(exc))
    if exc.status is Status.UNAVAILABLE:
        return RuntimeUnavailableError(details(exc))
    return kind(details(exc))


async def call(request: Awaitable[T], kind: type[RuntimeError_] = RuntimeError_) -> T:
    try:
        return await rpc(request)
    except GRPCError as exc:
        raise translate(exc, kind) from None
