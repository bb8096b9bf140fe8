"""The pod status sync against the test API server: the recorded PATCH shapes (uid precondition,
`$setElementOrder/conditions`, only what changed), conditions the kubelet does not own, 404 and recreated
pods, a terminal phase held back while containers may run, and the final DELETE (`kubelet-13`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minikubelet.base.clock import FakeClock
from minikubelet.kubeapi.rest import Json, RestClient
from minikubelet.metrics import Metrics
from minikubelet.status.api_sync import PodStatusSync, merge_pod_status
from minikubelet.status.manager import StatusManager
from tests.apiserver import ApiServer, Client
from tests.apiserver.fixtures import api_server  # noqa: F401
from tests.unit.kubeapi.helpers import client_for, eventually

POD_PATH = "/api/v1/namespaces/default/pods/p"
T0 = "2026-11-22T06:25:15Z"


class Recording(RestClient):
    """Our client, talking to the server, keeping what it sent (the server keeps only method and path)."""

    sent: list[tuple[str, str, Any]]

    async def request(self, method: str, path: str, **kwargs: Any) -> Json:
        self.sent.append((method, path, kwargs.get("body")))
        return await super().request(method, path, **kwargs)


def _client(api: ApiServer, tmp_path: Path, clock: FakeClock) -> Recording:
    base = client_for(api, api.node_identity("n1"), tmp_path, clock)
    client = Recording(base.config, clock, retry=base.retry)
    client.sent = []
    return client


def _writes(client: Recording) -> list[tuple[str, str, Any]]:
    return [s for s in client.sent if s[0] != "GET"]


def _cond(type_: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": T0, **extra}


def _status(phase: str, ready: str = "False") -> dict[str, Any]:
    return {"phase": phase, "hostIP": "192.0.2.2", "hostIPs": [{"ip": "192.0.2.2"}], "startTime": T0,
            "conditions": [_cond("PodReadyToStartContainers", "True"), _cond("Initialized", "True"),
                           _cond("Ready", ready), _cond("ContainersReady", ready), _cond("PodScheduled", "True")],
            "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": ready == "True",
                                   "restartCount": 0, "started": False, "state": {"waiting": {"reason": "ContainerCreating"}}}]}


async def _setup(api: ApiServer, tmp_path: Path, terminated: set[str]) -> tuple[
        StatusManager, PodStatusSync, Recording, dict[str, Any]]:
    admin = api.admin()
    await admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                        "spec": {"automountServiceAccountToken": False, "readinessGates": [{"conditionType": "x/gate"}],
                                 "containers": [{"name": "c", "image": "busybox"}]}})
    await admin.bind("p", "n1")  # the scheduler's PodScheduled
    pod = await admin.get("pods", "p", "default")
    clock = FakeClock()
    client = _client(api, tmp_path, clock)
    statuses = StatusManager()
    sync = PodStatusSync(client, clock, statuses, lambda uid: uid in terminated)
    return statuses, sync, client, pod


async def test_patches_as_the_kubelet_only_what_changed(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    statuses, sync, client, pod = await _setup(api_server, tmp_path, set())
    uid = pod["metadata"]["uid"]
    # a condition another owner set (a readiness gate) must survive our writes
    await api_server.admin().patch("pods", "p", {"status": {"conditions": [_cond("x/gate", "True")]}}, "default",
                                   sub="status")
    try:
        statuses.set_pod_status(pod, _status("Pending"))
        await sync.sync_pod(uid)
        (method, path, body), = _writes(client)
        assert (method, path) == ("PATCH", POD_PATH + "/status")
        assert body["metadata"] == {"uid": uid}  # the uid precondition, as kubelet-07
        assert body["status"]["$setElementOrder/conditions"] == [
            {"type": "x/gate"}, {"type": "PodReadyToStartContainers"}, {"type": "Initialized"}, {"type": "Ready"},
            {"type": "ContainersReady"}, {"type": "PodScheduled"}]
        stored = (await api_server.admin().get("pods", "p", "default"))["status"]
        assert stored["conditions"][0]["type"] == "x/gate" and stored["phase"] == "Pending"
        # the same status again: nothing sent
        await sync.sync_pod(uid)
        assert len(_writes(client)) == 1
        # Ready: only the changed conditions and fields, as kubelet-08
        statuses.set_pod_status(pod, _status("Running", ready="True"))
        await sync.sync_pod(uid)
        body = _writes(client)[1][2]
        assert body["status"]["phase"] == "Running"
        assert sorted(c["type"] for c in body["status"]["conditions"]) == ["ContainersReady", "Ready"]
        assert "hostIP" not in body["status"]
        stored = (await api_server.admin().get("pods", "p", "default"))["status"]
        assert {c["type"]: c["status"] for c in stored["conditions"]}["x/gate"] == "True"
    finally:
        await client.close()


async def test_a_status_change_is_written_by_the_running_sync(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    statuses, sync, client, pod = await _setup(api_server, tmp_path, set())
    task = asyncio.create_task(sync.run())
    try:
        statuses.set_pod_status(pod, _status("Pending"))
        await eventually(lambda: len(_writes(client)) == 1, what="the PATCH after a change")
    finally:
        task.cancel()
        await client.close()


async def test_404_and_a_recreated_pod_are_left_alone(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    statuses, sync, client, pod = await _setup(api_server, tmp_path, set())
    uid = pod["metadata"]["uid"]
    admin = api_server.admin()
    try:
        statuses.set_pod_status(pod, _status("Pending"))
        await admin.delete("pods", "p", "default", grace=0)
        await sync.sync_pod(uid)  # 404: nothing to write
        assert _writes(client) == []
        await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                            "spec": {"nodeName": "n1", "automountServiceAccountToken": False,
                                     "containers": [{"name": "c", "image": "busybox"}]}})
        await sync.sync_pod(uid)  # another pod under the same name: not ours to write
        assert _writes(client) == []
        assert sync.needs_update(uid)  # never acknowledged
    finally:
        await client.close()


async def test_a_conflicting_uid_precondition_is_not_fatal(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    statuses, sync, client, pod = await _setup(api_server, tmp_path, set())
    uid = pod["metadata"]["uid"]
    api_server.faults.fail(409, "PATCH", r"/pods/p/status$", times=1)
    try:
        statuses.set_pod_status(pod, _status("Pending"))
        await sync.sync_pod(uid)
        assert sync.needs_update(uid)  # retried at the next period
        await sync.sync_pod(uid)
        assert not sync.needs_update(uid)
        assert [m for m, _, _ in _writes(client)] == ["PATCH", "PATCH"]
    finally:
        await client.close()


async def test_final_delete_after_the_terminal_status_once_terminated(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    terminated: set[str] = set()
    statuses, sync, client, pod = await _setup(api_server, tmp_path, terminated)
    uid = pod["metadata"]["uid"]
    admin = api_server.admin()
    try:
        statuses.set_pod_status(pod, _status("Running", ready="True"))
        await sync.sync_pod(uid)
        await admin.delete("pods", "p", "default", grace=30)
        # the worker still kills the pod: a terminal phase is not reported yet, nothing deleted
        statuses.set_pod_status(pod, {**_status("Failed"), "reason": "Killed"})
        await sync.sync_pod(uid)
        stored = await admin.get("pods", "p", "default")
        assert stored["status"]["phase"] == "Running"
        assert [m for m, _, _ in _writes(client)] == ["PATCH", "PATCH"]
        assert not sync.needs_update(uid)  # until the worker has terminated the pod
        terminated.add(uid)
        await sync.sync_pod(uid)  # nothing runs: the terminal phase is written, but the status is not final yet
        assert [m for m, _, _ in _writes(client)] == ["PATCH", "PATCH", "PATCH"]
        assert _writes(client)[-1][2]["status"]["phase"] == "Failed"
        assert not sync.needs_update(uid)
        # upstream canBeDeleted needs podIsFinished: the status TerminatePod wrote at the end of SyncTerminatedPod
        statuses.terminate_pod(pod)
        assert sync.needs_update(uid)
        await sync.sync_pod(uid)
        method, path, body = _writes(client)[-1]
        assert (method, path) == ("DELETE", POD_PATH)
        assert body == {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                        "preconditions": {"uid": uid}}  # as kubelet-13
        (cs,) = _writes(client)[-2][2]["status"]["containerStatuses"]
        assert cs["state"]["terminated"]["reason"] == "ContainerStatusUnknown"
        assert (await admin.list("pods", "default"))["items"] == []
    finally:
        await client.close()


def test_merge_keeps_what_others_own_and_holds_back_a_terminal_phase() -> None:
    old = {"phase": "Running", "nominatedNodeName": "n9",
           "conditions": [_cond("DisruptionTarget", "True"), _cond("x/gate", "True"), _cond("Ready", "True")]}
    new = {"phase": "Failed", "reason": "Evicted", "conditions": [_cond("Ready", "False")]}
    merged = merge_pod_status(old, new, could_have_running_containers=True)
    assert [c["type"] for c in merged["conditions"]] == ["DisruptionTarget", "x/gate", "Ready"]
    assert merged["phase"] == "Running" and "reason" not in merged and merged["nominatedNodeName"] == "n9"
    merged = merge_pod_status(old, new, could_have_running_containers=False)
    assert (merged["phase"], merged["reason"]) == ("Failed", "Evicted")


async def test_a_held_back_terminal_phase_is_written_once_the_worker_is_done(
        api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    terminated: set[str] = set()
    statuses, sync, client, pod = await _setup(api_server, tmp_path, terminated)
    uid = pod["metadata"]["uid"]
    clock = sync.clock
    assert isinstance(clock, FakeClock)
    task = asyncio.create_task(sync.run())
    try:
        statuses.set_pod_status(pod, _status("Running", ready="True"))
        await eventually(lambda: len(_writes(client)) == 1, what="Running written")
        statuses.set_pod_status(pod, {**_status("Succeeded"), "reason": "Done"})
        await eventually(lambda: len(_writes(client)) == 2, what="the status without its phase")
        assert "phase" not in _writes(client)[1][2]["status"]
        terminated.add(uid)  # the same status stays: no listener call, the sync notices the worker
        await eventually(lambda: clock.sleepers == 1, what="the sync loop asleep again")
        clock.advance(0.6)
        await eventually(lambda: len(_writes(client)) == 3, what="the terminal phase")
        assert _writes(client)[2][2]["status"]["phase"] == "Succeeded"
        clock.advance(30)  # nothing more to write: no more GETs than the periodic check's
        await asyncio.sleep(0.1)
        assert len(_writes(client)) == 3
    finally:
        task.cancel()
        await client.close()


async def test_empty_structs_are_sent_as_the_kubelet_writes_them_but_never_cause_a_patch(
        api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    """kubelet-07 carries `resources: {}`; a sidecar without resources has `resources: {}` in its container
    status (pod-real-kubelet-crashloopbackoff.json). They are written, yet a status differing only by them
    is not written again."""
    statuses, sync, client, pod = await _setup(api_server, tmp_path, set())
    uid = pod["metadata"]["uid"]
    try:
        status = {**_status("Pending"), "resources": {}}
        status["containerStatuses"] = [{**status["containerStatuses"][0], "lastState": {}, "resources": {}}]
        statuses.set_pod_status(pod, status)
        await sync.sync_pod(uid)
        body = _writes(client)[0][2]
        assert body["status"]["resources"] == {} and body["status"]["containerStatuses"][0]["resources"] == {}
        stored = (await api_server.admin().get("pods", "p", "default"))["status"]
        assert stored["containerStatuses"][0]["resources"] == {}
        statuses.set_pod_status(pod, {k: v for k, v in status.items() if k != "resources"})
        await sync.sync_pod(uid)
        assert len(_writes(client)) == 1
    finally:
        await client.close()


async def _periods(sync: PodStatusSync, n: int) -> None:
    """Let the running sync loop go through `n` periodic syncs (10 s each) on its fake clock."""
    clock = sync.clock
    assert isinstance(clock, FakeClock)
    for _ in range(n):
        await eventually(lambda: clock.sleepers == 1, what="the sync loop asleep")
        clock.advance(10)
        await asyncio.sleep(0.05)
    await eventually(lambda: clock.sleepers == 1, what="the sync loop asleep")


async def _with_source(api: ApiServer, tmp_path: Path, terminated: set[str]) -> tuple[
        StatusManager, PodStatusSync, Recording, dict[str, Any], dict[str, dict[str, Any]]]:
    """As `_setup`, with the API pod as the pod source last received it (`source`, refreshed by the test as the
    watch would)."""
    statuses, sync, client, pod = await _setup(api, tmp_path, terminated)
    source: dict[str, dict[str, Any]] = {}
    sync = PodStatusSync(client, sync.clock, statuses, lambda uid: uid in terminated,
                         source_pod=lambda p: source.get(p["metadata"]["uid"]))
    return statuses, sync, client, pod, source


@dataclass
class _Written:
    """A running status sync whose pod's Running status the API server has, the API pod as its source last got it."""

    statuses: StatusManager
    sync: PodStatusSync
    client: Recording
    source: dict[str, dict[str, Any]]
    uid: str
    admin: Client


