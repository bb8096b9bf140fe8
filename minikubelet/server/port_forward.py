"""`/portForward/{ns}/{pod}[/{uid}]` (upstream `cri-streaming/pkg/streaming/portforward`): TCP connections into
the pod, over SPDY/3.1 streams (also tunnelled in WebSocket messages) or over plain WebSocket channels.

SPDY (`portforward.k8s.io`): the client opens two streams per forwarded connection, `streamtype` `error` and
`data`, both carrying `port` and `requestid`. Once both of a request id are there, the data stream is piped to a
connection the runtime opened to the port inside the pod; a failure is written as text to the error stream and
both streams are reset. When the pod side ends, the data stream and then the error stream get a FIN, as recorded.
Every forwarded connection runs in a task of its own, so one refused port leaves the others alone.

WebSocket channels (`v4.channel.k8s.io`, `?port=` list): two channels per port, opened once for the whole
WebSocket; the server's first message on each is the port number.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from cri import spdy
from cri.spdy import Headers, RstStatus
from cri.streaming import ForwardReader, PortForwardError
from minikubelet.server.streaming.channel_codec import ChannelData, PortForwardLayout
from minikubelet.server.streaming.channels import ChannelWebSocket
from minikubelet.server.streaming.connection import SpdyConnection, SpdyStream

log = logging.getLogger("minikubelet.server.port_forward")

PORT_HEADER = "port"
REQUEST_ID_HEADER = "requestID"
STREAM_TYPE_HEADER = "streamType"
STREAM_TYPE_DATA = "data"
STREAM_TYPE_ERROR = "error"

STREAM_CREATION_TIMEOUT = 30.0  # upstream streamCreationTimeout default
# After one direction of a forwarded connection ended, how long the other may still run (containerd: 1 s;
# cri-dockerd's socat: 0.5 s).
HALF_CLOSE_GRACE = 1.0
READ_SIZE = 32 * 1024

Connect = Callable[[int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]

_UINT = re.compile(r"[0-9]+")


# -- pure parts ---------------------------------------------------------------------------------------------------

def parse_port(text: str) -> int | str:
    """Go's `strconv.ParseUint(text, 10, 16)` then `> 0`: the port, or upstream's error text."""
    if not _UINT.fullmatch(text):
        return f'unable to parse "{text}" as a port: strconv.ParseUint: parsing "{text}": invalid syntax'
    if int(text) > 0xFFFF:
        return f'unable to parse "{text}" as a port: strconv.ParseUint: parsing "{text}": value out of range'
    if int(text) < 1:
        return f'port "{text}" must be > 0'
    return int(text)


def stream_rejection(headers: Headers) -> str | None:
    """Upstream `httpStreamReceived`: why a new stream is refused (it is then reset), or None."""
    port = spdy.header(headers, PORT_HEADER) or ""
    if not port:
        return f'"{PORT_HEADER}" header is required'
    parsed = parse_port(port)
    if isinstance(parsed, str):
        return parsed
    kind = spdy.header(headers, STREAM_TYPE_HEADER) or ""
    if not kind:
        return f'"{STREAM_TYPE_HEADER}" header is required'
    if kind not in (STREAM_TYPE_ERROR, STREAM_TYPE_DATA):
        return f'invalid stream type "{kind}"'
    return None


def request_id(stream_id: int, headers: Headers) -> str:
    """The `requestid` header; clients older than it get the error stream's id (the data stream's minus 2)."""
    value = spdy.header(headers, REQUEST_ID_HEADER)
    if value:
        return value
    kind = spdy.header(headers, STREAM_TYPE_HEADER)
    if kind == STREAM_TYPE_ERROR:
        return str(stream_id)
    if kind == STREAM_TYPE_DATA:
        return str(stream_id - 2)
    return ""


def forward_error(port: int, pod: str, uid: str, err: str) -> str:
    """What the error stream carries when the runtime could not forward (pod: the sandbox id under CRI)."""
    return f"error forwarding port {port} to pod {pod}, uid {uid}: {err}"


S = TypeVar("S")


class PairError(Exception):
    pass


@dataclass
class StreamPair(Generic[S]):
    request_id: str
    data: S | None = None
    error: S | None = None

    def add(self, kind: str, stream: S) -> bool:
        """Upstream `httpStreamPair.add`: True once both streams are there; PairError for a second one of a kind."""
        if kind == STREAM_TYPE_ERROR:
            if self.error is not None:
                raise PairError("error stream already assigned")
            self.error = stream
        elif kind == STREAM_TYPE_DATA:
            if self.data is not None:
                raise PairError("data stream already assigned")
            self.data = stream
        return self.data is not None and self.error is not None


class PairTable(Generic[S]):
    """The incomplete pairs of one connection, by request id."""

    def __init__(self) -> None:
        self._pairs: dict[str, StreamPair[S]] = {}

    def get(self, rid: str) -> tuple[StreamPair[S], bool]:
        """The pair for rid and whether it was just created."""
        pair = self._pairs.get(rid)
        if pair is not None:
            return pair, False
        pair = self._pairs[rid] = StreamPair(rid)
        return pair, True

    def remove(self, rid: str) -> StreamPair[S] | None:
        return self._pairs.pop(rid, None)

    def __len__(self) -> int:
        return len(self._pairs)


# -- piping ---------------------------------------------------------------------------------------------------------

class DataEnd(Protocol):
    """The client's side of one forwarded connection."""

    async def read(self) -> bytes:
        """b"" once the client ended its side."""

    async def write(self, data: bytes) -> None: ...

    async def close(self) -> None:
        """The pod side ended."""


