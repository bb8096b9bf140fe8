"""The client side of a SPDY/3.1 remotecommand connection, as kube-apiserver v1.36 opens it towards a kubelet
whose Node does not declare ExtendWebSocketsToKubelet (recorded in tests/fixtures/kubernetes/kubelet-api/
`exec-*-spdy`, `attach-spdy`, `cp-spdy`): `POST` with `Upgrade: SPDY/3.1` and the five
`X-Stream-Protocol-Version` offers, then one client-opened stream per channel with a `streamtype` header, in the
recorded order (error, stdin, stdout, stderr, resize). Built on the agent's own frame codec; used by the
integration tests and the bench.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from dataclasses import dataclass, field
from typing import Any

from cri.spdy import (
    DataFrame,
    Frame,
    FrameDecoder,
    FrameEncoder,
    GoAway,
    Headers,
    Ping,
    RstStream,
    SynReply,
    SynStream,
)

REMOTECOMMAND_OFFER = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io",
                       "channel.k8s.io")
MAX_RESPONSE_HEAD = 64 * 1024
MAX_DATA_FRAME = 32 * 1024  # spdystream's io.Copy buffer


class UpgradeRefused(Exception):
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        super().__init__(f"upgrade refused: {status} {body[:200]!r}")
        self.status, self.headers, self.body = status, headers, body


class ClientStream:
    def __init__(self, client: SpdyClient, stream_id: int) -> None:
        self._client = client
        self.id = stream_id
        self.replied = asyncio.Event()
        self.data = bytearray()
        self.fin = False
        self.reset: RstStream | None = None
        self._changed = asyncio.Event()

    async def write(self, data: bytes) -> None:
        for i in range(0, len(data), MAX_DATA_FRAME):
            await self._client.send(DataFrame(self.id, data[i:i + MAX_DATA_FRAME]))

    async def close(self) -> None:
        """End of this side: an empty DATA frame with FIN, as spdystream closes stdin."""
        await self._client.send(DataFrame(self.id, b"", fin=True))

    @property
    def ended(self) -> bool:
        return self.fin or self.reset is not None or self._client.closed

    async def read_all(self) -> bytes:
        """Everything until the server's FIN, its RST_STREAM or the end of the connection."""
        while not self.ended:
            await self._wait()
        return bytes(self.data)

    async def read_until(self, marker: bytes) -> bytes:
        while marker not in self.data:
            if self.ended:
                raise EOFError(f"stream {self.id} ended before {marker!r}: {bytes(self.data)[-200:]!r}")
            await self._wait()
        return bytes(self.data)

    async def _wait(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()


@dataclass
class SpdyClient:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    protocol: str
    response_headers: dict[str, list[str]]
    frames: list[Frame] = field(default_factory=list)  # every frame received, in order
    closed: bool = False
    _encoder: FrameEncoder = field(default_factory=FrameEncoder)
    _decoder: FrameDecoder = field(default_factory=FrameDecoder)
    _streams: dict[int, ClientStream] = field(default_factory=dict)
    _next_id: int = 1
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _runner: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, host: str, port: int, target: str, ssl_ctx: ssl.SSLContext | None,
                      offer: tuple[str, ...] = REMOTECOMMAND_OFFER) -> SpdyClient:
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_ctx)
        head = [f"POST {target} HTTP/1.1", f"Host: {host}:{port}", "User-Agent: Go-http-client/1.1",
                "Content-Length: 0", "Connection: Upgrade", "Upgrade: SPDY/3.1",
                *(f"X-Stream-Protocol-Version: {v}" for v in offer)]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            writer.close()
            raise UpgradeRefused(0, {}, exc.partial) from exc
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers: dict[str, list[str]] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers.setdefault(k.strip().lower(), []).append(v.strip())
        if status != 101:
            length = int((headers.get("content-length") or ["-1"])[0])
            body = await (reader.readexactly(length) if length >= 0 else reader.read(MAX_RESPONSE_HEAD))
            writer.close()
            raise UpgradeRefused(status, {k: v[0] for k, v in headers.items()}, body)
        client = cls(reader, writer, (headers.get("x-stream-protocol-version") or [""])[0], headers)
        client._runner = asyncio.create_task(client._run(), name="spdy-client-reader")
        return client

    async def open(self, headers: Headers) -> ClientStream:
        stream = ClientStream(self, self._next_id)
        self._streams[stream.id] = stream
        self._next_id += 2
        await self.send(SynStream(stream.id, headers))
        return stream

    async def send(self, frame: Frame) -> None:
        async with self._lock:  # header blocks must reach the zlib context in wire order
            self.writer.write(self._encoder.encode(frame))
            await self.writer.drain()

    async def wait_closed(self) -> None:
        if self._runner is not None:
            await asyncio.shield(self._runner)

    async def close(self) -> None:
        self.writer.close()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
            await self.writer.wait_closed()

    async def _run(self) -> None:
        try:
            while data := await self.reader.read(65536):
                for frame in self._decoder.feed(data):
                    self.frames.append(frame)
                    await self._dispatch(frame)
        except (ConnectionError, OSError, ssl.SSLError):
            pass
        finally:
            self.closed = True
            for stream in self._streams.values():
                stream.replied.set()
                stream._notify()

    async def _dispatch(self, frame: Frame) -> None:
        match frame:
            case SynReply(stream_id):
                if (stream := self._streams.get(stream_id)) is not None:
                    stream.replied.set()
            case DataFrame(stream_id, data, fin):
                if (stream := self._streams.get(stream_id)) is not None:
                    stream.data += data
                    stream.fin = stream.fin or fin
                    stream._notify()
            case RstStream(stream_id):
                if (stream := self._streams.get(stream_id)) is not None:
                    stream.reset = frame
                    stream._notify()
            case Ping(ping_id) if ping_id % 2 == 0:
                await self.send(frame)
            case GoAway():
                for stream in self._streams.values():
                    stream._notify()


