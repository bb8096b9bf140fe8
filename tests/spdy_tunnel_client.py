"""A byte-level SPDY/3.1 client as kube-apiserver speaks it to a kubelet (moby/spdystream), over any reader/writer
(a TLS socket or the port-forward WebSocket tunnel): the POST upgrade, then
client-opened streams (odd ids) with headers, data, FIN. Built on the agent's own frame codec, which the unit tests
pin against the recorded bytes; used by the integration tests as the API server would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol

from cri.spdy import (
    DataFrame,
    FrameDecoder,
    FrameEncoder,
    GoAway,
    Headers,
    Ping,
    RstStatus,
    RstStream,
    SynReply,
    SynStream,
)


class Reader(Protocol):
    async def read(self, n: int) -> bytes: ...


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    def drain(self) -> Awaitable[None]: ...


@dataclass
class ClientStream:
    client: SpdyClient
    id: int
    replied: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # FIN or RST from the server
    received: bytearray = field(default_factory=bytearray)
    remote_fin: bool = False
    reset: RstStatus | None = None

    async def write(self, data: bytes, fin: bool = False) -> None:
        await self.client.send(DataFrame(self.id, data, fin))

    async def close(self) -> None:
        await self.client.send(DataFrame(self.id, b"", True))

    async def read_all(self, timeout: float = 10.0) -> bytes:
        """Everything the server sent until its FIN or RST_STREAM."""
        async with asyncio.timeout(timeout):
            await self.ended.wait()
        return bytes(self.received)


class SpdyClient:
    """One SPDY connection over any byte transport; `run()` reads frames until the server closes it."""

    def __init__(self, reader: Reader, writer: Writer, split_frames: bool = False) -> None:
        self.reader, self.writer = reader, writer
        self.encoder, self.decoder = FrameEncoder(), FrameDecoder()
        self.streams: dict[int, ClientStream] = {}
        self.goaway: GoAway | None = None
        self.closed = asyncio.Event()
        self.events: list[tuple[str, int]] = []  # ("reply" | "fin" | "rst", stream id) in arrival order
        self._next_id = 1
        self._lock = asyncio.Lock()
        self._split = split_frames  # kubectl's tunnel writes a frame's 8-byte head and its body separately

    async def send(self, frame: SynStream | DataFrame | RstStream | Ping) -> None:
        async with self._lock:
            raw = self.encoder.encode(frame)
            for piece in (raw[:8], raw[8:]) if self._split and len(raw) > 8 else (raw,):
                self.writer.write(piece)
                await self.writer.drain()

    async def open(self, headers: Headers, timeout: float = 10.0) -> ClientStream:
        async with self._lock:
            stream = self.streams[self._next_id] = ClientStream(self, self._next_id)
            self._next_id += 2
        await self.send(SynStream(stream.id, headers))
        return stream

    async def run(self) -> None:
        try:
            while data := await self.reader.read(65536):
                for frame in self.decoder.feed(data):
                    self._dispatch(frame)
        except (ConnectionError, OSError):
            pass
        finally:
            for stream in self.streams.values():
                stream.ended.set()
            self.closed.set()

    def _dispatch(self, frame: object) -> None:
        match frame:
            case SynReply(sid):
                self.events.append(("reply", sid))
                if (s := self.streams.get(sid)) is not None:
                    s.replied.set()
            case DataFrame(sid, data, fin):
                if (s := self.streams.get(sid)) is not None:
                    s.received += data
                    if fin:
                        self.events.append(("fin", sid))
                        s.remote_fin = True
                        s.ended.set()
            case RstStream(sid, status):
                self.events.append(("rst", sid))
                if (s := self.streams.get(sid)) is not None:
                    s.reset = status
                    s.ended.set()
            case GoAway():
                self.goaway = frame


async def spdy_upgrade(host: str, port: int, path: str, ctx: ssl.SSLContext | None,
                       protocol: str = "portforward.k8s.io") -> tuple[bytes, asyncio.StreamReader,
                                                                      asyncio.StreamWriter]:
    """The POST upgrade the v1.36 API server sends (recorded headers); the response head and the connection."""
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx)
    writer.write((f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kubectl/v1.36.2 (linux/amd64)\r\n"
                  "Content-Length: 0\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                  f"X-Stream-Protocol-Version: {protocol}\r\n\r\n").encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    return head, reader, writer


async def close_writer(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
        await writer.wait_closed()
