"""cluster-footprint: the joined agent's RSS and CPU seconds per minute when idle with 0/30/100 API pods,
and the requests it sends the API server meanwhile (lease, node status, pod status resyncs)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.cluster import api_pod, delete_all, is_ready, joined_agent, tally
from bench.common import engine_pids, read_proc, table, write_result
from bench.kubelet_reference import CATEGORIES, kubelet_reference, per_minute

SETTLE = 15.0  # start-up work settles; the pods' first periodic resyncs come 60-90 s after their start


async def measure(n: int, duration: float, settle: float) -> dict[str, Any]:
    async with joined_agent() as c:
        names = [f"f{i}" for i in range(n)]
        await asyncio.gather(*(c.admin.create_pod(api_pod(name, c.agent.node)) for name in names))

        async def all_ready() -> bool:
            items = (await c.admin.node_pods(c.agent.node))["items"]
            return len(items) == n and all(is_ready(p) for p in items)

        await c.agent.wait_for("all pods Ready in the API", all_ready, 600, interval=0.5)
        await asyncio.sleep(settle)
        assert c.agent.proc is not None
        pid = c.agent.proc.pid
        engines = engine_pids()
        a0, e0, t0 = read_proc(pid), {k: read_proc(v) for k, v in engines.items()}, time.monotonic()
        await asyncio.sleep(duration)
        a1, e1, t1 = read_proc(pid), {k: read_proc(v) for k, v in engines.items()}, time.monotonic()
        minutes = (t1 - t0) / 60
        rows, _ = c.requests.since(t0, c.agent.user)
        kinds = tally(rows, c.agent.user)
        out = {
            "pods": n, "seconds": t1 - t0, "settle": settle,
            "agent_rss_mib": a1.rss_bytes / 2**20,
            "agent_cpu_s_per_min": (a1.cpu_seconds - a0.cpu_seconds) / minutes,
            "engine_cpu_s_per_min": {k: (e1[k].cpu_seconds - e0[k].cpu_seconds) / minutes for k in e1},
            "agent_requests_per_min": len(rows) / minutes,
            "agent_requests_by_kind": kinds,
            "agent_requests_per_min_by_category": per_minute(kinds, minutes),
        }
        await delete_all(c, names, 600)
        return out


async def main(counts: list[int], duration: float, settle: float = SETTLE) -> None:
    rows, data = [], []
    for n in counts:
        r = await measure(n, duration, settle)
        data.append(r)
        eng = r["engine_cpu_s_per_min"]
        rows.append([n, r["agent_rss_mib"], r["agent_cpu_s_per_min"], r["agent_cpu_s_per_min"] / 60 * 100,
                     eng.get("dockerd", float("nan")), r["agent_requests_per_min"],
                     ", ".join(f"{k} {v}" for k, v in r["agent_requests_by_kind"].items())])
    print(table(["API pods", "agent RSS MiB", "agent CPU s/min", "% of a core", "dockerd CPU s/min",
                 "agent reqs/min", "requests in the window"], rows))
    ref = kubelet_reference()
    print()
    print(traffic_table(data, ref))
    print(f"kubelet idle: lease every {ref['lease_interval_s']:.1f} s (kubelet-flows/lease-create-renew.json), node status "
          f"every 5 min when unchanged; kubelet session: kubelet-call-summary.json's totals over the "
          f"{ref['session_minutes']:.1f} min its lease renewals span (a busy session with pod churn, not idle)")
    print("results:", write_result("cluster-footprint", {"runs": data, "kubelet_reference": ref}))


def traffic_table(runs: list[dict[str, Any]], ref: dict[str, Any]) -> str:
    """Requests/min by category: the agent at each pod count beside the kubelet's idle and session figures."""
    rows = []
    for c in CATEGORIES:
        ours = [r["agent_requests_per_min_by_category"].get(c, 0.0) for r in runs]
        rows.append([c, *ours, ref["idle_per_min"].get(c, "-"), ref["session_per_min"].get(c, "-")])
    return table(["requests/min", *(f"agent, {r['pods']} pods" for r in runs), "kubelet idle", "kubelet session"], rows)
