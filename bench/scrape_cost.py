"""scrape-cost: the agent's CPU, idle with N pods, while Prometheus-style scrapes of all four metrics endpoints
arrive every 15 s, against the same agent left unscraped; and the time of one /metrics/cadvisor scrape.

Windows alternate (unscraped, scraped, unscraped, scraped...) on one agent so that load from other work on the
machine falls on both alike. A scrape round GETs the four paths one after the other on the read-only port, as
one Prometheus server with four scrape jobs would; with a 10 s housekeeping interval nearly every round finds a
new snapshot, so its /metrics/cadvisor time includes rendering it.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import aiohttp

from bench.common import read_proc, running_agent, sleeper_pod, summary, table, write_result

PATHS = ("/metrics", "/metrics/cadvisor", "/metrics/resource", "/metrics/probes")
INTERVAL = 15.0


async def _window(pid: int, seconds: float, session: aiohttp.ClientSession | None, url: Any,
                  times: dict[str, list[float]], sizes: dict[str, int]) -> float:
    """Agent CPU over the window as a fraction of one core; scrapes every INTERVAL when a session is given."""
    c0, t0 = read_proc(pid).cpu_seconds, time.monotonic()
    end = t0 + seconds
    while (now := time.monotonic()) < end:
        if session is not None:
            for path in PATHS:
                s = time.perf_counter()
                async with session.get(url(path), headers={"Accept-Encoding": "gzip"}) as r:
                    body = await r.read()
                    assert r.status == 200, (path, r.status)
                times[path].append(time.perf_counter() - s)
                sizes[path] = len(body)
        await asyncio.sleep(min(INTERVAL, max(0.0, end - time.monotonic())) if session is not None
                            else end - now)
    return (read_proc(pid).cpu_seconds - c0) / (time.monotonic() - t0)


async def main(pods: int, window: float, rounds: int) -> None:
    results: dict[str, Any] = {"pods": pods, "window_s": window, "rounds": rounds, "interval_s": INTERVAL}
    async with running_agent() as agent:
        for i in range(pods):
            agent.put(f"s{i}.yaml", sleeper_pod(f"s{i}"))

        async def all_rated() -> bool:
            body = await agent.get_json("/stats/summary")
            ours = [p for p in body["pods"] if p["podRef"]["name"].endswith(agent.node)]
            return len(ours) == pods and all(
                c.get("cpu", {}).get("usageNanoCores") is not None for p in ours for c in p["containers"])

        await agent.wait_for("every pod sampled twice", all_rated, timeout=900, interval=2)
        await asyncio.sleep(20)  # start-up work settles
        assert agent.proc is not None
        pid = agent.proc.pid
        idle: list[float] = []
        scraped: list[float] = []
        times: dict[str, list[float]] = {p: [] for p in PATHS}
        sizes: dict[str, int] = {}
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            for _ in range(rounds):
                idle.append(await _window(pid, window, None, agent.url, times, sizes))
                scraped.append(await _window(pid, window, session, agent.url, times, sizes))
        results["idle_core_pct"] = [round(v * 100, 2) for v in idle]
        results["scraped_core_pct"] = [round(v * 100, 2) for v in scraped]
        results["scrape_ms"] = {p: summary([v * 1000 for v in ts]) for p, ts in times.items()}
        results["gzip_bytes"] = sizes
    rows = [["agent CPU, unscraped (% of a core)", round(statistics.fmean(idle) * 100, 2),
             " ".join(f"{v * 100:.2f}" for v in idle)],
            ["agent CPU, 4 endpoints every 15 s (% of a core)", round(statistics.fmean(scraped) * 100, 2),
             " ".join(f"{v * 100:.2f}" for v in scraped)]]
    rows += [[f"{p} scrape p50 / max ms ({sizes.get(p, 0)} B gzip)", round(statistics.median(ts) * 1000, 1),
              f"max {max(ts) * 1000:.1f}"] for p, ts in times.items() if ts]
    print(table(["what", "value", "per window / detail"], rows))
    print("results:", write_result("scrape-cost", results))
