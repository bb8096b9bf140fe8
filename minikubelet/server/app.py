"""The kubelet HTTP API subset: /healthz, /pods, /metrics, /metrics/probes, /debug/events."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from minikubelet.base.prometheus import CONTENT_TYPE_LATEST, CollectorRegistry
from minikubelet.metrics import HttpRequestFamilies
from minikubelet.metrics_text import render
from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite
from minikubelet.server.pods_cache import PodList, PodsVersion, RenderedPods
from minikubelet.server.request_metrics import InstrumentedRoutes
from minikubelet.server.routes import Request, Response, Routes

if TYPE_CHECKING:
    from minikubelet.server.stats import StatsHandlers

HealthCheck = Callable[[], Awaitable[list[tuple[str, str | None]]]]  # (name, error or None)
Explain = Callable[[str, str], Awaitable[dict[str, Any] | None]]  # (namespace, name) -> the document, None: unknown
EXPLAIN_PATH = "/debug/pods/{ns}/{name}/explain"


class KubeletServer:
    def __init__(
        self,
        pods: PodList,
        health: HealthCheck,
        registry: CollectorRegistry,
        events: Callable[[str | None], list[dict[str, Any]]],
        probe_registry: CollectorRegistry | None = None,
        pods_version: PodsVersion | None = None,
        limits: ServingLimits | None = None,
        http: HttpRequestFamilies | None = None,
    ) -> None:
        self._pods = RenderedPods(pods, pods_version)
        self.limits = limits or ServingLimits()
        self._health = health
        self._registry = registry
        self._probe_registry = probe_registry
        self._events = events
        self.http = http  # the request families, None: requests are not counted
        self.sites: list[HttpSite] = []
        self.stats: StatsHandlers | None = None  # set by the agent before serving
        self.explain: Explain | None = None  # docs/explain.md

    @property
    def registry(self) -> CollectorRegistry:
        """The /metrics registry."""
        return self._registry

    @property
    def health(self) -> HealthCheck:
        return self._health

    def routes(self) -> Routes:
        """The read-only port's routes."""
        routes = Routes()
        routes.get("/healthz", self.healthz)
        routes.get("/pods", self.pods)
        routes.get("/pods/", self.pods)
        routes.get("/metrics", self.metrics)
        routes.get("/metrics/probes", self.metrics_probes)
        routes.get("/debug/events", self.events)
        routes.get(EXPLAIN_PATH, self.explain_pod)
        if self.stats is not None:
            routes.extend(self.stats.routes())
        return routes

    def health_routes(self) -> Routes:
        routes = Routes()
        routes.get("/healthz", self.healthz)
        return routes

    async def healthz(self, request: Request) -> Response:
        checks = await self._health()
        failed = [(n, e) for n, e in checks if e]
        if not failed:
            if "verbose" in request.query:
                return Response.text("".join(f"[+]{n} ok\n" for n, _ in checks) + "healthz check passed\n")
            return Response.text("ok")
        body = "".join(f"[+]{n} ok\n" if not e else f"[-]{n} failed: {e}\n" for n, e in checks)
        return Response.text(body + "healthz check failed\n", 500)

    async def pods(self, request: Request) -> Response:
        body, etag = self._pods.body()
        if request.headers.get("If-None-Match") == etag:
            return Response(304, headers={"ETag": etag})
        return Response(200, body, "application/json", {"ETag": etag})

    async def metrics(self, _request: Request) -> Response:
        return _prometheus(self._registry)

    async def metrics_probes(self, _request: Request) -> Response:
        if self._probe_registry is None:
            return Response.text("probe metrics are not enabled\n", 404)
        return _prometheus(self._probe_registry)

    async def events(self, request: Request) -> Response:
        items = self._events(request.query.get("uid"))
        return Response.json({"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def explain_pod(self, request: Request) -> Response:
        if self.explain is None:
            return Response.text("explain is not enabled\n", 404)
        ns, name = request.params["ns"], request.params["name"]
        doc = await self.explain(ns, name)
        if doc is None:
            return Response.text(f"pod {ns}/{name} is not known on this node\n", 404)
        return Response(200, json.dumps(doc, indent=1).encode(), "application/json")

    async def serve(self, host: str, port: int, routes: Routes, server_type: str | None = None,
                    ssl_context: ssl.SSLContext | None = None) -> HttpSite:
        """Serve `routes` (h11; over TLS with `ssl_context`); with a `server_type`, the requests are counted
        under it (the 10250 API's routes count their own)."""
        if server_type is not None and self.http is not None:
            routes = InstrumentedRoutes(routes, self.http, server_type)
        site = HttpSite(routes, host, port, self.limits, ssl_context)
        await site.start()
        self.sites.append(site)
        return site

    async def close(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.sites), return_exceptions=True)


def _prometheus(registry: CollectorRegistry) -> Response:
    return Response(200, render(registry), CONTENT_TYPE_LATEST.split(";")[0] + "; charset=utf-8")
