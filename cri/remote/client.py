"""The gRPC channel to a CRI endpoint and the mapping of gRPC status codes to the runtime's errors."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import grpc

from cri.errors import NotFoundError, RuntimeError_, RuntimeUnavailableError
from cri.remote.containerd import events_pb2_grpc
from cri.remote.v1 import api_pb2_grpc

T = TypeVar("T")

# The kubelet's CRI client accepts messages up to 16 MiB (pkg/kubelet/cri/remote: maxMsgSize).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def grpc_target(endpoint: str) -> str:
    """`unix:///run/containerd/containerd.sock` (or a bare absolute path) -> the gRPC target."""
    if endpoint.startswith("unix://"):
        path = endpoint[len("unix://"):]
    elif endpoint.startswith("/"):
        path = endpoint
    else:
        raise ValueError(f"unsupported CRI endpoint {endpoint!r}: only unix:// sockets are supported")
    if not path.startswith("/"):
        raise ValueError(f"CRI endpoint {endpoint!r} must name an absolute socket path")
    return f"unix://{path}"


class Channel:
    """One channel, both services, as the kubelet's remote runtime and image service share one endpoint."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._channel = grpc.aio.insecure_channel(grpc_target(endpoint), options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ])
        self.runtime = api_pb2_grpc.RuntimeServiceStub(self._channel)
        self.images = api_pb2_grpc.ImageServiceStub(self._channel)
        # containerd serves its own API on the CRI socket; other runtimes answer Unimplemented
        self.containerd_events = events_pb2_grpc.EventsStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()


def status_code(exc: BaseException) -> grpc.StatusCode | None:
    return exc.code() if isinstance(exc, grpc.aio.AioRpcError) else None


def translate(exc: grpc.aio.AioRpcError, kind: type[RuntimeError_] = RuntimeError_) -> RuntimeError_:
    """NotFound and Unavailable keep their meaning; anything else becomes `kind` with the runtime's text."""
    code, details = exc.code(), exc.details() or exc.code().name
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(details)
    if code == grpc.StatusCode.UNAVAILABLE:
        return RuntimeUnavailableError(details)
    return kind(details)


async def call(request: Awaitable[T], kind: type[RuntimeError_] = RuntimeError_) -> T:
    try:
        return await request
    except grpc.aio.AioRpcError as exc:
        raise translate(exc, kind) from None
