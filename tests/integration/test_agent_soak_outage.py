"""Issue 17's soak and its API server outage, in one run of real seconds: for MKL_TEST_API_OUTAGE_SECONDS
(default 300) the test API server is down while static pods are churned (waves that run, crash and exit, then
are deleted: tests/integration/soak.py) and two API pods created before the outage run on.

The outage (item 4): no API pod is killed or restarted for it (`steady` keeps its container, `restartCount` 0);
what changed meanwhile (`bumpy`'s container killed twice by the test) is sent once the server is back, the latest
state only (the API never sees `restartCount: 1`); the lease is renewed (its retry backoff is capped at 7 s) and
the Node is Ready again at the next status sync (within one nodeStatusUpdateFrequency, 10 s + 4 % jitter, as
upstream). The node lifecycle controller that would have marked the Node Unknown is played by the test.

The soak ("keep a 5-minute version in the suite"): nothing the static pods had is left behind (containers, pod
cgroups, mounts, pod dirs, log dirs and links), no file descriptor leaked (the floor of the open fds does not rise),
RSS growth over the second half < 64 KiB per pod (a joined agent's bounded Event caches still fill in 5 minutes)
(a leak of 200 kB per pod, put in on purpose, failed the former soak-only test with +11 % in 60 s). The hour-long
run is `bench/run soak --minutes 60` (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent
from tests.integration.recovery import api_pod, api_pod_running, node_ready, ready_condition
from tests.integration.runtime_view import RuntimeView
from tests.integration.soak import Leftovers, soak

docker = agent_env.docker
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration

OUTAGE = float(os.environ.get("MKL_TEST_API_OUTAGE_SECONDS", "300"))
# the churn stops this much before the outage ends: its last wave and the leftover count fit in it
CHURN_MARGIN = 20.0


def cid_of(pod: dict[str, Any]) -> str:
    return str(pod["status"]["containerStatuses"][0]["containerID"]).removeprefix("docker://")


async def local_restarts(a: JoinedAgent, name: str, restarts: int) -> bool:
    """The agent's own view (/pods on the read-only port) while the API server is away."""
    for p in await a.pods():
        if p["metadata"]["name"] == name:
            cs = (p["status"].get("containerStatuses") or [{}])[0]
            return cs.get("restartCount") == restarts and "running" in cs.get("state", {})
    return False


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[ApiServer]:
    """A history long enough for the check of every status `bumpy` had: the Events queued during the outage (~17
    a wave) reach the server right after it and would compact a 500-change history past the outage."""
    async with agent_env.running_api(tmp_path / "api", history=5000, max_watch_seconds=10) as server:
        yield server


