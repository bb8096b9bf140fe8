"""The manifest URL source end to end: the real agent, a manifest server on loopback, the real Docker Engine."""

from __future__ import annotations

import json
from typing import Any

import aiodocker
import pytest
from aiohttp import web

from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, free_port, simple_pod
from tests.integration.runtime_view import RuntimeView

agent = agent_env.agent
docker = agent_env.docker
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration


class ManifestServer:
    """Serves `self.body` at /pods on a fixed loopback port; can go down and come back on that port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.body: dict[str, Any] = {"apiVersion": "v1", "kind": "PodList", "items": []}
        self.tokens: list[str] = []
        self._runner: web.AppRunner | None = None

    async def _pods(self, request: web.Request) -> web.Response:
        self.tokens.append(request.headers.get("X-Token", ""))
        return web.Response(text=json.dumps(self.body), content_type="application/json")

    async def up(self) -> None:
        app = web.Application()
        app.router.add_get("/pods", self._pods)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def down(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def serve(self, *pods: dict[str, Any]) -> None:
        self.body = {"apiVersion": "v1", "kind": "PodList", "items": list(pods)}


@pytest.fixture
async def manifests() -> Any:
    s = ManifestServer()
    await s.up()
    yield s
    await s.down()


def sleeper(name: str, seconds: int = 3600) -> dict[str, Any]:
    return simple_pod(name, [{"name": "main", "command": ["sleep", str(seconds)]}], terminationGracePeriodSeconds=1)


def running(p: dict[str, Any]) -> bool:
    return p["status"].get("phase") == "Running" and all(
        "running" in s["state"] for s in p["status"].get("containerStatuses", []))


def configure(agent: AgentProcess, server: ManifestServer) -> None:
    agent.extra = {"staticPodURL": f"http://127.0.0.1:{server.port}/pods", "httpCheckFrequency": "1s",
                   "staticPodURLHeader": {"X-Token": ["t1"]}}


async def test_url_pods_run_are_replaced_survive_the_server_and_stop(
        agent: AgentProcess, docker: aiodocker.Docker, manifests: ManifestServer, runtime_view: RuntimeView) -> None:
    manifests.serve(sleeper("alpha"), sleeper("beta"))
    configure(agent, manifests)
    agent.start()
    alpha = await agent.wait_pod("alpha", running, "Running")
    beta = await agent.wait_pod("beta", running, "Running")
    assert alpha["metadata"]["annotations"]["kubernetes.io/config.source"] == "http"
    assert set(manifests.tokens) == {"t1"}
    assert f"url=http://127.0.0.1:{manifests.port}/pods" in agent.log()
    beta_cid = container_id(beta, "main")

    # a changed item is replaced by its new version; the unchanged one keeps its container
    manifests.serve(sleeper("alpha", 3601), sleeper("beta"))
    new_alpha = await agent.wait_pod(
        "alpha", lambda p: p["metadata"]["uid"] != alpha["metadata"]["uid"] and running(p), "replaced")
    assert not await runtime_view.exists(container_id(alpha, "main"))

    # the server going down changes nothing, and is logged once
    await manifests.down()
    polls = len(manifests.tokens)
    await agent.wait_for("three failed polls", _log_has(agent, "cannot read pods from manifest URL"), 10)
    await _seconds(agent, 3.5)
    for name, cid in (("alpha", container_id(new_alpha, "main")), ("beta", beta_cid)):
        p = await agent.pod(name)
        assert p is not None and running(p) and container_id(p, "main") == cid
        assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    assert agent.log().count("cannot read pods from manifest URL") == 1
    assert len(manifests.tokens) == polls

    # back with alpha removed: alpha stops, beta stays as it was
    manifests.serve(sleeper("beta"))
    await manifests.up()
    await agent.wait_gone("alpha", 30)
    beta_now = await agent.pod("beta")
    assert beta_now is not None and container_id(beta_now, "main") == beta_cid
    assert "read pods from manifest URL" in agent.log()
    assert await runtime_view.objects_of(new_alpha["metadata"]["uid"]) == []


async def test_a_restart_while_the_server_is_down_keeps_url_pods(
        agent: AgentProcess, docker: aiodocker.Docker, manifests: ManifestServer, runtime_view: RuntimeView) -> None:
    manifests.serve(sleeper("kept"))
    configure(agent, manifests)
    agent.start()
    kept = await agent.wait_pod("kept", running, "Running")
    cid = container_id(kept, "main")
    assert agent.stop() == 0

    # until the URL answered once, its pods are not orphans (upstream's sourcesReady)
    await manifests.down()
    agent.start()
    await agent.wait_up()
    await _seconds(agent, 3.0)
    assert await runtime_view.running(cid)
    assert "stopping orphaned pod" not in agent.log()

    await manifests.up()
    adopted = await agent.wait_pod("kept", running, "adopted after the server came back")
    assert container_id(adopted, "main") == cid


def _log_has(agent: AgentProcess, text: str) -> Any:
    async def check() -> bool:
        return text in agent.log()
    return check


async def _seconds(agent: AgentProcess, seconds: float) -> None:
    """Let the agent run that long, failing early if it exits."""
    async def never() -> bool:
        return False
    try:
        await agent.wait_for("time to pass", never, seconds)
    except AssertionError as e:
        if "timed out" not in str(e):
            raise
