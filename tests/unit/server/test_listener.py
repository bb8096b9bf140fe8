"""The h11 listener's HTTP/1.1 behaviour on loopback (keep-alive, pipelining, HEAD, 404/405, HTTP/1.0,
malformed input), and the same routes answered the same over TLS (the 10250 API's listener)."""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite
from minikubelet.server.routes import Request, Response, Routes, accepts_gzip
from tests.unit.server.tls_pair import make_tls_pair


async def _echo(request: Request) -> Response:
    """What the handler saw, one line per field."""
    lines = [f"method={request.method}", f"path={request.path}", f"a={request.query.getall('a')}",
             f"flag={'flag' in request.query}", f"x={request.headers.getall('X-Thing')}",
             f"form={request.form().getall('f')}", f"body={len(request.body)}"]
    return Response.text("\n".join(lines) + "\n")


async def _tagged(request: Request) -> Response:
    if request.headers.get("If-None-Match") == '"v1"':
        return Response(304, headers={"ETag": '"v1"'})
    resp = Response(200, b"tagged body", "application/json", {"ETag": '"v1"'})
    return resp.gzipped() if accepts_gzip(request) else resp


def _routes() -> Routes:
    routes = Routes()
    routes.add(("GET", "POST"), "/echo", _echo)
    routes.get("/tagged", _tagged)
    routes.add((), "/any/", _echo, prefix=True)
    return routes


@pytest.fixture
async def site() -> AsyncIterator[HttpSite]:
    s = HttpSite(_routes(), "127.0.0.1", 0, ServingLimits(header_timeout=5.0, idle_timeout=5.0, log_interval=60.0))
    await s.start()
    yield s
    await s.stop()


