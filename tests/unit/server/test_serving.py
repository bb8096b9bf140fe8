"""The bounded listener on loopback, plain (read-only and healthz ports) and over TLS (the 10250 API): deadlines,
size limits, the connection cap, compact error logs; each test runs against both."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest

from minikubelet.logs import KeyValueFormatter
from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite
from minikubelet.server.routes import Request, Response, Routes
from tests.unit.server.tls_pair import TlsPair, make_tls_pair

# Deadlines short enough for a unit test; the one a test is about is set there, the others stay long
# so that a close can only come from the bound under test.
FAST = ServingLimits(header_timeout=30.0, idle_timeout=30.0, write_timeout=30.0, log_interval=60.0)


@dataclass
class Served:
    site: HttpSite
    url: str
    client_ssl: ssl.SSLContext | None = None
    release: asyncio.Event = field(default_factory=asyncio.Event)  # answers the requests held on /slow

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection speaking HTTP (after the TLS handshake on the TLS listener)."""
        return await asyncio.open_connection("127.0.0.1", self.site.port, ssl=self.client_ssl)

    def session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.client_ssl or False))


Serve = Callable[[ServingLimits], Awaitable[Served]]


async def _hello(_request: Request) -> Response:
    return Response.text("hello")


async def _echo(request: Request) -> Response:
    return Response(200, request.body, "application/octet-stream")


async def _big(_request: Request) -> Response:
    return Response(200, b"x" * (32 << 20), "application/octet-stream")


def _routes() -> Routes:
    routes = Routes()
    routes.get("/", _hello)
    routes.add(("POST",), "/echo", _echo)
    routes.get("/big", _big)
    return routes


@pytest.fixture(scope="module")
def tls_pair(tmp_path_factory: pytest.TempPathFactory) -> TlsPair:
    return make_tls_pair(tmp_path_factory.mktemp("pki"))


@pytest.fixture(params=["plain", "tls"])
async def served(request: pytest.FixtureRequest, tls_pair: TlsPair) -> AsyncIterator[Serve]:
    sites: list[HttpSite] = []
    tls = tls_pair if request.param == "tls" else None

    async def start(limits: ServingLimits) -> Served:
        routes = _routes()
        release = asyncio.Event()

        async def slow(_request: Request) -> Response:
            await release.wait()
            return Response.text("slow")

        routes.get("/slow", slow)
        site = HttpSite(routes, "127.0.0.1", 0, limits, tls.server if tls else None)
        await site.start()
        sites.append(site)
        scheme = "https" if tls else "http"
        return Served(site, f"{scheme}://127.0.0.1:{site.port}", tls.client if tls else None, release)

    yield start
    for p in sites:
        await p.stop()


async def _until_closed(reader: asyncio.StreamReader, limit: float) -> tuple[float, bytes]:
    """Read until the server closes; (seconds it took, bytes received)."""
    start = time.monotonic()
    got = b""
    try:
        async with asyncio.timeout(limit):
            while chunk := await reader.read(65536):
                got += chunk
    except ConnectionResetError:
        pass
    return time.monotonic() - start, got


def _status(response: bytes) -> int:
    """The status code of a raw response (aiohttp answers an unparsable request as HTTP/1.0)."""
    assert response.startswith(b"HTTP/1."), response[:80]
    return int(response.split(b" ", 2)[1])


async def _wait(what: str, check: Callable[[], bool], limit: float = 5.0) -> None:
    async with asyncio.timeout(limit):
        while True:
            if check():
                return
            await asyncio.sleep(0.01)


async def test_a_head_trickled_byte_by_byte_is_closed_at_the_header_deadline(served: Serve) -> None:
    s = await served(ServingLimits(header_timeout=0.5, idle_timeout=30.0, log_interval=60.0))
    reader, writer = await s.open()
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")

    async def trickle() -> None:
        for _ in range(200):
            writer.write(b"X")
            await asyncio.sleep(0.05)

    dripping = asyncio.create_task(trickle())
    try:
        took, got = await _until_closed(reader, 10.0)
    finally:
        dripping.cancel()
        writer.close()
    assert got == b""
    assert 0.5 <= took < 5.0
    await _wait("connection released", lambda: not s.site.connections)


