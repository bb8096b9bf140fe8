"""grpc probes against a real gRPC server (grpclib's) with a grpc.health.v1 servicer; the integration test
probes the grpcio one in the grpc-health image."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest
from grpclib.const import Status
from grpclib.health.v1 import health_grpc, health_pb2
from grpclib.server import Server, Stream

from probes.grpc import probe_grpc
from probes.result import Result


class HealthServicer(health_grpc.HealthBase):
    """grpc.health.v1.Health/Check as the reference servicer answers it: a status per service, NOT_FOUND for
    a service it does not know."""

    def __init__(self) -> None:
        self.statuses: dict[str, int] = {}
        self.delay = 0.0

    async def set(self, service: str, status: int) -> None:
        self.statuses[service] = status

    async def Check(self, stream: Stream[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse]) -> None:
        request = await stream.recv_message()
        assert request is not None
        await asyncio.sleep(self.delay)
        status = self.statuses.get(request.service)
        if status is None:
            await stream.send_trailing_metadata(status=Status.NOT_FOUND, status_message="unknown service")
            return
        await stream.send_message(health_pb2.HealthCheckResponse(
            status=health_pb2.HealthCheckResponse.ServingStatus.ValueType(status)))

    async def Watch(self, stream: Stream[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse]) -> None:
        await stream.send_trailing_metadata(status=Status.UNIMPLEMENTED)


@pytest.fixture
async def health_server() -> AsyncIterator[tuple[int, HealthServicer]]:
    servicer = HealthServicer()
    server = Server([servicer])
    await server.start("127.0.0.1", 0)
    assert isinstance(server._server, asyncio.Server)
    port = server._server.sockets[0].getsockname()[1]
    yield port, servicer
    server.close()
    await server.wait_closed()


async def test_serving_flips(health_server: tuple[int, HealthServicer]) -> None:
    port, servicer = health_server
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    ok = await probe_grpc("127.0.0.1", port, "", 2)
    assert ok.result is Result.SUCCESS
    assert ok.output == "service is serving"

    await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    bad = await probe_grpc("127.0.0.1", port, "", 2)
    assert bad.result is Result.FAILURE
    assert bad.output == 'service unhealthy (responded with "NOT_SERVING")'

    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert (await probe_grpc("127.0.0.1", port, "", 2)).result is Result.SUCCESS


async def test_named_service(health_server: tuple[int, HealthServicer]) -> None:
    port, servicer = health_server
    await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    await servicer.set("db", health_pb2.HealthCheckResponse.SERVING)
    assert (await probe_grpc("127.0.0.1", port, "db", 2)).result is Result.SUCCESS
    missing = await probe_grpc("127.0.0.1", port, "nope", 2)
    assert missing.result is Result.FAILURE
    assert "code = NotFound" in missing.output


async def test_server_without_health_service_is_failure() -> None:
    # grpcio's server (a test dependency only): grpclib's answers an unknown method without a content-type
    import grpc

    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        outcome = await probe_grpc("127.0.0.1", port, "", 2)
    finally:
        await server.stop(None)
    assert outcome.result is Result.FAILURE
    assert outcome.output.startswith("error: this server does not implement the grpc health protocol")


async def test_nothing_listening_times_out() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    began = time.monotonic()
    outcome = await probe_grpc("127.0.0.1", port, "", 0.5)
    assert time.monotonic() - began < 2
    assert outcome.result is Result.FAILURE
    assert outcome.output.startswith(f'timeout: failed to connect service "127.0.0.1:{port}" within 0.5s')


async def test_grpcio_server_sees_the_probe_user_agent() -> None:
    import grpc

    seen: list[tuple[str, str]] = []

    def check(request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext) -> health_pb2.HealthCheckResponse:
        seen.extend((str(k), str(v)) for k, v in context.invocation_metadata())
        assert request.service == "svc"
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(
            check, request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString)})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        outcome = await probe_grpc("127.0.0.1", port, "svc", 2)
    finally:
        await server.stop(None)
    assert outcome.result is Result.SUCCESS
    assert dict(seen)["user-agent"].startswith("kube-probe/1.36")


async def test_a_check_slower_than_the_timeout_fails(health_server: tuple[int, HealthServicer]) -> None:
    port, servicer = health_server
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    servicer.delay = 2
    began = time.monotonic()
    outcome = await probe_grpc("127.0.0.1", port, "", 0.3)
    assert time.monotonic() - began < 1
    assert (outcome.result, outcome.output) == (Result.FAILURE, "timeout: health rpc did not complete within 0.3s")