@contextlib.asynccontextmanager
async def _running_written(api: ApiServer, tmp_path: Path) -> AsyncIterator[_Written]:
    statuses, sync, client, pod, source = await _with_source(api, tmp_path, set())
    uid = pod["metadata"]["uid"]
    admin = api.admin()
    task = asyncio.create_task(sync.run())
    try:
        statuses.set_pod_status(pod, _status("Running", ready="True"))
        await eventually(lambda: len(_writes(client)) == 1, what="Running written")
        source[uid] = await admin.get("pods", "p", "default")
        yield _Written(statuses, sync, client, source, uid, admin)
    finally:
        task.cancel()
        await client.close()


async def test_an_unchanged_status_sends_nothing_a_changed_one_is_patched_at_once(
        api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    async with _running_written(api_server, tmp_path) as w:
        # our write comes back through the watch: a new object of the pod, which the worker's periodic
        # resync hands to the status manager with the same status
        statuses, source, uid = w.statuses, w.source, w.uid
        statuses.set_pod_status(source[uid], _status("Running", ready="True"))
        assert statuses.pod_list()[0]["metadata"]["resourceVersion"] == source[uid]["metadata"]["resourceVersion"]
        w.client.sent.clear()
        await _periods(w.sync, 6)  # a minute idle
        assert w.client.sent == []  # not even a GET
        statuses.set_pod_status(source[uid], _status("Running", ready="False"))
        await eventually(lambda: len(_writes(w.client)) == 1, what="the change PATCHed without waiting for a period")
        assert [m for m, _, _ in w.client.sent] == ["GET", "PATCH"]
        stored = await w.admin.get("pods", "p", "default")
        assert {c["type"]: c["status"] for c in stored["status"]["conditions"]}["Ready"] == "False"


async def test_reconcile_repairs_a_status_someone_else_changed(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    """upstream needsReconcile: the API pod's status differs from ours in what the kubelet owns."""
    async with _running_written(api_server, tmp_path) as w:
        admin, source, uid, client = w.admin, w.source, w.uid, w.client
        # a condition of another owner and its own times on ours are no drift
        await admin.patch("pods", "p", {"status": {"conditions": [_cond("x/gate", "True")]}}, "default", sub="status")
        source[uid] = await admin.get("pods", "p", "default")
        client.sent.clear()
        await _periods(w.sync, 2)
        assert client.sent == []
        # someone else writes over the kubelet's Ready condition: the next periodic sync puts ours back
        drifted = {**_cond("Ready", "False"), "reason": "Tampered"}
        await admin.patch("pods", "p", {"status": {"conditions": [drifted]}}, "default", sub="status")
        source[uid] = await admin.get("pods", "p", "default")
        assert w.sync.needs_reconcile(w.statuses.statuses()[0].pod, w.statuses.statuses()[0].status)
        await _periods(w.sync, 1)
        assert [m for m, _, _ in client.sent] == ["GET", "PATCH"]
        stored = await admin.get("pods", "p", "default")
        conditions = {c["type"]: c for c in stored["status"]["conditions"]}
        assert conditions["Ready"]["status"] == "True" and "reason" not in conditions["Ready"]
        assert conditions["x/gate"]["status"] == "True"
        source[uid] = stored
        await _periods(w.sync, 2)  # repaired: quiet again
        assert [m for m, _, _ in client.sent] == ["GET", "PATCH"]


def test_merge_pod_status_sends_disruption_target_only_with_the_terminal_phase() -> None:
    """upstream mergePodStatus: the kubelet's DisruptionTarget is sent only when the phase turns terminal and no
    container can run; its transition time is then the sync's. Before that the API's conditions stay."""
    old = {"phase": "Running", "conditions": [_cond("Ready", "True")]}
    evicted = _cond("DisruptionTarget", "True", reason="TerminationByKubelet", message="low")
    new = {"phase": "Failed", "reason": "Evicted", "conditions": [evicted, _cond("Ready", "False")]}
    later = "2026-11-22T06:30:00Z"
    running = merge_pod_status(old, new, could_have_running_containers=True, now=later)
    assert [c["type"] for c in running["conditions"]] == ["Ready"] and running["phase"] == "Running"
    # a non-terminal status carrying the condition (the worker still killing) never sends it either
    assert [c["type"] for c in merge_pod_status(old, {**new, "phase": "Running"}, False, later)["conditions"]] == [
        "Ready"]
    done = merge_pod_status(old, new, could_have_running_containers=False, now=later)
    assert [c["type"] for c in done["conditions"]] == ["DisruptionTarget", "Ready"] and done["phase"] == "Failed"
    assert done["conditions"][0]["lastTransitionTime"] == later and done["conditions"][0]["reason"] == (
        "TerminationByKubelet")
    # once the API has a terminal phase, the API's own condition (or its absence) stays
    assert [c["type"] for c in merge_pod_status({**old, "phase": "Failed"}, new, False, later)["conditions"]] == [
        "Ready"]


async def test_sync_pod_patches_disruption_target_only_with_the_terminal_phase(
        api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    """upstream syncPod + mergePodStatus: no PATCH carries DisruptionTarget while the evicted pod's containers run."""
    terminated: set[str] = set()
    statuses, sync, client, pod = await _setup(api_server, tmp_path, terminated)
    uid = pod["metadata"]["uid"]
    try:
        statuses.set_pod_status(pod, _status("Running", ready="True"))
        await sync.sync_pod(uid)
        evicted = _status("Failed")
        evicted["reason"] = "Evicted"
        evicted["conditions"].append(_cond("DisruptionTarget", "True", reason="TerminationByKubelet"))
        statuses.set_pod_status(pod, evicted)
        await sync.sync_pod(uid)
        body = _writes(client)[-1][2]["status"]
        assert "phase" not in body and "DisruptionTarget" not in str(body)
        stored = (await api_server.admin().get("pods", "p", "default"))["status"]
        assert "DisruptionTarget" not in [c["type"] for c in stored["conditions"]]
        terminated.add(uid)
        await sync.sync_pod(uid)
        body = _writes(client)[-1][2]["status"]
        assert body["phase"] == "Failed" and "DisruptionTarget" in str(body)
        stored = (await api_server.admin().get("pods", "p", "default"))["status"]
        assert {c["type"]: c["status"] for c in stored["conditions"]}["DisruptionTarget"] == "True"
    finally:
        await client.close()


async def test_status_sync_duration_is_from_the_versions_making_to_its_write(
        api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    _, sync, client, pod = await _setup(api_server, tmp_path, set())
    metrics = Metrics()
    clock = sync.clock
    assert isinstance(clock, FakeClock)
    statuses = StatusManager(clock.monotonic, metrics)
    sync = PodStatusSync(client, clock, statuses, lambda _uid: False, metrics=metrics)
    uid = pod["metadata"]["uid"]
    try:
        statuses.set_pod_status(pod, _status("Pending"))
        clock.advance(0.25)
        await sync.sync_pod(uid)
        assert metrics.registry.get_sample_value("kubelet_pod_status_sync_duration_seconds_count") == 1
        assert metrics.registry.get_sample_value("kubelet_pod_status_sync_duration_seconds_sum") == 0.25
        # the server has it already: the kubelet measures that pass too
        clock.advance(1)
        await sync.sync_pod(uid)
        assert metrics.registry.get_sample_value("kubelet_pod_status_sync_duration_seconds_count") == 2
        assert metrics.registry.get_sample_value("kubelet_pod_status_sync_duration_seconds_sum") == 1.5
    finally:
        await client.close()


async def test_reconcile_compares_again_once_either_side_changed(api_server: ApiServer, tmp_path: Path) -> None:  # noqa: F811
    """The periodic sync asks needsReconcile for every pod; a pair found to agree is compared again only once
    the API pod (its resourceVersion) or our status (its version) moved."""
    async with _running_written(api_server, tmp_path) as w:
        entry = w.statuses.statuses()[0]
        assert not w.sync.needs_reconcile(entry.pod, entry.status, entry.version)
        assert not w.sync.needs_reconcile(entry.pod, entry.status, entry.version)  # remembered
        # ours moves on while the source has not seen it yet: compared again, and it differs
        assert w.sync.needs_reconcile(entry.pod, _status("Running", ready="False"), entry.version + 1)
        # the API pod moves on (another writer): compared again
        drifted = {**_cond("Ready", "False"), "reason": "Tampered"}
        await w.admin.patch("pods", "p", {"status": {"conditions": [drifted]}}, "default", sub="status")
        w.source[w.uid] = await w.admin.get("pods", "p", "default")
        assert w.sync.needs_reconcile(entry.pod, entry.status, entry.version)