def runtime_error(reader: asyncio.StreamReader) -> str:
    """The error a CRI runtime reported on its own error stream after the connection opened ('' if none)."""
    return reader.error if isinstance(reader, ForwardReader) else ""


async def pipe(end: DataEnd, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
               grace: float = HALF_CLOSE_GRACE) -> None:
    """Copy both ways until both ended, or one ended and the other did not within `grace`."""
    async def to_pod() -> None:
        while data := await end.read():
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    async def to_client() -> None:
        while data := await reader.read(READ_SIZE):
            await end.write(data)
        if not runtime_error(reader):
            await end.close()  # else the caller reports the error first

    tasks = [asyncio.create_task(to_pod()), asyncio.create_task(to_client())]
    try:
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if pending:
            await asyncio.wait(pending, timeout=grace)
    finally:
        for task in tasks:
            task.cancel()
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(result, Exception) and not isinstance(result, (ConnectionError, OSError)):
                log.info("port-forward copy ended: %s", str(result)[:200])
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


class _SpdyEnd:
    def __init__(self, stream: SpdyStream) -> None:
        self.stream = stream

    async def read(self) -> bytes:
        return await self.stream.read(READ_SIZE)

    async def write(self, data: bytes) -> None:
        await self.stream.write(data)

    async def close(self) -> None:
        await self.stream.close()


# -- SPDY -----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """What is forwarded to: the runtime's connector, the names upstream puts in its error text."""

    connect: Connect
    pod: str  # the sandbox id, as a CRI runtime's streaming server names the pod
    uid: str = ""
    creation_timeout: float = STREAM_CREATION_TIMEOUT
    grace: float = HALF_CLOSE_GRACE


async def _forward_pair(conn: SpdyConnection, pair: StreamPair[SpdyStream], target: Target) -> None:
    data, error = pair.data, pair.error
    assert data is not None and error is not None
    port = int(data.header(PORT_HEADER) or 0)
    try:
        try:
            reader, writer = await target.connect(port)
        except PortForwardError as exc:
            message = forward_error(port, target.pod, target.uid, str(exc))
            log.info("%s", message[:300])
            await error.write(message.encode())
            await data.reset(RstStatus.CANCEL)
            await error.reset(RstStatus.CANCEL)
            return
        await pipe(_SpdyEnd(data), reader, writer, target.grace)
        if failure := runtime_error(reader):
            # A CRI runtime's streaming server dials only now; its text is upstream's whole message already.
            log.info("%s", failure[:300])
            await error.write(failure.encode())
            await data.reset(RstStatus.CANCEL)
            await error.reset(RstStatus.CANCEL)
            return
        await data.close()
        await error.close()
    except (ConnectionError, OSError) as exc:
        log.debug("port-forward request %s ended: %s", pair.request_id, exc)
    except Exception as exc:  # a stream reset by the client (StreamReset) ends only this forward
        log.debug("port-forward request %s ended: %s", pair.request_id, exc)
    finally:
        for stream in (data, error):
            conn.forget(stream)


async def _write_error(stream: SpdyStream | None, message: str) -> None:
    if stream is None:
        return
    with contextlib.suppress(Exception):
        await stream.write(message.encode())


