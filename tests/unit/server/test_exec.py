"""The exec/attach stream server (`minikubelet/server/exec.py`) on loopback TCP against the tests' SPDY client,
with a scripted runtime session (the Docker-backed one is exercised in
tests/integration/test_agent_attach_exec.py); the client's own bytes are checked against the recordings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from cri.spdy import FrameDecoder, SynStream
from cri.streaming import STDERR, STDOUT, StreamSession
from minikubelet.server.exec import (
    ExecOptions,
    Remote,
    attach_remote,
    error_status,
    exec_options,
    exec_remote,
    exit_status,
    serve_spdy_exec,
)
from minikubelet.server.streaming import negotiation
from minikubelet.server.streaming.connection import SpdyConnection
from tests.spdy_client import RemoteCommand, SpdyClient
from tests.unit.server.streaming.recorded import KUBELET_API, load, recorded_data


@dataclass
class ScriptedSession:
    """A runtime session that prints `output` once stdin ended (or at once without stdin), then exits `code`."""

    output: list[tuple[int, bytes]]
    code: int = 0
    wait_for_stdin: bool = True
    stdin: bytearray = field(default_factory=bytearray)
    stdin_closed: asyncio.Event = field(default_factory=asyncio.Event)
    resizes: list[tuple[int, int]] = field(default_factory=list)
    closed: bool = False

    async def read(self) -> tuple[int, bytes] | None:
        if self.wait_for_stdin:
            await self.stdin_closed.wait()
        return self.output.pop(0) if self.output else None

    async def write(self, data: bytes) -> None:
        self.stdin += data

    async def close_stdin(self) -> None:
        self.stdin_closed.set()

    async def resize(self, width: int, height: int) -> None:
        self.resizes.append((width, height))
        if (width, height) == (120, 40):
            self.stdin_closed.set()

    async def exit_code(self) -> int:
        return self.code

    async def close(self) -> None:
        self.closed = True


@dataclass
class Loopback:
    port: int
    received: bytearray  # every byte the server read: the client's request head and SPDY frames
    serve: Callable[[ExecOptions, Remote[Any]], None]


class _Recording:
    def __init__(self, reader: asyncio.StreamReader, sink: bytearray) -> None:
        self._reader, self._sink = reader, sink

    async def read(self, n: int) -> bytes:
        data = await self._reader.read(n)
        self._sink += data
        return data


@pytest.fixture
async def loopback() -> AsyncIterator[Loopback]:
    """A server that answers the SPDY upgrade as the kubelet API does and serves the next session handed in."""
    received = bytearray()
    sessions: asyncio.Queue[tuple[ExecOptions, Remote[Any]]] = asyncio.Queue()
    handlers: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        received.extend(head)
        offered = [line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                   if line.lower().startswith(b"x-stream-protocol-version:")]
        result = negotiation.handshake({"x-stream-protocol-version": offered},
                                       negotiation.REMOTECOMMAND_SPDY_PROTOCOLS)
        assert isinstance(result, negotiation.Accepted)
        writer.write(result.response())
        opts, remote = await sessions.get()
        await serve_spdy_exec(SpdyConnection(_Recording(reader, received), writer), result.protocol, opts, remote)

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        await handle(reader, writer)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield Loopback(port, received, lambda opts, remote: sessions.put_nowait((opts, remote)))
    server.close()
    await server.wait_closed()
    await asyncio.gather(*handlers, return_exceptions=True)


def _opts(query: str) -> ExecOptions:
    parsed = exec_options({k: [v] for k, v in (p.split("=") for p in query.split("&"))}, command_required=False)
    assert isinstance(parsed, ExecOptions)
    return parsed


def _started(session: ScriptedSession) -> Callable[[], Awaitable[StreamSession]]:
    async def start() -> StreamSession:
        return session
    return start


async def test_attach_over_spdy_as_recorded(loopback: Loopback) -> None:
    session = ScriptedSession([(STDOUT, b"got: hello\n"), (STDERR, b"stderr: hello\n")], code=7)
    loopback.serve(_opts("error=1&input=1&output=1"), attach_remote(_started(session)))
    target = "/attach/fixtures/attach-spdy/main?error=1&input=1&output=1"
    client = await SpdyClient.connect("127.0.0.1", loopback.port, target, None)
    try:
        assert client.protocol == "v4.channel.k8s.io"
        rc = await RemoteCommand.open(client, stdin=True, stdout=True, stderr=True, tty=False)
        await rc.streams["stdin"].write(b"hello\n")
        await rc.streams["stdin"].close()
        assert await rc.streams["stdout"].read_all() == b"got: hello\n"
        assert await rc.streams["stderr"].read_all() == b"stderr: hello\n"
        # attach reports Success whatever the process's own exit code
        assert await rc.status() == {"metadata": {}, "status": "Success"}
        await asyncio.wait_for(client.wait_closed(), 5)
    finally:
        await client.close()
    assert (bytes(session.stdin), session.stdin_closed.is_set(), session.closed) == (b"hello\n", True, True)

    # What the client sent is what the API server sent: the head (but Host) and the SYN_STREAMs, byte for byte
    # in their decoded form, and the data frames with the same stream ids and flags.
    recorded_c2s = (KUBELET_API / "attach-spdy" / "c2s.bin").read_bytes()
    head_end = recorded_c2s.index(b"\r\n\r\n") + 4
    ours = bytes(loopback.received)
    ours_end = ours.index(b"\r\n\r\n") + 4

    def without_host(head: bytes) -> list[bytes]:
        return [line for line in head.split(b"\r\n") if not line.startswith(b"Host:")]

    assert without_host(ours[:ours_end]) == without_host(recorded_c2s[:head_end])
    mine = FrameDecoder().feed(ours[ours_end:])
    recorded = FrameDecoder().feed(recorded_c2s[head_end:])
    assert [f for f in mine if isinstance(f, SynStream)] == [f for f in recorded if isinstance(f, SynStream)]
    assert [(type(f), getattr(f, "stream_id", None), getattr(f, "fin", None)) for f in mine] == \
        [(type(f), getattr(f, "stream_id", None), getattr(f, "fin", None)) for f in recorded]
    assert load("attach-spdy").connection["subprotocol"] == "v4.channel.k8s.io"


async def test_exec_exit_code_and_tty_resize(loopback: Loopback) -> None:
    session = ScriptedSession([(STDOUT, b"$ ")], code=3)
    opts = _opts("command=sh&input=1&output=1&tty=1")

    async def start() -> ScriptedSession:
        return session

    loopback.serve(opts, exec_remote(start))
    client = await SpdyClient.connect("127.0.0.1", loopback.port, "/exec/ns/p/c?command=sh&input=1&output=1&tty=1",
                                      None)
    try:
        rc = await RemoteCommand.open(client, stdin=True, stdout=True, stderr=True, tty=True)
        assert set(rc.streams) == {"error", "stdin", "stdout", "resize"}
        await rc.streams["resize"].write(b'{"Width":80,"Height":24}\n{"Width":120,')  # a line split over frames
        await rc.streams["resize"].write(b'"Height":40}\nnot json\n')
        assert await rc.streams["stdout"].read_all() == b"$ "
        status = await rc.status()
    finally:
        await client.close()
    assert session.resizes == [(80, 24), (120, 40)]
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"] == {"causes": [{"reason": "ExitCode", "message": "3"}]}


async def test_a_failed_attach_is_an_internal_error_status(loopback: Loopback) -> None:
    async def refuse() -> StreamSession:
        raise RuntimeError("You cannot attach to a stopped container, start it first")

    loopback.serve(_opts("output=1"), attach_remote(refuse))
    client = await SpdyClient.connect("127.0.0.1", loopback.port, "/attach/ns/p/c?output=1", None)
    try:
        rc = await RemoteCommand.open(client, stdin=False, stdout=True, stderr=False, tty=False)
        status = await rc.status()
    finally:
        await client.close()
    message = "error attaching to container: You cannot attach to a stopped container, start it first"
    assert status == {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {message}",
                      "reason": "InternalError", "details": {"causes": [{"message": message}]}, "code": 500}


def test_attach_options() -> None:
    assert _opts("error=1&input=1&output=1") == ExecOptions((), True, True, True, False)
    assert _opts("input=1&output=1&tty=1&error=1").stderr is False  # a tty merges stderr into stdout
    assert exec_options({"output": ["1"]}) == "you must specify at least 1 command"
    assert exec_options({"tty": ["1"]}, command_required=False) == \
        "you must specify at least 1 of stdin, stdout, stderr"
    assert json.loads(error_status("boom"))["message"] == "Internal error occurred: boom"


@pytest.mark.parametrize("scenario", ["exec-echo-spdy", "exec-exit3-spdy", "exec-exit3-ws", "attach-spdy"])
def test_statuses_are_the_recorded_bytes(scenario: str) -> None:
    rec = load(scenario)
    request_line = rec.connection["exchanges"][0]["request"]["start_line"]
    query = parse_qs(urlsplit(request_line.split(" ")[1]).query)
    error_frames = [f for f in rec.frames("s2c") if f.get("stream_id") == 1 and f.get("kind") == "data"] \
        or [f for f in rec.frames("s2c") if f.get("channel") == 3]
    recorded, _ = recorded_data(next(f for f in error_frames if recorded_data(f)[1] > 0))
    assert recorded is not None
    code = int(json.loads(recorded)["details"]["causes"][0]["message"]) if b"ExitCode" in recorded else 0
    status = exit_status(code, tuple(query.get("command", [])), websocket=scenario.endswith("-ws"))
    assert status == recorded.removeprefix(b"\x03")
