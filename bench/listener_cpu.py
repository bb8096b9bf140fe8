"""listener-cpu: CPU time per keep-alive GET /healthz on the h11 listener (read-only and healthz ports) and on
the bounded aiohttp listener (10250), the same handler behind both, server and a raw client in one process.

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
        from minikubelet.server.aiohttp_routes import aiohttp_handler
        from minikubelet.server.serving import bounded_app

        app = bounded_app(server.limits)
        app.router.add_get("/healthz", aiohttp_handler(server.healthz))
        await server.serve_app("127.0.0.1", 0, app)
        port = server.sites[-1].port
    await _client(port, n)  # warm-up
    took = await _client(port, n)
    await server.close()
    print(f"{kind}: {took / n * 1e6:.0f} us CPU per request (server + client, {n} keep-alive requests)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "h11", int(sys.argv[2]) if len(sys.argv) > 2 else 3000))
