"""Routes served by the real h11 listener on loopback, with an aiohttp client session bound to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite
from minikubelet.server.routes import Routes


@asynccontextmanager
async def plain_client(routes: Routes, limits: ServingLimits | None = None) -> AsyncIterator[aiohttp.ClientSession]:
    site = HttpSite(routes, "127.0.0.1", 0, limits or ServingLimits())
    await site.start()
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{site.port}") as client:
            yield client
    finally:
        await site.stop()