async def test_soak_through_api_outage(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker,
                                      runtime_view: RuntimeView) -> None:
    a = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)  # upstream's default intervals
    a.extra = {"fileCheckFrequency": "20s"}  # the manifest dir is watched; the poll is only a safety net
    admin = api.admin()
    a.start()
    try:
        await a.wait_for("the Node Ready", lambda: node_ready(admin, a.node, "True"), timeout=60)
        await admin.create(api_pod("steady", a.node))
        await admin.create(api_pod("bumpy", a.node))
        steady = await a.wait_for("steady Running", lambda: api_pod_running(admin, "steady", 0), timeout=60)
        bumpy = await a.wait_for("bumpy Running", lambda: api_pod_running(admin, "bumpy", 0), timeout=60)
        keep = {"steady": steady["metadata"]["uid"], "bumpy": bumpy["metadata"]["uid"]}

        stopped_at = time.monotonic()
        await api.stop()
        # the node lifecycle controller's part, after its grace: the Node is Unknown in the store
        node = api.store.get("nodes", "", a.node)
        assert node is not None
        for c in node["status"]["conditions"]:
            c.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.")
        api.store.update("nodes", node)
        rv_at_outage = api.store.rv

        churn = asyncio.create_task(soak(a, docker, OUTAGE - CHURN_MARGIN, warmup=0.5, keep=keep))
        # two restarts of bumpy's container while the API is away: only the second may reach the API
        for n in (1, 2):
            local = {p["metadata"]["name"]: p for p in await a.pods()}
            await runtime_view.kill(cid_of(local["bumpy"]))
            await a.wait_for(f"bumpy restarted locally ({n})", functools.partial(local_restarts, a, "bumpy", n),
                             timeout=60)
        res = await churn
        await asyncio.sleep(max(0.0, OUTAGE - (time.monotonic() - stopped_at)))
        assert a.proc is not None and a.proc.poll() is None

        back_at = time.monotonic()
        i0 = len(api.handler.requests)
        await api.start()
        node = await a.wait_for("Ready again", lambda: node_ready(admin, a.node, "True"), timeout=30, interval=0.2)
        assert ready_condition(node)["reason"] == "KubeletReady"
        await a.wait_for("bumpy's restarts in the API", lambda: api_pod_running(admin, "bumpy", 2), timeout=30)

        async def first(method: str, path: str) -> float:
            """Seconds from the restart to the agent's first such request (the server's own log), waiting for
            it: the pod status may well reach the API before the lease's backoff (up to 7 s) runs out."""
            def seen() -> float | None:
                return next((t for (user, m, p), t in zip(api.handler.requests[i0:],
                                                          api.handler.request_times[i0:], strict=True)
                             if user == f"system:node:{a.node}" and m == method and p.startswith(path)), None)

            async def check() -> float | None:
                return seen()

            at: float = await a.wait_for(f"{method} {path}", check, timeout=30, interval=0.2)
            return at - back_at

        ready_after = await first("PATCH", f"/api/v1/nodes/{a.node}/status")
        lease_after = await first("PUT", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{a.node}")
        last = res.waves[-1]
        await asyncio.sleep(5)  # the agent's queued Events go out (to count them)
        events = sum(1 for (user, m, p) in api.handler.requests[i0:]
                     if user == f"system:node:{a.node}" and m == "POST" and p.endswith("/events"))
        print(f"outage {back_at - stopped_at:.0f} s; node status {ready_after:.1f} s and lease {lease_after:.1f} s "
              f"after; {events} Events posted after it; soak: {last.pods} pods in {len(res.waves)} waves, {res.seconds:.0f} s; RSS "
              f"{res.warm_rss / 2**20:.1f} -> {res.end_rss / 2**20:.1f} MiB ({res.growth_pct():+.2f} %, "
              f"{res.growth_per_pod() / 1024:.1f} KiB per pod after the warm-up); "
              f"fds per wave {[w.fds for w in res.waves]}; left {res.left}")
        # the next status sync comes within one nodeStatusUpdateFrequency (10 s, +4 % jitter, as upstream's
        # JitterUntil); the lease's retry backoff is capped at 7 s
        assert ready_after <= 10.4 + 1 and lease_after <= 7 + 1

        # latest wins: the API never saw restartCount 1
        seen = [c.obj["status"]["containerStatuses"][0].get("restartCount") for c in api.store.changes_since(rv_at_outage)
                if c.resource == "pods" and c.obj["metadata"]["name"] == "bumpy"
                and c.obj.get("status", {}).get("containerStatuses")]
        assert seen and 1 not in seen and seen[-1] == 2, seen
        # nothing was killed or restarted for the outage
        steady_now = await admin.get("pods", "steady", "default")
        assert cid_of(steady_now) == cid_of(steady) and steady_now["status"]["containerStatuses"][0]["restartCount"] == 0
        assert await runtime_view.running(cid_of(steady))
        assert cid_of(bumpy) != cid_of(await admin.get("pods", "bumpy", "default"))

        # the soak under it: the static pods' churn left nothing and leaked nothing
        assert res.left == Leftovers(0, 0, 0, 0, 0, 0)
        assert len(res.waves) >= res.seconds / 30  # a wave takes ~6-9 s here
        # open fds swing by a dozen between waves (the engine's connections, the agent's connection attempts to
        # the absent API server): a leak shows as the floor rising, so the last quarter's lowest against the first
        # half's lowest
        half = max(1, len(res.waves) // 2)
        early = min(w.fds for w in res.waves[:half])
        late = min(w.fds for w in res.waves[-max(1, half // 2):])
        assert late <= early + 5, [w.fds for w in res.waves]
        # a joined agent's Event correlator (three LRU caches of 4 096 keys, client-go's) and its queue for the API
        # (1 000 Events, filling through the outage) grow ~13 KiB per pod until they are full, hundreds of pods
        # later: the hour's < 5 % is not reachable in 5 minutes of a joined agent, so the bound is per pod (measured
        # 17-33 KiB; a leak of 200 kB per pod, as the one put in on purpose before, is far above)
        assert res.growth_per_pod() < 64 * 1024, res.growth_per_pod()
        assert a.proc is not None and a.proc.poll() is None
    finally:
        await agent_env.stop_and_clean(a, docker)
