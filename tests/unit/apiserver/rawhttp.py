"""A raw HTTP/1.1 exchange over TLS, to see the bytes a watch sends (as the watch-*.raw recordings do)."""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass
from typing import Any


@dataclass
class RawResponse:
    status_line: str
    headers: dict[str, str]
    chunks: list[bytes]  # the payload of each chunk, in order; the last one is b"" (the terminator)

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(c) for c in self.chunks if c]


def parse(raw: bytes) -> RawResponse:
    """Also reads the recordings, whose line ends were stored as LF."""
    eol = b"\r\n" if b"\r\n" in raw.split(b"\n", 1)[0] + b"\n" else b"\n"
    head, _, body = raw.partition(eol + eol)
    lines = head.decode().split(eol.decode())
    headers = dict(line.split(": ", 1) for line in lines[1:])
    chunks: list[bytes] = []
    while body:
        size_line, _, rest = body.partition(eol)
        size = int(size_line, 16)
        chunks.append(rest[:size])
        assert rest[size:size + len(eol)] == eol, "every chunk ends with the line end"
        body = rest[size + len(eol):]
        if size == 0:
            break
    assert body == b"", "nothing after the terminating chunk"
    return RawResponse(lines[0], headers, chunks)


async def exchange(host: str, port: int, ctx: ssl.SSLContext, request: str, timeout: float = 30) -> bytes:
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
    writer.write(request.encode())
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
