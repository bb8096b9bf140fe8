"""Lifecycle hooks' httpGet handler against a real loopback server (IPv4 and IPv6 pod IPs, named ports)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp import web

from cri.runtime import Runtime
from minikubelet.base.clock import FakeClock
from minikubelet.worker.hooks import HookError, run_hook


@pytest.fixture
async def server() -> AsyncIterator[tuple[list[str], int]]:
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(f"{request.path}?{request.query_string}|{request.headers.get('X-Hook', '')}")
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", 0))
    port = sock.getsockname()[1]
    site = web.SockSite(runner, sock)
    await site.start()
    try:
        yield hits, port
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("pod_ip", ["127.0.0.1", "::1"])
async def test_http_hook_reaches_the_pod_ip_on_a_named_port(server: tuple[list[str], int], pod_ip: str) -> None:
    hits, port = server
    container: dict[str, Any] = {"name": "app", "ports": [{"name": "web", "containerPort": port}]}
    handler = {"httpGet": {"path": "stop?now=1", "port": "web", "httpHeaders": [{"name": "X-Hook", "value": "yes"}]}}
    await run_hook(handler, runtime=cast(Runtime, None), clock=FakeClock(), container_id="c", container=container,
                   pod_ip=pod_ip, timeout=5)
    assert hits == ["/stop?now=1|yes"]


async def test_http_hook_with_an_unknown_port_name_fails_with_the_hook_message() -> None:
    with pytest.raises(HookError, match=r"HTTP lifecycle hook \(/\) for Container failed - error: .*nope"):
        await run_hook({"httpGet": {"port": "nope"}}, runtime=cast(Runtime, None), clock=FakeClock(),
                       container_id="c", container={"name": "app"}, pod_ip="127.0.0.1", timeout=1)
