"""The agent on containerd through the CRI (containerRuntimeEndpoint = the test environment's CRI containerd),
whatever MKL_TEST_RUNTIME says: ids and images in status, the pod network with an httpGet probe, the CRI log
files, and adoption of running containers after kill -9. The same behaviours on Docker are in
test_agent_static_pods.py and test_agent_gc_logs.py."""

from __future__ import annotations

import asyncio
import gzip
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
import pytest

from cri.remote import RemoteRuntime
from cri.types import ContainerState
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env, cri_runtime
from tests.integration.agent_env import AgentProcess, cstatus, free_port, simple_pod, stop_and_clean
from tests.integration.test_agent_kubelet_api import write_pki

pytestmark = pytest.mark.integration
cri_endpoint = cri_runtime.cri_endpoint
docker = agent_env.docker


class ContainerdAgent(AgentProcess):
    def __init__(self, base: Path, docker_host: str, endpoint: str) -> None:
        super().__init__(base, docker_host)
        self.endpoint = endpoint

    def write_config(self) -> None:
        self.extra["containerRuntimeEndpoint"] = self.endpoint
        super().write_config()


@pytest.fixture
async def agent(tmp_path: Path, docker: aiodocker.Docker, docker_host: str,
                cri_endpoint: str) -> AsyncIterator[ContainerdAgent]:
    a = ContainerdAgent(tmp_path, docker_host, cri_endpoint)
    try:
        yield a
    finally:
        await stop_and_clean(a, docker)  # its pods go from the CRI runtime it ran on, then its cgroups


def ready(p: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in p["status"].get("conditions", [])}
    return p["status"].get("phase") == "Running" and conditions.get("Ready") == "True"


