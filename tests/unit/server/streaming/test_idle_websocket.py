"""streamingConnectionIdleTimeout on a WebSocket: closed after the timeout without traffic, kept while busy."""

from __future__ import annotations

import asyncio
import time

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from minikubelet.server.streaming.idle import IdleClosingWebSocket

TIMEOUT = 0.3
EXPIRED = web.AppKey("expired", list[bool])


async def _serve(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    idle = IdleClosingWebSocket(ws, TIMEOUT)
    try:
        while (msg := await idle.receive()).type == aiohttp.WSMsgType.BINARY:
            await idle.send_bytes(msg.data)  # an echo: traffic both ways
    finally:
        # recorded first: aiohttp may cancel this handler once the peer is gone
        request.app[EXPIRED].append(idle.expired)
        await idle.stop()
    return ws


async def _handler_result(client: TestClient[web.Request, web.Application]) -> list[bool]:
    for _ in range(100):
        if client.app[EXPIRED]:
            break
        await asyncio.sleep(0.02)
    return client.app[EXPIRED]


async def _client() -> TestClient[web.Request, web.Application]:
    app = web.Application()
    app[EXPIRED] = []
    app.router.add_get("/", _serve)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


async def test_idle_websocket_is_closed_going_away() -> None:
    client = await _client()
    try:
        started = time.monotonic()
        async with client.ws_connect("/") as ws:
            msg = await ws.receive(timeout=5)
            took = time.monotonic() - started
        assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == aiohttp.WSCloseCode.GOING_AWAY
        assert TIMEOUT <= took < TIMEOUT + 1.0
        assert await _handler_result(client) == [True]
    finally:
        await client.close()


async def test_traffic_keeps_it_open() -> None:
    client = await _client()
    try:
        async with client.ws_connect("/") as ws:
            for _ in range(8):  # 0.8 s in all, more than twice the timeout
                await ws.send_bytes(b"x")
                assert (await ws.receive(timeout=5)).data == b"x"
                await asyncio.sleep(0.1)
            await ws.close()
        assert await _handler_result(client) == [False]
    finally:
        await client.close()
