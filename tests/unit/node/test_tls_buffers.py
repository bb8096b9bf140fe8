"""Smaller TLS read buffers: each connection's buffer is the smaller size and a body many times larger than it
crosses a real loopback TLS connection intact, both ways."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import os
import ssl
from pathlib import Path

import pytest

from minikubelet.node.tls_buffers import TLS_READ_BUFFER, shrink_tls_read_buffers
from minikubelet.server.tls import self_signed_paths, serving_context, write_self_signed


async def test_large_bodies_cross_tls_with_the_smaller_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", asyncio.sslproto.SSLProtocol.max_size)
    shrink_tls_read_buffers()
    assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER == 16 * 1024
    cert, key = self_signed_paths(str(tmp_path))
    write_self_signed(cert, key, "node-1", ["127.0.0.1"])
    server = serving_context(cert, key, "", root_dir=str(tmp_path), host="node-1", ips=["127.0.0.1"])
    client = ssl.create_default_context(cafile=cert)
    body = os.urandom(3 * 1024 * 1024 + 7)
    buffers: list[int] = []

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        buffers.append(len(writer.transport._ssl_protocol._ssl_buffer))  # type: ignore[attr-defined]
        writer.write(await reader.readexactly(len(body)))
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server)
    port = srv.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
        writer.write(body)
        await writer.drain()
        assert await asyncio.wait_for(reader.readexactly(len(body)), 30) == body
        writer.close()
    finally:
        srv.close()
        await srv.wait_closed()
    assert buffers == [TLS_READ_BUFFER]
