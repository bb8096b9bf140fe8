"""The kubelet HTTP API subset: /healthz, /pods, /metrics, /metrics/probes, /debug/events."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from minikubelet.server.limits import ServingLimits
from minikubelet.server.pods_cache import PodList, PodsVersion, RenderedPods
from minikubelet.server.serving import BoundedSite, bounded_app, serve

if TYPE_CHECKING:
    from minikubelet.server.stats import StatsHandlers

HealthCheck = Callable[[], Awaitable[list[tuple[str, str | None]]]]  # (name, error or None)


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
    ) -> None:
        self._pods = RenderedPods(pods, pods_version)
        self.limits = limits or ServingLimits()
        self._health = health
        self._registry = registry
        self._probe_registry = probe_registry
        self._events = events
        self._runners: list[web.AppRunner] = []
        self.sites: list[BoundedSite] = []
        self.stats: StatsHandlers | None = None  # set by the agent before serving

    @property
    def health(self) -> HealthCheck:
        return self._health

    def app(self) -> web.Application:
        app = bounded_app(self.limits)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/pods", self.pods)
        app.router.add_get("/pods/", self.pods)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/metrics/probes", self.metrics_probes)
        app.router.add_get("/debug/events", self.events)
        if self.stats is not None:
            self.stats.add_routes(app)
        return app

    def health_app(self) -> web.Application:
        app = bounded_app(self.limits)
        app.router.add_get("/healthz", self.healthz)
        return app

    async def healthz(self, request: web.Request) -> web.Response:
        checks = await self._health()
        failed = [(n, e) for n, e in checks if e]
        if not failed:
            if "verbose" in request.query:
                body = "".join(f"[+]{n} ok\n" for n, _ in checks) + "healthz check passed\n"
                return web.Response(text=body)
            return web.Response(text="ok")
        body = "".join(f"[+]{n} ok\n" if not e else f"[-]{n} failed: {e}\n" for n, e in checks)
        return web.Response(status=500, text=body + "healthz check failed\n")

    async def pods(self, request: web.Request) -> web.Response:
        body, etag = self._pods.body()
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=body, content_type="application/json", headers={"ETag": etag})

    async def metrics(self, _request: web.Request) -> web.Response:
        return _prometheus(self._registry)

    async def metrics_probes(self, _request: web.Request) -> web.Response:
        if self._probe_registry is None:
            return web.Response(status=404, text="probe metrics are not enabled\n")
        return _prometheus(self._probe_registry)

    async def events(self, request: web.Request) -> web.Response:
        items = self._events(request.query.get("uid"))
        return web.json_response({"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def serve(self, host: str, port: int, app: web.Application, ssl_context: ssl.SSLContext | None = None) -> None:
        runner, site = await serve(app, host, port, self.limits, ssl_context)
        self._runners.append(runner)
        self.sites.append(site)

    async def close(self) -> None:
        await asyncio.gather(*(r.cleanup() for r in self._runners), return_exceptions=True)


def _prometheus(registry: CollectorRegistry) -> web.Response:
    resp = web.Response(body=generate_latest(registry))
    resp.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    resp.charset = "utf-8"
    return resp
