"""The real agent against the adversarial corpus: every entry refused once, good pods untouched,
/healthz answering quickly throughout, memory back afterwards, nothing left behind."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.adversarial.corpus import Case, corpus, write
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod
from tests.integration.runtime_view import RuntimeView

agent = agent_env.agent
docker = agent_env.docker
runtime_view = views.runtime_view

GOOD = ["good-a", "good-b", "good-c"]


def running(p: dict[str, Any]) -> bool:
    return p["status"].get("phase") == "Running" and all(
        "running" in s["state"] for s in p["status"].get("containerStatuses", []))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def children(pid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


async def poll_healthz(a: AgentProcess, latencies: list[float], stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
        while not stop.is_set():
            started = time.monotonic()
            async with s.get(a.url("/healthz")) as r:
                assert r.status == 200, await r.text()
                await r.read()
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.005)


def missing_lines(log: str, cases: list[Case]) -> list[str]:
    lines = log.splitlines()
    return [c.token for c in cases
            if len(mine := [ln for ln in lines if c.token in ln]) != c.lines or not all(re.search(c.expect, ln) for ln in mine)]


async def test_adversarial_corpus_cannot_hurt_the_agent(agent: AgentProcess, runtime_view: RuntimeView) -> None:
    for name in GOOD:  # "a-..." sorts before the corpus' "adv..." files, so the good files define the pods
        agent.put(f"a-{name}.yaml", simple_pod(name, [{"name": "main", "command": ["sleep", "3600"]}]))
    agent.start()
    assert agent.proc is not None
    pid = agent.proc.pid
    ids = {n: container_id(await agent.wait_pod(n, running, "Running"), "main") for n in GOOD}
    idle: list[float] = []
    idle_stop = asyncio.Event()
    idle_poller = asyncio.create_task(poll_healthz(agent, idle, idle_stop))
    await asyncio.sleep(3)
    idle_stop.set()
    await idle_poller
    idle.sort()
    rss_start, fds_start = rss_kib(pid), len(os.listdir(f"/proc/{pid}/fd"))

    cases = corpus(good_names=GOOD)
    latencies: list[float] = []
    stop = asyncio.Event()
    poller = asyncio.create_task(poll_healthz(agent, latencies, stop))
    started = time.monotonic()
    write(agent.manifests, cases)
    workers: set[int] = set()

    async def all_logged() -> bool:
        workers.update(children(pid))
        return not missing_lines(agent.log(), cases)

    try:
        await agent.wait_for("a log line for every corpus entry", all_logged, timeout=150, interval=0.5)
    finally:
        stop.set()
        await poller
    took = time.monotonic() - started
    missing = missing_lines(agent.log(), cases)
    assert missing == []
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    rss_peak = rss_kib(pid)
    print(f"idle /healthz n={len(idle)} p50={idle[len(idle) // 2] * 1000:.1f}ms p99={idle[int(len(idle) * 0.99)] * 1000:.1f}ms")
    print(f"corpus: {len(cases)} cases in {took:.1f}s; /healthz n={len(latencies)} p50={latencies[len(latencies) // 2] * 1000:.1f}ms "
          f"p99={p99 * 1000:.1f}ms max={latencies[-1] * 1000:.1f}ms; agent RSS start {rss_start} KiB, after corpus {rss_peak} KiB")
    assert p99 < 0.1
    assert workers, "the corpus was parsed in a worker process"

    pods = await agent.pods()
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(f"{n}-{agent.node}" for n in GOOD)
    for n in GOOD:
        p = await agent.pod(n)
        assert p is not None and running(p)
        assert container_id(p, "main") == ids[n] and cstatus(p, "main")["restartCount"] == 0

    for entry in list(agent.manifests.iterdir()):
        if entry.name.startswith("a-good-"):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for _ in range(30):  # the next sync (inotify, or fileCheckFrequency) forgets the entries
        if rss_kib(pid) <= rss_start * 1.1:
            break
        await asyncio.sleep(1)
    rss_end = rss_kib(pid)
    print(f"agent RSS after the corpus was removed: {rss_end} KiB ({(rss_end - rss_start) * 100 / rss_start:+.1f}%)")
    assert rss_end <= rss_start * 1.1
    assert len(os.listdir(f"/proc/{pid}/fd")) <= fds_start + 2  # no descriptor kept from the corpus

    mine = await runtime_view.objects_of_node(agent.node)
    assert len(mine) == 2 * len(GOOD)  # a sandbox and a container per good pod, nothing for the corpus
    agent.stop()
    assert not [w for w in workers if Path(f"/proc/{w}").exists()], "a parser process outlived the agent"
