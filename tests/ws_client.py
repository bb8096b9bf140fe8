"""The client side of a `v5.channel.k8s.io` remotecommand WebSocket, as kube-apiserver v1.36 passes kubectl's
through to a kubelet that declares ExtendWebSocketsToKubelet (recorded in tests/fixtures/kubernetes/kubelet-api/
`exec-*-ws`, `attach-ws`, `cp-ws`): a channel byte per binary message, `0xFF 0x00` closes stdin, resize as JSON
on channel 4, the Status on channel 3, then the server's close. Used by the integration tests and the bench.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from minikubelet.server.streaming.channel_codec import V5_BINARY, Channel
from tests.spdy_client import Outcome

MAX_MESSAGE = 32 * 1024


@dataclass
class WsSession:
    ws: aiohttp.ClientWebSocketResponse
    output: dict[int, bytearray] = field(default_factory=lambda: {1: bytearray(), 2: bytearray(), 3: bytearray()})
    closed: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _reader: asyncio.Task[None] | None = None

    async def write(self, data: bytes) -> None:
        for i in range(0, len(data), MAX_MESSAGE):
            await self.ws.send_bytes(bytes([Channel.STDIN]) + data[i:i + MAX_MESSAGE])

    async def close_stdin(self) -> None:
        await self.ws.send_bytes(bytes([0xFF, Channel.STDIN]))

    async def resize(self, width: int, height: int) -> None:
        await self.ws.send_bytes(bytes([Channel.RESIZE]) + json.dumps({"Width": width, "Height": height}).encode())

    async def read_until(self, marker: bytes, channel: int = Channel.STDOUT) -> bytes:
        return await self.wait(lambda data: marker in data, channel)

    async def wait(self, check: Callable[[bytes], bool], channel: int = Channel.STDOUT) -> bytes:
        """All of a channel's output so far, once `check` holds for it."""
        while not check(bytes(self.output[channel])):
            if self.closed:
                raise EOFError(f"closed while waiting: {bytes(self.output[channel])[-200:]!r}")
            self._changed.clear()
            await self._changed.wait()
        return bytes(self.output[channel])

    async def finish(self) -> Outcome:
        """Everything until the server closes: stdout, stderr and the Status."""
        if self._reader is not None:
            await self._reader
        raw = bytes(self.output[Channel.ERROR])
        status: dict[str, Any] = json.loads(raw) if raw else {}
        return Outcome(bytes(self.output[Channel.STDOUT]), bytes(self.output[Channel.STDERR]), status)

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                    break
                channel = msg.data[0]
                if channel in self.output:
                    self.output[channel] += msg.data[1:]
                self._changed.set()
        finally:
            self.closed = True
            self._changed.set()


@asynccontextmanager
async def session(url: str, ssl_ctx: ssl.SSLContext | None) -> AsyncIterator[WsSession]:
    async with aiohttp.ClientSession() as http, http.ws_connect(url, protocols=(V5_BINARY,), ssl=ssl_ctx or True,
                                                                  autoping=True, heartbeat=None) as ws:
        if ws.protocol != V5_BINARY:
            raise ConnectionError(f"negotiated {ws.protocol!r}, not {V5_BINARY}")
        s = WsSession(ws)
        s._reader = asyncio.create_task(s._read(), name="ws-client-reader")
        try:
            yield s
        finally:
            s._reader.cancel()
            await asyncio.gather(s._reader, return_exceptions=True)


async def run(url: str, ssl_ctx: ssl.SSLContext | None, *, stdin: bytes | None = None,
              stdin_after: float = 0.0) -> Outcome:
    """One whole session: send stdin `stdin_after` seconds in (then close it), collect output and the Status."""
    async with session(url, ssl_ctx) as s:
        if stdin is not None:
            await asyncio.sleep(stdin_after)
            await s.write(stdin)
            await s.close_stdin()
        return await s.finish()
