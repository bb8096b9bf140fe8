"""The channel protocols of `channel_codec` on a WebSocket: the server's (`websocket.py`, wsproto) or a client's
(aiohttp's, in tests and benchmarks: its messages carry the same type numbers). The WebSocket bounds message size.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple, Protocol

from minikubelet.server.streaming import channel_codec
from minikubelet.server.streaming.channel_codec import ChannelClosed, ChannelData


class MsgType(IntEnum):
    """A received message's kind, numbered as aiohttp's WSMsgType (the opcodes, then its pseudo-types)."""

    TEXT = 1
    BINARY = 2
    CLOSE = 8
    CLOSING = 256
    CLOSED = 257
    ERROR = 258


class WSMessage(NamedTuple):
    type: int
    data: Any
    extra: Any = None


class MessageLike(Protocol):
    @property
    def type(self) -> int: ...

    @property
    def data(self) -> Any: ...


GOING_AWAY = 1001
_END = {MsgType.CLOSE, MsgType.CLOSING, MsgType.CLOSED, MsgType.ERROR}


class WebSocketLike(Protocol):
    """What `server_websocket.ServerWebSocket` and `aiohttp.ClientWebSocketResponse` share."""

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None: ...

    async def send_str(self, data: str, compress: int | None = None) -> None: ...

    async def receive(self, timeout: float | None = None) -> MessageLike: ...

    async def close(self, *, code: int = ..., message: bytes = ...) -> bool: ...

    @property
    def closed(self) -> bool: ...


class ChannelWebSocket:
    """remotecommand or plain port-forward channels on one WebSocket."""

    def __init__(self, ws: WebSocketLike, protocol: str, channels: int) -> None:
        self.ws = ws
        self.protocol = protocol
        self.channels = channels

    async def send(self, channel: int, data: bytes) -> None:
        message = channel_codec.encode(self.protocol, channel, data)
        if isinstance(message, str):
            await self.ws.send_str(message)
        else:
            await self.ws.send_bytes(message)

    async def close_channel(self, channel: int) -> None:
        await self.ws.send_bytes(channel_codec.encode_close(self.protocol, channel))

    async def receive(self) -> ChannelData | ChannelClosed | None:
        """The next channel message; None once the WebSocket is closing. Raises ChannelError on a bad one."""
        while True:
            msg = await self.ws.receive()
            if msg.type in _END:
                return None
            if msg.type not in (MsgType.BINARY, MsgType.TEXT):
                continue
            decoded = channel_codec.decode(self.protocol, msg.data, self.channels)
            if decoded is not None:
                return decoded

    async def close(self, code: int = 1000) -> None:
        await self.ws.close(code=code)


class WebSocketTunnel:
    """A byte transport over binary messages (`SPDY/3.1+portforward.k8s.io`): reader and writer for
    `SpdyConnection`. Message boundaries carry no meaning; each drain sends what was written as one message."""

    def __init__(self, ws: WebSocketLike) -> None:
        self.ws = ws
        self._leftover = b""
        self._pending: list[bytes] = []
        self._eof = False

    async def read(self, n: int) -> bytes:
        while not self._leftover and not self._eof:
            msg = await self.ws.receive()
            if msg.type in _END:
                self._eof = True
            elif msg.type == MsgType.BINARY:
                self._leftover = msg.data
        chunk, self._leftover = self._leftover[:n], self._leftover[n:]
        return chunk

    def write(self, data: bytes) -> None:
        self._pending.append(data)

    async def drain(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self.ws.closed:
            await self.ws.send_bytes(b"".join(pending))

    def close(self) -> None:
        """Stop reading; the owner of the WebSocket closes it (closing needs awaiting) after the connection ends."""
        self._eof = True
