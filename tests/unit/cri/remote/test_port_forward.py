"""The CRI port-forward client against a scripted streaming server on loopback: the upgrade, the two streams as
kubectl opens them, bytes both ways, and the runtime's error text whichever order its frames come in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from cri.remote.port_forward import DATA_STREAM, ERROR_STREAM, forward
from cri.spdy import DataFrame, FrameDecoder, FrameEncoder, SynStream
from cri.streaming import ForwardReader

Script = Callable[[asyncio.StreamReader, Callable[[DataFrame], Awaitable[None]], list[SynStream]], Awaitable[None]]


@asynccontextmanager
async def streaming_server(script: Script) -> AsyncIterator[tuple[str, list[str]]]:
    heads: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append((await reader.readuntil(b"\r\n\r\n")).decode())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                     b"X-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n")
        encoder, decoder = FrameEncoder(), FrameDecoder()
        syns: list[SynStream] = []
        while len(syns) < 2:
            syns += [f for f in decoder.feed(await reader.read(65536)) if isinstance(f, SynStream)]

        async def send(frame: DataFrame) -> None:
            writer.write(encoder.encode(frame))
            await writer.drain()

        frames = asyncio.StreamReader()

        async def pump() -> None:
            while data := await reader.read(65536):
                for f in decoder.feed(data):
                    if isinstance(f, DataFrame) and f.stream_id == DATA_STREAM:
                        frames.feed_data(f.data)
                        if f.fin:
                            frames.feed_eof()

        task = asyncio.create_task(pump())
        try:
            await script(frames, send, syns)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/portforward/abc", heads
    finally:
        server.close()
        await server.wait_closed()


async def test_bytes_both_ways_and_the_streams_as_kubectl_opens_them() -> None:
    async def echo(frames: asyncio.StreamReader, send: Callable[[DataFrame], Awaitable[None]],
                   syns: list[SynStream]) -> None:
        assert [(s.stream_id, dict(s.headers), s.fin) for s in syns] == [
            (ERROR_STREAM, {"streamtype": "error", "port": "8080", "requestid": "0"}, True),
            (DATA_STREAM, {"streamtype": "data", "port": "8080", "requestid": "0"}, False)]
        received = await frames.read()  # until the client's FIN
        await send(DataFrame(DATA_STREAM, b"echo:" + received))
        await send(DataFrame(ERROR_STREAM, b"", fin=True))
        await send(DataFrame(DATA_STREAM, b"", fin=True))

    async with streaming_server(echo) as (url, heads):
        reader, writer = await forward(url, 8080)
        writer.write(b"x" * 100_000)
        await writer.drain()
        writer.write_eof()
        got = await asyncio.wait_for(reader.read(), 5)
        writer.close()
    assert got == b"echo:" + b"x" * 100_000
    assert isinstance(reader, ForwardReader) and reader.error == ""
    assert heads[0].startswith("POST /portforward/abc HTTP/1.1\r\n")
    assert "X-Stream-Protocol-Version: portforward.k8s.io\r\n" in heads[0]


async def test_the_error_written_after_the_data_stream_ended_is_kept() -> None:
    text = b"error forwarding port 81 to pod abc, uid : failed to connect to localhost:81"

    async def refuse(frames: asyncio.StreamReader, send: Callable[[DataFrame], Awaitable[None]],
                     syns: list[SynStream]) -> None:
        await send(DataFrame(DATA_STREAM, b"", fin=True))  # containerd's order: the data stream ends first
        await asyncio.sleep(0.1)
        await send(DataFrame(ERROR_STREAM, text))
        await send(DataFrame(ERROR_STREAM, b"", fin=True))

    async with streaming_server(refuse) as (url, _):
        reader, writer = await forward(url, 81)
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
    assert isinstance(reader, ForwardReader) and reader.error == text.decode()
