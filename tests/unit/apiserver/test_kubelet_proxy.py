"""The test API server's kubelet subresources against a recording stand-in kubelet on loopback TLS: what it
sends (path, query as url.Values.Encode, headers, its kubelet client certificate) and what it relays."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from minikubelet.server.streaming.channel_codec import PORTFORWARD_TUNNEL as TUNNEL
from tests.apiserver import ApiServer
from tests.apiserver.proxy import KubeletProxy
from tests.apiserver.spdy_translator import TerminalSizes
from tests.unit.server.streaming.recorded import load

Seen = list[dict[str, Any]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
SEEN = web.AppKey("seen", list[dict[str, Any]])


async def _record(request: web.Request) -> web.StreamResponse:
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    subject = dict(x[0] for x in (peer or {}).get("subject", ()))
    request.app[SEEN].append({"method": request.method, "path_qs": request.path_qs,
                              "headers": dict(request.headers), "cn": subject.get("commonName", ""),
                              "versions": request.headers.getall("X-Stream-Protocol-Version", [])})
    if request.path == "/configz":
        return web.json_response({"kubeletconfig": {"port": 10250}})
    if request.path.startswith("/containerLogs/"):
        return web.Response(text="a\nb\n")
    if request.path.startswith("/exec/"):
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io",))
        await ws.prepare(request)
        msg = await ws.receive()
        await ws.send_bytes(b"\x01" + msg.data[1:].upper())
        await ws.close()
        return ws
    return web.Response(status=404, text="404 page not found\n")


@pytest.fixture
async def kubelet(api: ApiServer, tmp_path: Path) -> AsyncIterator[tuple[int, Seen]]:
    pair = api.ca.issue("node-1", server=True, ips=("127.0.0.1",))
    cert, key = pair.write(tmp_path / "kubelet", "serving")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(cadata=api.ca.cert_pem.decode())
    ctx.verify_mode = ssl.CERT_REQUIRED
    app = web.Application()
    app[SEEN] = []
    app.router.add_route("*", "/{tail:.*}", _record)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ctx).start()
    api.kubelet_proxy = KubeletProxy(api, kubelet_ca=api.ca.cert_pem)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
            "status": {"addresses": [{"type": "Hostname", "address": "node-1"},
                                     {"type": "InternalIP", "address": "127.0.0.1"}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}
    api.store.create("nodes", node)
    for name, containers in (("p", ["main"]), ("two", ["a", "b"])):
        api.store.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                                  "spec": {"nodeName": "node-1",
                                           "containers": [{"name": c, "image": "busybox"} for c in containers]}})
    yield port, app[SEEN]
    await runner.cleanup()


async def test_node_proxy_forwards_as_kube_apiserver(api: ApiServer, kubelet: tuple[int, Seen]) -> None:
    _, seen = kubelet
    reply = await api.admin().request("GET", "/api/v1/nodes/node-1/proxy/configz?x=1")
    assert (reply.status, reply.body) == (200, {"kubeletconfig": {"port": 10250}})
    [request] = seen
    assert request["method"] == "GET" and request["path_qs"] == "/configz?x=1"
    assert request["cn"] == "kube-apiserver-kubelet-client"
    assert request["headers"]["X-Forwarded-Uri"] == "/api/v1/nodes/node-1/proxy/configz"
    assert request["headers"]["X-Forwarded-For"] == "127.0.0.1" and "Authorization" not in request["headers"]
    reply = await api.admin().request("GET", "/api/v1/nodes/node-1/proxy/nothing")
    assert (reply.status, reply.body) == (404, "404 page not found\n")  # the kubelet's answer, unchanged
    stranger = api.client(api.identity("stranger"))
    assert (await stranger.request("GET", "/api/v1/nodes/node-1/proxy/configz")).status == 403
    assert len(seen) == 2


async def test_pod_log_maps_the_options(api: ApiServer, kubelet: tuple[int, Seen]) -> None:
    _, seen = kubelet
    admin = api.admin()
    reply = await admin.request("GET", "/api/v1/namespaces/default/pods/p/log?tailLines=2&timestamps=true&follow=true"
                                       "&sinceSeconds=5&limitBytes=9&previous=false")
    assert (reply.status, reply.body) == (200, "a\nb\n")
    assert seen[-1]["path_qs"] == ("/containerLogs/default/p/main?follow=true&limitBytes=9&sinceSeconds=5"
                                   "&tailLines=2&timestamps=true")
    assert seen[-1]["headers"]["User-Agent"] == "Go-http-client/1.1"
    reply = await admin.request("GET", "/api/v1/namespaces/default/pods/two/log")
    assert reply.status == 400
    assert reply.body["message"] == "a container name must be specified for pod two, choose one of: [a b]"
    reply = await admin.request("GET", "/api/v1/namespaces/default/pods/two/log?container=b")
    assert reply.status == 200 and seen[-1]["path_qs"] == "/containerLogs/default/two/b"


async def test_exec_websocket_passed_through_to_a_declaring_node_else_translated(api: ApiServer,
                                                                     kubelet: tuple[int, Seen]) -> None:
    _, seen = kubelet
    url = api.url.replace("https://", "wss://") + "/api/v1/namespaces/default/pods/p/exec?command=ls&command=-l" \
                                                   "&stdin=true&stdout=true&tty=false"
    ctx = api.client_ssl(api.admin_identity())
    async with aiohttp.ClientSession() as s:
        # not declared: translated, so the kubelet gets the SPDY/3.1 upgrade (which this stand-in refuses)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await s.ws_connect(url, protocols=("v5.channel.k8s.io",), ssl=ctx)
        assert refused.value.status == 400
        [spdy] = seen
        assert spdy["method"] == "POST" and spdy["path_qs"] == "/exec/default/p/main?command=ls&command=-l&input=1&output=1"
        assert spdy["headers"]["Upgrade"] == "SPDY/3.1" and spdy["headers"]["User-Agent"] == "Go-http-client/1.1"
        assert spdy["versions"] == ["v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io",
                                    "v2.channel.k8s.io", "channel.k8s.io"]  # one header each, as recorded
        node = api.store.get("nodes", "", "node-1")
        assert node is not None
        node["status"]["declaredFeatures"] = ["ExtendWebSocketsToKubelet"]
        api.store.update("nodes", node)
        async with s.ws_connect(url, protocols=("v5.channel.k8s.io",), ssl=ctx) as ws:
            assert ws.protocol == "v5.channel.k8s.io"
            await ws.send_bytes(b"\x00hello")
            assert (await ws.receive()).data == b"\x01HELLO"
            assert (await ws.receive()).type == aiohttp.WSMsgType.CLOSE
    assert seen[-1]["path_qs"] == "/exec/default/p/main?command=ls&command=-l&input=1&output=1"
    assert seen[-1]["cn"] == "kube-apiserver-kubelet-client"


async def test_unreachable_kubelet_is_503(api: ApiServer, kubelet: tuple[int, Seen]) -> None:
    node = api.store.get("nodes", "", "node-1")
    assert node is not None
    node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = free_port()
    api.store.update("nodes", node)
    reply = await api.admin().request("GET", "/api/v1/nodes/node-1/proxy/healthz")
    assert reply.status == 503 and reply.body["reason"] == "ServiceUnavailable"
    assert json.dumps(reply.body).count("error trying to reach service") == 1


async def test_legacy_discovery_names_the_kubelet_subresources(api: ApiServer) -> None:
    admin = api.admin()
    versions = (await admin.request("GET", "/api")).body
    assert versions["kind"] == "APIVersions" and versions["versions"] == ["v1"]
    groups = {g["name"] for g in (await admin.request("GET", "/apis")).body["groups"]}
    assert {"coordination.k8s.io", "certificates.k8s.io", "authorization.k8s.io"} <= groups
    core = (await admin.request("GET", "/api/v1")).body
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["namespaced"] and by_name["pods"]["shortNames"] == ["po"]
    assert by_name["pods/log"]["verbs"] == ["get"] and by_name["pods/exec"]["kind"] == "PodExecOptions"
    assert not by_name["nodes/proxy"]["namespaced"] and "pods/status" in by_name
    leases = (await admin.request("GET", "/apis/coordination.k8s.io/v1")).body
    assert [r["name"] for r in leases["resources"]] == ["leases"]
    assert (await admin.request("GET", "/apis/nope/v1")).status == 404


PORTFORWARD_URL = "/api/v1/namespaces/default/pods/p/portforward"


async def test_portforward_tunnel_unwrapped_onto_spdy_for_a_node_without_the_feature(
        api: ApiServer, kubelet: tuple[int, Seen], tmp_path: Path) -> None:
    """The recorded `portforward-spdy` exchange: kubectl's tunneled bytes, cut into WebSocket messages anywhere,
    reach the kubelet as one byte stream after the recorded POST upgrade; the kubelet's bytes come back."""
    recording = load("portforward-spdy")
    sent, answer = recording.after_head("c2s"), recording.after_head("s2c")
    raw_request = recording.raw("c2s")[:-len(sent)]
    heads: list[bytes] = []
    received = bytearray()

    async def spdy_kubelet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        if b"/portForward/default/p " not in heads[-1]:
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 18\r\n\r\npod does not exist")
        else:
            writer.write(recording.response_head())
            while len(received) < len(sent) and (data := await reader.read(4096)):
                received.extend(data)
            writer.write(answer)
        await writer.drain()
        writer.close()

    pair = api.ca.issue("node-1", server=True, ips=("127.0.0.1",))
    cert, key = pair.write(tmp_path / "spdy-kubelet", "serving")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = await asyncio.start_server(spdy_kubelet, "127.0.0.1", free_port(), ssl=ctx)
    node = api.store.get("nodes", "", "node-1")
    assert node is not None
    node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = server.sockets[0].getsockname()[1]
    api.store.update("nodes", node)
    url = api.url.replace("https://", "wss://") + PORTFORWARD_URL
    client_ssl = api.client_ssl(api.admin_identity())
    headers = {"User-Agent": "kubectl/v1.36.2 (linux/amd64) kubernetes/98b3519",
               "Kubectl-Command": "kubectl port-forward", "Kubectl-Session": "da0f8a35-182f-4234-bca6-ba1961e508e3"}
    try:
        async with aiohttp.ClientSession(skip_auto_headers=("Accept", "Accept-Encoding")) as s:  # as Go sends
            async with s.ws_connect(url, protocols=(TUNNEL,), ssl=client_ssl, headers=headers) as ws:
                assert ws.protocol == TUNNEL
                for i in range(0, len(sent), 37):  # boundaries that match no SPDY frame
                    await ws.send_bytes(sent[i:i + 37])
                got = bytearray()
                async for msg in ws:
                    if msg.type != aiohttp.WSMsgType.BINARY:
                        break
                    got.extend(msg.data)
            assert (bytes(received), bytes(got)) == (sent, answer)
            # the recorded request, but for this API server's Host
            assert heads[0] == raw_request.replace(b"127.0.0.1:6443", api.url.removeprefix("https://").encode()
                                                   ).replace(b"/fixtures/web", b"/default/p")
            assert api.kubelet_proxy.requests[-1] == ("POST", "/portForward/default/p")
            # the kubelet's refusal comes back as it was; `ports` becomes the kubelet's `port`
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await s.ws_connect(url.replace("/p/", "/two/") + "?ports=8080&ports=9090", protocols=(TUNNEL,),
                                   ssl=client_ssl)
            assert refused.value.status == 404
            assert api.kubelet_proxy.requests[-1] == ("POST", "/portForward/default/two?port=8080&port=9090")
    finally:
        server.close()
        await server.wait_closed()


