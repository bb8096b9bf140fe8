"""`/portForward` on the real agent and Docker Engine, driven as kube-apiserver v1.36 drives a kubelet: the SPDY/3.1
POST upgrade, the WebSocket tunnel (`SPDY/3.1+portforward.k8s.io`, frames split across messages as kubectl
writes them) and the v4 channel form, to a busybox httpd in a pod."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import aiodocker
import aiohttp
import pytest

from cri.spdy import RstStatus
from minikubelet.server.streaming import channel_codec
from minikubelet.server.streaming.channels import WebSocketTunnel
from minikubelet.server.streaming.negotiation import PORTFORWARD_V1, Accepted
from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, free_port, simple_pod
from tests.integration.test_agent_kubelet_api import anonymous_ctx, write_pki
from tests.spdy_tunnel_client import SpdyClient, close_writer, spdy_upgrade

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker

PAGES = {"/": b"hello from busybox httpd\n", "/two.html": b"second page\n"}
HTTPD = ("mkdir -p /www && echo 'hello from busybox httpd' > /www/index.html && echo 'second page' > /www/two.html"
         " && exec httpd -f -p 8080 -h /www")
# On containerd the text is the runtime's own (through its streaming URL): wrapped in its netns step, and with no
# IPv6 in the pod `localhost` has no ::1 to dial.
REFUSED = re.compile(r'error forwarding port 8081 to pod [0-9a-f]{64}, uid : '
                     r'(failed to execute portforward in network namespace "[^"]+": )?failed to connect to localhost:8081 '
                     r'inside namespace "[0-9a-f]{64}", IPv4: dial tcp4 127.0.0.1:8081: connect: connection refused '
                     r'IPv6 dial tcp6(: address localhost: no suitable address found| \[::1\]:8081: connect: '
                     r'(connection refused|cannot assign requested address)) ')


async def fetch(client: SpdyClient, request_id: int, path: str, port: int = 8080) -> tuple[bytes, bytes, bool]:
    """One forwarded connection as kubectl makes it: error stream (FIN at once), data stream, an HTTP GET.
    Returns (data received, error text, data stream ended by FIN)."""
    headers = (("port", str(port)), ("requestid", str(request_id)))
    error = await client.open((("streamtype", "error"), *headers))
    await error.close()
    data = await client.open((("streamtype", "data"), *headers))
    await data.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    body = await data.read_all(timeout=20)
    return body, await error.read_all(timeout=20), data.remote_fin and data.reset is None


def body_of(response: bytes) -> bytes:
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK"), response[:200]
    return body


async def test_port_forward_spdy_websocket_and_channels(tmp_path: Path, agent: AgentProcess,
                                                        docker: aiodocker.Docker) -> None:
    ca, ctx = write_pki(tmp_path)
    port = free_port()
    agent.extra = {"port": port, "authentication": {"x509": {"clientCAFile": str(ca)}},
                   "authorization": {"mode": "AlwaysAllow"}, "streamingConnectionIdleTimeout": "3s"}
    agent.put("web.yaml", simple_pod("web", [{"name": "httpd", "command": ["sh", "-c", HTTPD]}]))
    agent.start()
    pod = await agent.wait_pod("web", lambda p: p.get("status", {}).get("phase") == "Running", "running")
    ns, name, uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]
    base = f"https://127.0.0.1:{port}/portForward/{ns}/{name}"
    await asyncio.sleep(1.0)  # httpd listening

    # -- SPDY, as the API server speaks it to a kubelet without ExtendWebSocketsToKubelet ---------------------
    head, reader, writer = await spdy_upgrade("127.0.0.1", port, f"/portForward/{ns}/{name}/{uid}", ctx)
    assert head == Accepted(PORTFORWARD_V1).response()  # byte for byte the recorded kubelet's 101
    client = SpdyClient(reader, writer)
    running = asyncio.create_task(client.run())
    try:
        paths = ["/", "/two.html"] * 4
        results = await asyncio.gather(*(fetch(client, i, p) for i, p in enumerate(paths)))
        for path, (response, error, fin) in zip(paths, results, strict=True):
            assert (body_of(response), error, fin) == (PAGES[path], b"", True)

        refused, error, _ = await fetch(client, 100, "/", port=8081)
        assert refused == b"" and REFUSED.fullmatch(error.decode()), error
        error_id, data_id = client._next_id - 4, client._next_id - 2
        assert [e for e in client.events if e[0] == "rst"] == [("rst", data_id), ("rst", error_id)]  # as upstream
        assert all(s.reset is RstStatus.CANCEL for s in list(client.streams.values())[-2:])
        # the connection and the agent carry on
        response, error, fin = await fetch(client, 101, "/two.html")
        assert (body_of(response), error, fin) == (PAGES["/two.html"], b"", True)
        async with aiohttp.ClientSession() as s, s.get(f"https://127.0.0.1:{port}/healthz", ssl=ctx) as r:
            assert (r.status, await r.text()) == (200, "ok")
        # streamingConnectionIdleTimeout (3s here): an idle connection ends with GOAWAY
        async with asyncio.timeout(10):
            await client.closed.wait()
        assert client.goaway is not None and client.goaway.last_good_stream_id == client._next_id - 2
    finally:
        await close_writer(writer)
        await running

    # -- the WebSocket tunnel, as the API server passes kubectl's through --------------------------------------
    async with aiohttp.ClientSession() as s, s.ws_connect(
            base.replace("https", "wss"), protocols=(channel_codec.PORTFORWARD_TUNNEL,), ssl=ctx) as ws:
        assert ws.protocol == channel_codec.PORTFORWARD_TUNNEL
        tunnel = WebSocketTunnel(ws)
        client = SpdyClient(tunnel, tunnel, split_frames=True)
        running = asyncio.create_task(client.run())
        try:
            results = await asyncio.gather(*(fetch(client, i, p) for i, p in enumerate(["/two.html", "/"])))
            assert [(body_of(r), e, f) for r, e, f in results] == [(PAGES["/two.html"], b"", True),
                                                                   (PAGES["/"], b"", True)]
            refused, error, _ = await fetch(client, 2, "/", port=8081)
            assert REFUSED.fullmatch(error.decode()), error
        finally:
            await ws.close()
            await running

    # -- WebSocket v4 channels with ?port= ---------------------------------------------------------------------
    async with aiohttp.ClientSession() as s, s.ws_connect(
            base.replace("https", "wss") + "?port=8080&port=8081", protocols=(channel_codec.V4_BINARY,),
            ssl=ctx) as ws:
        assert ws.protocol == channel_codec.V4_BINARY
        await ws.send_bytes(b"\x00GET /two.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        channels: dict[int, bytes] = {}
        async with asyncio.timeout(20):
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.BINARY:
                    break
                channels[msg.data[0]] = channels.get(msg.data[0], b"") + msg.data[1:]
    assert channels[0][:2] == channels[1] == (8080).to_bytes(2, "little")
    assert body_of(channels[0][2:]) == PAGES["/two.html"]
    assert channels[2] == (8081).to_bytes(2, "little")
    assert channels[3][:2] == (8081).to_bytes(2, "little") and REFUSED.fullmatch(channels[3][2:].decode())

    # -- refusals before any upgrade ---------------------------------------------------------------------------
    async with aiohttp.ClientSession() as s:
        for url, status, text in [
            (base, 500, "Upgrade request required\n"),
            (f"https://127.0.0.1:{port}/portForward/{ns}/nope", 404, "pod does not exist"),
            (f"{base}/not-the-uid", 404, "pod not found"),
        ]:
            async with s.post(url, ssl=ctx) as r:
                assert (r.status, await r.text()) == (status, text)
        async with s.post(base, ssl=anonymous_ctx()) as r:
            assert (r.status, await r.text()) == (401, "Unauthorized")
    assert agent.proc is not None and agent.proc.poll() is None

    # -- a forward held open (httpd waits for a request) neither blocks the API nor the agent's shutdown ----------
    head, reader, writer = await spdy_upgrade("127.0.0.1", port, f"/portForward/{ns}/{name}", ctx)
    client = SpdyClient(reader, writer)
    running = asyncio.create_task(client.run())
    try:
        headers = (("port", "8080"), ("requestid", "0"))
        held = [await client.open((("streamtype", kind), *headers)) for kind in ("error", "data")]
        await asyncio.wait_for(held[1].replied.wait(), 10)
        async with aiohttp.ClientSession() as s, s.get(f"https://127.0.0.1:{port}/healthz", ssl=ctx) as r:
            assert r.status == 200
        started = time.monotonic()
        assert await asyncio.to_thread(agent.stop) == 0
        assert time.monotonic() - started < 10
        async with asyncio.timeout(10):
            await client.closed.wait()
    finally:
        await close_writer(writer)
        await running
    assert "Traceback" not in agent.log() and "Task exception was never retrieved" not in agent.log()