async def _exchange(site: HttpSite, raw: bytes) -> bytes:
    """Send `raw`, read until the server closes (or 5 s pass)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    writer.write(raw)
    got = b""
    try:
        async with asyncio.timeout(5.0):
            while chunk := await reader.read(65536):
                got += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    writer.close()
    return got


async def test_pipelined_requests_on_one_connection_are_answered_in_order(site: HttpSite) -> None:
    raw = (b"GET /echo?a=1 HTTP/1.1\r\nHost: x\r\n\r\n"
           b"GET /echo?a=2&a=3 HTTP/1.1\r\nHost: x\r\n\r\n"
           b"GET /echo?flag HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got = await _exchange(site, raw)
    assert got.count(b"HTTP/1.1 200 OK") == 3
    assert got.index(b"a=['1']") < got.index(b"a=['2', '3']") < got.index(b"flag=True")
    assert got.lower().count(b"connection: close") == 1


async def test_http_1_0_gets_one_answer_and_a_close(site: HttpSite) -> None:
    got = await _exchange(site, b"GET /echo HTTP/1.0\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 200") and b"path=/echo" in got


async def test_head_gets_the_headers_without_the_body(site: HttpSite) -> None:
    got = await _exchange(site, b"HEAD /tagged HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"content-length: 11" in head.lower() and body == b""


async def test_304_with_etag_and_gzip_on_request(site: HttpSite) -> None:
    async with aiohttp.ClientSession() as c:
        url = f"http://127.0.0.1:{site.port}/tagged"
        async with c.get(url, headers={"Accept-Encoding": "identity"}) as r:
            assert r.status == 200 and await r.read() == b"tagged body" and r.headers["ETag"] == '"v1"'
        async with c.get(url, headers={"If-None-Match": '"v1"'}) as r:
            assert r.status == 304 and r.headers["ETag"] == '"v1"' and await r.read() == b""
        async with c.get(url, headers={"Accept-Encoding": "gzip"}, auto_decompress=False) as r:
            assert r.headers["Content-Encoding"] == "gzip" and gzip.decompress(await r.read()) == b"tagged body"


async def test_unknown_paths_get_404_and_other_methods_405_with_allow(site: HttpSite) -> None:
    async with aiohttp.ClientSession() as c:
        base = f"http://127.0.0.1:{site.port}"
        async with c.get(base + "/nope") as r:
            assert r.status == 404 and await r.text() == "404: Not Found"
        async with c.delete(base + "/tagged") as r:
            assert r.status == 405 and r.headers["Allow"] == "GET,HEAD"
        async with c.put(base + "/any/thing/%2Fx", data=b"abc") as r:
            assert r.status == 200
            assert "method=PUT" in (text := await r.text()) and "path=/any/thing//x" in text and "body=3" in text


async def test_expect_100_continue_gets_its_interim_answer_and_a_too_large_one_413(site: HttpSite) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0) == b"HTTP/1.1 100 \r\n\r\n"
    writer.write(b"abc")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
    assert head.startswith(b"HTTP/1.1 200")
    writer.close()
    got = await _exchange(site, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999\r\n"
                                b"Expect: 100-continue\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 413")


async def test_a_urlencoded_post_body_is_read_as_form_fields(site: HttpSite) -> None:
    async with aiohttp.ClientSession() as c, c.post(f"http://127.0.0.1:{site.port}/echo?f=q",
                                                    data={"f": "b"}, headers={"X-Thing": "1"}) as r:
        text = await r.text()
    assert "form=['q', 'b']" in text and "x=['1']" in text


@pytest.mark.parametrize(("raw", "status"), [
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n", 400),  # a TLS hello
    (b"GET /echo HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400),
    (b"GET http://elsewhere/echo HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400),
    (b"GET /echo HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host
])
async def test_malformed_requests_get_400_with_one_log_line(site: HttpSite, raw: bytes, status: int,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    got = await _exchange(site, raw)
    assert got.startswith(b"HTTP/1.1 %d " % status) and b"connection: close" in got.lower(), got[:200]
    records = [r for r in caplog.records if r.name.startswith(("asyncio", "minikubelet", "h11"))]
    assert len(records) == 1 and records[0].exc_info is None, [r.getMessage() for r in records]
    assert site.log.counts == {"bad-request": 1}
    # the listener still serves
    assert (await _exchange(site, b"GET /echo HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 200")


async def test_a_kept_alive_connection_gets_a_fresh_header_deadline_per_request() -> None:
    s = HttpSite(_routes(), "127.0.0.1", 0, ServingLimits(header_timeout=0.4, idle_timeout=5.0, log_interval=60.0))
    await s.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        await asyncio.sleep(0.6)  # idle longer than the header deadline: only the idle timeout applies
        writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n")  # then a head that never completes
        loop = asyncio.get_running_loop()
        start = loop.time()
        rest = await asyncio.wait_for(reader.read(), 5.0)
        assert rest == b""  # closed without an answer
        assert 0.3 <= loop.time() - start < 3.0
        assert s.log.counts.get("header-timeout") == 1
        writer.close()
    finally:
        await s.stop()


async def test_stop_closes_idle_kept_alive_connections_at_once(site: HttpSite) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
    await reader.readuntil(b"\r\n\r\n")
    loop = asyncio.get_running_loop()
    start = loop.time()
    await site.stop()
    assert loop.time() - start < 1.0 and not site.connections
    writer.close()


async def test_over_tls_the_same_handlers_give_the_same_answers(tmp_path: Path) -> None:
    tls = make_tls_pair(tmp_path)
    plain = HttpSite(_routes(), "127.0.0.1", 0, ServingLimits())
    secure = HttpSite(_routes(), "127.0.0.1", 0, ServingLimits(), tls.server)
    await plain.start()
    await secure.start()
    try:
        async with tls.session() as c:
            for method, path, headers, data in [
                ("GET", "/echo?a=1&a=2&flag", {"X-Thing": "t"}, None),
                ("POST", "/echo?f=q", {}, {"f": "b"}),
                ("GET", "/tagged", {"Accept-Encoding": "identity"}, None),
                ("GET", "/tagged", {"If-None-Match": '"v1"'}, None),
                ("GET", "/tagged", {"Accept-Encoding": "gzip"}, None),
                ("PATCH", "/any/x", {}, None),
            ]:
                answers = []
                for url in (f"http://127.0.0.1:{plain.port}", f"https://127.0.0.1:{secure.port}"):
                    async with c.request(method, url + path, headers=headers, data=data,
                                         auto_decompress=False) as r:
                        answers.append((r.status, await r.read(), r.headers.get("Content-Type"),
                                        r.headers.get("ETag"), r.headers.get("Content-Encoding")))
                assert answers[0] == answers[1], (method, path)
    finally:
        await plain.stop()
        await secure.stop()
