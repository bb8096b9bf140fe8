"""A bounded server that runs out of descriptors right after it starts listening (see test_emfile.py).

`python -m tests.unit.server.emfile_server [aiohttp]` prints its port, then serves until killed;
`aiohttp` serves with aiohttp's own TCPSite instead, to compare.
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys

from aiohttp import web

from minikubelet.logs import setup_logging
from minikubelet.server.limits import ServingLimits
from minikubelet.server.serving import bounded_app, serve

SPARE_DESCRIPTORS = 8


async def main(plain_aiohttp: bool) -> None:
    setup_logging(0)
    limits = ServingLimits(header_timeout=1.0, log_interval=60.0, accept_retry_delay=0.2)

    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello")

    if plain_aiohttp:
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
    asyncio.run(main(sys.argv[1:] == ["aiohttp"]))
