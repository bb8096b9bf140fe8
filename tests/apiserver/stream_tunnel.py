"""kube-apiserver's TunnelingHandler for port-forward: kubectl's WebSocket (`SPDY/3.1+portforward.k8s.io`) on one
side, a SPDY/3.1 upgrade to a kubelet that does not declare ExtendWebSocketsToKubelet on the other, as recorded in
`portforward-spdy`. The API server does not read the SPDY frames: the payloads of kubectl's binary messages are one
byte stream (message boundaries fall anywhere, kubectl writes a frame's head and body separately), written to the
kubelet's connection as they come; what the kubelet sends goes back as binary messages as it is read.

The upgrade request is kubectl's own, cloned: method POST, no body, the WebSocket headers removed,
`Upgrade: SPDY/3.1` and one `X-Stream-Protocol-Version` per offered tunneling protocol with the prefix taken off.
The WebSocket is accepted only after the kubelet's 101, with the sub-protocol `SPDY/3.1+<the kubelet's choice>`;
anything else the kubelet answers is passed back as it came (status and body).
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
from aiohttp import web

from minikubelet.server.streaming.channel_codec import SPDY_TUNNEL_PREFIX

K8S_SUFFIX = ".k8s.io"
_DROPPED = {"sec-websocket-protocol", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
            "upgrade", "connection", "content-length", "transfer-encoding", "authorization",
            "x-stream-protocol-version"}
_FIRST = {"host", "user-agent"}
READ_SIZE = 32 * 1024


def spdy_protocols(offered: list[str]) -> list[str]:
    """The SPDY protocols inside the tunneling ones kubectl offers (`SPDY/3.1+portforward.k8s.io` → the suffix)."""
    return [p.removeprefix(SPDY_TUNNEL_PREFIX) for p in offered
            if p.startswith(SPDY_TUNNEL_PREFIX) and p.endswith(K8S_SUFFIX)]


def upgrade_headers(request: web.Request, protocols: list[str]) -> list[tuple[str, str]]:
    """The cloned request's headers as Go writes them: Host, User-Agent, Content-Length, then the rest by name."""
    rest = [(k, v) for k, v in request.headers.items() if k.lower() not in _DROPPED and k.lower() not in _FIRST]
    rest += [("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1"), ("X-Forwarded-For", request.remote or "")]
    rest += [("X-Stream-Protocol-Version", p) for p in protocols]
    first = [("Host", request.host), ("User-Agent", request.headers.get("User-Agent", "Go-http-client/1.1")),
             ("Content-Length", "0")]
    return first + sorted(rest, key=lambda kv: kv[0].lower())


async def splice(ws: web.WebSocketResponse, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes both ways until either side ends; then both are closed."""

    async def to_kubelet() -> None:
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                break
            writer.write(msg.data)
            await writer.drain()

    async def to_client() -> None:
        while data := await reader.read(READ_SIZE):
            await ws.send_bytes(data)

    tasks = {asyncio.create_task(to_kubelet()), asyncio.create_task(to_client())}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await ws.close()
