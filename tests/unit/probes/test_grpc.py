"""grpc probes against a real grpc.aio server with the standard health servicer."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from probes.grpc import probe_grpc
from probes.result import Result


@pytest.fixture
async def health_server() -> AsyncIterator[tuple[int, health.aio.HealthServicer]]:
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield port, servicer
    await server.stop(None)


async def test_serving_flips(health_server: tuple[int, health.aio.HealthServicer]) -> None:
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


async def test_named_service(health_server: tuple[int, health.aio.HealthServicer]) -> None:
    port, servicer = health_server
    await servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    await servicer.set("db", health_pb2.HealthCheckResponse.SERVING)
    assert (await probe_grpc("127.0.0.1", port, "db", 2)).result is Result.SUCCESS
    missing = await probe_grpc("127.0.0.1", port, "nope", 2)
    assert missing.result is Result.FAILURE
    assert "code = NotFound" in missing.output


async def test_server_without_health_service_is_failure() -> None:
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
