"""The Engine client's HTTP layer against a small HTTP/1.1 server on a unix socket (h11 on the server side):
error mapping, keep-alive reuse, the pool's bounds, streamed lines, and the hijack's hand-over of bytes.

The real Engine is exercised by tests/integration/test_cri_docker.py and the agent tests; these pin what
a Docker daemon rarely shows on demand (a burst of 100, a 500 in text, a socket that is not there)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import h11
import pytest

from cri.docker import connection
from cri.docker.client import DockerAPIError, DockerClient
from cri.docker.connection import READ_SIZE
from cri.docker.hijack import STDERR, STDOUT, RawStream
from cri.errors import ImagePullError, NotFoundError, RuntimeUnavailableError

Handler = Callable[[h11.Request, bytes], Awaitable[tuple[int, list[tuple[str, str]], list[bytes]]]]


class Engine:
    """Answers each request with `handler`; counts connections and concurrent requests."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.active = 0
        self.peak = 0
        self.hijacked: list[bytes] = []  # what a hijack's client wrote after the request

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = None, bytearray()
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(await reader.read(65536))
                        continue
                    if isinstance(event, h11.Request):
                        request = event
                    elif isinstance(event, h11.Data):
                        body.extend(event.data)
                    elif isinstance(event, h11.EndOfMessage) or isinstance(event, h11.ConnectionClosed):
                        break
                if request is None:
                    return
                if dict(request.headers).get(b"upgrade") == b"tcp":
                    await self._hijack(conn, reader, writer)
                    return
                self.active += 1
                self.peak = max(self.peak, self.active)
                try:
                    status, headers, chunks = await self.handler(request, bytes(body))
                finally:
                    self.active -= 1
                writer.write(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
                for chunk in chunks:
                    writer.write(conn.send(h11.Data(data=chunk)) or b"")
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _hijack(self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = conn.send(h11.InformationalResponse(status_code=101, headers=[("Connection", "Upgrade"),
                                                                              ("Upgrade", "tcp")])) or b""
        # Output right behind the head, in the same write: the client must not lose it.
        writer.write(head + frame(STDOUT, b"hello ") + frame(STDERR, b"oops"))
        writer.write(frame(STDOUT, b"world"))
        await writer.drain()
        self.hijacked.append(await reader.read())  # until the client half-closes
        writer.write(frame(STDOUT, b"bye"))
        await writer.drain()


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def json_answer(status: int, doc: object) -> tuple[int, list[tuple[str, str]], list[bytes]]:
    data = json.dumps(doc).encode()
    return status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))], [data]


async def routes(request: h11.Request, body: bytes) -> tuple[int, list[tuple[str, str]], list[bytes]]:
    path = request.target.decode()
    if path in ("/version", "/v1.41/version"):
        return json_answer(200, {"ApiVersion": "1.41"})
    if path.startswith("/v1.41/containers/missing/"):
        return json_answer(404, {"message": "No such container: missing"})
    if path.startswith("/v1.41/broken"):
        return 500, [("Content-Type", "text/plain"), ("Content-Length", "12")], [b"engine broke"]
    if path.startswith("/v1.41/slow"):
        await asyncio.sleep(0.05)
        return json_answer(200, {"slow": True})
    if path.startswith("/v1.41/events"):
        lines = [b'{"a":', b'1}\n{"b":2}\n', b'\n{"c":3}']  # a line split across chunks, an empty one, no last newline
        return 200, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")], lines
    if path.startswith("/v1.41/echo"):
        return json_answer(200, {"target": path, "body": body.decode(), "method": request.method.decode()})
    if path.startswith("/v1.41/start"):
        return 204, [], []
    if path.startswith("/v1.41/huge"):
        return 200, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")], [b" " * 4096] * 64
    return json_answer(400, {"message": f"unexpected {path}"})


@contextlib.asynccontextmanager
async def serving(handler: Handler, sock: Path) -> AsyncIterator[Engine]:
    """An Engine answering with `handler` on the unix socket `sock`, for the block."""
    server_state = Engine(handler)
    server = await asyncio.start_unix_server(server_state.serve, path=str(sock))
    try:
        yield server_state
    finally:
        server.close()


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[tuple[Engine, DockerClient]]:
    async with serving(routes, tmp_path / "docker.sock") as server_state:
        client = DockerClient(f"unix://{tmp_path}/docker.sock")
        try:
            yield server_state, client
        finally:
            await client.close()


async def test_json_requests_and_error_mapping(engine: tuple[Engine, DockerClient]) -> None:
    _, client = engine
    echoed = await client.post("echo", {"Cmd": ["true"]}, params={"all": True, "limit": 3, "filters": '{"a":1}'})
    assert echoed["method"] == "POST" and json.loads(echoed["body"]) == {"Cmd": ["true"]}
    assert echoed["target"] == "/v1.41/echo?all=1&limit=3&filters=%7B%22a%22%3A1%7D"
    assert await client.post("start") == ""  # 204: no body
    with pytest.raises(NotFoundError, match="No such container: missing"):
        await client.get("containers/missing/json")
    with pytest.raises(DockerAPIError) as caught:
        await client.delete("broken")
    assert (caught.value.status, caught.value.message) == (500, "engine broke")
    with pytest.raises(ImagePullError, match="engine broke"):
        await client.post("broken", kind=ImagePullError)


