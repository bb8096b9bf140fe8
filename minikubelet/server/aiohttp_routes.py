"""The framework-neutral handlers (`routes.py`) served by aiohttp, for the 10250 API."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from minikubelet.server.routes import Handler, Headers, Query, Request, Response, Routes

AiohttpHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def aiohttp_handler(handler: Handler) -> AiohttpHandler:
    async def serve(request: web.Request) -> web.StreamResponse:
        body = await request.read() if request.body_exists else b""  # bounded by client_max_size
        req = Request(request.method, request.path, Query(request.query.items()),
                      Headers(request.headers.items()), body)
        return aiohttp_response(await handler(req))

    return serve


def aiohttp_response(response: Response) -> web.Response:
    headers = dict(response.headers)
    if response.content_type is not None:
        headers["Content-Type"] = response.content_type
    return web.Response(status=response.status, body=response.body or None, headers=headers)


def add_routes(app: web.Application, routes: Routes) -> None:
    for route in routes.routes:
        path = route.path + "{rest:.*}" if route.prefix else route.path
        handler = aiohttp_handler(route.handler)
        if route.methods == {"GET", "HEAD"}:
            app.router.add_get(path, handler)
            continue
        for method in sorted(route.methods) or ["*"]:
            app.router.add_route(method, path, handler)
