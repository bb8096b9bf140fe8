"""`streamingConnectionIdleTimeout` for WebSocket streams: as upstream's wsstream, every message read or written
pushes the deadline out; when it passes, the WebSocket is closed (and the exec/attach ends as on a hang-up).
SPDY connections have the same timeout inside `SpdyConnection`."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from minikubelet.server.streaming.channels import GOING_AWAY, MessageLike, WebSocketLike

log = logging.getLogger("minikubelet.server.streaming")


class IdleClosingWebSocket:
    """A WebSocketLike that closes its WebSocket after `timeout` seconds without a message either way."""

    def __init__(self, ws: WebSocketLike, timeout: float) -> None:
        self._ws = ws
        self._timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._deadline = self._loop.time() + timeout
        self._watch = asyncio.create_task(self._run())
        self.expired = False

    def _touch(self) -> None:
        self._deadline = self._loop.time() + self._timeout

    async def _run(self) -> None:
        while True:
            left = self._deadline - self._loop.time()
            if left <= 0:
                break
            await asyncio.sleep(left)
        self.expired = True
        log.info("WebSocket stream idle for %.0fs, closing", self._timeout)
        with contextlib.suppress(ConnectionError, OSError):
            await self._ws.close(code=GOING_AWAY, message=b"idle timeout")

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        self._touch()
        await self._ws.send_bytes(data, compress)

    async def send_str(self, data: str, compress: int | None = None) -> None:
        self._touch()
        await self._ws.send_str(data, compress)

    async def receive(self, timeout: float | None = None) -> MessageLike:
        msg = await self._ws.receive(timeout)
        self._touch()
        return msg

    async def close(self, *, code: int = 1000, message: bytes = b"") -> bool:
        self._watch.cancel()
        return await self._ws.close(code=code, message=message)

    @property
    def closed(self) -> bool:
        return self._ws.closed

    async def stop(self) -> None:
        self._watch.cancel()
        await asyncio.gather(self._watch, return_exceptions=True)
