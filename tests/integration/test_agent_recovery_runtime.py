"""Issue 17 item 4, the runtime: the real dockerd of the test engine stopped and started again under the agent.

Without live-restore the engine stops its containers when it goes down; the agent reports the runtime down
on its Node (Ready False, `container runtime is down`, as upstream's runtimeState once the last good runtime
check is older than 30 s), keeps serving /healthz and /pods, and when the engine is back restarts every pod as
its restartPolicy says, each container's restartCount one higher. With live-restore nothing stops and
nothing restarts. A dockerd killed while the agent is creating a pod leaves no stray container behind.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, JoinedAgent, cstatus, simple_pod
from tests.integration.engine_faults import live_restore_engine, start_dockerd, stop_dockerd
from tests.integration.recovery import TRAPPING, api_pod, api_pod_running, node_ready, ready_condition
from tests.integration.runtime_view import docker_only

docker = agent_env.docker
agent = agent_env.agent
api = agent_env.api

# dockerd itself is the fault (stopped, SIGKILLed, live-restore); the CRI containerd's restart is not built here
pytestmark = [pytest.mark.integration,
              docker_only("it stops, kills and restarts dockerd (scripts/testenv stop-dockerd/start-dockerd)")]

def running_with(restarts: int) -> Any:
    def pred(p: dict[str, Any]) -> bool:
        c = cstatus(p, "main")
        return p["status"].get("phase") == "Running" and "running" in c["state"] and c["restartCount"] == restarts
    return pred


async def test_engine_restart_without_live_restore(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    a = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    a.extra = {"nodeStatusUpdateFrequency": "2s"}
    a.put("static.yaml", simple_pod("web", [{"name": "main", "command": TRAPPING}]))
    admin = api.admin()
    a.start()
    try:
        await a.wait_for("the Node Ready", lambda: node_ready(admin, a.node, "True"), timeout=60)
        await admin.create(api_pod("api-pod", a.node))
        await a.wait_pod("web", running_with(0), "Running")
        await a.wait_for("the API pod Running", lambda: api_pod_running(admin, "api-pod", 0), timeout=60)

        down_at = time.monotonic()
        stop_dockerd()
        try:
            node = await a.wait_for("Ready False: the runtime is down",
                                    lambda: node_ready(admin, a.node, "False"), timeout=60, interval=0.5)
            cond = ready_condition(node)
            assert cond["reason"] == "KubeletNotReady" and "container runtime is down" in cond["message"], cond
            # upstream's runtime sync threshold is 30 s after the last good check, made at most 2 s before the stop
            assert time.monotonic() - down_at >= 28
            # the agent serves on: /healthz passes (upstream's syncloop check allows 5 minutes), /pods lists both
            assert await a.get_text("/healthz") == (200, "ok")
            names = {p["metadata"]["name"] for p in await a.pods()}
            assert {f"web-{a.node}", "api-pod"} <= names
        finally:
            start_dockerd()

        # the engine stopped the containers (SIGTERM, exit 0); restartPolicy Always restarts each, counted once
        web = await a.wait_pod("web", running_with(1), "Running again, restartCount 1", timeout=90)
        assert cstatus(web, "main")["lastState"]["terminated"]["exitCode"] == 0
        await a.wait_for("the API pod Running again, restartCount 1",
                         lambda: api_pod_running(admin, "api-pod", 1), timeout=90)
        node = await a.wait_for("Ready True again", lambda: node_ready(admin, a.node, "True"), timeout=30)
        assert ready_condition(node)["reason"] == "KubeletReady"
        assert a.proc is not None and a.proc.poll() is None
    finally:
        await agent_env.stop_and_clean(a, docker)


async def test_engine_restart_with_live_restore(agent: AgentProcess, docker: aiodocker.Docker) -> None:
    with live_restore_engine():
        agent.put("web.yaml", simple_pod("web", [{"name": "main", "command": TRAPPING}]))
        agent.start()
        await agent.wait_up()
        before = await agent.wait_pod("web", running_with(0), "Running")
        cid = cstatus(before, "main")["containerID"]
        stop_dockerd(kill=True)
        await asyncio.sleep(3)
        start_dockerd(live_restore=True)
        # the container ran on through the engine's absence; nothing is restarted
        await asyncio.sleep(5)
        after = await agent.wait_pod("web", running_with(0), "still Running, restartCount 0")
        assert cstatus(after, "main")["containerID"] == cid
        # the event stream is subscribed again: a container killed now is seen and restarted
        await (await docker.containers.get(cid.removeprefix("docker://"))).kill()
        await agent.wait_pod("web", running_with(1), "restarted after a kill", timeout=30)
        assert "Docker event stream" in agent.log(), agent.log()[-3000:]
        await agent_env.stop_and_clean(agent, docker)


async def test_dockerd_killed_mid_create(agent: AgentProcess, docker: aiodocker.Docker) -> None:
    agent.start()
    await agent.wait_up()
    names = [f"m{i}" for i in range(3)]
    for n in names:
        agent.put(f"{n}.yaml", simple_pod(n, [{"name": "main", "command": TRAPPING},
                                              {"name": "side", "command": TRAPPING}]))

    async def first_container() -> bool:
        found = await docker.containers.list(all=True, filters='{"label": ["io.kubernetes.pod.uid"]}')
        return any(c._container["Labels"].get("io.kubernetes.pod.name", "").endswith(agent.node) for c in found)

    await agent.wait_for("the first sandbox created", first_container, timeout=30, interval=0.02)
    stop_dockerd(kill=True)
    await asyncio.sleep(2)
    start_dockerd()
    for n in names:
        p = await agent.wait_pod(n, lambda p: p["status"].get("phase") == "Running" and all(
            "running" in s["state"] for s in p["status"].get("containerStatuses", [])), "Running", timeout=90)
        assert len(p["status"]["containerStatuses"]) == 2
    # exactly one live sandbox and one live container per container: nothing half-created left running
    await asyncio.sleep(3)
    found = await docker.containers.list(all=True, filters='{"label": ["io.kubernetes.pod.uid"]}')
    ours = [c._container for c in found if c._container["Labels"].get("io.kubernetes.pod.name", "").endswith(agent.node)]
    live = [c for c in ours if c["State"] == "running"]
    assert len(live) == 3 * 3, [(c["Names"], c["State"]) for c in ours]
    # a sandbox the engine's death left `created` goes once its pod runs in a new one (evictSandboxes' rule, now)
    unused = [c["Names"] for c in ours if c["Labels"].get("io.kubernetes.docker.type") == "podsandbox"
              and c["State"] == "created"]
    assert not unused, unused
    assert agent.proc is not None and agent.proc.poll() is None
