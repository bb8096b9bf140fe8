"""Lifecycle hooks' httpGet handler against a real loopback server (IPv4 and IPv6 pod IPs, named ports)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp import web

from cri.runtime import Runtime
from cri.types import ExecResult
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import ContainerView
from minikubelet.worker.hooks import HookError, run_hook


@pytest.fixture
async def server() -> AsyncIterator[tuple[list[str], int]]:
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(f"{request.path}?{request.query_string}|{request.headers.get('X-Hook', '')}")
        return web.Response(text="no", status=500) if request.path.startswith("/status/") else web.Response(text="ok")

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
    await run_hook(handler, runtime=cast(Runtime, None), clock=FakeClock(), container_id="c", container=ContainerView.of(container),
                   pod_ip=pod_ip, pod_desc="p_default(u)")
    assert hits == ["/stop?now=1|yes"]


async def test_http_hook_answered_with_an_error_status_is_not_a_failure(server: tuple[list[str], int]) -> None:
    """D9, upstream handlerRunner.runHTTPHandler: only a failed request is an error, not a 4xx/5xx answer."""
    hits, port = server
    await run_hook({"httpGet": {"path": "/status/500", "port": port}}, runtime=cast(Runtime, None),
                   clock=FakeClock(), container_id="c", container=ContainerView.of({"name": "app"}), pod_ip="127.0.0.1",
                   pod_desc="p_default(u)")
    assert hits == ["/status/500?|"]


async def test_http_hook_failure_names_the_container_and_pod() -> None:
    """D9, upstream handlerRunner.Run: 'HTTP lifecycle hook (path) for Container "c" in Pod "p" failed - error: ...'."""
    with pytest.raises(HookError) as err:
        await run_hook({"httpGet": {"path": "/x", "port": "nope"}}, runtime=cast(Runtime, None), clock=FakeClock(),
                       container_id="c", container=ContainerView.of({"name": "app"}), pod_ip="127.0.0.1", pod_desc="p_default(u)")
    assert str(err.value).startswith('HTTP lifecycle hook (/x) for Container "app" in Pod "p_default(u)" failed - error: ')
    assert "nope" in str(err.value)


async def _raw_server(answers: list[bytes]) -> tuple[asyncio.Server, list[bytes]]:
    """A loopback server answering each connection with the next of `answers`, recording the request heads."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(answers[min(len(heads), len(answers)) - 1])
        await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0), heads


async def _hook(port: int, path: str = "/stop") -> None:
    await run_hook({"httpGet": {"path": path, "port": port}}, runtime=cast(Runtime, None), clock=FakeClock(),
                   container_id="c", container=ContainerView.of({"name": "app"}), pod_ip="127.0.0.1",
                   pod_desc="p_default(u)")


