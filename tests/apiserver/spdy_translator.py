"""kube-apiserver's StreamTranslator for exec/attach: kubectl's WebSocket (`v5.channel.k8s.io`) on one side, a
SPDY/3.1 connection to a kubelet that does not declare ExtendWebSocketsToKubelet on the other, as recorded in
`exec-*-spdy` (the POST upgrade offering v5 down to `channel.k8s.io`, one client stream per channel with a
`streamtype` header in the order error, stdin, stdout, stderr, resize; end of stdin as an empty DATA+FIN). Each
size from channel 4 goes on the resize stream as one JSON line, as the SPDY executor writes it (the kubelet reads
that stream line by line).

The frames are the agent's own SPDY codec (`cri.spdy`); this is the client half the
agent does not need. Windows are not enforced (spdystream does not either); the kubelet's WINDOW_UPDATEs are
read and ignored; PINGs are echoed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from cri import spdy

OFFERED = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
MAX_HEAD = 16 * 1024
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4


class UpgradeRefused(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(body)
        self.status = status
        self.body = body


@dataclass
class SpdyClient:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    protocol: str
    encoder: spdy.FrameEncoder = field(default_factory=spdy.FrameEncoder)
    decoder: spdy.FrameDecoder = field(default_factory=spdy.FrameDecoder)
    next_id: int = 1

    async def send(self, frame: spdy.Frame) -> None:
        self.writer.write(self.encoder.encode(frame))
        await self.writer.drain()

    async def open(self, streamtype: str) -> int:
        stream_id, self.next_id = self.next_id, self.next_id + 2
        await self.send(spdy.SynStream(stream_id, (("streamtype", streamtype),)))
        return stream_id


async def connect(host: str, port: int, ctx: ssl.SSLContext, target: str,
                  headers: Sequence[tuple[str, str]] | None = None) -> SpdyClient:
    """The POST upgrade (its headers after the request line: exec/attach's unless given); raises UpgradeRefused
    with the kubelet's answer when it is not a 101."""
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
    if headers is None:
        headers = [("Host", f"{host}:{port}"), ("User-Agent", "Go-http-client/1.1"), ("Content-Length", "0"),
                   ("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1"),
                   *(("X-Stream-Protocol-Version", p) for p in OFFERED)]
    head = [f"POST {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    raw = await reader.readuntil(b"\r\n\r\n")
    if len(raw) > MAX_HEAD:
        raise UpgradeRefused(502, "response head too large")
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    answer = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:] if line)}
    if status != 101:
        length = int(answer.get("content-length", "0") or 0)
        body = (await reader.readexactly(min(length, 4096))).decode(errors="replace") if length else ""
        writer.close()
        raise UpgradeRefused(status, body.strip())
    return SpdyClient(reader, writer, answer.get("x-stream-protocol-version", ""))


class TerminalSizes:
    """Channel 4's JSON sizes (decoded as they come, as the WebSocket side's json.Decoder does) re-encoded for the
    SPDY resize stream the way the SPDY executor writes them: `{"Width":w,"Height":h}` and a newline each."""

    def __init__(self) -> None:
        self._pending = ""
        self._broken = False

    def feed(self, data: bytes) -> list[bytes]:
        if self._broken:
            return []
        self._pending += data.decode(errors="replace")
        out: list[bytes] = []
        decoder = json.JSONDecoder()
        while self._pending.strip():
            text = self._pending.lstrip()
            try:
                size, end = decoder.raw_decode(text)
            except json.JSONDecodeError:
                if len(text) > MAX_HEAD:
                    self._broken = True
                return out
            self._pending = text[end:]
            try:
                width, height = int(size["Width"]), int(size["Height"])
            except (TypeError, KeyError, ValueError):
                self._broken = True  # a bad size ends the size queue, as upstream's decoder error does
                return out
            out.append(json.dumps({"Width": width, "Height": height}, separators=(",", ":")).encode() + b"\n")
        return out


async def translate(ws: web.WebSocketResponse, client: SpdyClient, *, stdin: bool, stdout: bool, stderr: bool,
                    tty: bool) -> None:
    """Relay until the kubelet ends the SPDY connection, then close the WebSocket (1000)."""
    channel_of: dict[int, int] = {}
    stream_of: dict[int, int] = {}
    for kind, channel, wanted in (("error", ERROR, True), ("stdin", STDIN, stdin), ("stdout", STDOUT, stdout),
                                  ("stderr", STDERR, stderr and not tty), ("resize", RESIZE, tty)):
        if wanted:
            sid = await client.open(kind)
            channel_of[sid], stream_of[channel] = channel, sid
    # the v5 server's first message, on the lowest writable channel, as the kubelet's own WebSocket
    await ws.send_bytes(bytes([STDOUT if stdout else STDERR if stderr and not tty else ERROR]))
    error = bytearray()
    sizes = TerminalSizes()

    async def from_kubelet() -> None:
        while data := await client.reader.read(64 * 1024):
            for frame in client.decoder.feed(data):
                if isinstance(frame, spdy.DataFrame) and frame.stream_id in channel_of:
                    channel = channel_of[frame.stream_id]
                    if channel == ERROR:
                        error.extend(frame.data)
                    elif frame.data:
                        await ws.send_bytes(bytes([channel]) + frame.data)
                elif isinstance(frame, spdy.Ping):
                    await client.send(frame)
                elif isinstance(frame, spdy.GoAway):
                    return

    async def from_client() -> None:
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                continue
            channel, payload = msg.data[0], msg.data[1:]
            if channel == 0xFF and payload[:1] == bytes([STDIN]) and STDIN in stream_of:
                await client.send(spdy.DataFrame(stream_of[STDIN], b"", fin=True))
            elif channel == STDIN and channel in stream_of:
                await client.send(spdy.DataFrame(stream_of[channel], bytes(payload)))
            elif channel == RESIZE and channel in stream_of:
                for size in sizes.feed(payload):
                    await client.send(spdy.DataFrame(stream_of[channel], size))

    upstream = asyncio.create_task(from_kubelet())
    downstream = asyncio.create_task(from_client())
    try:
        await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        downstream.cancel()
        upstream.cancel()
        await asyncio.gather(upstream, downstream, return_exceptions=True)
        client.writer.close()
    with contextlib.suppress(ConnectionError):
        if error:
            await ws.send_bytes(bytes([ERROR]) + bytes(error))
        await ws.close()
