"""attach, exec with a TTY and port-forward end to end through the test API server's `pods/attach|exec|portforward`:
the real agent joined to it, on the real Docker Engine, driven as kubectl 1.36 drives kube-apiserver (a WebSocket
to the API server: `v5.channel.k8s.io`, or `SPDY/3.1+portforward.k8s.io` with the SPDY frames cut across
messages). Both ways the API server reaches a node: the WebSocket passed through to one that declares
ExtendWebSocketsToKubelet (the default), translated to SPDY/3.1 for one that does not. Then the host's real
`kubectl`, when there is one: port-forward, attach and exec with stdin, cp both ways."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiodocker
import aiohttp
import pytest

from minikubelet.server.streaming.channel_codec import PORTFORWARD_TUNNEL
from minikubelet.server.streaming.channels import WebSocketTunnel
from tests import ws_client
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration.agent_env import stop_and_clean
from tests.integration.kubectl_cli import kubectl
from tests.integration.test_agent_attach_exec import READ_LOOP, _size_seen
from tests.integration.test_agent_kubelet_surface import SurfaceAgent
from tests.integration.test_agent_port_forward import HTTPD, PAGES, REFUSED, body_of, fetch
from tests.spdy_tunnel_client import SpdyClient

docker = agent_env.docker
pytestmark = pytest.mark.integration

EXTEND = "ExtendWebSocketsToKubelet"
SUCCESS = {"metadata": {}, "status": "Success"}


api = agent_env.api


def _pod(name: str, node: str, command: list[str], **container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     "command": command, **container}]}}


def _reader(name: str, node: str) -> dict[str, Any]:
    """The recorded attach scenario's container: reads stdin (stdinOnce) until it closes, then exits 0."""
    pod = _pod(name, node, ["sh", "-c", READ_LOOP], stdin=True, stdinOnce=True)
    pod["spec"]["restartPolicy"] = "Never"
    return pod


async def _joined(agent: SurfaceAgent, api: ApiServer, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """Starts the agent, waits for its Node, creates the pods and waits until they run; returns the Node."""
    admin = api.admin()
    agent.start()

    async def registered() -> dict[str, Any] | None:
        try:
            node: dict[str, Any] = await admin.get("nodes", agent.node)
        except ApiStatusError:
            return None
        return node if node.get("status", {}).get("daemonEndpoints") else None

    node: dict[str, Any] = await agent.wait_for("the Node", registered, timeout=60)
    for pod in pods:
        await admin.create(pod)
    for pod in pods:
        name = pod["metadata"]["name"]

        async def running(name: str = name) -> bool:
            return bool((await admin.get("pods", name, "default")).get("status", {}).get("phase") == "Running")

        await agent.wait_for(f"pod {name} Running", running, timeout=60)
    return node


def _url(api: ApiServer, pod: str, sub: str, **query: Any) -> str:
    pairs = [(k, v) for k, vs in query.items() for v in (vs if isinstance(vs, list) else [vs])]
    qs = urlencode(pairs, quote_via=quote)
    return api.url.replace("https://", "wss://") + f"/api/v1/namespaces/default/pods/{pod}/{sub}" + (
        f"?{qs}" if qs else "")


@pytest.mark.parametrize("declared", [True, False], ids=["passed-through", "translated"])
async def test_attach_exec_tty_and_port_forward_through_the_api_server(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, declared: bool) -> None:
    agent = SurfaceAgent(tmp_path / "agent", agent_env.docker_host(), api)
    if not declared:
        agent.extra["featureGates"] = {EXTEND: False}
    admin_ssl = api.client_ssl(api.admin_identity())
    try:
        node = await _joined(agent, api, [
            _pod("web", agent.node, ["sh", "-c", HTTPD]),
            _reader("reader", agent.node),
            _pod("console", agent.node, ["sh"], stdin=True, tty=True),
            _pod("shell", agent.node, ["sleep", "3600"]),
        ])
        assert node["status"].get("declaredFeatures", []) == ([EXTEND] if declared else [])
        upgrade = "GET" if declared else "POST"  # what reached the kubelet: the WebSocket, or the SPDY upgrade

        # pods/attach -i as kubectl attach sends it: two lines, stdin closed, the stdinOnce container ends
        out = await ws_client.run(_url(api, "reader", "attach", container="main", stdin="true", stdout="true",
                                       stderr="true"), admin_ssl, stdin=b"hello\nworld\n")
        assert out.stdout == b"got: hello\ngot: world\nstdin closed, exiting 0\n"
        assert (out.stderr, out.status) == (b"stderr: hello\nstderr: world\n", SUCCESS)
        assert (upgrade, "/attach/default/reader/main?error=1&input=1&output=1") in api.kubelet_proxy.requests

        # attach to a container's own TTY, resized (channel 4, or the SPDY resize stream), read back by stty
        async with ws_client.session(_url(api, "console", "attach", stdin="true", stdout="true", tty="true"),
                                     admin_ssl) as ws:
            await ws.resize(70, 20)
            n = await _size_seen(ws.write, ws.read_until, b"20 70", 0)
            await ws.resize(132, 43)
            await _size_seen(ws.write, ws.read_until, b"43 132", n)
        assert (upgrade, "/attach/default/console/main?input=1&output=1&tty=1") in api.kubelet_proxy.requests
        # exec with a TTY: resized, and the exit code in the Status
        async with ws_client.session(_url(api, "shell", "exec", command="sh", stdin="true", stdout="true",
                                          tty="true"), admin_ssl) as ws:
            await ws.resize(100, 30)
            await _size_seen(ws.write, ws.read_until, b"30 100", 0)
            await ws.write(b"exit 5\n")
            status = (await ws.finish()).status
        assert status["reason"] == "NonZeroExitCode"
        assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "5"}]

        # pods/portforward: kubectl's SPDY-in-WebSocket tunnel, several connections at once on one forward
        await asyncio.sleep(0.5)  # httpd listening
        async with aiohttp.ClientSession() as s, s.ws_connect(_url(api, "web", "portforward"),
                                                               protocols=(PORTFORWARD_TUNNEL,), ssl=admin_ssl) as ws:
            assert ws.protocol == PORTFORWARD_TUNNEL
            tunnel = WebSocketTunnel(ws)
            client = SpdyClient(tunnel, tunnel, split_frames=True)  # frame heads and bodies in separate messages
            running = asyncio.create_task(client.run())
            try:
                paths = ["/", "/two.html"] * 3
                results = await asyncio.gather(*(fetch(client, i, p) for i, p in enumerate(paths)))
                for path, (response, error, fin) in zip(paths, results, strict=True):
                    assert (body_of(response), error, fin) == (PAGES[path], b"", True)
                # a port nobody listens on: the kubelet's error on the error stream; the forward carries on
                refused, error, _ = await fetch(client, 10, "/", port=8081)
                assert refused == b"" and REFUSED.fullmatch(error.decode()), error
                response, error, fin = await fetch(client, 11, "/two.html")
                assert (body_of(response), error, fin) == (PAGES["/two.html"], b"", True)
            finally:
                await ws.close()
                await running
        assert (upgrade, "/portForward/default/web") in api.kubelet_proxy.requests
        assert agent.proc is not None and agent.proc.poll() is None
    finally:
        await stop_and_clean(agent, docker)
    assert "Traceback" not in agent.log()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs a kubectl binary")
