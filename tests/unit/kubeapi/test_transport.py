"""The API client's HTTP/1.1 transport (h11) against a real local socket server that answers as each test says:
keep-alive reuse and its bounds, gzip, stale connections, watch streams, and hostile answers (each must end
in a clear TransportError, never a hang)."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from minikubelet.base.clock import RealClock
from minikubelet.kubeapi.kubeconfig import ClientConfig, load_kubeconfig
from minikubelet.kubeapi.rest import (
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_LINE,
    ApiError,
    ConnectError,
    RestClient,
    RetryPolicy,
    TransportError,
)
from minikubelet.kubeapi.transport import MAX_IDLE, MAX_REQUESTS
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    connection: int  # which accepted socket carried it (1-based)
    index: int  # its place on that socket (1-based)


Answer = Callable[[Request, asyncio.StreamWriter], Awaitable[bool]]  # False: close the socket after it


def response(code: int, body: bytes, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {code} X", f"Content-Length: {len(body)}", "Content-Type: application/json", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)


async def ok_json(req: Request, w: asyncio.StreamWriter) -> bool:
    w.write(response(200, json.dumps({"target": req.target, "connection": req.connection}).encode()))
    return True


@dataclass
class RawServer:
    """Reads request heads and sized bodies itself (no HTTP library), then lets `answer` write anything."""

    answer: Answer = ok_json
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    port: int = 0
    handlers: set[asyncio.Task[None]] = field(default_factory=set)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        self.connections += 1
        number, index = self.connections, 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ")
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                index += 1
                req = Request(method, target, headers, body, number, index)
                self.requests.append(req)
                keep = await self.answer(req, writer)
                await writer.drain()
                if not keep:
                    return
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
async def server() -> AsyncIterator[RawServer]:
    raw = RawServer()
    srv = await asyncio.start_server(raw._handle, "127.0.0.1", 0)
    raw.port = srv.sockets[0].getsockname()[1]
    async with srv:
        yield raw
        srv.close()
        for task in raw.handlers:
            task.cancel()
        await asyncio.gather(*raw.handlers, return_exceptions=True)


def client(server: RawServer, *, timeout: float = 2.0, max_body: int = DEFAULT_MAX_BODY,
           max_line: int = DEFAULT_MAX_LINE, retry: RetryPolicy | None = None) -> RestClient:
    return RestClient(ClientConfig(server=server.url, token="t0k"), RealClock(), qps=0, agent="minikubelet/test",
                      timeout=timeout, max_body=max_body, max_line=max_line,
                      retry=retry or RetryPolicy(attempts=2, base=0.01, cap=0.02))


async def test_requests_reuse_one_connection_and_send_the_client_headers(server: RawServer) -> None:
    c = client(server)
    try:
        for _ in range(5):
            assert (await c.get("/api/v1/nodes/n1", {"a": "b c"}))["target"] == "/api/v1/nodes/n1?a=b+c"
        await c.patch("/api/v1/nodes/n1/status", {"status": {}})
    finally:
        await c.close()
    assert server.connections == 1 and [r.index for r in server.requests] == [1, 2, 3, 4, 5, 6]
    first, patch = server.requests[0], server.requests[-1]
    assert first.headers["host"] == f"127.0.0.1:{server.port}"
    assert first.headers["user-agent"] == "minikubelet/test"
    assert first.headers["authorization"] == "Bearer t0k"
    assert first.headers["accept"] == "application/json" and first.headers["accept-encoding"] == "gzip"
    assert "content-length" not in first.headers and first.body == b""
    assert patch.headers["content-type"] == "application/strategic-merge-patch+json"
    assert json.loads(patch.body) == {"status": {}}


async def test_concurrent_requests_are_bounded_and_few_sockets_stay(server: RawServer) -> None:
    async def slow(req: Request, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        return await ok_json(req, w)

    server.answer = slow
    c = client(server)
    try:
        answers = await asyncio.gather(*(c.get(f"/x/{i}") for i in range(3 * MAX_REQUESTS)))
        assert [a["target"] for a in answers] == [f"/x/{i}" for i in range(3 * MAX_REQUESTS)]
        transport = c._transport
        assert transport is not None
        assert server.connections <= MAX_REQUESTS and transport.pool.idle_count <= MAX_IDLE
    finally:
        await c.close()


async def test_a_gzip_answer_is_decoded_and_bounded_after_decoding(server: RawServer) -> None:
    big = b'{"pad": "' + b"a" * 5_000_000 + b'"}'

    async def gz(req: Request, w: asyncio.StreamWriter) -> bool:
        body = gzip.compress(big if req.target == "/big" else b'{"kind": "Node"}')
        w.write(response(200, body, "Content-Encoding: gzip"))
        return True

    server.answer = gz
    c = client(server, max_body=1_000_000)
    try:
        assert await c.get("/small") == {"kind": "Node"}
        with pytest.raises(TransportError, match="larger than 1000000 bytes"):
            await c.get("/big")  # ~5 KB on the wire, 5 MB decoded
        assert await c.get("/small") == {"kind": "Node"}
    finally:
        await c.close()


@pytest.mark.parametrize(("wire", "error"), [
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "GET http.*/x: .*"),
    (b"HTTP/1.1 200 OK\r\nX-Pad: " + b"p" * 200_000, "GET http.*/x: .*"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(b'{"a": ') + b"100\r\nabc", "GET .*"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}", "GET .*"),
    (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\n" + b"\x1f\x8b" + b"x" * 8, "gzip"),
    (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\n{}", "encoding not asked for"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n[1]", "not a JSON object"),
])
async def test_hostile_answers_fail_the_call_clearly(server: RawServer, wire: bytes, error: str) -> None:
    async def hostile(req: Request, w: asyncio.StreamWriter) -> bool:
        if req.target == "/ok":
            return await ok_json(req, w)
        w.write(wire)
        return False  # then close: a cut body must not wait for more

    server.answer = hostile
    c = client(server)
    try:
        with pytest.raises(TransportError, match=error):
            await c.get("/x")
        assert (await c.get("/ok"))["target"] == "/ok"  # the broken connection was not pooled
    finally:
        await c.close()


async def test_endless_headers_are_refused_at_the_head_bound_not_buffered(server: RawServer) -> None:
    async def endless(req: Request, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nX-Pad: ")
        for _ in range(64):
            w.write(b"p" * 16384)
            await w.drain()
        await asyncio.sleep(30)  # and never end the line nor close
        return False

    server.answer = endless
    c = client(server, timeout=10.0)
    try:
        with pytest.raises(TransportError, match=r"GET http.*/x: .*(too long|too large|maximum)"):
            await asyncio.wait_for(c.get("/x"), 5)
    finally:
        await c.close()


async def test_a_silent_server_is_a_timeout_not_a_hang(server: RawServer) -> None:
    async def silent(req: Request, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(30)
        return False

    server.answer = silent
    c = client(server, timeout=0.3)
    try:
        with pytest.raises(TransportError, match=r"no answer within 0\.3s"):
            await c.request("POST", "/api/v1/nodes", body={})
    finally:
        await c.close()


async def test_a_refused_connection_is_a_connect_error() -> None:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    c = RestClient(ClientConfig(server=f"http://127.0.0.1:{port}"), RealClock(), timeout=1.0)
    try:
        with pytest.raises(ConnectError, match="Cannot connect to API server"):
            await c.get("/version")
    finally:
        await c.close()


async def test_a_kept_connection_the_server_dropped_is_replaced_for_idempotent_requests(server: RawServer) -> None:
    async def once_per_socket(req: Request, w: asyncio.StreamWriter) -> bool:
        if req.index > 1:
            return False  # the server dropped the kept connection as the request arrived: no answer
        return await ok_json(req, w)

    server.answer = once_per_socket
    c = client(server, retry=RetryPolicy(attempts=1))  # no retries above the transport
    try:
        assert (await c.get("/a"))["connection"] == 1
        assert (await c.get("/b"))["connection"] == 2  # sent again on a new socket, at once
        assert (await c.update("/c", {}))["connection"] == 3  # PUT is idempotent too
        with pytest.raises(TransportError):
            await c.create("/d", {})  # a POST may have been acted on: not sent twice
        assert [r.target for r in server.requests] == ["/a", "/b", "/b", "/c", "/c", "/d"]
    finally:
        await c.close()


def watch_event(kind: str, name: str) -> bytes:
    return json.dumps({"type": kind, "object": {"metadata": {"name": name}}}).encode() + b"\n"


async def test_watch_lines_arrive_as_sent_and_the_connection_is_reused_after_a_clean_end(server: RawServer) -> None:
    async def watch(req: Request, w: asyncio.StreamWriter) -> bool:
        if "watch=true" not in req.target:
            return await ok_json(req, w)
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
        event = watch_event("ADDED", "a")
        w.write(chunked(event[:10]))  # a line split over chunks
        await w.drain()
        await asyncio.sleep(0.05)
        w.write(chunked(event[10:] + watch_event("MODIFIED", "a")[:-1], b"\n\n", b""))
        return True

    server.answer = watch
    c = client(server)
    try:
        async with c.stream_lines("/api/v1/pods", {"watch": "true"}, 5.0) as lines:
            got = [json.loads(line)["type"] async for line in lines]
        assert got == ["ADDED", "MODIFIED"]
        assert (await c.get("/version"))["connection"] == 1
    finally:
        await c.close()


async def test_a_gzip_watch_is_decoded_line_by_line(server: RawServer) -> None:
    async def watch(req: Request, w: asyncio.StreamWriter) -> bool:
        body = gzip.compress(watch_event("ADDED", "a") + watch_event("DELETED", "a"))
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n")
        w.write(chunked(body[:7], body[7:], b""))
        return True

    server.answer = watch
    c = client(server)
    try:
        async with c.stream_lines("/api/v1/pods", {"watch": "true"}, 5.0) as lines:
            assert [json.loads(line)["type"] async for line in lines] == ["ADDED", "DELETED"]
    finally:
        await c.close()


@pytest.mark.parametrize(("tail", "error"), [
    (b"", "silent for 0.3s"),  # nothing more, connection open
    (None, "watch /api/v1/pods: .*"),  # the connection is cut mid-stream
    (b"x" * 5000, "watch line longer than 4096 bytes"),
])
async def test_a_watch_that_stalls_breaks_or_floods_ends_in_a_transport_error(
        server: RawServer, tail: bytes | None, error: str) -> None:
    async def watch(req: Request, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(watch_event("ADDED", "a")))
        if tail is None:
            return False
        if tail:
            w.write(chunked(tail))
        await w.drain()
        await asyncio.sleep(10)
        return False

    server.answer = watch
    c = client(server, max_line=4096)
    got: list[bytes] = []
    try:
        with pytest.raises(TransportError, match=error):
            async with c.stream_lines("/api/v1/pods", {"watch": "true"}, 0.3) as lines:
                async for line in lines:
                    got.append(line)
        assert len(got) == 1
    finally:
        await c.close()


async def test_a_watch_refused_with_a_status_raises_api_error(server: RawServer) -> None:
    async def gone(req: Request, w: asyncio.StreamWriter) -> bool:
        w.write(response(410, json.dumps({"kind": "Status", "code": 410, "reason": "Expired"}).encode()))
        return True

    server.answer = gone
    c = client(server)
    try:
        with pytest.raises(ApiError) as e:
            async with c.stream_lines("/api/v1/pods", {"watch": "true"}, 1.0):
                pass
        assert e.value.gone and e.value.reason == "Expired"
    finally:
        await c.close()


async def test_reload_cuts_an_open_watch(server: RawServer) -> None:
    async def endless(req: Request, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(watch_event("ADDED", "a")))
        await w.drain()
        await asyncio.sleep(10)
        return False

    server.answer = endless
    c = client(server)
    first = asyncio.Event()

    async def consume() -> None:
        async with c.stream_lines("/api/v1/pods", {"watch": "true"}, 30.0) as lines:
            async for _ in lines:
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    await c.reload()  # a rotated certificate: every connection goes
    with pytest.raises(TransportError):
        await asyncio.wait_for(task, 5)
    await c.close()


def test_the_api_client_loads_no_aiohttp() -> None:
    code = "import sys, minikubelet.kubeapi.rest, minikubelet.kubeapi.watch; print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'multidict', 'yarl')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


async def test_tls_with_a_client_certificate_keeps_one_connection(api_server: ApiServer, tmp_path: Path) -> None:
    c = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    try:
        for _ in range(5):
            assert (await c.get("/version"))["gitVersion"] == "v1.36.2"
        assert c._transport is not None and c._transport.pool.opened == 1
        with pytest.raises(ApiError) as e:
            await c.get("/api/v1/nodes/other")  # the node identity came through the client certificate
        assert e.value.forbidden
    finally:
        await c.close()


async def test_tls_checks_the_server_name_the_kubeconfig_gives(api_server: ApiServer, tmp_path: Path) -> None:
    path = api_server.write_kubeconfig(tmp_path / "admin.conf", api_server.admin_identity())
    config = load_kubeconfig(str(path))
    named = RestClient(dataclasses.replace(config, tls_server_name="kubernetes.default.svc"), RealClock())
    wrong = RestClient(dataclasses.replace(config, tls_server_name="not-the-apiserver.example"), RealClock())
    try:
        assert (await named.get("/version"))["gitVersion"] == "v1.36.2"
        with pytest.raises(ConnectError, match=r"Cannot connect to API server .*certificate"):
            await wrong.get("/version")
    finally:
        for c in (named, wrong):
            await c.close()
