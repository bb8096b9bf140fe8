"""The 10250 API's streams end to end through the real listener over TLS: exec over SPDY/3.1 and over WebSocket
(v5.channel.k8s.io, wsproto on our side), port-forward on WebSocket channels, the refusals of bad upgrades, the
WebSocket's message bound and ping, and a followed log that ends when the client hangs up."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from cri.fake import FakeRuntime
from cri.streaming import STDERR, STDOUT, ExecSession, StreamSession
from cri.types import ContainerConfig, ContainerMeta, PodMeta, PodSandboxConfig
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.metrics import Metrics
from minikubelet.server.app import KubeletServer
from minikubelet.server.auth import AlwaysAllow, Authenticator
from minikubelet.server.kubelet_api import MAX_WS_MESSAGE, KubeletAPI
from minikubelet.server.limits import ServingLimits
from minikubelet.server.listener import HttpSite
from minikubelet.server.streaming import channel_codec as cc
from tests import spdy_client, ws_client
from tests.unit.server.tls_pair import TlsPair, make_tls_pair

POD = {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
       "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
EXEC = "/exec/ns/web/main?command=cat&input=1&output=1&error=1"


@dataclass
class EchoSession:
    """`cat` with a twist: once stdin ended, stdin back on stdout, "done" on stderr, then exit `code`."""

    code: int = 0
    stdin: bytearray = field(default_factory=bytearray)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    output: list[tuple[int, bytes]] | None = None

    async def read(self) -> tuple[int, bytes] | None:
        await self.ended.wait()
        if self.output is None:
            self.output = [(STDOUT, bytes(self.stdin)), (STDERR, b"done\n")]
        return self.output.pop(0) if self.output else None

    async def write(self, data: bytes) -> None:
        self.stdin += data

    async def close_stdin(self) -> None:
        self.ended.set()

    async def resize(self, width: int, height: int) -> None:
        pass

    async def exit_code(self) -> int:
        return self.code

    async def close(self) -> None:
        self.ended.set()


class Streaming:
    """The runtime's streaming side: exec'd `cat`s, and port-forwards to a local echo server."""

    def __init__(self, echo_port: int) -> None:
        self.echo_port = echo_port
        self.forwarded: list[tuple[str, int]] = []

    async def exec_stream(self, container_id: str, cmd: list[str], *, stdin: bool, stdout: bool, stderr: bool,
                          tty: bool) -> ExecSession:
        return EchoSession(code=3 if cmd == ["fail"] else 0)

    async def attach_stream(self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool,
                            tty: bool) -> StreamSession:
        return EchoSession()

    async def port_forward(self, sandbox_id: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.forwarded.append((sandbox_id, port))
        return await asyncio.open_connection("127.0.0.1", self.echo_port)


@dataclass
class Api:
    site: HttpSite
    tls: TlsPair
    metrics: Metrics
    log: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.site.port}"

    def inflight(self, path: str, method: str = "GET") -> float | None:
        return self.metrics.registry.get_sample_value("kubelet_http_inflight_requests", {
            "method": method, "path": path, "server_type": "readwrite",
            "long_running": str(path in ("exec", "attach")).lower()})

    async def settled(self, path: str, method: str = "GET") -> None:
        """Until the request is no longer in flight and its connection is gone."""
        deadline = time.monotonic() + 10
        while self.inflight(path, method) != 0 or self.site.connections:
            assert time.monotonic() < deadline, f"{method} {path} still in flight"
            await asyncio.sleep(0.02)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsPair:
    return make_tls_pair(tmp_path_factory.mktemp("pki"))


@pytest.fixture
async def api(tmp_path: Path, tls: TlsPair) -> AsyncIterator[Api]:
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    runtime = FakeRuntime(images=["busybox"])
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "main.log"
    log.write_text("2026-11-24T00:00:00.000000000Z stdout F first\n")
    sandbox = PodSandboxConfig(PodMeta("web", "ns", "u1"), log_directory=str(tmp_path / "logs"))
    sid = await runtime.run_pod_sandbox(sandbox)
    cid = await runtime.create_container(sid, ContainerConfig(ContainerMeta("main"), "busybox", log_path="main.log"),
                                         sandbox)
    await runtime.start_container(cid)

    async def health() -> list[tuple[str, str | None]]:
        return []

    metrics = Metrics()
    # a session whose client hung up without closing stdin runs on (as a real `cat` would): stop cuts it soon
    base = KubeletServer(lambda: [], health, CollectorRegistry(), lambda _uid: [], http=metrics.http,
                         limits=ServingLimits(shutdown_timeout=0.5))
    kubelet = KubeletAPI(base, "node-1", lambda: [POD], runtime, Streaming(echo.sockets[0].getsockname()[1]),
                         Authenticator(anonymous=True), AlwaysAllow())
    site = await base.serve("127.0.0.1", 0, kubelet.routes(), ssl_context=tls.server)
    yield Api(site, tls, metrics, log)
    await base.close()
    echo.close()


async def test_exec_over_spdy_through_the_tls_listener(api: Api) -> None:
    out = await spdy_client.run("127.0.0.1", api.site.port, EXEC, api.tls.client, stdin=b"hello")
    assert (out.stdout, out.stderr, out.status) == (b"hello", b"done\n", {"metadata": {}, "status": "Success"})
    await api.settled("exec", "POST")  # counted in flight until the stream ended


async def test_exec_over_websocket_v5(api: Api) -> None:
    out = await ws_client.run(api.url.replace("https", "wss") + EXEC, api.tls.client, stdin=b"hello")
    assert (out.stdout, out.stderr, out.status) == (b"hello", b"done\n", {"metadata": {}, "status": "Success"})
    failed = await ws_client.run(api.url.replace("https", "wss") + EXEC.replace("cat", "fail"), api.tls.client,
                                 stdin=b"")
    assert failed.status["reason"] == "NonZeroExitCode"
    assert failed.status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]


async def test_bad_upgrades_are_refused_with_the_reason(api: Api) -> None:
    async with api.tls.session() as http:
        plain = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "12",
                 "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        async with http.get(api.url + EXEC, headers=plain) as r:
            assert (r.status, await r.text()) == (400, "Unsupported version: 12")
        async with http.post(api.url + EXEC) as r:  # neither WebSocket nor SPDY
            assert (r.status, await r.text()) == (500, "Upgrade request required\n")
    with pytest.raises(spdy_client.UpgradeRefused) as refused:
        await spdy_client.SpdyClient.connect("127.0.0.1", api.site.port, EXEC, api.tls.client, offer=("v9.nothing",))
    assert refused.value.status == 403 and b"unable to negotiate protocol" in refused.value.body


async def test_the_accepted_versions_header_repeats_once_per_protocol(api: Api) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", api.site.port, ssl=api.tls.client)
    writer.write(f"POST {EXEC} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                 "X-Stream-Protocol-Version: v9.nothing\r\nContent-Length: 0\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    assert head.startswith(b"HTTP/1.1 403 ")
    assert head.count(b"\r\nX-Accepted-Stream-Protocol-Versions: ") == 4


async def test_port_forward_on_websocket_channels(api: Api) -> None:
    async with (api.tls.session() as http,
                http.ws_connect(api.url + "/portForward/ns/web?port=8080", protocols=(cc.V4_BINARY,)) as ws):
        assert ws.protocol == cc.V4_BINARY
        port_prefix = (8080).to_bytes(2, "little")
        firsts = {(await ws.receive_bytes(timeout=5))[0] for _ in range(2)}
        assert firsts == {0, 1}  # each channel opens with the port number
        await ws.send_bytes(b"\x00" + b"ping over the tunnel")
        msg = await ws.receive_bytes(timeout=5)
        assert msg == b"\x00ping over the tunnel"
    assert port_prefix == b"\x90\x1f"


async def test_a_websocket_message_beyond_the_bound_closes_it_1009(api: Api) -> None:
    async with (api.tls.session() as http,
                http.ws_connect(api.url.replace("https", "wss") + EXEC, protocols=(cc.V5_BINARY,),
                                max_msg_size=0) as ws):
        assert (await ws.receive_bytes(timeout=5)) == b"\x01"  # the server speaks first: empty stdout
        await ws.send_bytes(b"\x00" + b"x" * MAX_WS_MESSAGE)
        msg = await ws.receive(timeout=5)
        while msg.type == aiohttp.WSMsgType.BINARY:
            msg = await ws.receive(timeout=5)
        assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == 1009


async def test_a_ping_gets_its_pong(api: Api) -> None:
    async with (api.tls.session() as http,
                http.ws_connect(api.url.replace("https", "wss") + EXEC, protocols=(cc.V5_BINARY,),
                                autoping=False) as ws):
        assert (await ws.receive_bytes(timeout=5)) == b"\x01"
        await ws.ping(b"are you there")
        msg = await ws.receive(timeout=5)
        assert (msg.type, msg.data) == (aiohttp.WSMsgType.PONG, b"are you there")
        await ws.send_bytes(b"\xff\x00")  # stdin closed: the session ends
        assert (await ws.receive_bytes(timeout=5)) == b"\x02done\n"


async def test_a_followed_log_streams_and_ends_when_the_client_hangs_up(api: Api) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", api.site.port, ssl=api.tls.client)
    writer.write(b"GET /containerLogs/ns/web/main?follow=true HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"Transfer-Encoding: chunked" in head
    assert b"first\n" in await reader.readuntil(b"first\n")
    with api.log.open("a") as f:
        f.write("2026-11-24T00:00:01.000000000Z stdout F second\n")
    assert b"second\n" in await asyncio.wait_for(reader.readuntil(b"second\n"), 10)
    assert api.inflight("containerLogs") == 1
    writer.close()
    await api.settled("containerLogs")  # the follow does not outlive its client


async def test_head_and_keep_alive_after_a_streamed_response(api: Api) -> None:
    async with api.tls.session() as http:
        async with http.get(api.url + "/containerLogs/ns/web/main") as r:
            assert (r.status, await r.text()) == (200, "first\n")
        async with http.head(api.url + "/containerLogs/ns/web/main") as r:
            assert r.status == 200 and await r.read() == b""
        async with http.get(api.url + "/configz") as r:  # the same connection serves on
            assert r.status == 200 and json.loads(await r.read()) == {}
