"""Issue 13 items 4-7 end to end: the real agent, joined to the test API server, runs a pod bound to its
node on the real Docker Engine, reports it Running through the API (and its events), and honours a
graceful DELETE: a SIGTERM-ignoring container is SIGKILLed at the deletion's grace, then the pod is
deleted for good. A static pod has a mirror pod showing its status."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent, stop_and_clean
from tests.integration.runtime_view import RuntimeView

docker = agent_env.docker
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration




api = agent_env.api


async def test_api_pod_runs_reports_running_and_is_deleted_gracefully(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: _exists(admin, "nodes", agent.node), timeout=60)
        # `sh` as PID 1 has no SIGTERM handler: only the SIGKILL at the end of the grace stops it.
        await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stubborn", "namespace": "default"},
                            "spec": {"nodeName": agent.node, "automountServiceAccountToken": False,
                                     "terminationGracePeriodSeconds": 30,
                                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                                                     "imagePullPolicy": "IfNotPresent",
                                                     "command": ["sh", "-c", "while true; do sleep 1; done"]}]}})

        async def running() -> dict[str, Any] | None:
            pod = await admin.get("pods", "stubborn", "default")
            status = pod.get("status") or {}
            ready = {c["type"]: c["status"] for c in status.get("conditions", [])}
            return pod if status.get("phase") == "Running" and ready.get("Ready") == "True" else None

        pod = await agent.wait_for("the pod Running and Ready in the API", running, timeout=60)
        cid = pod["status"]["containerStatuses"][0]["containerID"]
        assert await runtime_view.running(cid)
        # the scheduler's PodScheduled stays, the kubelet's conditions follow
        types = [c["type"] for c in pod["status"]["conditions"]]
        assert "PodScheduled" in types and "Initialized" in types

        async def started_event() -> bool:
            events = (await admin.list("events", "default"))["items"]
            return any(e["reason"] == "Started" and e["involvedObject"]["name"] == "stubborn"
                       and e["involvedObject"].get("fieldPath") == "spec.containers{main}"
                       and e["source"] == {"component": "kubelet", "host": agent.node} for e in events)

        await agent.wait_for("the Started event in the API", started_event, timeout=15)

        # a steady pod is not patched again: our own writes coming back through the watch change nothing
        def status_patches() -> int:
            return sum(1 for u, m, p in api.handler.requests
                       if u == f"system:node:{agent.node}" and m == "PATCH" and p.endswith("/pods/stubborn/status"))

        before = status_patches()
        await asyncio.sleep(3)
        assert status_patches() - before <= 1
        started = time.monotonic()
        await admin.delete("pods", "stubborn", "default", grace=4)

        async def gone() -> bool:
            return not await _exists(admin, "pods", "stubborn", "default")

        await agent.wait_for("the pod deleted for good", gone, timeout=30)
        took = time.monotonic() - started
        assert 3.5 <= took <= 9, f"graceful delete with grace 4 s took {took:.1f}s"

        async def container_removed() -> bool:
            return not await runtime_view.exists(cid)

        await agent.wait_for("the container removed", container_removed, timeout=15)
        finals = [(m, p) for u, m, p in api.handler.requests
                  if u == f"system:node:{agent.node}" and m == "DELETE" and p.endswith("/pods/stubborn")]
        assert len(finals) == 1
    finally:
        await stop_and_clean(agent, docker)


async def test_a_never_started_pod_is_deleted(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    """Issue 27 item 2: `imagePullPolicy: Never` and no such image (ErrImageNeverPull), no container ever
    created; a graceful DELETE ends in upstream SyncTerminatedPod → TerminatePod (the container terminated
    137 ContainerStatusUnknown, the phase Failed) and the final DELETE (canBeDeleted), within seconds."""
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: _exists(admin, "nodes", agent.node), timeout=60)
        await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "never", "namespace": "default"},
                            "spec": {"nodeName": agent.node, "automountServiceAccountToken": False,
                                     "containers": [{"name": "main", "image": "minikubelet.invalid/never:1",
                                                     "imagePullPolicy": "Never"}]}})

        async def never_pulled() -> bool:
            statuses = (await admin.get("pods", "never", "default")).get("status", {}).get("containerStatuses")
            return bool(statuses) and statuses[0]["state"].get("waiting", {}).get("reason") == "ErrImageNeverPull"

        await agent.wait_for("ErrImageNeverPull in the API", never_pulled, timeout=30)
        since = api.store.rv
        started = time.monotonic()
        await admin.delete("pods", "never", "default", grace=30)

        async def gone() -> bool:
            return not await _exists(admin, "pods", "never", "default")

        await agent.wait_for("the pod deleted for good", gone, timeout=15)
        assert time.monotonic() - started < 8
        writes = [c.obj for c in api.store.changes_since(since) if c.resource == "pods"]
        final = writes[-1]  # the DELETE's object: the status of the node's last PATCH
        assert final["metadata"]["deletionGracePeriodSeconds"] == 0
        assert final["status"]["phase"] == "Failed"
        terminated = final["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"], terminated["message"]) == (
            137, "ContainerStatusUnknown", "The container could not be located when the pod was terminated")
        node_writes = [(m, p) for u, m, p in api.handler.requests if u == f"system:node:{agent.node}"
                       and p.split("?")[0].endswith(("/pods/never", "/pods/never/status")) and m != "GET"]
        assert node_writes[-2:] == [("PATCH", "/api/v1/namespaces/default/pods/never/status"),
                                    ("DELETE", "/api/v1/namespaces/default/pods/never")]
    finally:
        await stop_and_clean(agent, docker)


async def _exists(admin: Any, plural: str, name: str, namespace: str = "") -> bool:
    try:
        await admin.get(plural, name, namespace)
    except ApiStatusError:
        return False
    return True


async def test_static_pod_has_a_running_mirror_pod(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.put("web.yaml", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                           "spec": {"terminationGracePeriodSeconds": 1,  # `sleep` as PID 1 ignores SIGTERM
                                    "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                                                    "imagePullPolicy": "IfNotPresent",
                                                    "command": ["sh", "-c", "exec sleep 100000"]}]}})
    agent.start()
    name = f"web-{agent.node}"
    try:
        async def mirror_running() -> dict[str, Any] | None:
            try:
                pod = await admin.get("pods", name, "default")
            except ApiStatusError:
                return None
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None

        mirror = await agent.wait_for("the mirror pod Running", mirror_running, timeout=60)
        md = mirror["metadata"]
        assert md["annotations"]["kubernetes.io/config.mirror"] == md["annotations"]["kubernetes.io/config.hash"]
        assert md["annotations"]["kubernetes.io/config.source"] == "file"
        node = await admin.get("nodes", agent.node)
        assert md["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        # the mirror pod is not run a second time
        local = await agent.pods()
        assert [p["metadata"]["name"] for p in local] == [name]
        # the manifest removed: the static pod stops, its mirror goes
        (agent.manifests / "web.yaml").unlink()

        async def mirror_gone() -> bool:
            return not await _exists(admin, "pods", name, "default")

        await agent.wait_for("the mirror pod deleted", mirror_gone, timeout=60)
    finally:
        await stop_and_clean(agent, docker)
