"""Upstream status_manager TerminatePod and canBeDeleted (issue 27 item 2): a deleted pod whose containers never
ran, or are gone, still gets a terminal final status and its final DELETE. The rules on plain statuses, then
whole lifecycles on the fake runtime against the test API server."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cri.errors import RuntimeError_
from cri.fake import FakeRuntime
from minikubelet.base.clock import FakeClock
from minikubelet.status.api_sync import PodStatusSync
from minikubelet.status.manager import StatusManager
from minikubelet.status.terminate import terminated_pod_status
from minikubelet.worker.lifecycle import PodLifecycle
from tests.apiserver import ApiServer
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.unit.fake_node import IMAGE, FakeNode
from tests.unit.kubeapi.helpers import client_for

UNKNOWN = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                          "message": "The container could not be located when the pod was terminated",
                          "startedAt": None, "finishedAt": None}}
WAITING = {"waiting": {"reason": "ContainerCreating"}}
DONE = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": None, "finishedAt": None}}
RUNNING = {"running": {"startedAt": "2026-11-22T06:25:15Z"}}


def _pod(containers: list[str], inits: list[str] | None = None, source: str = "api",
         api_status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": n, "image": IMAGE} for n in containers]}
    if inits:
        spec["initContainers"] = [{"name": n, "image": IMAGE} for n in inits]
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u1",
                         "annotations": {"kubernetes.io/config.source": source}},
            "spec": spec, "status": api_status or {}}


def _cs(name: str, state: dict[str, Any], last: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "state": state, "lastState": last or {}, "ready": False, "restartCount": 0}


def test_terminate_pod_fails_waiting_containers_and_the_phase() -> None:
    """TerminatePod: a pod without init containers has initialized; a waiting container (a crash-looping one
    too, its lastState kept) is terminated 137 ContainerStatusUnknown; a terminated one stays; Pending → Failed."""
    status = {"phase": "Pending", "containerStatuses": [
        _cs("a", WAITING), _cs("b", DONE), _cs("c", {"waiting": {"reason": "CrashLoopBackOff"}}, DONE)]}
    out = terminated_pod_status(_pod(["a", "b", "c"]), status)
    assert out["phase"] == "Failed"
    assert [cs["state"] for cs in out["containerStatuses"]] == [UNKNOWN, DONE, UNKNOWN]
    assert out["containerStatuses"][2]["lastState"] == DONE
    assert status["phase"] == "Pending"  # the input is not changed
    assert terminated_pod_status(_pod(["b"]), {"phase": "Succeeded"})["phase"] == "Succeeded"
    # upstream TODO(#116484): a static pod keeps its phase
    assert terminated_pod_status(_pod(["a"], source="file"), status)["phase"] == "Pending"


def test_terminate_pod_init_containers_follow_has_pod_initialized_and_initialized_containers() -> None:
    """Not initialized (the API status shows nothing started): regular containers stay waiting; of the init
    containers, all but the trailing never-started ones are failed, the first at least."""
    status = {"phase": "Pending",
              "initContainerStatuses": [_cs("i1", DONE), _cs("i2", RUNNING), _cs("i3", WAITING)],
              "containerStatuses": [_cs("a", {"waiting": {"reason": "PodInitializing"}})]}
    api = copy.deepcopy(status)
    out = terminated_pod_status(_pod(["a"], ["i1", "i2", "i3"], api_status=api), status)
    assert [cs["state"] for cs in out["initContainerStatuses"]] == [DONE, UNKNOWN, WAITING]
    assert out["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    waiting = {**status, "initContainerStatuses": [_cs("i1", WAITING), _cs("i2", WAITING), _cs("i3", WAITING)]}
    out = terminated_pod_status(_pod(["a"], ["i1", "i2", "i3"], api_status=api), waiting)
    assert [cs["state"] for cs in out["initContainerStatuses"]] == [UNKNOWN, WAITING, WAITING]
    # initialized: the last init container completed in the API's status → regular containers are failed too
    api["initContainerStatuses"] = [_cs("i1", DONE), _cs("i2", DONE), _cs("i3", DONE)]
    out = terminated_pod_status(_pod(["a"], ["i1", "i2", "i3"], api_status=api), status)
    assert out["containerStatuses"][0]["state"] == UNKNOWN


def test_the_status_manager_marks_the_terminated_status_finished_and_writes_it_even_unchanged() -> None:
    sm = StatusManager()
    pod = _pod(["a"])
    sm.set_pod_status(pod, {"phase": "Failed", "containerStatuses": [_cs("a", DONE)]})
    before = sm.get("u1")
    assert before is not None and not before.finished
    sm.terminate_pod(pod)  # nothing to change, still a new version (upstream forceUpdate)
    after = sm.get("u1")
    assert after is not None and after.finished and after.version > before.version
    sm.set_pod_status(pod, {"phase": "Failed", "containerStatuses": [_cs("a", DONE)], "reason": "x"})
    assert sm.get("u1").finished  # type: ignore[union-attr]


# --- whole lifecycles: the fake runtime, the pod workers, the API sync against the test API server ---------


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[FakeNode]:
    n = FakeNode(tmp_path / "node")
    yield n
    await n.close()


async def _api_pod(api: ApiServer, image: str = IMAGE) -> dict[str, Any]:
    admin = api.admin()
    await admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                        "spec": {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 30,
                                 "containers": [{"name": "app", "image": image, "imagePullPolicy": "Never"}]}})
    await admin.bind("p", "n1")
    pod: dict[str, Any] = await admin.get("pods", "p", "default")
    return pod


def _sync(api: ApiServer, node: FakeNode, tmp_path: Path) -> PodStatusSync:
    def terminated(uid: str) -> bool:
        w = node.workers.get(uid)
        return w is None or w.lifecycle is PodLifecycle.TERMINATED

    client = client_for(api, api.node_identity("n1"), tmp_path, node.clock)
    return PodStatusSync(client, node.clock, node.statuses, terminated)


def _stored(state: dict[str, Any]) -> dict[str, Any]:
    """A state as the API server stores it: the null times dropped."""
    return {k: {f: v for f, v in s.items() if v is not None} for k, s in state.items()}


def _final_status(api: ApiServer) -> dict[str, Any]:
    """The pod as it was when it was deleted for good: the status of the last write before the DELETE."""
    (deleted,) = [c.obj for c in api.store.changes_since(api.store.oldest) if c.resource == "pods" and c.type == "DELETED"]
    status: dict[str, Any] = deleted["status"]
    return status


async def _delete_and_expect_the_final_delete(api: ApiServer, node: FakeNode, sync: PodStatusSync, uid: str) -> None:
    """A graceful DELETE through the API; the pod's final status (Failed, 137 ContainerStatusUnknown) is written
    and the pod is deleted for good."""
    await api.admin().delete("pods", "p", "default", grace=30)
    node.config.set_source_pods("api", [await api.admin().get("pods", "p", "default")])
    await node.settle()
    await sync.sync_pod(uid)
    assert (await api.admin().list("pods", "default"))["items"] == []
    final = _final_status(api)
    assert final["phase"] == "Failed" and _stored(final["containerStatuses"][0]["state"]) == _stored(UNKNOWN)


async def test_a_deleted_pod_whose_image_is_never_pulled_is_deleted_for_good(
        api_server: ApiServer, node: FakeNode, tmp_path: Path) -> None:  # noqa: F811
    """imagePullPolicy Never, the image missing: ErrImageNeverPull, no container ever created. A graceful
    DELETE then ends in SyncTerminatedPod → TerminatePod (137 ContainerStatusUnknown, Failed) and the final
    DELETE (canBeDeleted), instead of a pod Terminating for ever."""
    pod = await _api_pod(api_server, image="missing.example/never:1")
    uid = pod["metadata"]["uid"]
    sync = _sync(api_server, node, tmp_path)
    try:
        node.config.set_source_pods("api", [pod])
        await node.settle()
        assert node.container_state("app", uid)["state"]["waiting"]["reason"] == "ErrImageNeverPull"
        await sync.sync_pod(uid)
        await _delete_and_expect_the_final_delete(api_server, node, sync, uid)
    finally:
        await sync.client.close()


async def test_a_deleted_pod_whose_sandbox_never_started_is_deleted_for_good(
        api_server: ApiServer, node: FakeNode, tmp_path: Path) -> None:  # noqa: F811
    """The runtime refuses every sandbox: no container ever created; deleted, the pod still gets its final
    status (Failed, 137 ContainerStatusUnknown) and its final DELETE."""
    pod = await _api_pod(api_server)
    uid = pod["metadata"]["uid"]
    node.runtime.fail("run_pod_sandbox", RuntimeError_("sandbox refused"), times=1000)
    sync = _sync(api_server, node, tmp_path)
    try:
        node.config.set_source_pods("api", [pod])
        await node.settle()
        assert node.container_state("app", uid)["state"]["waiting"]["reason"] == "ContainerCreating"
        await _delete_and_expect_the_final_delete(api_server, node, sync, uid)
    finally:
        await sync.client.close()


async def test_after_an_agent_restart_a_deleted_pod_whose_containers_are_gone_is_deleted_for_good(
        api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    """The agent was down while the pod was deleted and its containers removed: the new agent finds only the
    API's Running status, nothing in the runtime; TerminatePod fails the vanished container, the DELETE follows."""
    pod = await _api_pod(api_server)
    uid = pod["metadata"]["uid"]
    admin = api_server.admin()
    await admin.patch("pods", "p", {"status": {"phase": "Running", "containerStatuses": [
        {**_cs("app", RUNNING), "image": IMAGE, "imageID": "", "containerID": "docker://gone"}]}},
                      "default", sub="status")
    await admin.delete("pods", "p", "default", grace=30)
    node = FakeNode(tmp_path / "node", runtime=FakeRuntime(FakeClock(), images=[IMAGE]))
    sync = _sync(api_server, node, tmp_path)
    try:
        node.config.set_source_pods("api", [await admin.get("pods", "p", "default")])
        await node.settle()
        await sync.sync_pod(uid)
        assert (await admin.list("pods", "default"))["items"] == []
        final = _final_status(api_server)
        assert final["phase"] == "Failed" and _stored(final["containerStatuses"][0]["state"]) == _stored(UNKNOWN)
    finally:
        await sync.client.close()
        await node.close()
