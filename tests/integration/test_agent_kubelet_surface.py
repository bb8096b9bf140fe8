"""The kubelet API's surface end to end: the real agent, joined to the test API server, on the real Docker Engine,
reached the way kube-apiserver v1.36 reaches it (its kubelet client certificate, the Node's InternalIP and
daemonEndpoints port) through `pods/log`, `pods/exec` and `nodes/proxy`, and directly: the serving certificate
by CSR, tlsMinVersion, bearer tokens through TokenReview, SubjectAccessReview per subresource, path cleaning."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import socket
import ssl
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
import psutil
import pytest
import yaml
from cryptography import x509

from minikubelet.server.streaming.channel_codec import V5_BINARY
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.apiserver.proxy import KubeletProxy
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, JoinedAgent, free_port, registered_node, stop_and_clean
from tests.integration.kubectl_cli import kubectl
from tests.integration.runtime_view import RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view
pytestmark = pytest.mark.integration


class SurfaceAgent(JoinedAgent):
    """The agent with a node client certificate, InternalIP 127.0.0.1 and its kubelet API on a free port."""

    def __init__(self, base: Path, docker_host: str, api: ApiServer) -> None:
        super().__init__(base, docker_host, api, "--node-ip", "127.0.0.1")
        self.api_port = free_port()
        self.extra = {
            "port": self.api_port,
            "authentication": {"x509": {"clientCAFile": str(api.ca_file)},
                               "webhook": {"enabled": True, "cacheTTL": "2m"}, "anonymous": {"enabled": False}},
            "authorization": {"mode": "Webhook"},
            "streamingConnectionIdleTimeout": "30m",
        }

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"


api = agent_env.api


def _unverified(ctx: ssl.SSLContext | None = None) -> ssl.SSLContext:
    ctx = ctx or ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def _raw_get(port: int, ctx: ssl.SSLContext, target: str) -> tuple[int, dict[str, str], bytes]:
    """One request exactly as written (aiohttp's client would clean `..` out of the path first)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


async def _running_pod(agent: AgentProcess, admin: Any, name: str) -> dict[str, Any]:
    async def running() -> dict[str, Any] | None:
        pod: dict[str, Any] = await admin.get("pods", name, "default")
        return pod if (pod.get("status") or {}).get("phase") == "Running" else None

    found: dict[str, Any] = await agent.wait_for(f"pod {name} Running", running, timeout=60)
    return found


def _pod(name: str, node: str, script: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sh", "-c", script]}]}}


async def _ws_exec(url: str, ctx: ssl.SSLContext) -> tuple[bytes, bytes, dict[str, Any]]:
    out, err, status = b"", b"", {}
    async with aiohttp.ClientSession() as s, s.ws_connect(url, protocols=(V5_BINARY,), ssl=ctx) as ws:
        assert ws.protocol == V5_BINARY
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                break
            channel, data = msg.data[:1], msg.data[1:]
            if channel == b"\x01":
                out += data
            elif channel == b"\x02":
                err += data
            elif channel == b"\x03":
                status = json.loads(data)
    return out, err, status


async def test_serving_certificate_logs_exec_and_node_proxy(tmp_path: Path, api: ApiServer,
                                                            docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    # the API server checks the kubelet's serving certificate against the cluster CA (--kubelet-certificate-authority)
    api.kubelet_proxy = KubeletProxy(api, kubelet_ca=api.ca.cert_pem)
    agent = SurfaceAgent(tmp_path / "agent", agent_env.docker_host(), api)
    agent.extra.update({"serverTLSBootstrap": True, "tlsMinVersion": "VersionTLS13",
                        "featureGates": {"ExtendWebSocketsToKubelet": True}})  # WebSocket passed through
    admin = api.admin()
    admin_ssl = api.client_ssl(api.admin_identity())
    agent.start()
    try:
        async def registered() -> dict[str, Any] | None:
            try:
                node: dict[str, Any] = await admin.get("nodes", agent.node)
            except ApiStatusError:
                return None
            return node if node["status"].get("declaredFeatures") else None

        node = await agent.wait_for("the Node with its declared features", registered, timeout=60)
        assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": agent.api_port}}
        assert node["status"]["declaredFeatures"] == ["ExtendWebSocketsToKubelet"]

        # serverTLSBootstrap: a kubelet-serving CSR, approved and signed; then served, verifiable by the cluster CA
        async def serving_csr() -> dict[str, Any] | None:
            for csr in (await admin.list("certificatesigningrequests", api_version="certificates.k8s.io/v1"))["items"]:
                if csr["spec"]["signerName"] == "kubernetes.io/kubelet-serving" and csr["status"].get("certificate"):
                    found: dict[str, Any] = csr
                    return found
            return None

        csr = await agent.wait_for("the serving certificate issued", serving_csr, timeout=30)
        assert csr["spec"]["usages"] == ["digital signature", "server auth"]
        assert csr["spec"]["username"] == f"system:node:{agent.node}"
        verified = ssl.create_default_context(cadata=api.ca.cert_pem.decode())

        async def served_cert() -> bytes | None:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", agent.api_port, ssl=verified)
            except (ssl.SSLError, OSError):
                return None
            der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
            writer.close()
            return bytes(der)

        cert = x509.load_der_x509_certificate(await agent.wait_for("the issued certificate served", served_cert,
                                                                   timeout=20))
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == [agent.node]
        assert [str(i) for i in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        assert cert.subject.rfc4514_string() == f"CN=system:node:{agent.node},O=system:nodes"
        # tlsMinVersion VersionTLS13: a client that stops at TLS 1.2 does not get in
        old = _unverified(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
        old.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises((ssl.SSLError, ConnectionResetError)):  # the server's alert, or its reset, first
            await asyncio.open_connection("127.0.0.1", agent.api_port, ssl=old)

        await admin.create(_pod("talker", agent.node,
                                "for i in 1 2 3 4 5; do echo line-$i; done; while true; do sleep 1; done"))
        await _running_pod(agent, admin, "talker")

        # pods/log: the API server's own /containerLogs request, options mapped
        async def logs(query: str = "") -> str:
            reply = await admin.request("GET", f"/api/v1/namespaces/default/pods/talker/log{query}")
            assert reply.status == 200, reply.body
            return str(reply.body)

        await agent.wait_for("all five lines", lambda: _contains(logs, "line-5"), timeout=15)
        assert await logs() == "".join(f"line-{i}\n" for i in range(1, 6))
        assert await logs("?tailLines=2") == "line-4\nline-5\n"
        stamped = (await logs("?timestamps=true&tailLines=1")).split(" ")
        assert stamped[1] == "line-5\n" and stamped[0].endswith("Z")
        assert ("GET", "/containerLogs/default/talker/main?tailLines=2") in api.kubelet_proxy.requests
        # follow: streamed as written, and the stream ends once the container has exited
        follower = _pod("follower", agent.node, "echo one; sleep 2; echo two; sleep 1; exit 0")
        follower["spec"]["restartPolicy"] = "Never"
        await admin.create(follower)
        await _running_pod(agent, admin, "follower")
        chunks: list[tuple[float, bytes]] = []
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with aiohttp.ClientSession() as s, s.get(
                f"{api.url}/api/v1/namespaces/default/pods/follower/log?follow=true", ssl=admin_ssl,
                timeout=aiohttp.ClientTimeout(total=30)) as r:
            assert r.status == 200
            async for chunk in r.content.iter_any():
                chunks.append((loop.time() - started, chunk))
        assert b"".join(c for _, c in chunks) == b"one\ntwo\n"
        assert chunks[0][1] == b"one\n" and chunks[0][0] < 1.5  # the first line did not wait for the second
        assert ("GET", "/containerLogs/default/follower/main?follow=true") in api.kubelet_proxy.requests

        # pods/exec: kubectl's WebSocket passed through to the node that declares ExtendWebSocketsToKubelet
        base = api.url.replace("https://", "wss://") + "/api/v1/namespaces/default/pods/talker/exec"
        out, _, status = await _ws_exec(base + "?command=sh&command=-c&command=echo+%24%28%2840%2B2%29%29"
                                               "&container=main&stdout=true&stderr=true", admin_ssl)
        assert out == b"42\n" and status["status"] == "Success"
        out, err, status = await _ws_exec(base + "?command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262"
                                                 "%3B+exit+3&stdout=true&stderr=true", admin_ssl)
        assert (out, err) == (b"out\n", b"err\n")
        assert status["reason"] == "NonZeroExitCode"
        assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
        assert ("GET", "/exec/default/talker/main?command=sh&command=-c&command=echo+%24%28%2840%2B2%29%29"
                       "&error=1&output=1") in api.kubelet_proxy.requests
        # pods/attach goes the same way; the kubelet's refusal (the container has exited) comes back as is
        exited = base.replace("/pods/talker/exec", "/pods/follower/attach")
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await _ws_exec(exited + "?stdout=true", admin_ssl)
        assert refused.value.status == 500
        assert ("GET", "/attach/default/follower/main?output=1") in api.kubelet_proxy.requests

        # nodes/proxy: the rest of the surface
        async def proxied(path: str, method: str = "GET") -> tuple[int, Any]:
            reply = await admin.request(method, f"/api/v1/nodes/{agent.node}/proxy{path}")
            return reply.status, reply.body

        status_code, configz = await proxied("/configz")
        assert status_code == 200
        served = configz["kubeletconfig"]
        assert served["kind"] == "KubeletConfiguration" and served["apiVersion"] == "kubelet.config.k8s.io/v1beta1"
        assert served["port"] == agent.api_port and served["authorization"]["mode"] == "Webhook"
        assert served["serverTLSBootstrap"] is True and served["tlsMinVersion"] == "VersionTLS13"
        assert served["streamingConnectionIdleTimeout"] == "30m0s"
        assert served["authentication"]["webhook"] == {"enabled": True, "cacheTTL": "2m0s"}
        assert served["featureGates"] == {"ExtendWebSocketsToKubelet": True}
        assert "kubeconfig" not in served and "nodeIP" not in served

        status_code, pods = await proxied("/pods")
        assert status_code == 200 and "talker" in [p["metadata"]["name"] for p in pods["items"]]
        status_code, running = await proxied("/runningpods/")
        assert status_code == 200 and running["kind"] == "PodList"
        talker = next(p for p in running["items"] if p["metadata"]["name"] == "talker")
        assert talker["metadata"]["namespace"] == "default"
        assert talker["metadata"]["uid"] == (await admin.get("pods", "talker", "default"))["metadata"]["uid"]
        # the image as the runtime reports it (one of the image's tags: busybox has aliases)
        image = await runtime_view.runtime.image_status(BUSYBOX_IMAGE)
        assert image is not None
        tags = image.repo_tags
        [container] = talker["spec"]["containers"]
        assert container["name"] == "main" and container["image"] in tags and container["resources"] == {}
        assert await proxied("/healthz") == (200, "ok")
        assert await proxied("/healthz/syncloop") == (200, "ok")
        assert await proxied("/healthz/log") == (200, "ok")
        assert await proxied("/healthz?verbose") == (
            200, "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n")
        assert await proxied("/debug/pprof/") == (404, "404 page not found\n")
        # /stats/summary comes with the stats work; until then the kubelet's 404, relayed unchanged
        status_code, summary = await proxied("/stats/summary")
        assert (status_code, summary) == (404, "404 page not found\n") or (
            status_code == 200 and summary["node"]["nodeName"] == agent.node)
        status_code, text = await proxied("/checkpoint/default/talker/main", "POST")
        assert status_code == 500 and text.startswith("checkpointing of default/talker/main failed (")
        assert await proxied("/checkpoint/default/nobody/main", "POST") == (404, "pod does not exist")
        status_code, listing = await proxied("/logs/")
        assert status_code == 200
        assert listing.startswith('<!doctype html>\n<meta name="viewport" content="width=device-width">\n<pre>\n')
        for entry in os.scandir("/var/log"):
            shown = entry.name + ("/" if entry.is_dir() else "")
            assert f">{shown}</a>\n" in listing
        assert ("GET", "/logs/") in api.kubelet_proxy.requests

        # directly, as the API server would be (its kubelet client certificate): Go's path cleaning
        direct = ssl.create_default_context(cadata=api.ca.cert_pem.decode())
        ident = api.kubelet_proxy.identity
        assert ident.cert_file is not None and ident.key_file is not None
        direct.load_cert_chain(ident.cert_file, ident.key_file)
        code, headers, body = await _raw_get(agent.api_port, direct, "/logs/../../../../etc/os-release")
        assert (code, headers["Location"]) == (307, "/etc/os-release")
        assert body == b'<a href="/etc/os-release">Temporary Redirect</a>.\n\n'
        for target in ("/logs/%2e%2e/%2e%2e/%2e%2e/etc/os-release", "/logs/..%2f..%2f..%2fetc%2fos-release",
                       "/containerLogs/default/talker/..%2f..%2f..%2f..%2fetc%2fos-release"):
            code, _, body = await _raw_get(agent.api_port, direct, target)
            assert (code, body) == (404, b"404 page not found\n"), target
        code, _, body = await _raw_get(agent.api_port, _unverified(), "/pods")
        assert (code, body) == (401, b"Unauthorized")
    finally:
        await stop_and_clean(agent, docker)


async def _contains(fetch: Any, text: str) -> bool:
    return text in await fetch()


async def test_bearer_tokens_and_subresource_authorization(tmp_path: Path, api: ApiServer,
                                                           docker: aiodocker.Docker) -> None:
    agent = SurfaceAgent(tmp_path / "agent", agent_env.docker_host(), api)
    # as a kubelet of an older API server's era: exec reaches it translated to SPDY/3.1
    agent.extra["featureGates"] = {"ExtendWebSocketsToKubelet": False}
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", functools.partial(registered_node, admin, agent.node), timeout=60)
        await admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": "log-reader", "namespace": "default"}})
        reply = await admin.request("POST", "/api/v1/namespaces/default/serviceaccounts/log-reader/token",
                                    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                     "spec": {"expirationSeconds": 3600}})
        token = reply.body["status"]["token"]
        user = "system:serviceaccount:default:log-reader"
        api.authorizer.grant(user, "nodes/log", ("get",))
        ctx = _unverified()

        async def get(path: str, bearer: str) -> tuple[int, str]:
            async with aiohttp.ClientSession() as s, s.get(f"{agent.api_url}{path}", ssl=ctx,
                                                           headers={"Authorization": f"Bearer {bearer}"}) as r:
                return r.status, await r.text()

        async def up() -> bool:
            try:
                return (await get("/logs/", token))[0] == 200
            except aiohttp.ClientError:
                return False

        await agent.wait_for("the kubelet API", up, timeout=20)
        # allowed nodes/log, not nodes/proxy: /logs/ yes; /containerLogs, /exec and /pods (pods, then proxy) no
        assert await get("/pods", token) == (
            403, f"Forbidden (user={user}, verb=get, resource=nodes, subresource(s)=[pods proxy])\n")
        assert await get("/containerLogs/default/x/main", token) == (
            403, f"Forbidden (user={user}, verb=get, resource=nodes, subresource(s)=[proxy])\n")
        assert await get("/stats/summary", token) == (
            403, f"Forbidden (user={user}, verb=get, resource=nodes, subresource(s)=[stats])\n")
        assert await get("/logs/", "not-a-token") == (401, "Unauthorized")
        node_user = f"system:node:{agent.node}"
        reviews = [p for u, m, p in api.handler.requests if u == node_user and m == "POST"]
        assert "/apis/authentication.k8s.io/v1/tokenreviews" in reviews
        assert reviews.count("/apis/authorization.k8s.io/v1/subjectaccessreviews") >= 4
        # the token's review is cached (webhook.cacheTTL 2m): a second request makes no new TokenReview
        before = reviews.count("/apis/authentication.k8s.io/v1/tokenreviews")
        assert (await get("/logs/", token))[0] == 200
        after = [p for u, m, p in api.handler.requests if u == node_user and m == "POST"]
        assert after.count("/apis/authentication.k8s.io/v1/tokenreviews") == before
        # the same user through the API server's nodes/proxy is stopped there (no nodes/proxy)
        reply = await api.client(api.identity("someone-else")).request("GET", f"/api/v1/nodes/{agent.node}/proxy/pods")
        assert reply.status == 403

        # a node that does not declare ExtendWebSocketsToKubelet (gate off here): pods/exec is translated to SPDY/3.1
        await admin.create(_pod("shell", agent.node, "while true; do sleep 1; done"))
        await _running_pod(agent, admin, "shell")
        admin_ssl = api.client_ssl(api.admin_identity())
        base = api.url.replace("https://", "wss://") + "/api/v1/namespaces/default/pods/shell/exec"
        out, _, status = await _ws_exec(base + "?command=sh&command=-c&command=echo+%24%28%2840%2B2%29%29"
                                               "&stdout=true&stderr=true", admin_ssl)
        assert out == b"42\n" and status["status"] == "Success"
        out, err, status = await _ws_exec(base + "?command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262"
                                                 "%3B+exit+3&stdout=true&stderr=true", admin_ssl)
        assert (out, err) == (b"out\n", b"err\n")
        assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
        # stdin, ended with the v5 close message, reaches the SPDY stdin stream as DATA+FIN
        async with aiohttp.ClientSession() as s, s.ws_connect(base + "?command=cat&stdin=true&stdout=true",
                                                               protocols=(V5_BINARY,), ssl=admin_ssl) as ws:
            await ws.send_bytes(b"\x00hi there\n")
            await ws.send_bytes(b"\xff\x00")
            got = b""
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.BINARY:
                    break
                if msg.data[:1] == b"\x01":
                    got += msg.data[1:]
                elif msg.data[:1] == b"\x03":
                    assert json.loads(msg.data[1:])["status"] == "Success"
        assert got == b"hi there\n"
        assert ("POST", "/exec/default/shell/main?command=cat&input=1&output=1") in api.kubelet_proxy.requests
    finally:
        await stop_and_clean(agent, docker)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs a kubectl binary")
async def test_kubectl_logs_exec_and_node_proxy_through_the_test_api_server(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    agent = SurfaceAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    kubeconfig = api.write_kubeconfig(tmp_path / "admin.conf", api.admin_identity())
    cache = tmp_path / "kube-cache"
    agent.start()
    try:
        async def registered() -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = await admin.get("nodes", agent.node)
            except ApiStatusError:
                return None
            return found

        node = await agent.wait_for("the Node", registered, timeout=60)
        # the default, as the 1.36 kubelet: kubectl's WebSocket is passed through to the node
        assert node["status"]["declaredFeatures"] == ["ExtendWebSocketsToKubelet"]
        await admin.create(_pod("talker", agent.node, "echo hello; echo world; while true; do sleep 1; done"))
        await _running_pod(agent, admin, "talker")

        async def logged() -> bool:
            return (await kubectl(kubeconfig, cache, "logs", "talker"))[1] == "hello\nworld\n"

        await agent.wait_for("kubectl logs", logged, timeout=20)
        assert await kubectl(kubeconfig, cache, "logs", "talker", "--tail=1") == (0, "world\n", "")
        assert await kubectl(kubeconfig, cache, "exec", "talker", "--", "sh", "-c", "echo $((40+2))") == (
            0, "42\n", "")
        code, out, err = await kubectl(kubeconfig, cache, "exec", "talker", "--", "sh", "-c",
                                       "echo out; echo err >&2; exit 3")
        assert (code, out, err) == (3, "out\n", "err\ncommand terminated with exit code 3\n")  # as recorded
        code, out, _ = await kubectl(kubeconfig, cache, "get", "--raw", f"/api/v1/nodes/{agent.node}/proxy/healthz")
        assert (code, out) == (0, "ok")
        code, out, _ = await kubectl(kubeconfig, cache, "get", "--raw", f"/api/v1/nodes/{agent.node}/proxy/configz")
        assert code == 0 and json.loads(out)["kubeletconfig"]["port"] == agent.api_port
        # what reached the kubelet is what kube-apiserver sends it
        assert ("GET", "/containerLogs/default/talker/main?tailLines=1") in api.kubelet_proxy.requests
        assert any(m == "GET" and p.startswith("/exec/default/talker/main?command=sh&command=-c&command=echo") and
                   p.endswith("&error=1&output=1") for m, p in api.kubelet_proxy.requests)
    finally:
        await stop_and_clean(agent, docker)


class KubeadmStyleAgent(SurfaceAgent):
    """A joined node whose KubeletConfiguration sets neither `address` nor `readOnlyPort`, as kubeadm's does not;
    its /healthz on a healthzPort of its own (loopback, as upstream's healthzBindAddress)."""

    def write_config(self) -> None:
        super().write_config()
        cfg = yaml.safe_load(self.config.read_text())
        del cfg["address"], cfg["readOnlyPort"]
        cfg["healthzPort"] = self.port
        self.config.write_text(yaml.safe_dump(cfg))


def _netns_address() -> str:
    """An IPv4 address of this network namespace that is not loopback (the engine's bridge)."""
    for iface, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family == socket.AF_INET and iface != "lo" and not a.address.startswith("127."):
                return str(a.address)
    pytest.skip("no non-loopback IPv4 address in the test network namespace")


async def test_the_kubelet_api_listens_on_upstreams_default_address_and_the_read_only_port_is_off(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    """Upstream's defaults (SetDefaults_KubeletConfiguration): `address` 0.0.0.0, so the API server reaches
    10250 on the Node's address; `readOnlyPort` 0 from a config file, so nothing unauthenticated listens."""
    agent = KubeadmStyleAgent(tmp_path / "agent", agent_env.docker_host(), api)
    try:
        agent.start()
        await agent.wait_up()
        address = _netns_address()
        # the API server's kubelet client, at an address that is not loopback
        async with aiohttp.ClientSession() as session, session.get(
                f"https://{address}:{agent.api_port}/healthz", ssl=_unverified()) as r:
            assert r.status == 401  # anonymous off: it answered, and asked who we are
        assert agent.proc is not None
        listening = {(c.laddr.ip, c.laddr.port) for c in psutil.Process(agent.proc.pid).net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN}
        assert listening == {("0.0.0.0", agent.api_port), ("127.0.0.1", agent.port)}, listening
    finally:
        await stop_and_clean(agent, docker)
