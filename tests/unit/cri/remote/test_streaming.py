"""The CRI streaming client (`cri/remote/streaming.py`) against our own SPDY server side over a socket pair: the
streams kubectl opens, stdin then its end as a FIN, output in order, the v4 Status read as the exit code."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from cri.remote.streaming import SpdySession, exit_code_of
from cri.spdy import FrameDecoder, WindowUpdate
from cri.streaming import STDERR, STDOUT
from minikubelet.server.streaming.connection import SpdyConnection, SpdyStream

FAILED_7 = json.dumps({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                       "details": {"causes": [{"reason": "ExitCode", "message": "7"}]}}).encode()


@dataclass
class Pair:
    session: SpdySession
    server: SpdyConnection
    client_bytes: bytearray  # everything the client sent, as the server read it


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    server_sock, client_sock = socket.socketpair()
    s_reader, s_writer = await asyncio.open_connection(sock=server_sock)
    seen = bytearray()

    class Tap:
        async def read(self, n: int) -> bytes:
            data = await s_reader.read(n)
            seen.extend(data)
            return data

    conn = SpdyConnection(Tap(), s_writer)
    running = asyncio.create_task(conn.run())
    c_reader, c_writer = await asyncio.open_connection(sock=client_sock)
    session = SpdySession(c_reader, c_writer, ["error", "stdin", "stdout", "stderr"])
    await session.start()
    try:
        yield Pair(session, conn, seen)
    finally:
        await session.close()
        await conn.close()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        s_writer.close()


async def streams_of(conn: SpdyConnection, n: int) -> dict[str, SpdyStream]:
    out: dict[str, SpdyStream] = {}
    while len(out) < n:
        stream = await asyncio.wait_for(conn.accept(), 5)
        assert stream is not None
        out[stream.header("streamtype") or ""] = stream
    return out


async def test_stdin_then_eof_reach_the_process_and_the_status_is_the_exit_code(pair: Pair) -> None:
    streams = await streams_of(pair.server, 4)
    assert list(streams) == ["error", "stdin", "stdout", "stderr"]  # kubectl's order

    await pair.session.write(b"hello\n")
    await pair.session.close_stdin()
    received = b""
    while chunk := await asyncio.wait_for(streams["stdin"].read(), 5):
        received += chunk
    assert received == b"hello\n"  # then b"": the FIN, i.e. EOF for the process
    await pair.session.write(b"late")  # after EOF nothing more is sent

    await streams["stdout"].write(b"got: hello\n")
    await streams["stderr"].write(b"oops\n")
    await streams["error"].write(FAILED_7)
    await pair.server.close()
    got = []
    while (piece := await asyncio.wait_for(pair.session.read(), 5)) is not None:
        got.append(piece)
    assert got == [(STDOUT, b"got: hello\n"), (STDERR, b"oops\n")]
    assert await asyncio.wait_for(pair.session.exit_code(), 5) == 7
    sent = FrameDecoder().feed(bytes(pair.client_bytes))
    assert not [f for f in sent if isinstance(f, WindowUpdate)]  # spdystream peers neither need nor honour them
    assert b"late" not in pair.client_bytes


async def test_output_ends_when_both_output_streams_end(pair: Pair) -> None:
    streams = await streams_of(pair.server, 4)
    await streams["stdout"].write(b"a")
    await streams["stdout"].close()
    await streams["stderr"].close()
    assert await asyncio.wait_for(pair.session.read(), 5) == (STDOUT, b"a")
    assert await asyncio.wait_for(pair.session.read(), 5) is None
    await streams["error"].write(b'{"metadata":{},"status":"Success"}')
    await streams["error"].close()
    assert await asyncio.wait_for(pair.session.exit_code(), 5) == 0


@pytest.mark.parametrize(("status", "code"), [
    (b"", -1), (b"not json", -1), (b'{"status":"Success"}', 0), (FAILED_7, 7),
    (b'{"status":"Failure","reason":"InternalError"}', -1),
])
def test_exit_code_of(status: bytes, code: int) -> None:
    assert exit_code_of(status) == code