@dataclass
class RemoteCommand:
    """One exec/attach session's streams, opened as the API server opens them."""

    client: SpdyClient
    streams: dict[str, ClientStream]

    @classmethod
    async def open(cls, client: SpdyClient, *, stdin: bool, stdout: bool, stderr: bool,
                   tty: bool) -> RemoteCommand:
        kinds = ["error"] + [k for k, on in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr and not tty),
                                             ("resize", tty)) if on]
        streams = {k: await client.open((("streamtype", k),)) for k in kinds}
        for stream in streams.values():
            await stream.replied.wait()
        return cls(client, streams)

    async def resize(self, width: int, height: int) -> None:
        await self.streams["resize"].write(json.dumps({"Width": width, "Height": height}).encode() + b"\n")

    async def status(self) -> dict[str, Any]:
        """The Status JSON the server writes on the error stream at the end (v4+)."""
        raw = await self.streams["error"].read_all()
        parsed: dict[str, Any] = json.loads(raw) if raw else {}
        return parsed


@dataclass
class Outcome:
    stdout: bytes
    stderr: bytes
    status: dict[str, Any]


async def run(host: str, port: int, target: str, ssl_ctx: ssl.SSLContext | None, *, stdin: bytes | None = None,
              stdout: bool = True, stderr: bool = True, tty: bool = False, stdin_after: float = 0.0) -> Outcome:
    """One whole session: open, send stdin `stdin_after` seconds later (then the empty DATA+FIN), collect output
    and the Status."""
    client = await SpdyClient.connect(host, port, target, ssl_ctx)
    try:
        rc = await RemoteCommand.open(client, stdin=stdin is not None, stdout=stdout, stderr=stderr, tty=tty)
        if stdin is not None:
            await asyncio.sleep(stdin_after)
            if stdin:
                await rc.streams["stdin"].write(stdin)
            await rc.streams["stdin"].close()
        out = await rc.streams["stdout"].read_all() if stdout else b""
        err = await rc.streams["stderr"].read_all() if "stderr" in rc.streams else b""
        return Outcome(out, err, await rc.status())
    finally:
        await client.close()
