"""Issue 17 item 4, the API server: each kind of trouble a real kube-apiserver gives a client. (The 5-minute
outage runs with the soak: tests/integration/test_agent_soak_outage.py.)

Faults (tests/apiserver Faults and WatchStreams): 429 with Retry-After is waited out, 500s are retried, slow
answers are waited for, a dropped watch is resumed from its resourceVersion without a LIST, and a watch whose
resourceVersion was compacted away gets 410 Gone and lists again.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent
from tests.integration.recovery import api_pod, api_pod_running, node_ready
from tests.integration.runtime_view import RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view
api = agent_env.api

pytestmark = pytest.mark.integration



def cid_of(pod: dict[str, Any]) -> str:
    return str(pod["status"]["containerStatuses"][0]["containerID"])


def _since(api: ApiServer, i0: int, method: str, pattern: str) -> list[tuple[float, str]]:
    reqs = api.handler.requests[i0:]
    times = api.handler.request_times[i0:]
    return [(t, p) for (_, m, p), t in zip(reqs, times, strict=True) if m == method and pattern in p]


async def test_api_faults_429_500_slow_dropped_and_gone_watches(tmp_path: Path, api: ApiServer,
                                                                docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    a = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    a.extra = {"nodeStatusUpdateFrequency": "2s"}
    admin = api.admin()
    a.start()
    try:
        await a.wait_for("the Node Ready", lambda: node_ready(admin, a.node, "True"), timeout=60)
        await admin.create(api_pod("p1", a.node))
        p1 = await a.wait_for("p1 Running", lambda: api_pod_running(admin, "p1", 0), timeout=60)
        status_path = "/namespaces/default/pods/p1/status"

        # 429 with Retry-After: 3 twice, then through: the retries wait out what the server asked
        i0 = len(api.handler.requests)
        rule = api.faults.fail(429, "PATCH", status_path, times=2, retry_after=3)
        await runtime_view.kill(cid_of(p1))
        p1 = await a.wait_for("p1 restartCount 1 through two 429s", lambda: api_pod_running(admin, "p1", 1),
                              timeout=60)
        tries = [t for t, _ in _since(api, i0, "PATCH", status_path)]
        assert rule.hits == 2 and len(tries) >= 3, tries
        assert all(later - first >= 2.9 for first, later in itertools.pairwise(tries[:3])), tries

        # 500 three times: retried with backoff until it passes
        rule = api.faults.fail(500, "PATCH", status_path, times=3)
        await runtime_view.kill(cid_of(p1))
        p1 = await a.wait_for("p1 restartCount 2 through three 500s", lambda: api_pod_running(admin, "p1", 2),
                              timeout=60)
        assert rule.hits == 3

        # every answer 1.5 s late: still served, the lease still renewed
        api.faults.delay = 1.5
        i0 = len(api.handler.requests)
        await runtime_view.kill(cid_of(p1))
        p1 = await a.wait_for("p1 restartCount 3 with slow answers", lambda: api_pod_running(admin, "p1", 3),
                              timeout=60)
        await a.wait_for("a lease renewal while slow",
                         lambda: _async_true(bool(_since(api, i0, "PUT", f"/leases/{a.node}"))), timeout=30)
        api.faults.delay = 0.0

        # a dropped watch: resumed from its resourceVersion, no LIST
        # (the harness ends watches after 10 s: wait for one to be open, then cut it)
        def pods_watch_open() -> bool:
            return any(r.path == "/api/v1/pods" for w, r in api.watches.requests.items() if w in api.watches.open)

        await a.wait_for("an open pods watch", lambda: _async_true(pods_watch_open()), timeout=30, interval=0.05)
        i0 = len(api.handler.requests)
        assert api.watches.drop() >= 1
        await admin.create(api_pod("p2", a.node))
        await a.wait_for("p2 Running after the drop", lambda: api_pod_running(admin, "p2", 0), timeout=60)
        pod_requests = [p for _, p in _since(api, i0, "GET", "/api/v1/pods?")]
        assert any("watch=true" in p and "resourceVersion=" in p and "resourceVersion=&" not in p
                   for p in pod_requests), pod_requests
        assert not [p for p in pod_requests if "watch=true" not in p], pod_requests

        # 410 Gone: while the pod watch is refused, p3 is created and the history compacted past the agent's
        # resourceVersion; the next watch gets 410 and the agent lists again, finding p3
        block = api.faults.fail(503, "GET", r"/api/v1/pods\?.*watch=true")
        api.watches.drop()
        await admin.create(api_pod("p3", a.node))
        api.store.compact()
        await a.wait_for("a refused re-watch", lambda: _async_true(block.hits >= 1), timeout=30)
        i0 = len(api.handler.requests)
        api.faults.rules.remove(block)
        await a.wait_for("p3 Running after the relist", lambda: api_pod_running(admin, "p3", 0), timeout=90)
        pod_requests = [p for _, p in _since(api, i0, "GET", "/api/v1/pods?")]
        assert any("watch=true" not in p for p in pod_requests), pod_requests  # the LIST after 410
        # nothing was restarted by any of it but the kills above
        assert (await admin.get("pods", "p2", "default"))["status"]["containerStatuses"][0]["restartCount"] == 0
        assert a.proc is not None and a.proc.poll() is None
    finally:
        await agent_env.stop_and_clean(a, docker)


async def _async_true(value: bool) -> bool:
    return value
