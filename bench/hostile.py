"""hostile: /healthz latency (polled every 5 ms) while the agent is idle with three good pods, then while it
processes the adversarial manifest corpus (tests/adversarial/corpus.py, the procedure of
tests/integration/test_agent_adversarial.py: the corpus written at once, done when every entry has its log
line); the load average beside it."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import aiohttp

from bench.common import running_agent, summary, table, write_result
from tests.adversarial.corpus import corpus, write
from tests.integration.agent_env import AgentProcess, simple_pod
from tests.integration.test_agent_adversarial import GOOD, missing_lines, running

POLL = 0.005
TARGET_P99 = 0.1
TIMEOUT = 150.0


async def poll_healthz(agent: AgentProcess, latencies: list[float], failures: list[str], stop: asyncio.Event) -> None:
    """Times every /healthz answer; a refusal or a non-200 is kept as a failure, not a latency."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
        while not stop.is_set():
            started = time.monotonic()
            try:
                async with s.get(agent.url("/healthz")) as r:
                    await r.read()
                took = time.monotonic() - started
                if r.status == 200:
                    latencies.append(took)
                else:
                    failures.append(str(r.status))
            except (aiohttp.ClientError, TimeoutError) as e:
                failures.append(type(e).__name__)
            await asyncio.sleep(POLL)


def phase_row(name: str, latencies: list[float], failures: list[str], load: tuple[float, float, float],
              seconds: float) -> dict[str, Any]:
    return {"phase": name, "seconds": seconds, "healthz": summary(latencies), "failures": len(failures),
            "loadavg_end": list(load)}


async def measure(idle_seconds: float) -> dict[str, Any]:
    load_start = os.getloadavg()
    async with running_agent() as agent:
        for name in GOOD:
            agent.put(f"a-{name}.yaml", simple_pod(name, [{"name": "main", "command": ["sleep", "3600"]}]))
        for name in GOOD:
            await agent.wait_pod(name, running, "Running", 120)
        idle: list[float] = []
        idle_failures: list[str] = []
        stop = asyncio.Event()
        poller = asyncio.create_task(poll_healthz(agent, idle, idle_failures, stop))
        await asyncio.sleep(idle_seconds)
        stop.set()
        await poller
        idle_row = phase_row("idle, 3 good pods", idle, idle_failures, os.getloadavg(), idle_seconds)

        cases = corpus(good_names=GOOD)
        busy: list[float] = []
        busy_failures: list[str] = []
        stop = asyncio.Event()
        poller = asyncio.create_task(poll_healthz(agent, busy, busy_failures, stop))
        started = time.monotonic()
        write(agent.manifests, cases)

        async def all_logged() -> bool:
            return not missing_lines(agent.log(), cases)

        try:
            await agent.wait_for("a log line for every corpus entry", all_logged, timeout=TIMEOUT, interval=0.5)
        finally:
            stop.set()
            await poller
        took = time.monotonic() - started
        busy_row = phase_row(f"corpus, {len(cases)} entries", busy, busy_failures, os.getloadavg(), took)
        good_running = [n for n in GOOD if (p := await agent.pod(n)) is not None and running(p)]
    return {"loadavg_start": list(load_start), "phases": [idle_row, busy_row], "cases": len(cases),
            "good_pods_running_after": len(good_running), "target_p99_s": TARGET_P99}


def rows(result: dict[str, Any]) -> list[list[Any]]:
    out = []
    for ph in result["phases"]:
        h = ph["healthz"]
        out.append([ph["phase"], ph["seconds"], h["n"], h["p50"] * 1000, h["p99"] * 1000, h["max"] * 1000,
                    ph["failures"], " ".join(f"{x:.2f}" for x in ph["loadavg_end"])])
    return out


async def main(idle_seconds: float) -> None:
    result = await measure(idle_seconds)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in result['loadavg_start'])}")
    print(table(["phase", "seconds", "/healthz n", "p50 ms", "p99 ms", "max ms", "failures", "load avg at end"],
                rows(result)))
    busy = result["phases"][1]["healthz"]["p99"]
    print(f"/healthz p99 under the corpus {busy * 1000:.1f} ms, target <= {TARGET_P99 * 1000:.0f} ms: "
          f"{'met' if busy <= TARGET_P99 else 'missed'}; good pods still running: "
          f"{result['good_pods_running_after']}/{len(GOOD)}")
    print("results:", write_result("hostile", result))
