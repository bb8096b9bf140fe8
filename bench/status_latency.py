"""status-latency: a container is killed -> time until /pods shows it terminated."""

from __future__ import annotations

import asyncio
import time

import aiodocker

from bench.common import docker_host, running_agent, sleeper_pod, summary, table, write_result
from tests.integration.agent_env import container_id, cstatus


async def main(events: int) -> None:
    docker = aiodocker.Docker(url=docker_host())
    try:
        async with running_agent() as agent:
            for i in range(events):
                agent.put(f"k{i}.yaml", sleeper_pod(f"k{i}", restartPolicy="Never"))
            pods = {}
            for i in range(events):
                pods[i] = await agent.wait_pod(f"k{i}", lambda p: p["status"].get("phase") == "Running", "Running", 300)
            await asyncio.sleep(2)
            lat = []
            for i in range(events):
                c = await docker.containers.get(container_id(pods[i], "main"))
                t0 = time.monotonic()
                await c.kill(signal="SIGKILL")
                while True:
                    p = await agent.pod(f"k{i}")
                    if p is not None and "terminated" in cstatus(p, "main")["state"]:
                        break
                    await asyncio.sleep(0.005)
                lat.append(time.monotonic() - t0)
            for i in range(events):
                (agent.manifests / f"k{i}.yaml").unlink()
            await asyncio.sleep(3)
    finally:
        await docker.close()
    s = summary(lat)
    print(table(["events", "p50 s", "p90 s", "p99 s", "max s"], [[s["n"], s["p50"], s["p90"], s["p99"], s["max"]]]))
    print("results:", write_result("status-latency", {"latency": s, "samples": lat}))
