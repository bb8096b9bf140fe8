"""The server side of a WebSocket on a connection the listener handed over after our 101 (RFC 6455).

The opening handshake is checked and answered here (`handshake`); framing, masking, ping/pong and the close
handshake are wsproto's, in `server_websocket.py`, imported by the first upgrade. No extension is negotiated
(permessage-deflate is optional for the server, and the channel protocols gain nothing from it). A message larger than `max_message` closes the WebSocket with 1009.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from minikubelet.server.routes import Answer, ByteReader, ByteWriter, Headers, Request, Response, Upgrade

if TYPE_CHECKING:
    from minikubelet.server.streaming.server_websocket import ServerWebSocket

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


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


def upgrade(request: Request, protocols: Sequence[str], serve: Callable[[ServerWebSocket], Awaitable[None]],
            max_message: int) -> Answer:
    """The answer to an opening handshake: 400 for a bad one, else our 101 and the WebSocket for `serve`, closed
    after it (if it did not close it itself)."""
    result = handshake(request.headers, protocols)
    if isinstance(result, str):
        return Response.text(result, 400)
    headers, protocol = result

    async def take_over(reader: ByteReader, writer: ByteWriter) -> None:
        from minikubelet.server.streaming.server_websocket import ServerWebSocket  # wsproto: on the first use

        ws = ServerWebSocket(reader, writer, protocol, max_message)
        try:
            await serve(ws)
        finally:
            if not ws.closed:
                await ws.close()

    return Upgrade(take_over, headers)