async def test_a_connection_that_sends_nothing_is_closed_at_the_header_deadline(served: Serve) -> None:
    s = await served(ServingLimits(header_timeout=0.3, idle_timeout=30.0))
    reader, writer = await s.open()
    took, got = await _until_closed(reader, 10.0)
    writer.close()
    assert got == b"" and 0.3 <= took < 5.0


async def test_an_idle_kept_alive_connection_is_closed_at_the_idle_timeout(served: Serve) -> None:
    s = await served(ServingLimits(header_timeout=30.0, idle_timeout=0.5))
    reader, writer = await s.open()
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"close" not in head.lower()
    assert await reader.readexactly(5) == b"hello"
    took, got = await _until_closed(reader, 10.0)
    writer.close()
    assert got == b"" and 0.4 <= took < 5.0


async def test_heads_beyond_the_limits_get_431(served: Serve) -> None:
    s = await served(ServingLimits(max_line_size=1024, max_field_size=1024, max_headers=20, log_interval=60.0))
    heads = {
        "long header": b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n",
        "long request line": b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        "many headers": b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(40)) + b"\r\n",
    }
    for what, head in heads.items():
        reader, writer = await s.open()
        writer.write(head)
        _, got = await _until_closed(reader, 5.0)
        writer.close()
        assert _status(got) == 431, what
    # within the limits the same server answers
    async with s.session() as c, c.get(s.url + "/", headers={"X-Ok": "a" * 500}) as r:
        assert r.status == 200


async def test_bodies_beyond_the_limit_get_413(served: Serve) -> None:
    s = await served(ServingLimits(max_body_size=1000, lingering_time=0.5))
    async with s.session() as c:
        async with c.post(s.url + "/echo", data=b"a" * 1000) as r:
            assert r.status == 200 and await r.read() == b"a" * 1000
        async with c.post(s.url + "/echo", data=b"a" * 1001) as r:
            assert r.status == 413
        # declared but not sent: answered from the head alone
        reader, writer = await s.open()
        writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n")
        _, got = await _until_closed(reader, 5.0)
        writer.close()
        assert _status(got) == 413

        # chunked: no length to check up front, the handler's read stops at the limit
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(5):
                yield b"a" * 400

        async with c.post(s.url + "/echo", data=chunks()) as r:
            assert r.status == 413


