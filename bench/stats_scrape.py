"""stats-scrape: what a scrape of /stats/summary, /metrics/resource and /metrics/cadvisor costs with N pods,
and what one housekeeping pass (the sampling behind them) costs.

The scrapes go to the real agent; the pass is timed in this process with the agent's own StatsProvider over the
same engine and the agent's cgroup root (reads only).
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from bench.common import docker_host, running_agent, sleeper_pod, summary, table, write_result
from cgroups.detect import detect_cgroup_version
from cgroups.manager import CgroupManager
from cgroups.v1 import CgroupV1Driver
from cgroups.v2 import CgroupV2Driver
from cri.docker.runtime import DockerRuntime
from minikubelet.base.clock import RealClock
from minikubelet.stats.provider import StatsProvider

PATHS = ("/stats/summary", "/metrics/resource", "/metrics/cadvisor")


async def main(pods: int, requests: int, passes: int) -> None:
    rows: list[list[object]] = []
    results: dict[str, object] = {"pods": pods}
    async with running_agent() as agent:
        for i in range(pods):
            agent.put(f"s{i}.yaml", sleeper_pod(f"s{i}"))
        for i in range(pods):
            await agent.wait_phase(f"s{i}", "Running", 300)

        async def all_rated() -> bool:
            body = await agent.get_json("/stats/summary")
            ours = [p for p in body["pods"] if p["podRef"]["name"].endswith(agent.node)]
            return len(ours) == pods and all(
                c.get("cpu", {}).get("usageNanoCores") is not None for p in ours for c in p["containers"])

        await agent.wait_for("two housekeeping passes over every pod", all_rated, timeout=120, interval=1)
        async with aiohttp.ClientSession() as session:
            for path in PATHS:
                lat: list[float] = []
                size = 0
                for _ in range(requests):
                    t0 = time.perf_counter()
                    async with session.get(agent.url(path)) as r:
                        size = len(await r.read())
                    lat.append(time.perf_counter() - t0)
                s = summary(lat)
                results[path] = {"latency": s, "bytes": size}
                rows.append([path, requests, size, round(s["p50"] * 1000, 2), round(s["p90"] * 1000, 2),
                             round(s["max"] * 1000, 2)])

        root = agent.cgroup_root
        version = detect_cgroup_version()
        driver = CgroupV2Driver(prefix=root) if version == 2 else CgroupV1Driver(prefix=root)
        manager = CgroupManager(driver, "cgroupfs", {"cpu": "1", "memory": "1Gi"}, {}, {}, [], root)
        runtime = DockerRuntime(docker_host())
        provider = StatsProvider(runtime, RealClock(), agent.node, str(agent.root), manager)
        try:
            durations = []
            for _ in range(passes):
                t0 = time.perf_counter()
                await provider.update()
                durations.append(time.perf_counter() - t0)
        finally:
            await runtime.close()
        s = summary(durations)
        results["housekeeping_pass"] = s
        rows.append(["housekeeping pass", passes, "", round(s["p50"] * 1000, 2), round(s["p90"] * 1000, 2),
                     round(s["max"] * 1000, 2)])
    print(table(["what", "n", "bytes", "p50 ms", "p90 ms", "max ms"], rows))
    print("results:", write_result("stats-scrape", results))


if __name__ == "__main__":
    asyncio.run(main(30, 50, 5))
