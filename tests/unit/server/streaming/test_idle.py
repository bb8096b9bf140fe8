"""streamingConnectionIdleTimeout on a SPDY connection: data we send counts as activity, as the peer's does;
silence both ways ends the connection with GOAWAY(OK). Short real timeouts over a socket pair."""

from __future__ import annotations

import asyncio
import socket
import time

from cri.spdy import GoAwayStatus
from minikubelet.server.streaming.connection import ConnectionOptions, SpdyConnection
from tests.spdy_tunnel_client import SpdyClient

IDLE = 0.2


async def test_output_keeps_the_connection_alive_then_silence_ends_it() -> None:
    server_sock, client_sock = socket.socketpair()
    s_reader, s_writer = await asyncio.open_connection(sock=server_sock)
    conn = SpdyConnection(s_reader, s_writer, ConnectionOptions(idle_timeout=IDLE))
    running = asyncio.create_task(conn.run())
    c_reader, c_writer = await asyncio.open_connection(sock=client_sock)
    client = SpdyClient(c_reader, c_writer)
    reading = asyncio.create_task(client.run())
    try:
        await client.open((("streamtype", "data"),))
        stream = await asyncio.wait_for(conn.accept(), 5)
        assert stream is not None
        started = time.monotonic()
        while time.monotonic() - started < 3 * IDLE:  # we write, the client stays silent
            await stream.write(b"x")
            quiet = time.monotonic()
            await asyncio.sleep(IDLE / 4)
        assert client.goaway is None and not conn.closed
        await asyncio.wait_for(client.closed.wait(), 5)
        assert IDLE * 0.9 <= time.monotonic() - quiet < IDLE * 5
        assert client.goaway is not None and client.goaway.status is GoAwayStatus.OK
        assert len(client.streams[1].received) >= 8
    finally:
        c_writer.close()
        await asyncio.gather(running, reading, return_exceptions=True)
