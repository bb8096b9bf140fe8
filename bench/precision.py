"""precision: probe period jitter, SIGKILL time versus the grace period, restart delays versus the backoff."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
import time
from typing import Any

import aiodocker
from aiohttp import web

from bench.common import docker_host, free_port_in_netns, running_agent, sleeper_pod, summary, table, write_result
from tests.integration.agent_env import BUSYBOX, container_id


async def probe_jitter(agent: Any, samples: int) -> dict[str, Any]:
    arrivals: list[float] = []
    enough = asyncio.Event()

    async def health(_r: web.Request) -> web.Response:
        arrivals.append(time.monotonic())
        if len(arrivals) > samples:
            enough.set()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", health)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port_in_netns()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    pod = sleeper_pod("jitter")
    pod["spec"]["hostNetwork"] = True
    pod["spec"]["containers"][0]["readinessProbe"] = {
        "httpGet": {"host": "127.0.0.1", "port": port, "path": "/"}, "periodSeconds": 1}
    agent.put("jitter.yaml", pod)
    await asyncio.wait_for(enough.wait(), samples * 3 + 60)
    await runner.cleanup()
    (agent.manifests / "jitter.yaml").unlink()
    gaps = [b - a for a, b in itertools.pairwise(arrivals)][:samples]
    dev = [abs(g - 1.0) for g in gaps]
    return {"period": 1.0, "gaps": summary(gaps), "abs_deviation": summary(dev),
            "stdev": statistics.pstdev(gaps), "drift_s": (arrivals[samples] - arrivals[0]) - samples}


async def _events(docker: aiodocker.Docker, cid: str | None, actions: set[str], label: str = "") -> Any:
    """Yield (action, time) of matching container events; filtering here, not in the shared stream."""
    sub = docker.events.subscribe()  # type: ignore[no-untyped-call]
    while True:
        ev = await asyncio.wait_for(sub.get(), 400)
        if ev is None or ev.get("Type") != "container" or ev.get("Action") not in actions:
            continue
        if cid is not None and ev["Actor"]["ID"] != cid:
            continue
        if label and ev["Actor"]["Attributes"].get("io.kubernetes.container.name") != label:
            continue
        yield ev["Action"], int(ev["timeNano"]) / 1e9


async def kill_timing(agent: Any, docker: aiodocker.Docker, grace: int, runs: int) -> dict[str, Any]:
    out = []
    for i in range(runs):
        pod = sleeper_pod(f"grace{i}", terminationGracePeriodSeconds=grace)
        pod["spec"]["containers"][0]["command"] = ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"]
        agent.put(f"grace{i}.yaml", pod)
        p = await agent.wait_pod(f"grace{i}", lambda p: p["status"].get("phase") == "Running", "Running")
        cid = container_id(p, "main")
        events = _events(docker, cid, {"kill", "die"})
        waiter = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.2)
        (agent.manifests / f"grace{i}.yaml").unlink()
        first_kill = None
        while True:
            action, t = await waiter
            if action == "kill" and first_kill is None:
                first_kill = t
            if action == "die":
                assert first_kill is not None
                out.append(t - first_kill)
                break
            waiter = asyncio.ensure_future(events.__anext__())
        await events.aclose()
        await agent.wait_gone(f"grace{i}")
    return {"grace": grace, "stop_signal_to_exit": summary(out)}


async def restart_delays(agent: Any, docker: aiodocker.Docker, restarts: int) -> dict[str, Any]:
    events = _events(docker, None, {"start", "die"}, label="crash")
    waiter = asyncio.ensure_future(events.__anext__())
    await asyncio.sleep(0.2)
    agent.put("crash.yaml", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crash"}, "spec": {
        "containers": [{"name": "crash", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", "exit 1"]}]}})
    starts: list[float] = []
    dies: list[float] = []
    while len(starts) < restarts + 1:
        action, t = await waiter
        (starts if action == "start" else dies).append(t)
        waiter = asyncio.ensure_future(events.__anext__())
    waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiter
    await events.aclose()
    (agent.manifests / "crash.yaml").unlink()
    expected = [0.0] + [min(10.0 * 2**i, 300.0) for i in range(restarts - 1)]
    gaps = [starts[i + 1] - dies[i] for i in range(restarts)]
    return {"expected": expected, "measured": gaps, "error": [g - e for g, e in zip(gaps, expected, strict=True)]}


async def main(samples: int, grace: int, kills: int, restarts: int) -> None:
    docker = aiodocker.Docker(url=docker_host())
    try:
        async with running_agent() as agent:
            jitter = await probe_jitter(agent, samples)
            kills_r = await kill_timing(agent, docker, grace, kills)
            restart_r = await restart_delays(agent, docker, restarts) if restarts else None
    finally:
        await docker.close()
    g, d = jitter["gaps"], jitter["abs_deviation"]
    print("probe period 1 s:")
    print(table(["samples", "gap p50", "gap p99", "|dev| p50", "|dev| p99", "stdev", "drift over run"],
                [[g["n"], g["p50"], g["p99"], d["p50"], d["p99"], jitter["stdev"], jitter["drift_s"]]]))
    k = kills_r["stop_signal_to_exit"]
    print(f"\nSIGTERM-ignoring container, grace {grace} s: stop signal -> exit")
    print(table(["runs", "p50 s", "max s"], [[k["n"], k["p50"], k["max"]]]))
    if restart_r:
        print("\nrestart delays (container exits 1 at once):")
        print(table(["restart", "expected s", "measured s", "error s"],
                    [[i + 1, e, m, m - e] for i, (e, m) in enumerate(zip(restart_r["expected"], restart_r["measured"],
                                                                         strict=True))]))
    print("results:", write_result("precision", {"probe_jitter": jitter, "kill": kills_r, "restarts": restart_r}))