@pytest.mark.parametrize("declared", [True, False], ids=["passed-through", "translated"])
async def test_kubectl_port_forward_attach_exec_and_cp(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker,
                                                       declared: bool) -> None:
    agent = SurfaceAgent(tmp_path / "agent", agent_env.docker_host(), api)
    if not declared:
        agent.extra["featureGates"] = {EXTEND: False}
    kubeconfig = api.write_kubeconfig(tmp_path / "admin.conf", api.admin_identity())
    cache = tmp_path / "kube-cache"
    try:
        await _joined(agent, api, [_pod("web", agent.node, ["sh", "-c", HTTPD]), _reader("reader", agent.node),
                                   _pod("shell", agent.node, ["sleep", "3600"])])
        upgrade = "GET" if declared else "POST"

        # kubectl port-forward on a loopback port of its choosing; three pages fetched at once through it
        forward = await asyncio.create_subprocess_exec(
            "kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}", "port-forward", "--address=127.0.0.1",
            "pod/web", ":8080", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            assert forward.stdout is not None
            line = (await asyncio.wait_for(forward.stdout.readline(), 30)).decode()
            assert line.startswith("Forwarding from 127.0.0.1:") and line.endswith(" -> 8080\n"), line
            local = int(line.split(":")[1].split(" ")[0])
            async with aiohttp.ClientSession() as s:
                async def page(path: str) -> tuple[int, bytes]:
                    async with s.get(f"http://127.0.0.1:{local}{path}") as r:
                        return r.status, await r.read()

                pages = await asyncio.gather(*(page(p) for p in ("/", "/two.html", "/")))
            assert pages == [(200, PAGES["/"]), (200, PAGES["/two.html"]), (200, PAGES["/"])]
        finally:
            forward.terminate()
            await forward.wait()
        assert (upgrade, "/portForward/default/web") in api.kubelet_proxy.requests

        # kubectl attach -i with stdin piped in: the recorded scenario's output
        code, out, _ = await kubectl(kubeconfig, cache, "attach", "-i", "reader", "-c", "main",
                                     stdin=b"hello\nworld\n")
        assert (code, out) == (0, "got: hello\ngot: world\nstdin closed, exiting 0\n")
        assert (upgrade, "/attach/default/reader/main?error=1&input=1&output=1") in api.kubelet_proxy.requests
        # kubectl exec -i: stdin through, its end reaches the command
        assert await kubectl(kubeconfig, cache, "exec", "-i", "shell", "--", "sh", "-c", "tr a-z A-Z; echo done",
                             stdin=b"from stdin\n") == (0, "FROM STDIN\ndone\n", "")

        # kubectl cp both ways (tar through exec): a file with every byte value, and back
        payload = os.urandom(64 * 1024) + bytes(range(256))
        (tmp_path / "up.bin").write_bytes(payload)
        code, _, err = await kubectl(kubeconfig, cache, "cp", "up.bin", "default/shell:/tmp/up.bin", cwd=tmp_path)
        assert code == 0, err
        assert await kubectl(kubeconfig, cache, "exec", "shell", "--", "wc", "-c", "/tmp/up.bin") == (
            0, f"{len(payload)} /tmp/up.bin\n", "")
        code, _, err = await kubectl(kubeconfig, cache, "cp", "default/shell:/tmp/up.bin", "down.bin",
                                     cwd=tmp_path)
        assert code == 0, err
        assert (tmp_path / "down.bin").read_bytes() == payload
        assert any(m == upgrade and p.startswith("/exec/default/shell/main?command=tar")
                   for m, p in api.kubelet_proxy.requests)
    finally:
        await stop_and_clean(agent, docker)
    assert "Traceback" not in agent.log()
