"""The stats endpoints: /stats/summary (GET and POST, `only_cpu_and_memory=true`), /metrics/resource and
/metrics/cadvisor, rendered from the stats provider's last snapshot (upstream server/stats/handler.go and the
metrics handlers of server.go). 1.36 serves nothing else under /stats/: those paths get go-restful's 404.

A rendering is kept until the next snapshot, so repeated scrapes within a housekeeping interval cost a dict lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from minikubelet.server.routes import Request, Response, Routes, accepts_gzip, gzip_body
from minikubelet.stats import cadvisor_metrics, resource_metrics, summary
from minikubelet.stats.exposition import CONTENT_TYPE
from minikubelet.stats.provider import StatsProvider
from minikubelet.stats.snapshot import Snapshot

log = logging.getLogger("minikubelet.server.stats")


class StatsHandlers:
    def __init__(self, provider: StatsProvider) -> None:
        self.provider = provider
        self._rendered: dict[str, tuple[Snapshot, bytes]] = {}

    def routes(self) -> Routes:
        routes = Routes()
        routes.add(("GET", "POST"), "/stats/summary", self.summary)
        routes.add((), "/stats/", self.not_found, prefix=True)
        routes.get("/metrics/resource", self.resource)
        routes.get("/metrics/cadvisor", self.cadvisor)
        return routes

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

    async def summary(self, request: Request) -> Response:
        values = request.form().getall("only_cpu_and_memory")  # ParseForm reads the query and a POST body
        only = len(values) == 1 and values[0] == "true"
        try:
            body = await self._render("summary-cpu-memory" if only else "summary",
                                      lambda s: summary.encode(summary.summary(s, only_cpu_and_memory=only)))
        except Exception as e:
            log.exception("stats summary failed")
            return Response.text(f"Internal Error: {e}", 500)
        return Response(200, body, "application/json")

    async def not_found(self, _request: Request) -> Response:
        return Response.text("404: Page Not Found", 404)

    async def _metrics(self, request: Request, kind: str, render: Callable[[Snapshot], str]) -> Response:
        gz = accepts_gzip(request)
        try:
            # The compressed rendering is kept with the plain one: scrapers ask for gzip every time.
            if gz:
                body = await self._render(kind + "+gzip", lambda s: gzip_body(render(s).encode()))
            else:
                body = await self._render(kind, lambda s: render(s).encode())
        except Exception as e:
            log.exception("metrics rendering failed")
            return Response.text(f"Internal Error: {e}", 500)
        return Response(200, body, CONTENT_TYPE, {"Content-Encoding": "gzip"} if gz else {})

    async def resource(self, request: Request) -> Response:
        return await self._metrics(request, "resource", resource_metrics.text)

    async def cadvisor(self, request: Request) -> Response:
        return await self._metrics(request, "cadvisor", cadvisor_metrics.text)
