"""Issue 27 items 1-2 end to end, on the real agent joined to the test API server and the real runtime, with
containers that trap SIGTERM and exit 0. As upstream's SyncTerminatingPod and mergePodStatus: an API eviction ends
the pod `Succeeded` (no reason) with the Eviction API's `DisruptionTarget` as the API server wrote it, never
rewritten by the kubelet; the kubelet's own eviction (a local storage limit) ends it `Succeeded` too, its
`Failed`/`Evicted` never reaching the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration.agent_env import JoinedAgent, stop_and_clean

docker = agent_env.docker
api = agent_env.api

pytestmark = pytest.mark.integration

GRACEFUL = "trap 'exit 0' TERM; while true; do sleep 1; done"


async def test_api_eviction_of_a_pod_exiting_0_on_sigterm_ends_succeeded(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    agent.extra = {"volumeStatsAggPeriod": "5s"}  # the emptyDir's usage measured within seconds, not 1-2 min
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: _get(admin, "nodes", agent.node), timeout=60)
        # the kubelet's own eviction (an emptyDir over its sizeLimit): Failed/Evicted is only the status before the
        # kill, held back from the API while the container runs; the pod ends Succeeded without the reason
        filling_since = api.store.rv
        await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "filling", "namespace": "default"},
                            "spec": {"nodeName": agent.node, "automountServiceAccountToken": False,
                                     "restartPolicy": "Always", "terminationGracePeriodSeconds": 10,
                                     "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}],
                                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                                                     "imagePullPolicy": "IfNotPresent",
                                                     "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                                                     "command": ["sh", "-c", "dd if=/dev/zero of=/scratch/f bs=1M "
                                                                 f"count=2; {GRACEFUL}"]}]}})
        await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "graceful", "namespace": "default"},
                            "spec": {"nodeName": agent.node, "automountServiceAccountToken": False,
                                     "restartPolicy": "Always", "terminationGracePeriodSeconds": 10,
                                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                                                     "imagePullPolicy": "IfNotPresent",
                                                     "command": ["sh", "-c", GRACEFUL]}]}})

        async def running() -> Any:
            pod = await _get(admin, "pods", "graceful", "default")
            return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None

        await agent.wait_for("the pod Running in the API", running, timeout=60)
        since = api.store.rv
        await admin.evict("graceful")

        async def gone() -> bool:
            return await _get(admin, "pods", "graceful", "default") is None

        await agent.wait_for("the evicted pod deleted for good", gone, timeout=30)
        versions = [c.obj for c in api.store.changes_since(since)
                    if c.resource == "pods" and c.obj["metadata"]["name"] == "graceful"]
        api_condition = next(c for c in versions[0]["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert api_condition["reason"] == "EvictionByEvictionAPI"
        for pod in versions:
            status = pod["status"]
            disruption = [c for c in status["conditions"] if c["type"] == "DisruptionTarget"]
            assert disruption == [api_condition], status  # never rewritten by the kubelet, before or after
        final = versions[-1]["status"]
        assert final["phase"] == "Succeeded" and "reason" not in final and "message" not in final, final
        assert final["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
        phases = [p["status"].get("phase") for p in versions]
        assert "Failed" not in phases, phases

        async def succeeded() -> Any:
            pod = await _get(admin, "pods", "filling", "default")
            return pod if pod and (pod.get("status") or {}).get("phase") == "Succeeded" else None

        final = (await agent.wait_for("the evicted pod Succeeded", succeeded, timeout=40))["status"]
        assert "reason" not in final and final["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
        statuses = [c.obj["status"] for c in api.store.changes_since(filling_since)
                    if c.resource == "pods" and c.obj["metadata"]["name"] == "filling"]
        assert all(s.get("phase") != "Failed" and s.get("reason") != "Evicted" for s in statuses), statuses
        events = (await admin.list("events", "default"))["items"]
        assert any(e["reason"] == "Evicted" and e["involvedObject"]["name"] == "filling" for e in events)
    finally:
        await stop_and_clean(agent, docker)


async def _get(admin: Any, plural: str, name: str, namespace: str = "") -> Any:
    try:
        return await admin.get(plural, name, namespace)
    except ApiStatusError:
        return None
