"""A bounded server that runs out of descriptors right after it starts listening (see test_emfile.py).

`python -m tests.unit.server.emfile_server [aiohttp|h11]` prints its port, then serves until killed;
`aiohttp` serves with aiohttp's own TCPSite instead, to compare; `h11` with the h11 listener of the
read-only and healthz ports.
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys

from aiohttp import web

from minikubelet.logs import setup_logging
from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import PlainSite
from minikubelet.server.routes import Request, Response, Routes
from minikubelet.server.serving import bounded_app, serve

SPARE_DESCRIPTORS = 8


async def _hello(_request: Request) -> Response:
    return Response.text("hello")


async def main(mode: str) -> None:
    setup_logging(0)
    limits = ServingLimits(header_timeout=1.0, log_interval=60.0, accept_retry_delay=0.2)

    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello")

    if mode == "h11":
        routes = Routes()
        routes.get("/", _hello)
        plain = PlainSite(routes, "127.0.0.1", 0, limits)
        await plain.start()
        port = plain.port
    elif mode == "aiohttp":
        app = web.Application()
        app.router.add_get("/", hello)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
    else:
        app = bounded_app(limits)
        app.router.add_get("/", hello)
        _, bounded = await serve(app, "127.0.0.1", 0, limits)
        port = bounded.port
    used = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + SPARE_DESCRIPTORS, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    print(port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "bounded"))
