"""A bounded server that runs out of descriptors right after it starts listening (see test_emfile.py).

`python -m tests.unit.server.emfile_server [aiohttp|h11|tls DIR]` prints its port, then serves until killed;
`aiohttp` serves with aiohttp's own TCPSite instead, to compare; `h11` with the listener as the read-only and
healthz ports use it; `tls` as the 10250 API does (a self-signed pair under DIR).
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys

from aiohttp import web

from minikubelet.logs import setup_logging
from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite
from minikubelet.server.routes import Request, Response, Routes
from minikubelet.server.tls import serving_context

SPARE_DESCRIPTORS = 8


async def _hello(_request: Request) -> Response:
    return Response.text("hello")


async def main(mode: str, pki: str) -> None:
    setup_logging(0)
    limits = ServingLimits(header_timeout=1.0, log_interval=60.0, accept_retry_delay=0.2)

    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello")

    if mode in ("h11", "tls"):
        routes = Routes()
        routes.get("/", _hello)
        ctx = serving_context("", "", "", root_dir=pki, host="localhost", ips=[]) if mode == "tls" else None
        ours = HttpSite(routes, "127.0.0.1", 0, limits, ctx)
        await ours.start()
        port = ours.port
    else:
        app = web.Application()
        app.router.add_get("/", hello)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
    used = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + SPARE_DESCRIPTORS, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    print(port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "tls", sys.argv[2] if len(sys.argv) > 2 else ""))