async def test_portforward_websocket_passed_through_to_a_declaring_node(api: ApiServer,
                                                                        kubelet: tuple[int, Seen]) -> None:
    _, seen = kubelet
    node = api.store.get("nodes", "", "node-1")
    assert node is not None
    node["status"]["declaredFeatures"] = ["ExtendWebSocketsToKubelet"]
    api.store.update("nodes", node)
    url = api.url.replace("https://", "wss://") + PORTFORWARD_URL
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:  # the stand-in has no /portForward
            await s.ws_connect(url, protocols=(TUNNEL,), ssl=api.client_ssl(api.admin_identity()))
    assert refused.value.status == 404
    assert seen[-1]["method"] == "GET" and seen[-1]["path_qs"] == "/portForward/default/p"
    assert seen[-1]["headers"]["Sec-WebSocket-Protocol"] == TUNNEL


def test_terminal_sizes_become_json_lines_for_the_spdy_resize_stream() -> None:
    sizes = TerminalSizes()
    assert sizes.feed(b'{"Width":80,"Height":24}') == [b'{"Width":80,"Height":24}\n']
    # split across messages, two in one, spaces: decoded as a stream
    assert sizes.feed(b'{"Width": 100,') == []
    assert sizes.feed(b' "Height": 30} {"Height":43,"Width":132}') == [b'{"Width":100,"Height":30}\n',
                                                                       b'{"Width":132,"Height":43}\n']
    # a size that is not one ends the queue
    assert sizes.feed(b'{"Width":"wide"}') == []
    assert sizes.feed(b'{"Width":80,"Height":24}') == []
