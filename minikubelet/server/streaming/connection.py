"""A SPDY/3.1 server connection over a byte transport (the hijacked HTTP/1.1 connection after the 101, or the
WebSocket tunnel of `channels.py`).

The peer (the API server) opens every stream; each gets an empty SYN_REPLY at once, as the recorded kubelet
does, and is handed to `accept()`. Streams are async byte streams with FIN half-close and RST_STREAM.

Flow control: we account both windows of SPDY/3.1 and send WINDOW_UPDATE as the application consumes data.
The peer Kubernetes uses, moby/spdystream, neither sends WINDOW_UPDATE nor honours windows, so by default our
writes are paced by the transport (TCP) rather than by the peer's window (`enforce_send_window=False`), and a
peer that overruns our receive window is paced by per-stream buffer bounds (we stop reading the socket) instead
of being reset. A conformant peer gets real SPDY/3.1 flow control with `enforce_send_window=True`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from cri import spdy
from cri.spdy import (
    DataFrame,
    Frame,
    GoAway,
    GoAwayStatus,
    Headers,
    HeadersFrame,
    Ping,
    RstStatus,
    RstStream,
    SettingId,
    Settings,
    SpdyError,
    SynReply,
    SynStream,
    WindowUpdate,
)

log = logging.getLogger("minikubelet.server.streaming")


class ByteReader(Protocol):
    async def read(self, n: int) -> bytes: ...


class ByteWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    def drain(self) -> Awaitable[None]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ConnectionOptions:
    limits: spdy.Limits = field(default_factory=spdy.Limits)
    idle_timeout: float = 4 * 3600.0  # kubelet streamingConnectionIdleTimeout default
    read_size: int = 64 * 1024
    max_streams: int = 64  # open streams at once; more are refused (RST_STREAM REFUSED_STREAM)
    max_stream_buffer: int = 256 * 1024  # received, unread bytes per stream before we stop reading the socket
    max_data_frame: int = 32 * 1024  # what we put in one DATA frame (spdystream's io.Copy buffer size)
    enforce_send_window: bool = False


class StreamReset(Exception):
    def __init__(self, stream_id: int, status: RstStatus) -> None:
        super().__init__(f"stream {stream_id} reset: {status.name}")
        self.status = status


class SpdyStream:
    def __init__(self, conn: SpdyConnection, frame: SynStream, initial_send_window: int) -> None:
        self._conn = conn
        self.id = frame.stream_id
        self.headers: Headers = frame.headers
        self.state = spdy.StreamState(self.id, send_window=spdy.FlowWindow(initial_send_window))
        self.reset_status: RstStatus | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._unacked = 0
        self._readable = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self._writable = asyncio.Event()
        self._writable.set()
        if frame.fin:
            self.state.on_remote_fin()

    def header(self, name: str) -> str | None:
        return spdy.header(self.headers, name)

    async def read(self, n: int = 64 * 1024) -> bytes:
        """Up to n bytes; b"" once the peer half-closed (FIN) or the stream was reset."""
        while not self._chunks:
            if self.state.remote_closed or self.reset_status is not None or self._conn.closed:
                return b""
            self._readable.clear()
            await self._readable.wait()
        chunk = self._chunks.popleft()
        if len(chunk) > n:
            self._chunks.appendleft(chunk[n:])
            chunk = chunk[:n]
        self._buffered -= len(chunk)
        if self._buffered <= self._conn.options.max_stream_buffer:
            self._drained.set()
        self._conn._forget_if_closed(self)
        await self._conn._consumed(self, len(chunk))
        return chunk

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            self._check_writable()
            size = min(len(view), self._conn.options.max_data_frame)
            if self._conn.options.enforce_send_window:
                size = await self._conn._reserve_window(self, size)
            else:
                self.state.send_window.spend(size)
                self._conn.send_window.spend(size)
            await self._conn._send(DataFrame(self.id, bytes(view[:size])))
            view = view[size:]

    async def close(self) -> None:
        """Half-close: an empty DATA frame with FIN."""
        if self.state.local_closed or self.reset_status is not None:
            return
        self.state.on_local_fin()
        await self._conn._send(DataFrame(self.id, b"", fin=True))
        self._conn._forget_if_closed(self)

    async def reset(self, status: RstStatus = RstStatus.CANCEL) -> None:
        if self.reset_status is not None:
            return
        self._on_reset(status)
        self._conn._streams.pop(self.id, None)
        await self._conn._send(RstStream(self.id, status))

    def _check_writable(self) -> None:
        if self.reset_status is not None:
            raise StreamReset(self.id, self.reset_status)
        if self.state.local_closed:
            raise StreamReset(self.id, RstStatus.STREAM_ALREADY_CLOSED)
        if self._conn.closed:
            raise ConnectionError("SPDY connection closed")

    def _on_data(self, frame: DataFrame) -> None:
        self.state.on_data(len(frame.data), frame.fin)
        if frame.data:
            self._chunks.append(frame.data)
            self._buffered += len(frame.data)
            if self._buffered > self._conn.options.max_stream_buffer:
                self._drained.clear()
        self._readable.set()

    def _on_reset(self, status: RstStatus) -> None:
        self.reset_status = status
        self.state.on_reset()
        self._chunks.clear()
        self._readable.set()
        self._drained.set()
        self._writable.set()


class SpdyConnection:
    """Server side of one SPDY/3.1 connection; `run()` reads frames until the peer or we end the connection."""

    def __init__(self, reader: ByteReader, writer: ByteWriter, options: ConnectionOptions | None = None,
                 reject: Callable[[Headers], str | None] | None = None) -> None:
        """`reject` looks at each new stream's headers: a reason refuses it (RST_STREAM CANCEL, no SYN_REPLY),
        as upstream's stream handlers do."""
        self.options = options or ConnectionOptions()
        self._reject = reject
        self._last_activity = time.monotonic()
        self._reader = reader
        self._writer = writer
        self._decoder = spdy.FrameDecoder(self.options.limits)
        self._encoder = spdy.FrameEncoder()
        self._write_lock = asyncio.Lock()
        self._streams: dict[int, SpdyStream] = {}
        self._incoming: asyncio.Queue[SpdyStream | None] = asyncio.Queue()
        self._last_peer_stream = 0
        self._initial_send_window = spdy.DEFAULT_INITIAL_WINDOW
        self.send_window = spdy.FlowWindow()
        self._conn_unacked = 0
        self._window_grown = asyncio.Event()
        self.goaway_sent = False
        self.goaway_received: GoAway | None = None
        self.closed = False
        self._closed_event = asyncio.Event()

    async def accept(self) -> SpdyStream | None:
        """The next stream the peer opened; None once the connection is closing."""
        if self.closed and self._incoming.empty():
            return None
        return await self._incoming.get()

    async def run(self) -> None:
        try:
            while not self.closed:
                left = self.options.idle_timeout - (time.monotonic() - self._last_activity)
                try:
                    data = await asyncio.wait_for(self._reader.read(self.options.read_size), max(left, 0.0))
                except TimeoutError:
                    if time.monotonic() - self._last_activity < self.options.idle_timeout:
                        continue  # we sent data meanwhile: not idle
                    log.info("SPDY connection idle for %.0fs, closing", self.options.idle_timeout)
                    await self.goaway(GoAwayStatus.OK)
                    break
                if not data:
                    break
                self._last_activity = time.monotonic()
                try:
                    frames = self._decoder.feed(data)
                except SpdyError as exc:
                    log.info("SPDY protocol error from peer: %s", str(exc)[:200])
                    await self.goaway(GoAwayStatus.PROTOCOL_ERROR)
                    break
                for frame in frames:
                    await self._dispatch(frame)
                    if self.closed:
                        break
        except (ConnectionError, OSError) as exc:
            log.info("SPDY connection lost: %s", exc)
        finally:
            self._shutdown()

    async def goaway(self, status: GoAwayStatus = GoAwayStatus.OK) -> None:
        """Tell the peer we accept no more streams (GOAWAY names the last one we took)."""
        if self.goaway_sent or self.closed:
            return
        self.goaway_sent = True
        with contextlib.suppress(ConnectionError, OSError):
            await self._send(GoAway(self._last_peer_stream, status))

    async def close(self) -> None:
        """Orderly end: GOAWAY(OK) if not sent yet, then close the transport."""
        await self.goaway(GoAwayStatus.OK)
        self._shutdown()

    def forget(self, stream: SpdyStream) -> None:
        """Stop tracking a stream we are done with although the peer has not closed its half (upstream's
        `RemoveStreams`): it no longer counts against `max_streams`, and its later frames are dropped."""
        self._streams.pop(stream.id, None)
        stream._on_reset(RstStatus.CANCEL)

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    # -- frame handling ---------------------------------------------------------------------------------------

    async def _dispatch(self, frame: Frame) -> None:
        match frame:
            case SynStream():
                await self._on_syn_stream(frame)
            case DataFrame():
                await self._on_data(frame)
            case RstStream(stream_id, status):
                stream = self._streams.pop(stream_id, None)
                if stream is not None:
                    stream._on_reset(status)
            case HeadersFrame(stream_id, _, fin):
                stream = self._streams.get(stream_id)
                if stream is not None and fin:
                    stream.state.on_remote_fin()
                    stream._readable.set()
                    self._forget_if_closed(stream)
            case WindowUpdate(stream_id, delta):
                self._on_window_update(stream_id, delta)
            case Settings(values, _):
                self._on_settings(values)
            case Ping(ping_id):
                if ping_id % 2 == 1:  # client-initiated ids are odd: echo; ours (even) we never send
                    await self._send(frame)
            case GoAway():
                self.goaway_received = frame
                for stream_id in [s for s in self._streams if s > frame.last_good_stream_id]:
                    self._streams.pop(stream_id)._on_reset(RstStatus.REFUSED_STREAM)
                self._incoming.put_nowait(None)
            case SynReply():
                pass  # we open no streams; spdystream ignores stray replies too

    async def _on_syn_stream(self, frame: SynStream) -> None:
        sid = frame.stream_id
        if sid % 2 == 0 or sid <= self._last_peer_stream:
            log.info("SPDY peer opened stream %d out of order", sid)
            await self.goaway(GoAwayStatus.PROTOCOL_ERROR)
            self._shutdown()
            return
        self._last_peer_stream = sid
        if self.goaway_sent or len(self._streams) >= self.options.max_streams:
            await self._send(RstStream(sid, RstStatus.REFUSED_STREAM))
            return
        if self._reject is not None and (reason := self._reject(frame.headers)) is not None:
            log.info("SPDY stream %d rejected: %s", sid, reason[:200])
            await self._send(RstStream(sid, RstStatus.CANCEL))
            return
        stream = SpdyStream(self, frame, self._initial_send_window)
        self._streams[sid] = stream
        await self._send(SynReply(sid))
        self._incoming.put_nowait(stream)

    async def _on_data(self, frame: DataFrame) -> None:
        stream = self._streams.get(frame.stream_id)
        if stream is None:
            if frame.stream_id > self._last_peer_stream:
                await self._send(RstStream(frame.stream_id, RstStatus.INVALID_STREAM))
            return  # data racing our RST_STREAM or our close: dropped, as spdystream does
        try:
            stream._on_data(frame)
        except SpdyError as exc:
            self._streams.pop(frame.stream_id, None)
            stream._on_reset(exc.status)
            await self._send(RstStream(frame.stream_id, exc.status))
            return
        self._forget_if_closed(stream)
        if not stream._drained.is_set():
            # Backpressure: stop reading the socket until the application drains this stream.
            await stream._drained.wait()

    def _on_window_update(self, stream_id: int, delta: int) -> None:
        try:
            if stream_id == 0:
                self.send_window.grow(delta)
            elif (stream := self._streams.get(stream_id)) is not None:
                stream.state.send_window.grow(delta)
        except SpdyError:
            log.info("SPDY peer overflowed a send window on stream %d", stream_id)
            return
        self._window_grown.set()

    def _on_settings(self, values: tuple[spdy.Setting, ...]) -> None:
        for setting in values:
            if setting.id == SettingId.INITIAL_WINDOW_SIZE and setting.value <= spdy.MAX_WINDOW:
                for stream in self._streams.values():
                    stream.state.send_window.adjust_initial(self._initial_send_window, setting.value)
                self._initial_send_window = setting.value
                self._window_grown.set()

    # -- used by streams --------------------------------------------------------------------------------------

    async def _send(self, frame: Frame) -> None:
        if self.closed:
            raise ConnectionError("SPDY connection closed")
        if isinstance(frame, DataFrame) and frame.data:
            self._last_activity = time.monotonic()
        async with self._write_lock:  # the zlib context must see header blocks in wire order
            self._writer.write(self._encoder.encode(frame))
            await self._writer.drain()

    async def _consumed(self, stream: SpdyStream, n: int) -> None:
        stream._unacked += n
        self._conn_unacked += n
        threshold = spdy.DEFAULT_INITIAL_WINDOW // 2
        updates: list[Frame] = []
        if stream._unacked >= threshold and not stream.state.remote_closed and stream.reset_status is None:
            stream.state.recv_window.grow(stream._unacked)
            updates.append(WindowUpdate(stream.id, stream._unacked))
            stream._unacked = 0
        if self._conn_unacked >= threshold:
            updates.append(WindowUpdate(0, self._conn_unacked))
            self._conn_unacked = 0
        for update in updates:
            with contextlib.suppress(ConnectionError, OSError):
                await self._send(update)

    async def _reserve_window(self, stream: SpdyStream, wanted: int) -> int:
        while True:
            stream._check_writable()
            available = min(stream.state.send_window.size, self.send_window.size)
            if available > 0:
                size = min(wanted, available)
                stream.state.send_window.spend(size)
                self.send_window.spend(size)
                return size
            self._window_grown.clear()
            await self._window_grown.wait()

    def _forget_if_closed(self, stream: SpdyStream) -> None:
        if stream.state.closed and not stream._chunks:
            self._streams.pop(stream.id, None)

    def _shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        for stream in self._streams.values():
            stream._readable.set()
            stream._drained.set()
        self._window_grown.set()
        self._incoming.put_nowait(None)
        with contextlib.suppress(Exception):
            self._writer.close()
        self._closed_event.set()