async def test_get_bytes_gives_the_undecoded_body_and_maps_errors(engine: tuple[Engine, DockerClient]) -> None:
    _, client = engine
    raw = await client.get_bytes("echo", params={"all": True})
    assert isinstance(raw, bytes) and json.loads(raw)["target"] == "/v1.41/echo?all=1"
    with pytest.raises(NotFoundError, match="No such container: missing"):
        await client.get_bytes("containers/missing/json")


async def test_an_oversized_answer_fails_the_call_not_the_agent(engine: tuple[Engine, DockerClient],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    server, client = engine
    monkeypatch.setattr(connection, "MAX_BODY", 100_000)
    with pytest.raises(RuntimeUnavailableError, match="answer longer than 100000 bytes"):
        await client.get("huge")
    with pytest.raises(RuntimeUnavailableError, match="answer longer than 100000 bytes"):
        await client.get_bytes("huge")
    monkeypatch.setattr(connection, "MAX_BODY", 300_000)
    assert await client.get_bytes("huge") == b" " * 4096 * 64
    assert (await client.get("echo"))["method"] == "GET"  # the broken sockets were not pooled
    assert server.connections >= 3


async def test_unreachable_engine_is_runtime_unavailable(tmp_path: Path) -> None:
    client = DockerClient(f"unix://{tmp_path}/absent.sock")
    with pytest.raises(RuntimeUnavailableError, match="Cannot connect to Docker Engine"):
        await client.get("version")


def test_endpoint_schemes() -> None:
    DockerClient("tcp://127.0.0.1:2375")
    with pytest.raises(ValueError, match="only unix:// and tcp://"):
        DockerClient("npipe:////./pipe/docker_engine")


async def test_keep_alive_reuses_one_connection(engine: tuple[Engine, DockerClient]) -> None:
    server, client = engine
    for _ in range(10):
        await client.get("echo")
    assert server.connections == 1 and client.pool.opened == 1


async def test_a_burst_runs_in_parallel_and_leaves_few_sockets(engine: tuple[Engine, DockerClient]) -> None:
    server, client = engine
    await client.get("version")
    answers = await asyncio.gather(*(client.get("slow") for _ in range(100)))
    assert len(answers) == 100
    # Neither one at a time nor a hundred sockets: the pool's request bound, then its idle bound.
    assert 1 < server.peak <= 64
    assert client.pool.opened <= 64
    assert client.pool.idle_count == 8


async def test_streamed_lines(engine: tuple[Engine, DockerClient]) -> None:
    _, client = engine
    async with client.stream("events") as response:
        lines = [line async for line in response.content]
    assert lines == [b'{"a":1}\n', b'{"b":2}\n', b"\n", b'{"c":3}']
    await client.get("echo")  # a stream read to its end gives its connection back
    assert client.pool.opened == 1


async def test_stream_error_is_raised_before_the_body(engine: tuple[Engine, DockerClient]) -> None:
    _, client = engine
    with pytest.raises(NotFoundError):
        async with client.stream("containers/missing/logs"):
            pytest.fail("no body for an error")


async def test_hijack_keeps_the_bytes_behind_the_head_and_half_closes(engine: tuple[Engine, DockerClient]) -> None:
    server, client = engine
    stream = await client.hijack("exec/x/start", {"Detach": False, "Tty": False}, tty=False)
    got = [await stream.read() for _ in range(3)]
    assert got == [(STDOUT, b"hello "), (STDERR, b"oops"), (STDOUT, b"world")]
    await stream.write(b"input")
    stream.write_eof()
    assert await stream.read() == (STDOUT, b"bye")
    assert await stream.read() is None
    await stream.close()
    assert server.hijacked == [b"input"]


def test_importing_the_docker_runtime_loads_no_aiohttp() -> None:
    code = "import sys, cri.docker; print(sorted(m for m in ('aiohttp', 'aiodocker') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def raw_stream(output: bytes, tty: bool, head: bytes = b"") -> RawStream:
    """A RawStream reading `output` from the far end of a socket pair, which then closes."""
    ours, theirs = socket.socketpair()
    theirs.sendall(output)
    theirs.close()
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    return RawStream(reader, writer, tty, head)


async def drain(stream: RawStream) -> list[tuple[int, bytes]]:
    out = []
    while (chunk := await stream.read()) is not None:
        out.append(chunk)
    await stream.close()
    return out


async def test_a_large_frame_comes_in_bounded_pieces() -> None:
    big = bytes(range(256)) * 600  # 150 KiB in one frame
    chunks = await drain(await raw_stream(frame(STDERR, big) + frame(STDOUT, b"end"), tty=False))
    assert all(len(data) <= READ_SIZE for _, data in chunks)
    assert b"".join(d for s, d in chunks if s == STDERR) == big
    assert chunks[-1] == (STDOUT, b"end")


async def test_a_partial_frame_at_eof_ends_the_output() -> None:
    whole = frame(STDOUT, b"whole")
    assert await drain(await raw_stream(whole[3:] + frame(STDOUT, b"cut")[:6], tty=False, head=whole[:3])) == [
        (STDOUT, b"whole")]


async def test_with_a_tty_output_is_raw_stdout() -> None:
    assert await drain(await raw_stream(b"\x01\x00raw", tty=True, head=b"$ ")) == [(STDOUT, b"$ "),
                                                                                   (STDOUT, b"\x01\x00raw")]
