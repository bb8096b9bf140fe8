"""cluster-startup: N pods bound to the node created through the API at once; per pod, the time from the API
showing it (ADDED on a watch) to the API showing it Running and Ready; and what the agent asked of the API.
Before each count, the runtime floor: the same N sandbox + container pairs created straight through the runtime
(bench/startup.py's direct path: Docker Engine API, or CRI with MKL_TEST_RUNTIME=containerd), all at once."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.cluster import Cluster, ReadyTimes, api_pod, counts_delta, delete_all, joined_agent, peak_rate, tally
from bench.common import summary, table, write_result
from bench.startup import direct_cri_startup, direct_startup
from tests.integration.agent_env import agent_runtime

TIMEOUT = 300.0
LOCAL_POLL = 0.05  # the agent's own view (/pods on its read-only port), for the API path's share (--api-lag)


async def follow_local(c: Cluster, local: ReadyTimes) -> None:
    """When the agent itself first reported each pod Running and Ready (the same test as the API's).

    Only with --api-lag: twenty requests a second are the bench's work, not the agent's, and they cost the
    agent 13–15 % of its loop's work during a start (docs/performance.md, issue 31's third round). One
    keep-alive connection and a conditional GET (the agent's ETag)."""
    etag = ""
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(c.agent.url("/pods"), headers={"If-None-Match": etag} if etag else {}) as r:
                    now = time.monotonic()  # Ready by then at the latest
                    if r.status == 200:
                        etag = r.headers.get("ETag", "")
                        for pod in (await r.json())["items"]:
                            local.observe({"type": "MODIFIED", "object": pod}, now)
            except (aiohttp.ClientError, OSError):
                etag = ""
            await asyncio.sleep(LOCAL_POLL)


async def wait_ready(c: Cluster, tracker: ReadyTimes, names: set[str], watch: asyncio.Task[None]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not tracker.all_ready(names):
        if watch.done():
            watch.result()  # the watch failed: its error
            raise SystemExit("cluster-startup: the bench's watch ended")
        if c.agent.proc is not None and c.agent.proc.poll() is not None:
            raise SystemExit(f"cluster-startup: the agent exited:\n{c.agent.log()[-4000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"cluster-startup: only {len(tracker.ready)}/{len(names)} pods Ready after {TIMEOUT:.0f} s")
        await asyncio.sleep(0.01)


def agent_cpu_seconds(c: Cluster) -> float:
    """User and system CPU seconds the agent process has used so far (it runs in one process)."""
    assert c.agent.proc is not None, "cluster-startup starts its own agent"
    with open(f"/proc/{c.agent.proc.pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def agent_pid(c: Cluster) -> int:
    assert c.agent.proc is not None, "cluster-startup starts its own agent"
    return c.agent.proc.pid


def api_lag(api: ReadyTimes, local: ReadyTimes) -> dict[str, float]:
    """Per pod: the agent's /pods showed it Ready -> the API showed it Ready (status sync and watch)."""
    return {n: t - local.ready[n] for n, t in api.ready.items() if n in local.ready}


async def run(n: int, profile: Path | None = None, with_lag: bool = False) -> dict[str, Any]:
    async with joined_agent(profile) as c:
        listed = await c.admin.node_pods(c.agent.node)
        tracker, local = ReadyTimes(), ReadyTimes()
        watch = asyncio.create_task(c.admin.watch_pods(c.agent.node, listed["metadata"]["resourceVersion"],
                                                       tracker.observe))
        poll = asyncio.create_task(follow_local(c, local) if with_lag else asyncio.sleep(0))
        names = [f"c{i}" for i in range(n)]
        try:
            await asyncio.sleep(0.2)  # the watch is open before the first create
            before = await c.agent_counts()
            if profile is not None:
                os.kill(agent_pid(c), signal.SIGUSR1)
            cpu0 = agent_cpu_seconds(c)
            t0 = time.monotonic()
            await asyncio.gather(*(c.admin.create_pod(api_pod(name, c.agent.node)) for name in names))
            created = time.monotonic() - t0
            await wait_ready(c, tracker, set(names), watch)
            if with_lag:
                await asyncio.sleep(2 * LOCAL_POLL)  # the agent's view of the last pods, which may come after the API's
            cpu = agent_cpu_seconds(c) - cpu0
            if profile is not None:
                os.kill(agent_pid(c), signal.SIGUSR2)
            work = counts_delta(before, await c.agent_counts())
        finally:
            watch.cancel()
            poll.cancel()
            await asyncio.gather(watch, poll, return_exceptions=True)
        lat = tracker.latencies()
        lag = api_lag(tracker, local)
        total = max(tracker.ready.values()) - t0
        rows, times = c.requests.since(t0, c.agent.user)
        in_window = [(r, t) for r, t in zip(rows, times, strict=True) if t <= t0 + total]
        window_rows = [r for r, _ in in_window]
        kinds = tally(window_rows, c.agent.user)
        deleted = await delete_all(c, names)
        return {
            "pods": n, "latency": summary(list(lat.values())), "total": total, "creates_took": created, "api_lag_polled": with_lag,
            "api_lag": summary(list(lag.values())), "api_lag_samples": lag,
            "agent_requests": len(window_rows), "agent_requests_by_kind": kinds,
            "status_patches_per_pod": kinds.get("PATCH pods/status", 0) / n,
            "peak_requests_per_s": peak_rate([t for _, t in in_window]),
            "agent_work": work, "pod_syncs_per_pod": work.get("pod worker sync", 0) / n,
            "delete_all": deleted, "samples": lat, "agent_cpu_s_per_pod": cpu / n,
        }


async def floor(n: int) -> dict[str, Any]:
    """The same N pods created straight through the runtime, at once: per pod and last."""
    direct = direct_cri_startup if agent_runtime() == "containerd" else direct_startup
    times, total = await direct(n)
    return {"runtime": agent_runtime(), "latency": summary(times), "total": total}


async def main(counts: list[int], profile: Path | None = None, with_floor: bool = True, with_lag: bool = False) -> None:
    if not counts or min(counts) < 1:
        raise SystemExit("cluster-startup: --pods needs counts of at least 1")
    data = []
    for n in counts:
        base = await floor(n) if with_floor else None
        d = await run(n, profile.with_name(f"{profile.name}-{n}") if profile else None, with_lag)
        d["floor"] = base
        data.append(d)
    nan = float("nan")
    rows = [[d["pods"], d["latency"]["p50"], d["latency"]["p90"], d["latency"]["p99"], d["total"],
             d["floor"]["latency"]["p99"] if d["floor"] else nan, d["floor"]["total"] if d["floor"] else nan,
             d["total"] / d["floor"]["total"] if d["floor"] else nan, d["creates_took"],
             d["api_lag"]["p50"], d["api_lag"]["p99"], d["pod_syncs_per_pod"], d["status_patches_per_pod"], d["agent_requests"],
             d["peak_requests_per_s"], d["delete_all"], d["agent_cpu_s_per_pod"]] for d in data]
    print(f"runtime: {agent_runtime()}")
    print(table(["pods", "p50 s", "p90", "p99", "total", "floor p99", "floor total", "ratio total", "creates",
                 "API lag p50", "p99", "syncs/pod", "status PATCH/pod", "agent reqs", "peak req/s", "delete all s",
                 "agent CPU s/pod"], rows))
    print("results:", write_result("cluster-startup", {"runs": data}))
