"""The stats endpoints: /stats/summary (GET and POST, `only_cpu_and_memory=true`), /metrics/resource and
/metrics/cadvisor, rendered from the stats provider's last snapshot (upstream server/stats/handler.go and the
metrics handlers of server.go). 1.36 serves nothing else under /stats/: those paths get go-restful's 404.

A rendering is kept until the next snapshot, so repeated scrapes within a housekeeping interval cost a dict lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from aiohttp.web_response import ContentCoding

from minikubelet.stats import cadvisor_metrics, resource_metrics, summary
from minikubelet.stats.exposition import CONTENT_TYPE
from minikubelet.stats.provider import StatsProvider
from minikubelet.stats.snapshot import Snapshot

log = logging.getLogger("minikubelet.server.stats")


class StatsHandlers:
    def __init__(self, provider: StatsProvider) -> None:
        self.provider = provider
        self._rendered: dict[str, tuple[Snapshot, bytes]] = {}

    def add_routes(self, app: web.Application) -> None:
        for method in ("GET", "POST"):
            app.router.add_route(method, "/stats/summary", self.summary)
        app.router.add_route("*", "/stats/{rest:.*}", self.not_found)
        app.router.add_get("/metrics/resource", self.resource)
        app.router.add_get("/metrics/cadvisor", self.cadvisor)

    async def _snapshot(self) -> Snapshot:
        snap = self.provider.snapshot
        return snap if snap is not None else await self.provider.update()

    async def _render(self, kind: str, render: Callable[[Snapshot], bytes]) -> bytes:
        snap = await self._snapshot()
        cached = self._rendered.get(kind)
        if cached is not None and cached[0] is snap:
            return cached[1]
        body = render(snap)
        self._rendered[kind] = (snap, body)
        return body

    async def summary(self, request: web.Request) -> web.Response:
        values = request.query.getall("only_cpu_and_memory", [])
        if request.method == "POST":
            values = [*values, *(str(v) for v in (await request.post()).getall("only_cpu_and_memory", []))]  # ParseForm reads both
        only = len(values) == 1 and values[0] == "true"
        try:
            body = await self._render("summary-cpu-memory" if only else "summary",
                                      lambda s: summary.encode(summary.summary(s, only_cpu_and_memory=only)))
        except Exception as e:
            log.exception("stats summary failed")
            return web.Response(status=500, text=f"Internal Error: {e}", content_type="text/plain")
        return web.Response(body=body, content_type="application/json")

    async def not_found(self, _request: web.Request) -> web.Response:
        return web.Response(status=404, text="404: Page Not Found", content_type="text/plain")

    async def _metrics(self, request: web.Request, kind: str, render: Callable[[Snapshot], str]) -> web.Response:
        try:
            body = await self._render(kind, lambda s: render(s).encode())
        except Exception as e:
            log.exception("metrics rendering failed")
            return web.Response(status=500, text=f"Internal Error: {e}", content_type="text/plain")
        resp = web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            resp.enable_compression(ContentCoding.gzip)
        return resp

    async def resource(self, request: web.Request) -> web.Response:
        return await self._metrics(request, "resource", resource_metrics.text)

    async def cadvisor(self, request: web.Request) -> web.Response:
        return await self._metrics(request, "cadvisor", cadvisor_metrics.text)
