"""The pod lifecycle families move as a real pod runs: the agent joined to the test API server, a pod on the real
runtime, /metrics read from the read-only port as a scraper reads it, a request to the 10250 API counted."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.apiserver import ApiServer
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration.agent_env import JoinedAgent, free_port, stop_and_clean

docker = agent_env.docker
api = agent_env.api

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def _scrape(agent: JoinedAgent) -> tuple[Samples, dict[str, str]]:
    status, text = await agent.get_text("/metrics")
    assert status == 200
    samples: Samples = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, types


def _get(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_a_running_pod_moves_the_lifecycle_families(tmp_path: Path, api: ApiServer,
                                                          docker: aiodocker.Docker) -> None:
    port = free_port()
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    agent.extra = {"port": port}
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: _node(admin, agent.node), timeout=60)
        pod: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"sli-{agent.node}", "namespace": "default"},
            "spec": {"nodeName": agent.node, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sleep", "3600"]}]}}
        await admin.create(pod)

        async def sli_observed() -> Samples | None:
            samples, _ = await _scrape(agent)
            return samples if _get(samples, "kubelet_pod_start_sli_duration_seconds_count") == 1 else None

        # the SLI is taken when the watch brings back the pod with its container running
        samples = await agent.wait_for("the pod start SLI", sli_observed, timeout=90)
        total = _get(samples, "kubelet_pod_start_total_duration_seconds_sum")
        sli = _get(samples, "kubelet_pod_start_sli_duration_seconds_sum")
        assert total is not None and sli is not None and 0 < sli <= total < 90
        assert _get(samples, "kubelet_first_network_pod_start_sli_duration_seconds") == sli
        assert (_get(samples, "kubelet_started_pods_total") or 0) >= 1
        assert (_get(samples, "kubelet_started_containers_total", container_type="container") or 0) >= 1
        assert (_get(samples, "kubelet_pod_status_sync_duration_seconds_count") or 0) >= 1
        assert (_get(samples, "kubelet_run_podsandbox_duration_seconds_count", runtime_handler="") or 0) >= 1

        async def gauges() -> Samples | None:
            s, _ = await _scrape(agent)
            ready = (_get(s, "kubelet_running_pods") == 1
                     and _get(s, "kubelet_running_containers", container_state="running") == 1
                     and _get(s, "kubelet_desired_pods", static="") == 1
                     and _get(s, "kubelet_working_pods", lifecycle="sync", config="desired", static="") == 1)
            return s if ready else None

        samples = await agent.wait_for("the relist's and the housekeeping's gauges", gauges, timeout=30)
        assert (_get(samples, "kubelet_pleg_last_seen_seconds") or 0) > 1_600_000_000
        # this node registered itself: its start-up durations are known once it was Ready
        assert (_get(samples, "kubelet_node_startup_registration_duration_seconds") or 0) > 0
        assert (_get(samples, "kubelet_node_startup_post_registration_duration_seconds") or 0) > 0

        # the read-only port counts our scrapes; the 10250 API the request below, refused or not
        scrapes = _get(samples, "kubelet_http_requests_total", method="GET", path="metrics",
                       server_type="readonly", long_running="false")
        assert scrapes is not None and scrapes >= 2
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        async with aiohttp.ClientSession() as s, s.get(f"https://127.0.0.1:{port}/pods", ssl=ctx) as r:
            await r.read()
        samples, types = await _scrape(agent)
        assert _get(samples, "kubelet_http_requests_total", method="GET", path="pods", server_type="readwrite",
                    long_running="false") == 1
        assert types["kubelet_http_requests_total"] == "counter"
        assert types["kubelet_running_containers"] == "gauge"
        assert types["kubelet_pod_start_sli_duration_seconds"] == "histogram"
    finally:
        await stop_and_clean(agent, docker)


async def _node(admin: Any, name: str) -> dict[str, Any] | None:
    try:
        node: dict[str, Any] = await admin.get("nodes", name)
    except Exception:
        return None
    return node
