"""listener-cpu: CPU time per keep-alive GET /healthz on the h11 listener (every port of the agent) and, to
compare, on a plain aiohttp application (which served 10250 before), server and a raw client in one process.

`python -m bench.listener_cpu [h11|aiohttp] [requests]`: no Docker needed; run the two kinds interleaved.
"""

from __future__ import annotations

import asyncio
import sys
import time

from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.server.app import KubeletServer

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


async def _health() -> list[tuple[str, str | None]]:
    return [("ping", None), ("syncloop", None)]


async def _client(port: int, n: int) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    start = time.process_time()
    for _ in range(n):
        writer.write(REQUEST)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
    took = time.process_time() - start
    writer.close()
    return took


async def main(kind: str, n: int) -> None:
    server = KubeletServer(lambda: [], _health, CollectorRegistry(), lambda uid: [], None)
    if kind == "h11":
        port = (await server.serve("127.0.0.1", 0, server.health_routes())).port
    else:
        from aiohttp import web

        async def healthz(_request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
    await _client(port, n)  # warm-up
    took = await _client(port, n)
    await server.close()
    if kind != "h11":
        await runner.cleanup()
    print(f"{kind}: {took / n * 1e6:.0f} us CPU per request (server + client, {n} keep-alive requests)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "h11", int(sys.argv[2]) if len(sys.argv) > 2 else 3000))
