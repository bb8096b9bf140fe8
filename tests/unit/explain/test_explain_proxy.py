"""`explain` end to end through the test API server's node proxy (`kubectl get --raw
/api/v1/nodes/NODE/proxy/debug/pods/NS/NAME/explain`): the kubelet API (TLS, the API server's kubelet client
certificate, authorization asked as nodes/proxy) serving the document of a pod crash-looping on the fake runtime;
and the same document on the read-only port."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import jsonschema
import pytest

from cri.fake import Program
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.server.app import KubeletServer
from minikubelet.server.auth import AlwaysAllow, Attributes, Authenticator
from minikubelet.server.kubelet_api import KubeletAPI
from minikubelet.server.tls import serving_context
from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.apiserver.proxy import KubeletProxy
from tests.unit.explain.explained import SCHEMA, ExplainedNode, explained_node
from tests.unit.fake_node import make_pod

PATH = "/debug/pods/default/p/explain"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RecordingAuthorizer(AlwaysAllow):
    """Allows everything and keeps what it was asked (the SubjectAccessReview's attributes)."""

    def __init__(self) -> None:
        self.asked: list[Attributes] = []

    async def allowed(self, attrs: Attributes) -> bool:
        self.asked.append(attrs)
        return True


@pytest.fixture
async def en(tmp_path: Path) -> AsyncIterator[ExplainedNode]:
    async for n in explained_node(tmp_path / "node"):
        yield n


async def test_explain_through_the_api_servers_node_proxy_and_the_read_only_port(
        api_server: ApiServer, en: ExplainedNode, tmp_path: Path) -> None:  # noqa: F811
    api = api_server
    node = en.node
    node.runtime.program("app", Program(exit_on_start=2))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    await node.advance(11)

    server = KubeletServer(node.statuses.pod_list, lambda: _no_checks(), CollectorRegistry(), node.recorder.list)
    server.explain = en.explainer.explain
    pair = api.ca.issue("node-1", server=True, ips=("127.0.0.1",))
    cert, key = pair.write(tmp_path / "kubelet", "serving")
    ctx = serving_context(str(cert), str(key), str(api.ca_file), root_dir=str(tmp_path), host="node-1",
                          ips=["127.0.0.1"])
    authz = RecordingAuthorizer()
    kubelet = KubeletAPI(server, "node-1", lambda: node.manager.desired.values(), node.runtime, None,
                         Authenticator(anonymous=False), authz)
    port, ro_port = free_port(), free_port()
    await server.serve("127.0.0.1", port, kubelet.routes(), ssl_context=ctx)
    await server.serve("127.0.0.1", ro_port, server.routes())
    try:
        api.kubelet_proxy = KubeletProxy(api, kubelet_ca=api.ca.cert_pem)
        api.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
                                   "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                                              "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}})
        reply = await api.admin().request("GET", f"/api/v1/nodes/node-1/proxy{PATH}")
        assert reply.status == 200, reply.body
        doc = reply.body
        jsonschema.validate(doc, SCHEMA)
        app = next(c for c in doc["decision"]["containers"] if c["name"] == "app")
        assert app["reason"] == "CrashLoopBackOff" and app["exitCodes"][0] == 2
        [asked] = authz.asked
        assert (asked.user.name, asked.verb, asked.subresource, asked.node) == (
            "kube-apiserver-kubelet-client", "get", "proxy", "node-1")
        missing = await api.admin().request("GET", "/api/v1/nodes/node-1/proxy/debug/pods/default/nobody/explain")
        assert missing.status == 404 and "not known on this node" in missing.body
        stranger = api.client(api.identity("stranger"))  # no nodes/proxy: stopped at the API server
        assert (await stranger.request("GET", f"/api/v1/nodes/node-1/proxy{PATH}")).status == 403

        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{ro_port}{PATH}") as resp:
            assert resp.status == 200
            plain = json.loads(await resp.read())
        assert plain["decision"] == doc["decision"] and plain["pod"]["uid"] == "uid-1"
    finally:
        await server.close()


async def _no_checks() -> list[tuple[str, str | None]]:
    await asyncio.sleep(0)
    return []



