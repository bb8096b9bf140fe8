"""Issue 11 end to end: the real agent, started with a soft RLIMIT_NOFILE of 1024, under 1 100 idle
connections to its read-only port: no pod is touched, /healthz answers, the log stays short and the
agent's descriptors come back down."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
import pytest

from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, cstatus, free_port, simple_pod, stop_and_clean
from tests.integration.runtime_view import RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration

IDLE_CONNECTIONS = 1100
HOLD = 20.0
HEADER_TIMEOUT = 10.0  # ServingLimits' default: the agent closes its side of an idle connection then
POD_NAMES = ("one", "two")


class LimitedAgent(AgentProcess):
    """The agent process started with the given RLIMIT_NOFILE (soft, hard)."""

    def __init__(self, base: Path, docker_host: str, nofile: tuple[int, int]) -> None:
        super().__init__(base, docker_host)
        self.nofile = nofile
        self.healthz_port = free_port()
        self.extra = {"healthzPort": self.healthz_port, "healthzBindAddress": "127.0.0.1"}

    def start(self) -> None:
        self.write_config()
        self._log_fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minikubelet", "run", "--config", str(self.config), "--v", "2"],
            stdout=self._log_fh, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, self.nofile),
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        assert match is not None
        return int(match.group(1))

    def soft_nofile(self) -> int:
        limits = Path(f"/proc/{self.pid}/limits").read_text()
        match = re.search(r"^Max open files\s+(\d+)\s+(\d+)", limits, re.M)
        assert match is not None
        return int(match.group(1))

    async def healthz_on_its_port(self) -> bool:
        try:
            async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{self.healthz_port}/healthz") as r:
                return r.status == 200
        except (aiohttp.ClientError, OSError):
            return False


def running(p: dict[str, Any]) -> bool:
    return p["status"].get("phase") == "Running" and all(
        "running" in s["state"] for s in p["status"].get("containerStatuses", []))


async def pod_containers(view: RuntimeView, uid: str) -> dict[str, bool]:
    """Every container of the pod, the sandbox included: id -> running."""
    return {o.id: o.running for o in await view.objects_of(uid)}


async def open_idle(port: int, count: int) -> list[asyncio.StreamWriter]:
    writers = []
    for _ in range(count):
        _, w = await asyncio.open_connection("127.0.0.1", port)
        writers.append(w)
    return writers


@pytest.fixture(params=[(1024, 1024), (1024, 4096)], ids=["hard-1024", "hard-4096"])
async def limited_agent(request: pytest.FixtureRequest, tmp_path: Path,
                        docker: aiodocker.Docker) -> AsyncIterator[LimitedAgent]:
    a = LimitedAgent(tmp_path, agent_env.docker_host(), request.param)
    try:
        yield a
    finally:
        await stop_and_clean(a, docker)


async def test_idle_connections_leave_pods_health_and_descriptors_alone(
        limited_agent: LimitedAgent, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent = limited_agent
    for name in POD_NAMES:
        agent.put(f"{name}.yaml", simple_pod(name, [{"name": "main", "command": ["sleep", "3600"]}],
                                             terminationGracePeriodSeconds=1))
    agent.start()
    await agent.wait_up()
    pods = {n: await agent.wait_pod(n, running, "Running") for n in POD_NAMES}
    containers = {n: await pod_containers(runtime_view, p["metadata"]["uid"]) for n, p in pods.items()}
    soft, hard = agent.nofile
    assert agent.soft_nofile() == hard  # raised at start as far as the hard limit allows
    if hard > soft:
        assert f"old={soft} new={hard}" in agent.log()

    fds_before, rss_before = agent.descriptors(), agent.rss_kib()
    log_before = len(agent.log().splitlines())
    writers = await open_idle(agent.port, IDLE_CONNECTIONS)
    fds_peak, rss_peak = agent.descriptors(), agent.rss_kib()
    try:
        assert await agent.wait_for("/healthz on the healthz port", agent.healthz_on_its_port, 5)
        # the read-only port serves again once the agent has closed its side of the idle connections
        assert await agent.wait_for("/pods on the read-only port", agent.pods, HEADER_TIMEOUT + 8)
        hold_until = time.monotonic() + HOLD
        while time.monotonic() < hold_until:
            fds_peak, rss_peak = max(fds_peak, agent.descriptors()), max(rss_peak, agent.rss_kib())
            assert agent.proc is not None and agent.proc.poll() is None
            await asyncio.sleep(0.5)
    finally:
        for w in writers:
            w.close()

    async def descriptors_back() -> bool:
        return agent.descriptors() <= fds_before + 10

    await agent.wait_for("descriptors back down", descriptors_back, 15)
    fds_after, rss_after = agent.descriptors(), agent.rss_kib()
    log_lines = agent.log().splitlines()[log_before:]
    print(f"\n[{soft}:{hard}] fds {fds_before} -> peak {fds_peak} -> {fds_after}; "
          f"RSS KiB {rss_before} -> peak {rss_peak} -> {rss_after}; log lines during the flood: {len(log_lines)}")

    assert await agent.healthz_on_its_port()
    assert (await agent.get_text("/healthz"))[0] == 200
    assert not any("Traceback" in line for line in log_lines), "\n".join(log_lines[:40])
    assert len(log_lines) <= 30, "\n".join(log_lines[:40])
    for name, before in pods.items():
        after = await agent.wait_pod(name, running, "still Running")
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert cstatus(after, "main")["containerID"] == cstatus(before, "main")["containerID"]
        assert cstatus(after, "main")["restartCount"] == 0
        now = await pod_containers(runtime_view, before["metadata"]["uid"])
        assert now.keys() == containers[name].keys()
        assert set(now.values()) == {True}
