"""End to end on loopback: our SPDY server connection against a small client built from `spdy`, with flow
control; our WebSocket server (the listener's upgrade, wsproto) against aiohttp's client, speaking
v5.channel.k8s.io and the SPDY port-forward tunnel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import aiohttp
import pytest

from cri.spdy import (
    DataFrame,
    Frame,
    FrameDecoder,
    FrameEncoder,
    GoAway,
    Ping,
    SynReply,
    SynStream,
    WindowUpdate,
)
from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite
from minikubelet.server.routes import Answer, Request, Routes
from minikubelet.server.streaming import channel_codec as cc
from minikubelet.server.streaming import websocket
from minikubelet.server.streaming.channel_codec import ChannelClosed, ChannelData
from minikubelet.server.streaming.channels import ChannelWebSocket, WebSocketTunnel
from minikubelet.server.streaming.connection import ConnectionOptions, SpdyConnection
from minikubelet.server.streaming.server_websocket import ServerWebSocket

OUTPUT = 100_000  # more than one 64 KiB window


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.encoder, self.decoder = FrameEncoder(), FrameDecoder()
        self.pending: list[Frame] = []

    async def send(self, *frames: Frame) -> None:
        for frame in frames:
            self.writer.write(self.encoder.encode(frame))
        await self.writer.drain()

    async def next(self, timeout: float = 5.0) -> Frame:
        while not self.pending:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            assert data, "server closed the connection"
            self.pending += self.decoder.feed(data)
        return self.pending.pop(0)


async def _echo_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    conn = SpdyConnection(reader, writer, ConnectionOptions(enforce_send_window=True))
    runner = asyncio.create_task(conn.run())
    stdin, stdout = await conn.accept(), await conn.accept()
    assert stdin is not None and stdout is not None
    assert (stdin.header("streamType"), stdout.header("streamType")) == ("stdin", "stdout")
    received = b""
    while chunk := await stdin.read():
        received += chunk
    await stdout.write((received * (OUTPUT // len(received) + 1))[:OUTPUT])
    await stdout.close()
    await conn.close()
    await runner


@pytest.fixture
async def spdy_client() -> AsyncIterator[Client]:
    server = await asyncio.start_server(_echo_server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    yield Client(reader, writer)
    writer.close()
    server.close()
    await server.wait_closed()


async def test_spdy_streams_flow_control_ping_and_goaway(spdy_client: Client) -> None:
    c = spdy_client
    await c.send(SynStream(1, (("streamtype", "stdin"),)), SynStream(3, (("streamtype", "stdout"),)))
    assert [await c.next(), await c.next()] == [SynReply(1), SynReply(3)]
    await c.send(Ping(1))
    assert await c.next() == Ping(1)
    await c.send(DataFrame(1, b"0123456789"), DataFrame(1, b"", fin=True))
    got = 0
    while got < 65536:
        frame = await c.next()
        assert isinstance(frame, DataFrame) and frame.stream_id == 3 and not frame.fin
        got += len(frame.data)
    assert got == 65536
    with pytest.raises(TimeoutError):  # the window is spent: the server waits for WINDOW_UPDATE
        await c.next(timeout=0.2)
    await c.send(WindowUpdate(3, 65536), WindowUpdate(0, 65536))
    rest = b""
    while True:
        frame = await c.next()
        assert isinstance(frame, DataFrame)
        rest += frame.data
        if frame.fin:
            break
    assert got + len(rest) == OUTPUT and rest.startswith(b"6789")
    assert await c.next() == GoAway(3)


async def test_spdy_server_refuses_out_of_order_streams(spdy_client: Client) -> None:
    c = spdy_client
    await c.send(SynStream(3, (("streamtype", "stdin"),)))
    assert await c.next() == SynReply(3)
    await c.send(SynStream(1, (("streamtype", "stdout"),)))
    frame = await c.next()
    assert isinstance(frame, GoAway) and frame.status == 1


Handler = Callable[[ServerWebSocket], Awaitable[None]]
WsUrl = Callable[[Sequence[str], Handler], Awaitable[str]]
MAX_MESSAGE = 64 * 1024


@pytest.fixture
async def ws_url() -> AsyncIterator[WsUrl]:
    sites: list[HttpSite] = []

    async def start(protocols: Sequence[str], handler: Handler) -> str:
        async def upgrade(request: Request) -> Answer:
            return websocket.upgrade(request, protocols, handler, MAX_MESSAGE)

        routes = Routes()
        routes.get("/ws", upgrade)
        site = HttpSite(routes, "127.0.0.1", 0, ServingLimits())
        await site.start()
        sites.append(site)
        return f"http://127.0.0.1:{site.port}/ws"

    yield start
    for site in sites:
        await site.stop()


async def test_websocket_v5_exec_like_exchange(ws_url: WsUrl) -> None:
    async def handler(ws: ServerWebSocket) -> None:
        chan = ChannelWebSocket(ws, ws.protocol, 5)
        await chan.send(cc.Channel.STDOUT, b"")
        stdin = b""
        while (msg := await chan.receive()) != ChannelClosed(cc.Channel.STDIN):
            assert isinstance(msg, ChannelData) and msg.channel == cc.Channel.STDIN
            stdin += msg.data
        await chan.send(cc.Channel.STDOUT, stdin)
        await chan.send(cc.Channel.ERROR, b'{"metadata":{},"status":"Success"}')
        await chan.close()

    url = await ws_url(cc.REMOTECOMMAND_PROTOCOLS, handler)
    async with aiohttp.ClientSession() as session, session.ws_connect(url, protocols=[cc.V5_BINARY]) as ws:
        assert ws.protocol == cc.V5_BINARY
        client = ChannelWebSocket(ws, cc.V5_BINARY, 5)
        assert await client.receive() == ChannelData(cc.Channel.STDOUT, b"")
        await client.send(cc.Channel.STDIN, b"hi\n")
        await client.close_channel(cc.Channel.STDIN)
        assert await client.receive() == ChannelData(cc.Channel.STDOUT, b"hi\n")
        assert await client.receive() == ChannelData(cc.Channel.ERROR, b'{"metadata":{},"status":"Success"}')
        assert await client.receive() is None
        assert ws.close_code == 1000


async def test_spdy_port_forward_tunnelled_in_websocket(ws_url: WsUrl) -> None:
    async def handler(ws: ServerWebSocket) -> None:
        tunnel = WebSocketTunnel(ws)
        conn = SpdyConnection(tunnel, tunnel)
        runner = asyncio.create_task(conn.run())
        error, data = await conn.accept(), await conn.accept()
        assert error is not None and data is not None
        assert (data.header("streamType"), data.header("port"), data.header("requestID")) == ("data", "8080", "0")
        assert await error.read() == b""  # the client half-closes the error stream at once
        await data.write(await data.read())
        await data.close()
        await error.close()
        await conn.close()
        await runner
        await ws.close()

    url = await ws_url(cc.PORTFORWARD_PROTOCOLS, handler)
    async with aiohttp.ClientSession() as session, session.ws_connect(url, protocols=[cc.PORTFORWARD_TUNNEL]) as ws:
        encoder, decoder = FrameEncoder(), FrameDecoder()
        wire = b"".join(encoder.encode(f) for f in (
            SynStream(1, (("streamtype", "error"), ("port", "8080"), ("requestid", "0"))),
            DataFrame(1, b"", fin=True),
            SynStream(3, (("streamtype", "data"), ("port", "8080"), ("requestid", "0"))),
            DataFrame(3, b"GET / HTTP/1.0\r\n\r\n"),
        ))
        for i in range(0, len(wire), 3):  # message boundaries unrelated to frames, as kubectl's
            await ws.send_bytes(wire[i:i + 3])
        frames: list[Frame] = []
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.BINARY:
                frames += decoder.feed(msg.data)
        assert frames == [SynReply(1), SynReply(3), DataFrame(3, b"GET / HTTP/1.0\r\n\r\n"),
                          DataFrame(3, b"", fin=True), DataFrame(1, b"", fin=True), GoAway(3)]
