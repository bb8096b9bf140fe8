"""httpGet probes against a real aiohttp server on loopback."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from minikubelet.base.podview import ProbeSpec
from probes.http import probe_headers, probe_http, probe_url
from probes.result import MAX_OUTPUT_BYTES, Result


def spec_headers(*headers: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The (name, value) pairs a probe spec's httpHeaders become."""
    return ProbeSpec.of({"httpGet": {"port": 80, "httpHeaders": list(headers)}}).http_headers


class Server:
    def __init__(self) -> None:
        self.requests: list[web.Request] = []
        self.headers: list[dict[str, list[str]]] = []
        self.port = 0


def _app(server: Server) -> web.Application:
    async def record(request: web.Request) -> None:
        server.requests.append(request)
        seen: dict[str, list[str]] = {}
        for name, value in request.headers.items():
            seen.setdefault(name.lower(), []).append(value)
        server.headers.append(seen)

    async def status(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(status=int(request.match_info["code"]), text=f"status {request.match_info['code']}")

    async def redirect(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(status=int(request.query.get("code", "302")), headers={"Location": request.query["to"]})

    async def loop(request: web.Request) -> web.Response:
        await record(request)
        n = int(request.match_info["n"])
        return web.Response(status=302, headers={"Location": f"/loop/{n + 1}"})

    async def slow(request: web.Request) -> web.Response:
        await record(request)
        await asyncio.sleep(1.5)
        return web.Response(text="late")

    async def big(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(body=b"x" * (MAX_OUTPUT_BYTES * 10))

    app = web.Application()
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/loop/{n}", loop)
    app.router.add_get("/slow", slow)
    app.router.add_get("/big", big)
    return app


async def _serve(server: Server, ssl_context: ssl.SSLContext | None = None) -> web.AppRunner:
    runner = web.AppRunner(_app(server))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    server.port = runner.addresses[0][1]
    return runner


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    runner = await _serve(srv)
    yield srv
    await runner.cleanup()


def url(server: Server, path: str, host: str = "127.0.0.1", scheme: str = "HTTP"):  # type: ignore[no-untyped-def]
    return probe_url(scheme, host, server.port, path)


@pytest.mark.parametrize("code", [200, 204, 299])
async def test_2xx_is_success_with_body_as_output(server: Server, code: int) -> None:
    outcome = await probe_http(url(server, f"/status/{code}"), probe_headers([]), 1)
    assert outcome.result is Result.SUCCESS
    assert not outcome.warning
    assert outcome.output == ("" if code == 204 else f"status {code}")


@pytest.mark.parametrize("code", [400, 404, 500, 503])
async def test_4xx_5xx_fail_without_body_in_message(server: Server, code: int) -> None:
    outcome = await probe_http(url(server, f"/status/{code}"), probe_headers([]), 1)
    assert outcome.result is Result.FAILURE
    assert outcome.output == f"HTTP probe failed with statuscode: {code}"


async def test_unfollowed_3xx_is_success_with_warning(server: Server) -> None:
    outcome = await probe_http(url(server, "/status/304"), probe_headers([]), 1)
    assert outcome.result is Result.SUCCESS
    assert outcome.warning
    assert outcome.output.startswith("Probe terminated redirects")


async def test_default_headers(server: Server) -> None:
    await probe_http(url(server, "/status/200"), probe_headers([]), 1)
    seen = server.headers[0]
    assert seen["user-agent"] == ["kube-probe/1.36"]
    assert seen["accept"] == ["*/*"]
    assert "accept-encoding" not in seen
    assert seen["host"] == [f"127.0.0.1:{server.port}"]


async def test_spec_headers_host_and_user_agent_override(server: Server) -> None:
    headers = probe_headers(
        spec_headers(
            {"name": "X-Custom-Header", "value": "Awesome"},
            {"name": "X-Multi", "value": "a"},
            {"name": "X-Multi", "value": "b"},
            {"name": "Host", "value": "example.test"},
            {"name": "user-agent", "value": "mine/1"},
            {"name": "Accept", "value": ""},
        )
    )
    await probe_http(url(server, "/status/200"), headers, 1)
    seen = server.headers[0]
    assert seen["x-custom-header"] == ["Awesome"]
    assert seen["x-multi"] == ["a", "b"]
    assert seen["host"] == ["example.test"]
    assert seen["user-agent"] == ["mine/1"]
    assert "accept" not in seen


async def test_path_with_query_and_missing_slash(server: Server) -> None:
    outcome = await probe_http(url(server, "status/200?x=1"), probe_headers([]), 1)
    assert outcome.result is Result.SUCCESS
    assert server.requests[0].path_qs == "/status/200?x=1"


async def test_same_host_redirect_is_followed(server: Server) -> None:
    outcome = await probe_http(url(server, "/redirect?to=/status/500"), probe_headers([]), 1)
    assert outcome.result is Result.FAILURE
    assert outcome.output == "HTTP probe failed with statuscode: 500"
    assert [r.path for r in server.requests] == ["/redirect", "/status/500"]


async def test_relative_redirect_keeps_custom_host_header(server: Server) -> None:
    headers = probe_headers(spec_headers({"name": "Host", "value": "example.test"}))
    outcome = await probe_http(url(server, "/redirect?to=/status/200"), headers, 1)
    assert outcome.result is Result.SUCCESS
    assert [h["host"] for h in server.headers] == [["example.test"], ["example.test"]]


async def test_redirect_to_other_host_is_not_followed_and_warns(server: Server) -> None:
    target = f"http://localhost:{server.port}/status/500"
    outcome = await probe_http(url(server, f"/redirect?to={target}&code=301"), probe_headers([]), 1)
    assert outcome.result is Result.SUCCESS
    assert outcome.warning
    assert [r.path for r in server.requests] == ["/redirect"]


async def test_redirect_loop_stops_after_ten_requests(server: Server) -> None:
    outcome = await probe_http(url(server, "/loop/0"), probe_headers([]), 2)
    assert outcome.result is Result.FAILURE
    assert outcome.output == 'Get "/loop/10": stopped after 10 redirects'
    assert len(server.requests) == 10


async def test_slow_response_times_out(server: Server) -> None:
    began = time.monotonic()
    outcome = await probe_http(url(server, "/slow"), probe_headers([]), 0.3)
    assert time.monotonic() - began < 2
    assert outcome.result is Result.FAILURE
    assert "context deadline exceeded" in outcome.output


async def test_body_read_is_capped(server: Server) -> None:
    outcome = await probe_http(url(server, "/big"), probe_headers([]), 2)
    assert outcome.result is Result.SUCCESS
    assert len(outcome.output) == MAX_OUTPUT_BYTES


async def test_connection_refused_is_failure() -> None:
    outcome = await probe_http(probe_url("HTTP", "127.0.0.1", _free_port(), "/"), probe_headers([]), 1)
    assert outcome.result is Result.FAILURE
    assert "connection refused" in outcome.output


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def self_signed(tmp_path: Path) -> ssl.SSLContext:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=probe.test",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


async def test_https_without_certificate_verification(self_signed: ssl.SSLContext) -> None:
    srv = Server()
    runner = await _serve(srv, self_signed)
    try:
        outcome = await probe_http(url(srv, "/status/200", scheme="HTTPS"), probe_headers([]), 2)
        assert outcome.result is Result.SUCCESS
        assert outcome.output == "status 200"
        plain = await probe_http(url(srv, "/status/200", scheme="HTTP"), probe_headers([]), 2)
        assert plain.result is Result.FAILURE
    finally:
        await runner.cleanup()


async def test_request_is_upstreams_wire_form(server: Server) -> None:
    """Go's http.Header canonical names, `Connection: close` (DisableKeepAlives), no Accept-Encoding
    (DisableCompression), an empty User-Agent sends none."""
    headers = probe_headers(spec_headers({"name": "x-custom-header", "value": "v"}, {"name": "User-Agent", "value": ""}))
    await probe_http(url(server, "/status/200"), headers, 1)
    raw = {name.decode(): value.decode() for name, value in server.requests[0].raw_headers}
    assert raw["X-Custom-Header"] == "v"
    assert raw["Connection"] == "close"
    assert "User-Agent" not in raw and "Accept-Encoding" not in raw


async def test_a_followed_redirect_sends_the_previous_url_as_referer(server: Server) -> None:
    await probe_http(url(server, "/redirect?to=/status/200"), probe_headers([]), 1)
    assert "referer" not in server.headers[0]
    assert server.headers[1]["referer"] == [f"http://127.0.0.1:{server.port}/redirect?to=/status/200"]


async def test_an_absolute_redirect_on_the_same_host_drops_the_custom_host(server: Server) -> None:
    headers = probe_headers(spec_headers({"name": "Host", "value": "example.test"}))
    target = f"http://127.0.0.1:{server.port}/status/200"
    outcome = await probe_http(url(server, f"/redirect?to={target}"), headers, 1)
    assert outcome.result is Result.SUCCESS
    assert [h["host"] for h in server.headers] == [["example.test"], [f"127.0.0.1:{server.port}"]]


async def test_a_location_that_is_no_url_fails_the_probe(server: Server) -> None:
    outcome = await probe_http(url(server, "/redirect?to=http://[::1/x"), probe_headers([]), 1)
    assert outcome.result is Result.FAILURE
    assert outcome.output.startswith(f'Get "http://127.0.0.1:{server.port}/redirect?to=http://[::1/x": '
                                     'failed to parse Location header "http://[::1/x"')


async def test_a_header_value_no_request_can_carry_fails_the_probe(server: Server) -> None:
    outcome = await probe_http(url(server, "/status/200"), probe_headers([("X-Bad", "a\r\nInjected: 1")]), 1)
    assert outcome.result is Result.FAILURE
    assert "invalid header" in outcome.output
    assert server.requests == []


async def test_a_timeout_after_a_redirect_names_the_url_then_requested(server: Server) -> None:
    outcome = await probe_http(url(server, "/redirect?to=/slow"), probe_headers([]), 0.3)
    assert outcome.result is Result.FAILURE
    assert outcome.output.startswith(f'Get "http://127.0.0.1:{server.port}/slow": context deadline exceeded')


async def test_an_ipv6_literal_host() -> None:
    srv = Server()
    runner = web.AppRunner(_app(srv))
    await runner.setup()
    site = web.TCPSite(runner, "::1", 0)
    await site.start()
    srv.port = runner.addresses[0][1]
    try:
        outcome = await probe_http(url(srv, "/status/200", host="::1"), probe_headers([]), 1)
        assert outcome.result is Result.SUCCESS and outcome.output == "status 200"
        assert srv.headers[0]["host"] == [f"[::1]:{srv.port}"]
        refused = await probe_http(probe_url("HTTP", "::1", _free_port(), "/"), probe_headers([]), 1)
        assert refused.output.startswith('Get "http://[::1]:') and "connect: connection refused" in refused.output
    finally:
        await runner.cleanup()


async def test_https_to_a_plain_http_server_is_gos_scheme_mismatch(server: Server) -> None:
    outcome = await probe_http(url(server, "/status/200", scheme="HTTPS"), probe_headers([]), 2)
    assert outcome.result is Result.FAILURE
    assert outcome.output == f'Get "https://127.0.0.1:{server.port}/status/200": http: server gave HTTP response to HTTPS client'
