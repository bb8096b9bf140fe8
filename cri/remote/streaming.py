"""Interactive exec and attach on a CRI runtime: `Exec`/`Attach` return a URL of the runtime's streaming server,
spoken to here as SPDY/3.1 with the `v4.channel.k8s.io` remotecommand protocol, as kubectl and the API server
speak it: an HTTP upgrade, then one client-opened stream per channel (`streamtype` error, stdin, stdout, stderr,
resize). SPDY rather than WebSocket because only SPDY can end stdin alone on every runtime: a FIN on the stdin
stream. WebSocket needs channel protocol v5 for that, which containerd 1.6's streaming server does not speak
(docs/decisions.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from urllib.parse import urlsplit

from cri.errors import RuntimeError_
from cri.spdy import (
    DataFrame,
    Frame,
    FrameDecoder,
    FrameEncoder,
    Ping,
    RstStream,
    SpdyError,
    SynStream,
)
from cri.streaming import STDERR, STDOUT

PROTOCOL = "v4.channel.k8s.io"
CONNECT_TIMEOUT = 30.0
MAX_DATA_FRAME = 32 * 1024
MAX_RESPONSE_HEAD = 64 * 1024


def exit_code_of(status: bytes) -> int:
    """The exit code in the streaming server's final status (a metav1.Status); -1 when it names none."""
    if not status:
        return -1
    try:
        parsed = json.loads(status)
    except ValueError:
        return -1
    if parsed.get("status") == "Success":
        return 0
    if parsed.get("reason") == "NonZeroExitCode":
        for cause in (parsed.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                try:
                    return int(cause.get("message", ""))
                except ValueError:
                    return -1
    return -1


class SpdySession:
    """One exec or attach on the runtime's streaming server (cri.streaming.ExecSession)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, kinds: list[str]) -> None:
        self._reader = reader
        self._writer = writer
        self._encoder = FrameEncoder()
        self._decoder = FrameDecoder()
        self._lock = asyncio.Lock()  # header blocks must reach the zlib context in wire order
        self._ids = {kind: 1 + 2 * i for i, kind in enumerate(kinds)}
        self._kinds = {sid: kind for kind, sid in self._ids.items()}
        self._output: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue()
        self._open_outputs = {self._ids[k] for k in ("stdout", "stderr") if k in self._ids}
        self._status = bytearray()
        self._status_done = asyncio.Event()
        self._stdin_open = "stdin" in self._ids
        self._ended = False
        self._runner: asyncio.Task[None] | None = None

    async def start(self) -> None:
        for kind, sid in self._ids.items():
            await self._send(SynStream(sid, (("streamtype", kind),)))
        if not self._open_outputs:
            self._output.put_nowait(None)
        self._runner = asyncio.create_task(self._run(), name="cri-stream-reader")

    async def read(self) -> tuple[int, bytes] | None:
        if self._ended:
            return None
        chunk = await self._output.get()
        if chunk is None:
            self._ended = True
        return chunk

    async def write(self, data: bytes) -> None:
        if not (data and self._stdin_open):
            return
        for i in range(0, len(data), MAX_DATA_FRAME):
            await self._send(DataFrame(self._ids["stdin"], data[i:i + MAX_DATA_FRAME]))

    async def close_stdin(self) -> None:
        if self._stdin_open:
            self._stdin_open = False
            with contextlib.suppress(ConnectionError, OSError):
                await self._send(DataFrame(self._ids["stdin"], b"", fin=True))

    async def resize(self, width: int, height: int) -> None:
        if "resize" in self._ids:
            await self._send(DataFrame(self._ids["resize"],
                                       json.dumps({"Width": width, "Height": height}).encode() + b"\n"))

    async def exit_code(self) -> int:
        while await self.read() is not None:
            pass
        await self._status_done.wait()
        return exit_code_of(bytes(self._status))

    async def close(self) -> None:
        self._writer.close()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
            await self._writer.wait_closed()

    async def _send(self, frame: Frame) -> None:
        async with self._lock:
            self._writer.write(self._encoder.encode(frame))
            await self._writer.drain()

    async def _run(self) -> None:
        try:
            while data := await self._reader.read(65536):
                for frame in self._decoder.feed(data):
                    await self._dispatch(frame)
        except (ConnectionError, OSError, ssl.SSLError, SpdyError):
            pass  # a dropped connection or bad SPDY both end the session: the output ends, the status is as read
        finally:
            self._status_done.set()
            if self._open_outputs:
                self._open_outputs.clear()
                self._output.put_nowait(None)

    async def _dispatch(self, frame: Frame) -> None:
        match frame:
            case DataFrame(stream_id, data, fin):
                kind = self._kinds.get(stream_id)
                if data:
                    if kind == "stdout":
                        self._output.put_nowait((STDOUT, data))
                    elif kind == "stderr":
                        self._output.put_nowait((STDERR, data))
                    elif kind == "error":
                        self._status += data
                # No WINDOW_UPDATE: the runtime's spdystream neither honours nor sends them, and one arriving after
                # it stopped reading makes its close a TCP RST, which can drop the final status before we read it.
                if fin:
                    self._stream_ended(stream_id)
            case RstStream(stream_id):
                self._stream_ended(stream_id)
            case Ping(ping_id) if ping_id % 2 == 0:
                await self._send(frame)
            case _:
                pass

    def _stream_ended(self, stream_id: int) -> None:
        kind = self._kinds.get(stream_id)
        if kind == "error":
            self._status_done.set()
        elif stream_id in self._open_outputs:
            self._open_outputs.discard(stream_id)
            if not self._open_outputs:
                self._output.put_nowait(None)


async def upgrade(url: str, protocol: str = PROTOCOL) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """POST to the streaming URL with `Upgrade: SPDY/3.1` and the stream protocol; the connection after the 101."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RuntimeError_(f"the runtime's streaming URL {url!r} is not http(s)")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    ctx = ssl.create_default_context() if parts.scheme == "https" else None
    reader, writer = await asyncio.open_connection(parts.hostname, port, ssl=ctx)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    head = [f"POST {target or '/'} HTTP/1.1", f"Host: {parts.netloc}", "Content-Length: 0",
            "Connection: Upgrade", "Upgrade: SPDY/3.1", f"X-Stream-Protocol-Version: {protocol}"]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        if status != 101:
            body = await reader.read(MAX_RESPONSE_HEAD)
            raise RuntimeError_(f"the runtime's streaming server refused the upgrade: {lines[0]} "
                                f"{body[:512].decode(errors='replace').strip()}")
        negotiated = [line.split(":", 1)[1].strip() for line in lines[1:]
                      if line.lower().startswith("x-stream-protocol-version:")]
        if negotiated != [protocol]:
            raise RuntimeError_(f"the runtime's streaming server did not agree on {protocol}: {negotiated}")
    except BaseException:
        writer.close()
        raise
    return reader, writer


async def open_stream(url: str, *, stdin: bool, stdout: bool, stderr: bool, tty: bool) -> SpdySession:
    """Connect to the streaming URL and open the channels asked for (with a tty, stderr is merged and a resize
    channel is added)."""
    kinds = ["error"] + [k for k, on in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr and not tty),
                                         ("resize", tty)) if on]
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            reader, writer = await upgrade(url)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
        raise RuntimeError_(f"cannot connect to the runtime's streaming server at {url}: {exc}") from exc
    session = SpdySession(reader, writer, kinds)
    try:
        await session.start()
    except BaseException:
        await session.close()
        raise
    return session
