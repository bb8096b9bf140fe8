"""The server side of a WebSocket on a connection the listener handed over after our 101 (RFC 6455).

The opening handshake is checked and answered here (`handshake`); framing, masking, ping/pong and the close
handshake are wsproto's. No extension is negotiated (permessage-deflate is optional for the server, and the
channel protocols gain nothing from it). A message larger than `max_message` closes the WebSocket with 1009.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Event, Message, Ping, TextMessage

from minikubelet.server.routes import Answer, ByteReader, ByteWriter, Headers, Request, Response, Upgrade
from minikubelet.server.streaming.channels import MsgType, WSMessage

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
READ_SIZE = 64 * 1024
# How long close() waits for the peer's Close before it closes the connection anyway.
CLOSE_TIMEOUT = 5.0
MESSAGE_TOO_BIG = 1009


def is_upgrade(headers: Headers) -> bool:
    return (headers.get("Upgrade") or "").lower() == "websocket"


def handshake(headers: Headers, protocols: Sequence[str]) -> tuple[tuple[tuple[str, str], ...], str] | str:
    """The 101's headers and the chosen subprotocol (the client's first one we serve, "" when none), or why the
    request is not a valid opening handshake."""
    if "upgrade" not in (headers.get("Connection") or "").lower():
        return "No CONNECTION upgrade hdr"
    if (headers.get("Sec-WebSocket-Version") or "") != "13":
        return f"Unsupported version: {headers.get('Sec-WebSocket-Version')}"
    key = (headers.get("Sec-WebSocket-Key") or "").strip()
    try:
        valid = len(base64.b64decode(key, validate=True)) == 16
    except binascii.Error:
        valid = False
    if not valid:
        return f"Handshake error: {key!r}"
    offered = [p.strip() for value in headers.getall("Sec-WebSocket-Protocol") for p in value.split(",")]
    chosen = next((p for p in offered if p in protocols), "")
    accept = base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")
    fields = [("Upgrade", "websocket"), ("Connection", "upgrade"), ("Sec-WebSocket-Accept", accept)]
    if chosen:
        fields.append(("Sec-WebSocket-Protocol", chosen))
    return tuple(fields), chosen


class ServerWebSocket:
    """A WebSocketLike (`channels.py`) over the taken-over connection. One task receives; any may send."""

    def __init__(self, reader: ByteReader, writer: ByteWriter, protocol: str, max_message: int) -> None:
        self.protocol = protocol
        self._reader = reader
        self._writer = writer
        self._max = max_message
        self._ws = Connection(ConnectionType.SERVER)
        self._inbox: deque[WSMessage] = deque()
        self._parts: list[bytes | str] = []
        self._size = 0
        self._eof = False
        self._receiving = False
        self._peer_closed = asyncio.Event()

    @property
    def closed(self) -> bool:
        return self._eof or self._ws.state is not ConnectionState.OPEN

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        await self._send(BytesMessage(data=data))

    async def send_str(self, data: str, compress: int | None = None) -> None:
        await self._send(TextMessage(data=data))

    async def _send(self, event: Event) -> None:
        if self.closed:
            raise ConnectionResetError("the WebSocket is closing")
        self._writer.write(self._ws.send(event))
        await self._writer.drain()

    async def receive(self, timeout: float | None = None) -> WSMessage:
        self._receiving = True
        try:
            async with asyncio.timeout(timeout):
                return await self._receive()
        finally:
            self._receiving = False

    async def _receive(self) -> WSMessage:
        while not self._inbox:
            if self._eof or self._ws.state is ConnectionState.CLOSED:
                return WSMessage(MsgType.CLOSED, None)
            data = await self._reader.read(READ_SIZE)
            if not data:
                self._eof = True
                self._peer_closed.set()
            if self._ws.state in (ConnectionState.OPEN, ConnectionState.LOCAL_CLOSING):
                self._ws.receive_data(data or None)
            await self._process()
        return self._inbox.popleft()

    async def _process(self) -> None:
        out: list[bytes] = []
        for event in self._ws.events():
            if isinstance(event, Message):
                self._size += len(event.data)
                if self._size > self._max:
                    if self._ws.state is ConnectionState.OPEN:
                        out.append(self._ws.send(CloseConnection(code=MESSAGE_TOO_BIG, reason="message too big")))
                    self._inbox.append(WSMessage(MsgType.ERROR, None))
                    break
                self._parts.append(event.data)
                if event.message_finished:
                    kind = MsgType.TEXT if isinstance(event, TextMessage) else MsgType.BINARY
                    parts, self._parts, self._size = self._parts, [], 0
                    joined = "".join(parts) if kind is MsgType.TEXT else b"".join(parts)  # type: ignore[arg-type]
                    self._inbox.append(WSMessage(kind, joined))
            elif isinstance(event, Ping):
                if self._ws.state is ConnectionState.OPEN:
                    out.append(self._ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                if self._ws.state is ConnectionState.REMOTE_CLOSING:
                    out.append(self._ws.send(event.response()))
                elif self._ws.state is ConnectionState.OPEN:  # a frame wsproto could not parse
                    out.append(self._ws.send(CloseConnection(code=event.code, reason=event.reason)))
                self._peer_closed.set()
                self._inbox.append(WSMessage(MsgType.CLOSE, event.code, event.reason))
        if out:
            with contextlib.suppress(ConnectionError, OSError):
                self._writer.write(b"".join(out))
                await self._writer.drain()

    async def close(self, *, code: int = 1000, message: bytes = b"") -> bool:
        """Send Close, wait a while for the peer's, then close the connection (the server closes TCP first)."""
        if self._ws.state is not ConnectionState.OPEN or self._eof:
            self._writer.close()
            return False
        with contextlib.suppress(ConnectionError, OSError):
            self._writer.write(self._ws.send(CloseConnection(code=code, reason=message.decode("utf-8", "replace"))))
            await self._writer.drain()
        with contextlib.suppress(TimeoutError, ConnectionError, OSError):
            async with asyncio.timeout(CLOSE_TIMEOUT):
                if self._receiving:
                    await self._peer_closed.wait()
                else:
                    while (await self._receive()).type not in (MsgType.CLOSE, MsgType.CLOSED, MsgType.ERROR):
                        pass
        self._writer.close()
        return True


def upgrade(request: Request, protocols: Sequence[str], serve: Callable[[ServerWebSocket], Awaitable[None]],
            max_message: int) -> Answer:
    """The answer to an opening handshake: 400 for a bad one, else our 101 and the WebSocket for `serve`, closed
    after it (if it did not close it itself)."""
    result = handshake(request.headers, protocols)
    if isinstance(result, str):
        return Response.text(result, 400)
    headers, protocol = result

    async def take_over(reader: ByteReader, writer: ByteWriter) -> None:
        ws = ServerWebSocket(reader, writer, protocol, max_message)
        try:
            await serve(ws)
        finally:
            if not ws.closed:
                await ws.close()

    return Upgrade(take_over, headers)
