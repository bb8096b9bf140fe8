"""footprint: agent RSS and CPU seconds per minute when idle, with 0/30/100 pods, with and without probes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.common import engine_pids, read_proc, running_agent, sleeper_pod, table, write_result

PROBES: dict[str, dict[str, Any] | None] = {
    "none": None,
    "exec": {"exec": {"command": ["true"]}, "periodSeconds": 10},
    "http": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 10},
}


def pod(name: str, probe: str) -> dict[str, Any]:
    p = sleeper_pod(name)
    spec = PROBES[probe]
    if spec is not None:
        c = p["spec"]["containers"][0]
        if probe == "http":
            c["command"] = ["httpd", "-f", "-p", "8080"]
        c["readinessProbe"] = spec
    return p


async def measure(n: int, probe: str, duration: float) -> dict[str, Any]:
    async with running_agent() as agent:
        for i in range(n):
            agent.put(f"f{i}.yaml", pod(f"f{i}", probe))

        async def all_running() -> bool:
            ps = await agent.pods()
            return len(ps) == n and all(p["status"].get("phase") == "Running" for p in ps)

        await agent.wait_for("all running", all_running, 600)
        await asyncio.sleep(15)  # let start-up work and the first probe jitter settle
        assert agent.proc is not None
        pid = agent.proc.pid
        engines = engine_pids()
        a0, e0, t0 = read_proc(pid), {k: read_proc(v) for k, v in engines.items()}, time.monotonic()
        await asyncio.sleep(duration)
        a1, e1, t1 = read_proc(pid), {k: read_proc(v) for k, v in engines.items()}, time.monotonic()
        minutes = (t1 - t0) / 60
        out = {
            "pods": n, "probe": probe, "seconds": t1 - t0,
            "agent_rss_mib": a1.rss_bytes / 2**20,
            "agent_cpu_s_per_min": (a1.cpu_seconds - a0.cpu_seconds) / minutes,
            "engine_cpu_s_per_min": {k: (e1[k].cpu_seconds - e0[k].cpu_seconds) / minutes for k in e1},
        }
        for i in range(n):
            (agent.manifests / f"f{i}.yaml").unlink()

        async def none_left() -> bool:
            return not await agent.pods()

        await agent.wait_for("pods gone", none_left, 600)
        return out


async def main(counts: list[int], probes: list[str], duration: float) -> None:
    rows, data = [], []
    for probe in probes:
        for n in counts:
            r = await measure(n, probe, duration)
            data.append(r)
            eng = r["engine_cpu_s_per_min"]
            rows.append([n, probe, r["agent_rss_mib"], r["agent_cpu_s_per_min"], r["agent_cpu_s_per_min"] / 60 * 100,
                         eng.get("dockerd", float("nan")), eng.get("containerd", float("nan"))])
    print(table(["pods", "probe", "agent RSS MiB", "agent CPU s/min", "% of a core", "dockerd CPU s/min",
                 "containerd CPU s/min"], rows))
    print("results:", write_result("footprint", {"runs": data}))
