"""grpc probes: grpc.health.v1.Health/Check over plaintext (grpclib); success only on SERVING."""

from __future__ import annotations

import asyncio

from grpclib.client import Channel
from grpclib.const import Status
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError
from grpclib.health.v1 import health_grpc, health_pb2
from h2.exceptions import H2Error

from probes.addresses import join_host_port
from probes.result import ProbeOutcome, Result

# How often a refused connection is tried again within the probe's timeout, as a blocking gRPC dial retries.
_REDIAL_INTERVAL = 0.1


async def probe_grpc(host: str, port: int, service: str, timeout_s: float) -> ProbeOutcome:
    address = join_host_port(host, port)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    channel = Channel(host, port)
    try:
        if not await _dial(channel, deadline):
            return ProbeOutcome(
                Result.FAILURE,
                f'timeout: failed to connect service "{address}" within {_go_duration(timeout_s)}: '
                "context deadline exceeded",
            )
        try:
            response = await health_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=max(0.001, deadline - loop.time())
            )
        except TimeoutError:
            return _deadline_exceeded(timeout_s)
        except (OSError, StreamTerminatedError, ProtocolError, H2Error) as err:
            return _rpc_failed(Status.UNAVAILABLE, str(err) or type(err).__name__)
        except GRPCError as err:
            if err.status is Status.UNIMPLEMENTED:
                return ProbeOutcome(
                    Result.FAILURE,
                    "error: this server does not implement the grpc health protocol "
                    f"(grpc.health.v1.Health): {err.message}",
                )
            if err.status is Status.DEADLINE_EXCEEDED:
                return _deadline_exceeded(timeout_s)
            return _rpc_failed(err.status, err.message or "")
    finally:
        channel.close()
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        name = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return ProbeOutcome(Result.FAILURE, f'service unhealthy (responded with "{name}")')
    return ProbeOutcome(Result.SUCCESS, "service is serving")


async def _dial(channel: Channel, deadline: float) -> bool:
    """Connect before the deadline, trying again while the connection is refused; False when time ran out."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                await channel.__connect__()
            return True
        except TimeoutError:
            return False
        except OSError:
            if loop.time() + _REDIAL_INTERVAL >= deadline:
                await asyncio.sleep(max(0.0, deadline - loop.time()))
                return False
            await asyncio.sleep(_REDIAL_INTERVAL)


def _deadline_exceeded(timeout_s: float) -> ProbeOutcome:
    return ProbeOutcome(Result.FAILURE, f"timeout: health rpc did not complete within {_go_duration(timeout_s)}")


def _rpc_failed(status: Status, message: str) -> ProbeOutcome:
    return ProbeOutcome(
        Result.FAILURE,
        f"error: health rpc probe failed: rpc error: code = {_code_name(status)} desc = {message}",
    )


def _code_name(status: Status) -> str:
    """Go's codes.Code.String(): NOT_FOUND -> NotFound."""
    return "".join(part.capitalize() for part in status.name.split("_"))


def _go_duration(seconds: float) -> str:
    return f"{seconds:g}s"
