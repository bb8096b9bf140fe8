"""grpc probes: grpc.health.v1.Health/Check over plaintext HTTP/2; success only on SERVING.

One unary call on a fresh connection, written on h2 directly rather than through a gRPC client: a client
library would send its own user agent, and the probe's is `kube-probe/<major>.<minor>` as upstream's.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from grpclib.health.v1 import health_pb2
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)
from h2.exceptions import H2Error

from probes.addresses import join_host_port
from probes.http import USER_AGENT
from probes.result import ProbeOutcome, Result

_PATH = "/grpc.health.v1.Health/Check"
# How often a refused connection is tried again within the probe's timeout, as a blocking gRPC dial retries.
_REDIAL_INTERVAL = 0.1
# Go's codes.Code.String() for the gRPC status codes.
_CODE_NAMES = ("OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
               "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
               "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated")
_UNKNOWN, _DEADLINE_EXCEEDED, _UNIMPLEMENTED, _UNAVAILABLE = 2, 4, 12, 14
# gRPC's mapping of an HTTP status without a grpc-status (the grpc-go http2 client's).
_HTTP_CODES = {400: 13, 401: 16, 403: 7, 404: _UNIMPLEMENTED, 429: _UNAVAILABLE, 502: _UNAVAILABLE,
               503: _UNAVAILABLE, 504: _UNAVAILABLE}


@dataclass
class _Answer:
    status: int | None = None
    message: str = ""
    body: bytearray = field(default_factory=bytearray)

    def headers(self, headers: list[tuple[str, str]]) -> None:
        values = dict(headers)
        if ":status" in values and values[":status"] != "200" and "grpc-status" not in values:
            code = int(values[":status"]) if values[":status"].isdigit() else 0
            self.status = _HTTP_CODES.get(code, _UNKNOWN)
            self.message = f"unexpected HTTP status code received from server: {values[':status']}"
        elif "grpc-status" in values:
            self.status = int(values["grpc-status"]) if values["grpc-status"].isdigit() else _UNKNOWN
            self.message = urllib.parse.unquote(values.get("grpc-message", ""))


class _Failed(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


async def probe_grpc(host: str, port: int, service: str, timeout_s: float) -> ProbeOutcome:
    address = join_host_port(host, port)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    connection = await _dial(host, port, deadline)
    if connection is None:
        return ProbeOutcome(
            Result.FAILURE,
            f'timeout: failed to connect service "{address}" within {_go_duration(timeout_s)}: '
            "context deadline exceeded",
        )
    reader, writer = connection
    try:
        async with asyncio.timeout_at(deadline):
            response = await _check(reader, writer, address, service, deadline - loop.time())
    except TimeoutError:
        return _deadline_exceeded(timeout_s)
    except _Failed as err:
        if err.status == _UNIMPLEMENTED:
            return ProbeOutcome(
                Result.FAILURE,
                "error: this server does not implement the grpc health protocol "
                f"(grpc.health.v1.Health): {err.message}",
            )
        if err.status == _DEADLINE_EXCEEDED:
            return _deadline_exceeded(timeout_s)
        name = _CODE_NAMES[err.status] if 0 <= err.status < len(_CODE_NAMES) else f"Code({err.status})"
        return ProbeOutcome(
            Result.FAILURE, f"error: health rpc probe failed: rpc error: code = {name} desc = {err.message}"
        )
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        name = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return ProbeOutcome(Result.FAILURE, f'service unhealthy (responded with "{name}")')
    return ProbeOutcome(Result.SUCCESS, "service is serving")


async def _dial(host: str, port: int, deadline: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """Connect before the deadline, trying again while the connection is refused; None when time ran out."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                return await asyncio.open_connection(host, port)
        except TimeoutError:
            return None
        except OSError:
            if loop.time() + _REDIAL_INTERVAL >= deadline:
                await asyncio.sleep(max(0.0, deadline - loop.time()))
                return None
            await asyncio.sleep(_REDIAL_INTERVAL)


async def _check(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, authority: str, service: str,
                 timeout: float) -> health_pb2.HealthCheckResponse:
    conn = H2Connection(H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    stream_id = conn.get_next_available_stream_id()
    conn.send_headers(stream_id, [
        (":method", "POST"), (":scheme", "http"), (":path", _PATH), (":authority", authority),
        ("te", "trailers"), ("content-type", "application/grpc"), ("user-agent", USER_AGENT),
        ("grpc-timeout", f"{max(1, int(timeout * 1000))}m"),
    ])
    request = health_pb2.HealthCheckRequest(service=service).SerializeToString()
    conn.send_data(stream_id, b"\x00" + len(request).to_bytes(4, "big") + request, end_stream=True)
    answer = _Answer()
    try:
        while True:
            writer.write(conn.data_to_send())
            await writer.drain()
            data = await reader.read(65536)
            if not data:
                raise _Failed(_UNAVAILABLE, "error reading from server: EOF")
            for event in conn.receive_data(data):
                if isinstance(event, ResponseReceived | TrailersReceived) and event.stream_id == stream_id:
                    answer.headers([(str(k), str(v)) for k, v in event.headers])
                elif isinstance(event, DataReceived) and event.stream_id == stream_id:
                    answer.body += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, StreamEnded) and event.stream_id == stream_id:
                    return _response(answer)
                elif isinstance(event, StreamReset) and event.stream_id == stream_id:
                    raise _Failed(_UNAVAILABLE, f"stream terminated by RST_STREAM with error code: {event.error_code}")
                elif isinstance(event, ConnectionTerminated):
                    raise _Failed(_UNAVAILABLE, f"connection closed by the server (GOAWAY {event.error_code})")
    except (OSError, H2Error) as err:
        raise _Failed(_UNAVAILABLE, str(err) or type(err).__name__) from None


def _response(answer: _Answer) -> health_pb2.HealthCheckResponse:
    if answer.status is None:
        raise _Failed(_UNKNOWN, "server closed the stream without sending trailers")
    if answer.status != 0:
        raise _Failed(answer.status, answer.message)
    body = bytes(answer.body)
    if len(body) < 5 or body[0] != 0 or int.from_bytes(body[1:5], "big") != len(body) - 5:
        raise _Failed(_UNKNOWN, "malformed response message")
    response = health_pb2.HealthCheckResponse()
    try:
        response.ParseFromString(body[5:])
    except DecodeError as err:
        raise _Failed(13, f"grpc: failed to unmarshal the received message: {err}") from None
    return response


def _deadline_exceeded(timeout_s: float) -> ProbeOutcome:
    return ProbeOutcome(Result.FAILURE, f"timeout: health rpc did not complete within {_go_duration(timeout_s)}")


def _go_duration(seconds: float) -> str:
    return f"{seconds:g}s"
