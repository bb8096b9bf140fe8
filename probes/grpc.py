"""grpc probes: grpc.health.v1.Health/Check over plaintext; success only on SERVING."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from probes.addresses import join_host_port
from probes.http import USER_AGENT
from probes.result import ProbeOutcome, Result


async def probe_grpc(host: str, port: int, service: str, timeout_s: float) -> ProbeOutcome:
    address = join_host_port(host, port)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    async with grpc.aio.insecure_channel(
        address, options=[("grpc.primary_user_agent", USER_AGENT), ("grpc.enable_retries", 0)]
    ) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout_s)
        except TimeoutError:
            return ProbeOutcome(
                Result.FAILURE,
                f'timeout: failed to connect service "{address}" within {_go_duration(timeout_s)}: '
                "context deadline exceeded",
            )
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = await stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=max(0.001, deadline - loop.time())
            )
        except grpc.aio.AioRpcError as err:
            code = err.code()
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return ProbeOutcome(
                    Result.FAILURE,
                    "error: this server does not implement the grpc health protocol "
                    f"(grpc.health.v1.Health): {err.details()}",
                )
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return ProbeOutcome(
                    Result.FAILURE, f"timeout: health rpc did not complete within {_go_duration(timeout_s)}"
                )
            return ProbeOutcome(
                Result.FAILURE,
                f"error: health rpc probe failed: rpc error: code = {_code_name(code)} desc = {err.details()}",
            )
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        name = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return ProbeOutcome(Result.FAILURE, f'service unhealthy (responded with "{name}")')
    return ProbeOutcome(Result.SUCCESS, "service is serving")


def _code_name(code: grpc.StatusCode) -> str:
    """Go's codes.Code.String(): NOT_FOUND -> NotFound."""
    return "".join(part.capitalize() for part in code.name.split("_"))


def _go_duration(seconds: float) -> str:
    return f"{seconds:g}s"