async def test_http_hook_sends_upstreams_lifecycle_request() -> None:
    """upstream NewRequestForHTTPGetAction(..., "lifecycle") on a plain http.Transport: User-Agent
    kube-lifecycle/<version>, Accept */*, gzip asked for (compression is not disabled), no Connection: close."""
    server, heads = await _raw_server([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"])
    async with server:
        await _hook(server.sockets[0].getsockname()[1])
    lines = heads[0].decode().split("\r\n")
    assert lines[0] == "GET /stop HTTP/1.1"
    assert {"User-Agent: kube-lifecycle/1.36", "Accept: */*", "Accept-Encoding: gzip"} <= set(lines)
    assert not any(line.lower().startswith("connection:") for line in lines)


async def test_http_hook_follows_same_host_redirects_and_stops_at_another_host() -> None:
    """upstream's hook client has RedirectChecker(false): the same host is followed, another host's redirect is
    the answer (a success: a hook fails only when the request does)."""
    server, heads = await _raw_server([
        b"HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 302 Found\r\nLocation: http://localhost:1/elsewhere\r\nContent-Length: 0\r\n\r\n",
    ])
    async with server:
        await _hook(server.sockets[0].getsockname()[1])
    assert [h.split(b" ")[1] for h in heads] == [b"/stop", b"/next"]


async def test_http_hook_redirect_loop_fails_after_ten_requests() -> None:
    server, heads = await _raw_server([b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n"])
    async with server:
        with pytest.raises(HookError) as err:
            await _hook(server.sockets[0].getsockname()[1])
    assert len(heads) == 10
    assert str(err.value).endswith('failed - error: Get "/again": stopped after 10 redirects')


async def test_http_hook_to_a_closed_port_fails_with_the_dial_error() -> None:
    server, _ = await _raw_server([b""])
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(HookError) as err:
        await _hook(port)
    assert str(err.value).endswith(f'failed - error: Get "http://127.0.0.1:{port}/stop": dial tcp 127.0.0.1:{port}: '
                                   "connect: connection refused")


async def _plain_server(tls_answer: bytes) -> tuple[asyncio.Server, list[bytes]]:
    """Plain HTTP on loopback: a TLS hello (first byte 0x16) gets `tls_answer`, an HTTP request a 200."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await reader.read(1)
        if first == b"\x16":
            writer.write(tls_answer)
        else:
            heads.append(first + await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0), heads


async def _https_hook(port: int, fallbacks: list[str]) -> None:
    handler = {"httpGet": {"path": "/stop", "port": port, "scheme": "HTTPS", "httpHeaders": [
        {"name": "Authorization", "value": "Bearer t"}, {"name": "X-Other", "value": "kept"}]}}
    await run_hook(handler, runtime=cast(Runtime, None), clock=FakeClock(), container_id="c",
                   container=ContainerView.of({"name": "app"}), pod_ip="127.0.0.1", pod_desc="p_default(u)",
                   http_fallback=fallbacks.append)


async def test_https_hook_answered_in_plain_http_is_sent_again_over_http_without_authorization() -> None:
    """upstream runHTTPHandler: "server gave HTTP response to HTTPS client" -> the same request over HTTP, minus
    Authorization; its success is reported (the LifecycleHTTPFallback event and counter)."""
    server, heads = await _plain_server(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
    port = server.sockets[0].getsockname()[1]
    fallbacks: list[str] = []
    async with server:
        await _https_hook(port, fallbacks)
    assert fallbacks == [f"127.0.0.1:{port}"]
    (head,) = heads
    assert head.startswith(b"GET /stop HTTP/1.1") and b"X-Other: kept" in head and b"Authorization" not in head


async def test_https_hook_to_a_server_speaking_neither_fails_without_a_retry() -> None:
    server, heads = await _plain_server(b"SSH-2.0-not-tls\r\n")
    fallbacks: list[str] = []
    async with server:
        with pytest.raises(HookError) as err:
            await _https_hook(server.sockets[0].getsockname()[1], fallbacks)
    assert fallbacks == [] and heads == []
    assert "server gave HTTP response" not in str(err.value)


class _ExecOnly:
    """Answers exec_sync like a container whose command exits 3, and records the timeouts asked for."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        self.timeouts.append(timeout)
        return ExecResult(exit_code=3, stdout=b"out\n", stderr=b"boom\n")


async def test_exec_hook_failure_message_and_no_timeout_of_its_own() -> None:
    """D9, upstream handlerRunner.Run: RunInContainer with timeout 0; the message carries the command as Go
    prints a []string, the exit error and the output."""
    rt = _ExecOnly()
    with pytest.raises(HookError) as err:
        await run_hook({"exec": {"command": ["sh", "-c", "exit 3"]}}, runtime=cast(Runtime, rt), clock=FakeClock(),
                       container_id="c1", container=ContainerView.of({"name": "app"}), pod_ip="", pod_desc="p_default(u)")
    assert rt.timeouts == [0]
    assert str(err.value) == ('Exec lifecycle hook ([sh -c exit 3]) for Container "app" in Pod "p_default(u)" failed'
                              " - error: command 'sh -c exit 3' exited with 3: boom\n, message: \"out\\nboom\\n\"")
