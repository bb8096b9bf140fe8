"""The WebSocket itself, on a connection the listener handed over after our 101 (RFC 6455): framing, masking,
ping/pong and the close handshake are wsproto's. Apart from `websocket.py` (the handshake and the 101) so that
wsproto (+0.3 MiB) is imported by the first WebSocket exec, attach or port-forward, not by every agent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Event, Message, Ping, TextMessage

from minikubelet.server.routes import ByteReader, ByteWriter
from minikubelet.server.streaming.channels import MsgType, WSMessage

READ_SIZE = 64 * 1024
# How long close() waits for the peer's Close before it closes the connection anyway.
CLOSE_TIMEOUT = 5.0
MESSAGE_TOO_BIG = 1009


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
