"""startup: N pods written at once; time until each is Running, versus the same work done directly on the runtime
(Docker, or with MKL_TEST_RUNTIME=containerd the CRI calls crictl would make: RunPodSandbox, CreateContainer,
StartContainer)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import aiodocker

from bench.common import docker_host, running_agent, sleeper_pod, summary, table, write_result
from cri.remote import RemoteRuntime
from cri.types import ContainerConfig, ContainerMeta, PodMeta, PodSandboxConfig
from tests.integration.agent_env import BUSYBOX, PAUSE, agent_runtime, runtime_endpoint


def _running(p: dict[str, Any]) -> bool:
    cs = p["status"].get("containerStatuses") or []
    return p["status"].get("phase") == "Running" and bool(cs) and all("running" in c["state"] for c in cs)


async def agent_startup(n: int) -> tuple[list[float], float]:
    async with running_agent() as agent:
        names = [f"s{i}" for i in range(n)]
        t0 = time.monotonic()
        for name in names:
            agent.put(f"{name}.yaml", sleeper_pod(name))
        done: dict[str, float] = {}
        while len(done) < n:
            for p in await agent.pods():
                short = p["metadata"]["name"].removesuffix(f"-{agent.node}")
                if short not in done and _running(p):
                    done[short] = time.monotonic() - t0
            if time.monotonic() - t0 > 300:
                raise SystemExit(f"startup: only {len(done)}/{n} pods Running after 300 s")
            await asyncio.sleep(0.02)
        total = max(done.values())
        for name in names:
            (agent.manifests / f"{name}.yaml").unlink()
        await agent.wait_for("pods gone", lambda: _none(agent), 300)
        return list(done.values()), total


async def _none(agent: Any) -> bool:
    return not await agent.pods()


async def direct_startup(n: int) -> tuple[list[float], float]:
    tag = uuid.uuid4().hex[:6]
    docker = aiodocker.Docker(url=docker_host())
    times: list[float] = []
    made: list[aiodocker.containers.DockerContainer] = []

    async def one(i: int, t0: float) -> None:
        pause = await docker.containers.create(
            {"Image": PAUSE, "HostConfig": {"IpcMode": "shareable"}, "Labels": {"mkl-bench": tag}},
            name=f"bench-pause-{tag}-{i}")
        made.append(pause)
        await pause.start()
        c = await docker.containers.create(
            {"Image": BUSYBOX, "Cmd": ["sleep", "3600"], "Labels": {"mkl-bench": tag},
             "HostConfig": {"NetworkMode": f"container:{pause.id}", "IpcMode": f"container:{pause.id}"}},
            name=f"bench-main-{tag}-{i}")
        made.append(c)
        await c.start()
        times.append(time.monotonic() - t0)

    try:
        t0 = time.monotonic()
        await asyncio.gather(*(one(i, t0) for i in range(n)))
        total = time.monotonic() - t0
    finally:
        await asyncio.gather(*(c.delete(force=True) for c in made), return_exceptions=True)
        await docker.close()
    return times, total


async def direct_cri_startup(n: int) -> tuple[list[float], float]:
    """The CRI floor: what the agent asks of the runtime for a pod, with nothing in between."""
    rt = RemoteRuntime(runtime_endpoint(docker_host()))
    tag = uuid.uuid4().hex[:6]
    times: list[float] = []
    sandboxes: list[str] = []

    async def one(i: int, t0: float) -> None:
        pod = PodSandboxConfig(PodMeta(f"bench-{tag}-{i}", "default", str(uuid.uuid4())), hostname=f"bench-{i}",
                               labels={"mkl-bench": tag})
        sandbox_id = await rt.run_pod_sandbox(pod)
        sandboxes.append(sandbox_id)
        container_id = await rt.create_container(
            sandbox_id, ContainerConfig(ContainerMeta("main"), BUSYBOX, command=("sleep", "3600")), pod)
        await rt.start_container(container_id)
        times.append(time.monotonic() - t0)

    try:
        t0 = time.monotonic()
        await asyncio.gather(*(one(i, t0) for i in range(n)))
        total = time.monotonic() - t0
    finally:
        await asyncio.gather(*(rt.remove_pod_sandbox(s) for s in sandboxes), return_exceptions=True)
        await rt.close()
    return times, total


async def main(counts: list[int]) -> None:
    rows, data = [], []
    floor = direct_cri_startup if agent_runtime() == "containerd" else direct_startup
    for n in counts:
        direct, direct_total = await floor(n)
        agent, agent_total = await agent_startup(n)
        a, d = summary(agent), summary(direct)
        rows.append([n, a["p50"], a["p90"], a["p99"], agent_total, d["p50"], d["p99"], direct_total,
                     a["p50"] / d["p50"], agent_total / direct_total])
        data.append({"pods": n, "runtime": agent_runtime(), "agent": a, "agent_total": agent_total, "direct": d, "direct_total": direct_total})
    print(table(["pods", "agent p50", "p90", "p99", "total", "direct p50", "p99", "total", "ratio p50", "ratio total"],
                rows))
    print("results:", write_result("startup", {"runs": data}))
