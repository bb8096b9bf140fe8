"""tcpSocket probes against real listeners on loopback."""

from __future__ import annotations

import asyncio
import socket
import time

from probes.result import Result
from probes.tcp import probe_tcp


async def test_open_port_is_success() -> None:
    accepted = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        outcome = await probe_tcp("127.0.0.1", port, 1)
        await asyncio.wait_for(accepted.wait(), 1)
    assert outcome.result is Result.SUCCESS


async def test_peer_closing_immediately_is_still_success() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        listener.setblocking(False)
        probe = asyncio.create_task(probe_tcp("127.0.0.1", port, 1))
        loop = asyncio.get_running_loop()
        conn, _ = await loop.sock_accept(listener)
        conn.close()
        outcome = await probe
    assert outcome.result is Result.SUCCESS


async def test_closed_port_is_failure() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    outcome = await probe_tcp("127.0.0.1", port, 1)
    assert outcome.result is Result.FAILURE
    assert outcome.output == f"dial tcp 127.0.0.1:{port}: connect: connection refused"


async def test_connect_that_never_completes_times_out() -> None:
    # A listener whose accept queue is full drops further SYNs, so the connect hangs.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(4):
                filler = socket.socket()
                filler.setblocking(False)
                try:
                    filler.connect(("127.0.0.1", port))
                except BlockingIOError:
                    pass
                fillers.append(filler)
            await asyncio.sleep(0.1)
            began = time.monotonic()
            outcome = await probe_tcp("127.0.0.1", port, 0.3)
            elapsed = time.monotonic() - began
        finally:
            for filler in fillers:
                filler.close()
    assert outcome.result is Result.FAILURE
    assert outcome.output == f"dial tcp 127.0.0.1:{port}: i/o timeout"
    assert 0.25 < elapsed < 1.5