WEB = simple_pod("web", [
    {"name": "httpd", "command": ["sh", "-c", "mkdir -p /www && echo ok >/www/healthz && exec httpd -f -p 8080 -h /www"],
     "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1}},
    {"name": "talker", "command": ["sh", "-c", "head -c 2097152 /dev/zero > /fill; echo hello-cri; echo oops >&2; "
                                               "exec sleep 3600"]},
])


async def test_static_pod_on_containerd_survives_agent_kill9(agent: ContainerdAgent, cri_endpoint: str) -> None:
    agent.put("web.yaml", WEB)
    agent.start()
    pod = await agent.wait_pod("web", ready, "Ready", timeout=60)
    status = pod["status"]
    assert status["podIP"].startswith("10.88.")  # from the CNI bridge's host-local range
    runtime = RemoteRuntime(cri_endpoint)
    try:
        busybox = await runtime.image_status(BUSYBOX_IMAGE)
    finally:
        await runtime.close()
    assert busybox is not None
    ids = {}
    for name in ("httpd", "talker"):
        cs = cstatus(pod, name)
        assert cs["containerID"].startswith("containerd://") and cs["restartCount"] == 0
        # containerd names the image by its first repo tag (several aliases share this one) and its id.
        assert cs["imageID"] == busybox.id and cs["image"] in busybox.repo_tags
        ids[name] = cs["containerID"].removeprefix("containerd://")
    async with aiohttp.ClientSession() as session, session.get(f"http://{status['podIP']}:8080/healthz") as resp:
        assert (await resp.text()).strip() == "ok"

    # The log is the CRI log file containerd writes under podLogsDir/<ns>_<pod>_<uid>/<container>/0.log.
    uid = pod["metadata"]["uid"]
    log = agent.logs / f"default_web-{agent.node}_{uid}" / "talker" / "0.log"
    async def logged() -> bool:
        return log.exists() and "oops" in log.read_text()

    await agent.wait_for("the talker's log", logged, 10)
    records = [line.split(" ", 1)[1] for line in log.read_text().splitlines()]
    assert sorted(records) == ["stderr F oops", "stdout F hello-cri"]

    # /stats/summary: the writable layer from the CRI (ListContainerStats; containerd refreshes it every 10 s),
    # CPU and memory from the cgroup, which the CRI's own figures agree with.
    async def rootfs() -> dict[str, Any] | None:
        summary = await agent.get_json("/stats/summary")
        pod = next((p for p in summary["pods"] if p["podRef"]["uid"] == uid), None)
        c: dict[str, Any] = next((c for c in pod["containers"] if c["name"] == "talker"), {}) if pod else {}
        return c if c.get("rootfs", {}).get("usedBytes", 0) >= 2 * MiB else None

    talker = await agent.wait_for("the talker's writable layer in /stats/summary", rootfs, timeout=45, interval=1)
    assert talker["rootfs"]["usedBytes"] < 3 * MiB and talker["rootfs"]["inodesUsed"] >= 1
    assert talker["rootfs"]["capacityBytes"] >= talker["rootfs"]["availableBytes"] > 0
    runtime = RemoteRuntime(cri_endpoint)
    try:
        cri = await runtime.container_stats(ids["talker"])
    finally:
        await runtime.close()
    assert cri.writable_layer_used_bytes is not None and cri.writable_layer_used_bytes >= 2 * MiB
    working_set = talker["memory"]["workingSetBytes"]
    assert working_set > 0 and working_set / 2 <= cri.memory_working_set_bytes <= working_set * 2
    assert talker["cpu"]["usageCoreNanoSeconds"] > 0

    agent.kill9()
    runtime = RemoteRuntime(cri_endpoint)
    try:
        for container_id in ids.values():  # pods outlive the agent
            assert (await runtime.container_status(container_id)).state is ContainerState.RUNNING
    finally:
        await runtime.close()
    agent.start()
    await agent.wait_up()
    again = await agent.wait_pod("web", ready, "Ready again", timeout=30)
    assert {n: cstatus(again, n)["containerID"].removeprefix("containerd://") for n in ids} == ids
    assert all(cstatus(again, n)["restartCount"] == 0 for n in ids)
    assert again["metadata"]["uid"] == uid


MiB = 2**20
ROTATED = re.compile(r"0\.log\.\d{8}-\d{6}(\.gz)?")
PAD = "x" * 200


async def test_the_agent_rotates_the_cri_log_and_still_serves_it(
    tmp_path: Path, agent: ContainerdAgent
) -> None:
    ca, ctx = write_pki(tmp_path)
    port = free_port()
    agent.extra = {"port": port, "authentication": {"x509": {"clientCAFile": str(ca)}},
                   "authorization": {"mode": "AlwaysAllow"}, "containerLogMaxSize": "64Ki",
                   "containerLogMaxFiles": 3, "containerLogMonitorInterval": "3s"}
    # about 40 kB/s of numbered lines: over 64 KiB at every 3 s check
    agent.put("chatty.yaml", simple_pod("chatty", [{"name": "app", "command": [
        "sh", "-c", f"i=0; while true; do i=$((i+1)); echo \"$i {PAD}\"; usleep 5000; done"]}],
        terminationGracePeriodSeconds=1))
    agent.start()
    pod = await agent.wait_pod("chatty", ready, "Ready", timeout=60)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    log_dir = agent.logs / f"default_{name}_{uid}" / "app"
    url = f"https://127.0.0.1:{port}/containerLogs/default/{name}/app"
    followed: list[int] = []

    async def follow(session: aiohttp.ClientSession) -> None:
        async with session.get(url + "?follow=true", ssl=ctx) as r:
            assert r.status == 200
            async for line in r.content:
                followed.append(int(line.split(b" ", 1)[0]))

    async with aiohttp.ClientSession() as session:
        follower = asyncio.create_task(follow(session))
        try:
            async def rotated_thrice() -> bool:
                names = [n for n in os.listdir(log_dir) if not n.endswith(".tmp")]  # a compression under way
                assert all(n == "0.log" or ROTATED.fullmatch(n) for n in names), names
                assert len(names) <= 3, names  # containerLogMaxFiles, the live log included
                try:
                    oldest = gzip.decompress(min(log_dir.glob("0.log.*.gz")).read_bytes())
                except (ValueError, OSError, EOFError):
                    return False  # none yet, or removed or replaced under us
                # the third rotation removed the first rotated file: the oldest one kept starts later
                return int(oldest.split(b" ", 4)[3]) > 1

            await agent.wait_for("three rotations", rotated_thrice, timeout=60)
        finally:
            follower.cancel()
            ended = (await asyncio.gather(follower, return_exceptions=True))[0]
        assert isinstance(ended, asyncio.CancelledError), f"the follow ended early: {ended!r}"
        # Served from the live file only (as upstream): it starts after the rotated lines, with no gap.
        async with session.get(url, ssl=ctx) as r:
            assert r.status == 200
            served = [int(line.split(" ", 1)[0]) for line in (await r.text()).splitlines()]
    assert served and served[0] > 1 and served == list(range(served[0], served[0] + len(served)))
    # A follow spanning the rotations saw every line once, in order.
    assert len(followed) > 2 * 64 * 1024 // (len(PAD) + 40)
    assert followed == list(range(followed[0], followed[0] + len(followed))), followed[-5:]
    records = gzip.decompress(min(log_dir.glob("0.log.*.gz")).read_bytes()).decode().splitlines()
    assert records[0].split(" ")[1:3] == ["stdout", "F"]  # the CRI format, compressed as is
    written = followed[-1] * (len(PAD) + 36)  # 36: the CRI prefix and the number
    on_disk = sum(p.stat().st_size for p in log_dir.iterdir())
    assert on_disk < written, (on_disk, written)
