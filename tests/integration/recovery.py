"""Pieces the recovery tests share: a pod that stops at once on SIGTERM, API pods, Node and pod readiness."""

from __future__ import annotations

from typing import Any

from tests.apiserver.client import ApiStatusError, Client
from tests.integration.agent_env import BUSYBOX

# exits at once on SIGTERM, so an engine stopping its containers does not wait out the 10 s stop timeout
TRAPPING = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]


def api_pod(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 2,
                     "containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
                                     "command": TRAPPING}]}}


def ready_condition(node: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in node["status"].get("conditions", []) if c["type"] == "Ready"), {})


async def node_ready(admin: Client, name: str, status: str) -> dict[str, Any] | None:
    try:
        node = await admin.get("nodes", name)
    except ApiStatusError:
        return None
    return node if ready_condition(node).get("status") == status else None


async def api_pod_running(admin: Client, name: str, restarts: int) -> dict[str, Any] | None:
    pod = await admin.get("pods", name, "default")
    st = pod.get("status") or {}
    cs = (st.get("containerStatuses") or [{}])[0]
    ok = st.get("phase") == "Running" and "running" in cs.get("state", {}) and cs.get("restartCount") == restarts
    return pod if ok else None