async def serve_spdy_port_forward(conn: SpdyConnection, target: Target) -> None:
    """Serve streams until the connection ends; `conn` should reject bad headers with `stream_rejection`."""
    loop = asyncio.get_running_loop()
    runner = asyncio.create_task(conn.run(), name="spdy-port-forward-reader")
    pairs: PairTable[SpdyStream] = PairTable()
    timers: dict[str, asyncio.TimerHandle] = {}
    tasks: set[asyncio.Task[None]] = set()

    def spawn(coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def expire(rid: str) -> None:
        pair = pairs.remove(rid)
        timers.pop(rid, None)
        if pair is None:
            return
        message = f"(conn={id(conn):#x}, request={rid}) timed out waiting for streams"
        log.info("port-forward %s", message)
        await _write_error(pair.error, message)
        for stream in (pair.data, pair.error):
            if stream is not None:
                with contextlib.suppress(Exception):
                    await stream.reset(RstStatus.CANCEL)

    def on_timeout(rid: str) -> None:
        spawn(expire(rid))

    try:
        while (stream := await conn.accept()) is not None:
            rid = request_id(stream.id, stream.headers)
            kind = stream.header(STREAM_TYPE_HEADER) or ""
            pair, created = pairs.get(rid)
            if created:
                timers[rid] = loop.call_later(target.creation_timeout, on_timeout, rid)
            try:
                complete = pair.add(kind, stream)
            except PairError as exc:
                message = f"error processing stream for request {rid}: {exc}"
                log.info("port-forward %s", message)
                spawn(_write_error(pair.error, message))
                spawn(stream.reset(RstStatus.CANCEL))
                continue
            if complete:
                pairs.remove(rid)
                timer = timers.pop(rid, None)
                if timer is not None:
                    timer.cancel()
                spawn(_forward_pair(conn, pair, target))
        if tasks and not conn.closed:  # GOAWAY from the client: let what runs finish
            closed = asyncio.create_task(conn.wait_closed())
            waiters: list[asyncio.Future[Any]] = [closed, asyncio.gather(*tasks, return_exceptions=True)]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            closed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await closed
    finally:
        for timer in timers.values():
            timer.cancel()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not conn.closed:
            await conn.close()
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


# -- WebSocket channels -----------------------------------------------------------------------------------------

class _ChannelEnd:
    def __init__(self, ws: ChannelWebSocket, channel: int) -> None:
        self.ws = ws
        self.channel = channel
        self.inbox: asyncio.Queue[bytes] = asyncio.Queue(maxsize=8)  # then the WebSocket is not read on
        self.eof = False

    async def read(self) -> bytes:
        if self.eof and self.inbox.empty():
            return b""
        return await self.inbox.get()

    def end(self) -> None:
        self.eof = True
        if not self.inbox.full():
            self.inbox.put_nowait(b"")

    async def write(self, data: bytes) -> None:
        await self.ws.send(self.channel, data)

    async def close(self) -> None:
        pass  # v4 channels have no close message; the WebSocket closes when every port is done


async def serve_websocket_port_forward(ws: ChannelWebSocket, ports: tuple[int, ...], target: Target) -> None:
    """One connection per requested port for the life of the WebSocket (upstream `handleWebSocketStreams`)."""
    layout = PortForwardLayout(ports)
    ends = [_ChannelEnd(ws, layout.data_channel(i)) for i in range(len(ports))]
    for i, port in enumerate(ports):
        await ws.send(layout.data_channel(i), layout.port_prefix(port))
        await ws.send(layout.error_channel(i), layout.port_prefix(port))

    async def one(i: int, port: int) -> None:
        try:
            reader, writer = await target.connect(port)
        except PortForwardError as exc:
            with contextlib.suppress(ConnectionError, OSError):
                await ws.send(layout.error_channel(i),
                              forward_error(port, target.pod, target.uid, str(exc)).encode())
            return
        await pipe(ends[i], reader, writer, target.grace)
        if failure := runtime_error(reader):
            with contextlib.suppress(ConnectionError, OSError):
                await ws.send(layout.error_channel(i), failure.encode())

    async def receive() -> None:
        try:
            while (msg := await ws.receive()) is not None:
                if isinstance(msg, ChannelData) and layout.is_data(msg.channel) and msg.data:
                    await ends[msg.channel // 2].inbox.put(msg.data)
        finally:
            for end in ends:
                end.end()

    reader_task = asyncio.create_task(receive())
    try:
        await asyncio.gather(*(one(i, p) for i, p in enumerate(ports)), return_exceptions=True)
    finally:
        reader_task.cancel()
        await asyncio.gather(reader_task, return_exceptions=True)
        with contextlib.suppress(ConnectionError, OSError):
            await ws.close()
