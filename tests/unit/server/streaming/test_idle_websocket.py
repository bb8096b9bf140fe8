"""streamingConnectionIdleTimeout on a WebSocket (our server's, after the listener's upgrade): closed after the
timeout without traffic, kept while busy."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite
from minikubelet.server.routes import Answer, Request, Routes
from minikubelet.server.streaming import websocket
from minikubelet.server.streaming.channels import MsgType
from minikubelet.server.streaming.idle import IdleClosingWebSocket
from minikubelet.server.streaming.server_websocket import ServerWebSocket

TIMEOUT = 0.3


class Echo:
    """A WebSocket echo behind the idle timeout; `expired` holds, per WebSocket served, whether it expired."""

    def __init__(self) -> None:
        self.expired: list[bool] = []

    async def serve(self, ws: ServerWebSocket) -> None:
        idle = IdleClosingWebSocket(ws, TIMEOUT)
        try:
            while (msg := await idle.receive()).type == MsgType.BINARY:
                await idle.send_bytes(msg.data)  # traffic both ways
        finally:
            self.expired.append(idle.expired)
            await idle.stop()

    async def upgrade(self, request: Request) -> Answer:
        return websocket.upgrade(request, (), self.serve, 1 << 20)

    async def result(self) -> list[bool]:
        for _ in range(100):
            if self.expired:
                break
            await asyncio.sleep(0.02)
        return self.expired


@pytest.fixture
async def served() -> AsyncIterator[tuple[Echo, str]]:
    echo = Echo()
    routes = Routes()
    routes.get("/", echo.upgrade)
    site = HttpSite(routes, "127.0.0.1", 0, ServingLimits())
    await site.start()
    yield echo, f"http://127.0.0.1:{site.port}/"
    await site.stop()


async def test_idle_websocket_is_closed_going_away(served: tuple[Echo, str]) -> None:
    echo, url = served
    started = time.monotonic()
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        msg = await ws.receive(timeout=5)
        took = time.monotonic() - started
    assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == aiohttp.WSCloseCode.GOING_AWAY
    assert TIMEOUT <= took < TIMEOUT + 1.0
    assert await echo.result() == [True]


async def test_traffic_keeps_it_open(served: tuple[Echo, str]) -> None:
    echo, url = served
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        for _ in range(8):  # 0.8 s in all, more than twice the timeout
            await ws.send_bytes(b"x")
            assert (await ws.receive(timeout=5)).data == b"x"
            await asyncio.sleep(0.1)
        await ws.close()
    assert await echo.result() == [False]
