"""The CRI client's errors against a real gRPC server on a unix socket (grpclib's): the runtime's status codes,
a missing socket, a deadline, a lost connection and the message size cap, each as the runtime error the agent
handles."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream
from h2.connection import H2Connection

from cri.errors import CreateContainerError, NotFoundError, RuntimeError_, RuntimeUnavailableError
from cri.remote import RemoteRuntime
from cri.remote.client import CLOSED_STREAMS_KEPT, MAX_MESSAGE_BYTES, Channel, call, rpc, server_stream
from cri.remote.v1 import api_pb2 as pb
from tests.unit.cri.remote.partial_runtime import PartialRuntime


async def test_a_missing_socket_is_unavailable(tmp_path: Path) -> None:
    channel = Channel(f"unix://{tmp_path}/nothing.sock")
    try:
        with pytest.raises(RuntimeUnavailableError, match="FileNotFoundError"):
            await call(channel.runtime.Version(pb.VersionRequest()))
        with pytest.raises(GRPCError) as caught:
            async for _ in server_stream(channel.runtime.GetContainerEvents, pb.GetEventsRequest()):
                pass
        assert caught.value.status is Status.UNAVAILABLE
    finally:
        await channel.close()


async def test_status_codes_become_the_runtime_errors(served: tuple[PartialRuntime, Callable[[], Awaitable[str]]]) -> None:
    runtime, start = served

    async def not_found(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        raise GRPCError(Status.NOT_FOUND, 'an error occurred when try to find container "abc": not found')

    async def invalid(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        raise GRPCError(Status.INVALID_ARGUMENT, "bad config")

    async def unavailable(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        raise GRPCError(Status.UNAVAILABLE, "shutting down")

    runtime.answer("ContainerStatus", pb.ContainerStatusRequest, pb.ContainerStatusResponse, not_found)
    runtime.answer("CreateContainer", pb.CreateContainerRequest, pb.CreateContainerResponse, invalid)
    runtime.answer("Version", pb.VersionRequest, pb.VersionResponse, unavailable)
    runtime.answer("RuntimeConfig", pb.RuntimeConfigRequest, pb.RuntimeConfigResponse, _unimplemented)
    channel = Channel(await start())
    try:
        with pytest.raises(NotFoundError, match='find container "abc": not found'):
            await call(channel.runtime.ContainerStatus(pb.ContainerStatusRequest(container_id="abc")))
        with pytest.raises(RuntimeError_, match=r"^bad config$"):
            await call(channel.runtime.CreateContainer(pb.CreateContainerRequest()))
        with pytest.raises(RuntimeUnavailableError, match="shutting down"):
            await call(channel.runtime.Version(pb.VersionRequest()))
        with pytest.raises(GRPCError) as caught:  # a method the runtime lacks (containerd 1.6): the fallbacks' signal
            await rpc(channel.runtime.RuntimeConfig(pb.RuntimeConfigRequest()))
        assert caught.value.status is Status.UNIMPLEMENTED
    finally:
        await channel.close()
    rt = RemoteRuntime(await start())
    try:
        with pytest.raises(CreateContainerError, match="bad config"):
            await rt._create(rt._channel.runtime.CreateContainer(pb.CreateContainerRequest()))
    finally:
        await rt.close()


async def test_a_deadline_and_a_lost_connection(served: tuple[PartialRuntime, Callable[[], Awaitable[str]]]) -> None:
    runtime, start = served
    hang = asyncio.Event()

    async def slow(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        await hang.wait()

    runtime.answer("StopContainer", pb.StopContainerRequest, pb.StopContainerResponse, slow)
    runtime.answer("ListContainers", pb.ListContainersRequest, pb.ListContainersResponse, slow)
    runtime.answer("Version", pb.VersionRequest, pb.VersionResponse, _version)
    endpoint = await start()
    channel = Channel(endpoint)
    try:
        with pytest.raises(GRPCError) as caught:
            await rpc(channel.runtime.StopContainer(pb.StopContainerRequest(container_id="c"), timeout=0.2))
        assert caught.value.status is Status.DEADLINE_EXCEEDED
        with pytest.raises(RuntimeError_, match="Deadline Exceeded"):
            await call(channel.runtime.StopContainer(pb.StopContainerRequest(container_id="c"), timeout=0.2))

        pending = asyncio.create_task(call(channel.runtime.ListContainers(pb.ListContainersRequest())))
        await asyncio.sleep(0.2)
        channel._channel.close()  # the connection goes away under the call
        with pytest.raises(RuntimeUnavailableError):
            await pending
        # the next call connects again
        assert (await call(channel.runtime.Version(pb.VersionRequest()))).runtime_name == "test"
    finally:
        hang.set()
        await channel.close()


async def _unimplemented(stream: Stream[Any, Any]) -> None:
    await stream.recv_message()
    raise GRPCError(Status.UNIMPLEMENTED, "unknown method RuntimeConfig for service runtime.v1.RuntimeService")


async def _version(stream: Stream[Any, Any]) -> None:
    await stream.recv_message()
    await stream.send_message(pb.VersionResponse(runtime_name="test"))


async def test_messages_past_16_mib_are_refused(served: tuple[PartialRuntime, Callable[[], Awaitable[str]]]) -> None:
    runtime, start = served

    async def huge(stream: Stream[Any, Any]) -> None:
        await stream.recv_message()
        await stream.send_message(pb.ListContainersResponse(containers=[
            pb.Container(id="c", labels={"big": "x" * (MAX_MESSAGE_BYTES + 1)})]))

    runtime.answer("ListContainers", pb.ListContainersRequest, pb.ListContainersResponse, huge)
    channel = Channel(await start())
    try:
        with pytest.raises(RuntimeError_, match="received message larger than max"):
            await call(channel.runtime.ListContainers(pb.ListContainersRequest()))
        with pytest.raises(RuntimeError_, match="trying to send message larger than max"):
            await call(channel.runtime.ListContainers(pb.ListContainersRequest(
                filter=pb.ContainerFilter(id="x" * (MAX_MESSAGE_BYTES + 1)))))
    finally:
        await channel.close()


async def test_the_connection_forgets_all_but_the_last_closed_streams(
        served: tuple[PartialRuntime, Callable[[], Awaitable[str]]]) -> None:
    """Every call is a stream of the one connection: h2's record of how closed streams ended stays bounded (its
    default keeps 65 536), and calls go on working past the bound."""
    runtime, start = served
    runtime.answer("Version", pb.VersionRequest, pb.VersionResponse, _version)
    channel = Channel(await start())
    try:
        calls = CLOSED_STREAMS_KEPT + 200
        for _ in range(calls // 8):
            replies = await asyncio.gather(*(call(channel.runtime.Version(pb.VersionRequest())) for _ in range(8)))
            assert {r.runtime_name for r in replies} == {"test"}
        # this channel's connection: earlier tests' connections may not be collected yet
        client = [c for c in gc.get_objects() if isinstance(c, H2Connection) and c.config.client_side
                  and c.highest_outbound_stream_id == 2 * calls - 1]  # odd client stream ids from 1: one per call
        assert len(client) == 1
        assert len(client[0]._closed_streams) <= CLOSED_STREAMS_KEPT
    finally:
        await channel.close()