async def test_the_connection_beyond_the_cap_is_refused_and_service_resumes(served: Serve) -> None:
    """Five requests in flight hold the cap (an idle connection would be closed to make room, see below): the
    sixth connection is closed at once, before any TLS handshake, and service resumes once they are answered."""
    s = await served(ServingLimits(max_connections=5, header_timeout=30.0, log_interval=60.0))
    held = [await s.open() for _ in range(5)]
    for _, w in held:
        w.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    await _wait("5 requests in flight", lambda: len(s.site.connections) == 5 and not s.site.waiting)

    reader, writer = await asyncio.open_connection("127.0.0.1", s.site.port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    took, got = await _until_closed(reader, 5.0)
    writer.close()
    assert got == b"" and took < 5.0
    assert len(s.site.connections) == 5

    s.release.set()
    for r, w in held:
        assert (await r.readuntil(b"slow")).startswith(b"HTTP/1.1 200")
        w.close()
    await _wait("held connections gone", lambda: not s.site.connections)
    async with s.session() as c, c.get(s.url + "/") as resp:
        assert resp.status == 200 and await resp.text() == "hello"
    assert s.site.log.counts["over-cap"] == 1


async def test_a_client_that_does_not_read_its_response_is_dropped(served: Serve) -> None:
    s = await served(ServingLimits(write_timeout=0.5, header_timeout=30.0, idle_timeout=30.0))
    _, writer = await s.open()
    writer.write(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    await _wait("response under way", lambda: len(s.site.connections) == 1)
    await _wait("stalled connection dropped", lambda: not s.site.connections, limit=15.0)
    assert s.site.log.counts["write-timeout"] == 1
    writer.close()


async def test_a_malformed_request_logs_exactly_one_line(served: Serve, caplog: pytest.LogCaptureFixture) -> None:
    s = await served(ServingLimits(log_interval=60.0))
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        reader, writer = await s.open()
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        _, got = await _until_closed(reader, 5.0)
        writer.close()
        assert _status(got) == 400
    records = [r for r in caplog.records if r.name.startswith(("aiohttp", "asyncio", "minikubelet"))]
    assert len(records) == 1, [r.getMessage() for r in records]
    line = KeyValueFormatter().format(records[0])
    assert "\n" not in line and records[0].exc_info is None
    assert "rejected a malformed request" in line and "status=400" in line and "Content-Length" in line
    assert s.site.log.counts["bad-request"] == 3


async def test_a_failing_handler_still_logs_its_traceback(caplog: pytest.LogCaptureFixture,
                                                         tls_pair: TlsPair) -> None:
    async def broken(_request: Request) -> Response:
        raise RuntimeError("bug")

    routes = Routes()
    routes.get("/", broken)
    site = HttpSite(routes, "127.0.0.1", 0, ServingLimits(), tls_pair.server)
    await site.start()
    try:
        async with tls_pair.session() as c, c.get(f"https://127.0.0.1:{site.port}/") as r:
            assert r.status == 500
    finally:
        await site.stop()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None


async def test_a_failing_neutral_handler_logs_its_traceback_and_the_connection_serves_on(
        caplog: pytest.LogCaptureFixture) -> None:
    async def broken(_request: Request) -> Response:
        raise RuntimeError("bug")

    routes = _routes()
    routes.get("/broken", broken)
    site = HttpSite(routes, "127.0.0.1", 0, ServingLimits())
    await site.start()
    try:
        async with aiohttp.ClientSession() as c:
            async with c.get(f"http://127.0.0.1:{site.port}/broken") as r:
                assert r.status == 500
            async with c.get(f"http://127.0.0.1:{site.port}/") as r:
                assert r.status == 200 and await r.text() == "hello"
    finally:
        await site.stop()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert "RuntimeError: bug" in logging.Formatter().formatException(errors[0].exc_info)


def _slow_routes() -> tuple[Routes, asyncio.Event]:
    """The test routes plus /slow, which answers once the event is set: a request held in flight."""
    release = asyncio.Event()

    async def slow(_request: Request) -> Response:
        await release.wait()
        return Response.text("slow")

    routes = _routes()
    routes.get("/slow", slow)
    return routes, release


async def test_idle_connections_at_the_cap_never_keep_healthz_from_answering() -> None:
    """The read-only port with /healthz on it (healthzPort 0): a client that opens the cap's worth of connections
    and sends nothing used to have every new connection refused until the 10 s header timeout; now the longest-idle
    connection is closed to make room, and a connection with a request in flight never is."""
    routes, release = _slow_routes()
    site = HttpSite(routes, "127.0.0.1", 0, ServingLimits(max_connections=20, header_timeout=30.0,
                                                            log_interval=60.0))
    await site.start()
    held: list[asyncio.StreamWriter] = []
    try:
        busy = []
        for _ in range(2):  # two requests in flight: never closed to make room
            r, w = await asyncio.open_connection("127.0.0.1", site.port)
            w.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            busy.append((r, w))
        for _ in range(18):
            held.append((await asyncio.open_connection("127.0.0.1", site.port))[1])
        await _wait("cap reached", lambda: len(site.connections) == 20 and len(site.waiting) == 18)
        for _ in range(3):  # the first closes the longest-idle connection; each then leaves after its answer
            start = time.monotonic()
            async with aiohttp.ClientSession() as c, c.get(f"http://127.0.0.1:{site.port}/") as resp:
                assert resp.status == 200 and await resp.text() == "hello"
            assert time.monotonic() - start < 2.0
        assert site.log.counts["evicted-idle"] == 1 and "over-cap" not in site.log.counts
        assert len(site.waiting) == 17
        release.set()
        for r, w in busy:
            head = await r.readuntil(b"slow")
            assert head.startswith(b"HTTP/1.1 200"), head
            w.close()
    finally:
        release.set()
        for w in held:
            w.close()
        await site.stop()


async def test_at_the_cap_with_every_connection_busy_the_new_one_is_refused() -> None:
    routes, release = _slow_routes()
    site = HttpSite(routes, "127.0.0.1", 0, ServingLimits(max_connections=3, log_interval=60.0))
    await site.start()
    writers = []
    try:
        for _ in range(3):
            _, w = await asyncio.open_connection("127.0.0.1", site.port)
            w.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            writers.append(w)
        await _wait("three requests in flight", lambda: len(site.connections) == 3 and not site.waiting)
        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        _, got = await _until_closed(reader, 5.0)
        writer.close()
        assert got == b"" and site.log.counts["over-cap"] == 1
    finally:
        release.set()
        for w in writers:
            w.close()
        await site.stop()
