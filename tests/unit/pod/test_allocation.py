"""The allocation manager against upstream's allocation_manager_test.go (TestUpdatePodFromAllocation,
TestRetryPendingResizes, TestAllocationManagerAddPod, TestSortPendingResizes, TestRecordPodDeferredAcceptedResizes)
and kubelet_test.go's TestHandlePodUpdates_RecordContainerRequestedResizes: pure cases, then the whole pod stack on
the fake runtime with the resize service wired as the agent wires it."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from cri.types import LinuxResources
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.node.labels import initial_node
from minikubelet.pod.allocation import POD_LEVEL_UNSUPPORTED, update_pod_from_allocation
from minikubelet.pod.predicate import PredicateAdmitHandler
from minikubelet.runtime.resource_checkpoint import PodResourceInfo
from minikubelet.services.pod_resize import PodResizeService
from tests.unit.fake_node import IMAGE, FakeNode, make_pod

Json = dict[str, Any]


def res(cpu: str, memory: str) -> Json:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}


def app(cpu: str = "1", memory: str = "1000M", name: str = "c1") -> Json:
    return {"name": name, "image": IMAGE, "resources": res(cpu, memory)}


# --- TestUpdatePodFromAllocation ------------------------------------------------------------------

def test_update_pod_from_allocation() -> None:
    pod = make_pod(containers=[app("100m", "100Mi", "c1"), app("200m", "200Mi", "c2")],
                   inits=[app("300m", "300Mi", "init")])
    steady = PodResourceInfo({"c1": res("100m", "100Mi"), "c2": res("200m", "200Mi"), "init": res("300m", "300Mi")})
    same, updated = update_pod_from_allocation(pod, steady)
    assert same is pod and not updated  # "steady state"
    assert update_pod_from_allocation(pod, None) == (pod, False)  # "no allocations"
    partial = PodResourceInfo({"c1": res("100m", "100Mi")})
    assert update_pod_from_allocation(pod, partial)[1] is False  # "missing container allocation"
    resized = PodResourceInfo({"c1": res("100m", "100Mi"), "c2": res("400m", "200Mi"), "init": res("300m", "300Mi")})
    out, updated = update_pod_from_allocation(pod, resized)  # "resized container"
    assert updated and out is not pod
    assert out["spec"]["containers"][1]["resources"] == res("400m", "200Mi")
    assert pod["spec"]["containers"][1]["resources"] == res("200m", "200Mi")  # the source pod is not touched
    # semantically equal quantities are no difference
    assert not update_pod_from_allocation(pod, PodResourceInfo({"c1": res("0.1", "104857600")}))[1]


def test_resized_pod_level_allocation() -> None:
    pod = make_pod(resources={"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}})
    out, updated = update_pod_from_allocation(pod, PodResourceInfo({}, {"requests": {"cpu": "100m"},
                                                                         "limits": {"cpu": "300m"}}))
    assert updated and out["spec"]["resources"] == {"requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}}


# --- the pod stack ----------------------------------------------------------------------------------

class ResizeNode:
    """FakeNode with a 4 CPU / 4 GiB node's resource fit and the resize service."""

    def __init__(self, root: Path, node: FakeNode) -> None:
        self.root, self.node = root, node
        allocatable = {"cpu": Fraction(4), "memory": Fraction(4 << 30), "pods": Fraction(110)}
        node.manager.admit_handlers.append(PredicateAdmitHandler(
            lambda: initial_node("node-1", {}, (), allocatable)))
        self.service = PodResizeService(KubeletConfig(root_dir=str(root)), node.runtime, node.clock, node.recorder,
                                        node.metrics, node.manager, node.workers, node.syncer, lambda: True)

    def run(self, *pods: Pod) -> None:
        self.node.config.set_source_pods("api", list(pods))

    def conditions(self, uid: str) -> dict[str, Json]:
        return {c["type"]: c for c in (self.node.statuses.get_pod_status(uid) or {}).get("conditions") or []}

    def metric(self, name: str, **labels: str) -> float:
        value = self.node.metrics.registry.get_sample_value(name, labels)
        return float(value or 0)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ResizeNode]:
    n = FakeNode(tmp_path)
    try:
        yield ResizeNode(tmp_path, n)
    finally:
        await n.close()


def api_pod(name: str, uid: str, *containers: Json, generation: int = 1, **spec: Any) -> Pod:
    p = make_pod(name=name, uid=uid, containers=list(containers), **spec)
    p["metadata"]["annotations"] = {"kubernetes.io/config.source": "api"}
    p["metadata"]["generation"] = generation
    return p


def resized(p: Pod, generation: int, **containers: Json) -> Pod:
    out = copy.deepcopy(p)
    out["metadata"]["generation"] = generation
    for c in out["spec"]["containers"]:
        if c["name"] in containers:
            c["resources"] = containers[c["name"]]
    return out


async def test_resize_is_allocated_actuated_and_read_back(stack: ResizeNode) -> None:
    """'Request CPU and memory decrease - expect InProgress', then the worker actuates it."""
    node = stack.node
    pod = api_pod("p1", "1111", app("1", "1000M"))
    stack.run(pod)
    await node.settle()
    cs = node.container_state("c1", "1111")
    # no cgroups on this node: the fake runtime reports nothing, so the actuated record stands in (as upstream)
    assert cs["resources"] == {"limits": {"cpu": "1", "memory": "1000M"}, "requests": {"cpu": "1", "memory": "1000M"}}
    stack.run(resized(pod, 2, c1=res("500m", "500M")))
    await node.settle()
    updates = [call.args for call in node.runtime.calls if call.op == "update_container_resources"]
    assert [u[1] for u in updates] == [
        LinuxResources(cpu_period=100_000, cpu_quota=100_000, cpu_shares=1024, memory_limit_bytes=500_000_000),
        LinuxResources(cpu_period=100_000, cpu_quota=50_000, cpu_shares=512, memory_limit_bytes=500_000_000)]
    cs = node.container_state("c1", "1111")
    # read back from the runtime (quota, shares, bytes) as upstream prints them; the memory request as actuated
    assert cs["resources"] == {"limits": {"cpu": "500m", "memory": "500000000"},
                               "requests": {"cpu": "500m", "memory": "500000000"}}
    assert cs["allocatedResources"] == {"cpu": "500m", "memory": "500M"} and cs["restartCount"] == 0
    assert "PodResizeInProgress" not in stack.conditions("1111")
    reasons = [r for r, _ in node.events("1111")]
    assert reasons.index("ResizeStarted") < reasons.index("ResizeCompleted")
    started = next(m for r, m in node.events("1111") if r == "ResizeStarted")
    assert started == ('Pod resize started: {"containers":[{"name":"c1","resources":{"limits":{"cpu":"500m",'
                       '"memory":"500M"},"requests":{"cpu":"500m","memory":"500M"}}}],"generation":2}')
    state = json.loads((stack.root / "allocated_pods_state").read_text())
    assert json.loads(state["data"])["1111"]["containers"]["c1"]["limits"] == {"cpu": "500m", "memory": "500M"}
    assert stack.metric("kubelet_container_requested_resizes_total", resource="cpu", requirement="limits",
                        operation="decrease") == 1


async def test_beyond_capacity_is_deferred_and_allocated_once_a_pod_goes(stack: ResizeNode) -> None:
    """'Request CPU increase beyond current capacity - expect Deferred', retried on pods_removed
    (TestRecordPodDeferredAcceptedResizes)."""
    node = stack.node
    p1, p2 = api_pod("p1", "1111", app("1", "1000M")), api_pod("p2", "2222", app("2", "1000M"))
    stack.run(p1, p2)
    await node.settle()
    stack.run(resized(p1, 2, c1=res("2500m", "1000M")), p2)
    await node.settle()
    pending = stack.conditions("1111")["PodResizePending"]
    assert (pending["reason"], pending["observedGeneration"], pending["status"]) == ("Deferred", 2, "True")
    assert pending["message"] == "Node didn't have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000"
    assert node.container_state("c1", "1111")["allocatedResources"]["cpu"] == "1"
    assert ("ResizeDeferred", 'Pod resize OutOfcpu: {"containers":[{"name":"c1","resources":{"limits":{"cpu":'
            '"2500m","memory":"1G"},"requests":{"cpu":"2500m","memory":"1G"}}}],"generation":2,"error":'
            '"Node didn\'t have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000"}') \
        in node.events("1111")
    assert stack.metric("kubelet_pod_pending_resizes", reason="deferred") == 1
    stack.run(resized(p1, 2, c1=res("2500m", "1000M")))  # p2 goes
    await node.settle()
    assert "PodResizePending" not in stack.conditions("1111")
    assert node.container_state("c1", "1111")["resources"]["limits"]["cpu"] == "2500m"
    assert stack.metric("kubelet_pod_deferred_accepted_resizes_total", retry_trigger="pods_removed") == 1
    assert stack.metric("kubelet_pod_pending_resizes", reason="deferred") == 0


async def test_a_reverted_pending_resize_clears_its_condition(stack: ResizeNode) -> None:
    node = stack.node
    p1 = api_pod("p1", "1111", app("1", "1000M"))
    stack.run(p1)
    await node.settle()
    stack.run(resized(p1, 2, c1=res("5", "1000M")))
    await node.settle()
    pending = stack.conditions("1111")["PodResizePending"]
    assert pending["message"] == "Node didn't have enough resource: cpu, requested: 5000, used: 0, capacity: 4000"
    stack.run(resized(p1, 3, c1=res("1", "1000M")))
    await node.settle()
    assert not {"PodResizePending", "PodResizeInProgress"} & set(stack.conditions("1111"))
    assert not [c for c in node.runtime.calls if c.op == "update_container_resources"]


async def test_pod_level_resize_is_infeasible_here(stack: ResizeNode) -> None:
    node = stack.node
    p1 = api_pod("p1", "1111", {"name": "c1", "image": IMAGE},
                 resources={"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}})
    stack.run(p1)
    await node.settle()
    p2 = copy.deepcopy(p1)
    p2["metadata"]["generation"] = 2
    p2["spec"]["resources"]["limits"]["cpu"] = "300m"
    stack.run(p2)
    await node.settle()
    pending = stack.conditions("1111")["PodResizePending"]
    assert (pending["reason"], pending["message"], pending["observedGeneration"]) == (
        "Infeasible", POD_LEVEL_UNSUPPORTED, 2)
    assert [r for r, _ in node.events("1111")].count("ResizeInfeasible") == 1
    assert stack.metric("kubelet_pod_infeasible_resizes_total", reason_detail="unsupported_platform") == 1
    assert stack.metric("kubelet_pod_pending_resizes", reason="infeasible") == 1


async def test_allocation_survives_an_agent_restart(tmp_path: Path) -> None:
    """TestAllocationManagerAddPod 'request different from current allocation. Pod still admitted based on
    existing allocation': a restarted agent runs the pod as allocated, and the new spec is a pending resize."""
    first = FakeNode(tmp_path)
    try:
        stack = ResizeNode(tmp_path, first)
        p1 = api_pod("p1", "1111", app("1", "1000M"))
        stack.run(p1)
        await first.settle()
        stack.run(resized(p1, 2, c1=res("1500m", "1000M")))
        await first.settle()
        assert first.container_state("c1", "1111")["resources"]["limits"]["cpu"] == "1500m"
    finally:
        await first.close()  # the agent stops; its pods keep running
    second = FakeNode(tmp_path, runtime=first.runtime)
    try:
        restarted = ResizeNode(tmp_path, second)
        # while it was down the spec asked for 5 CPUs: admitted with its allocation (1500m), the 5 CPUs pending
        restarted.run(resized(p1, 3, c1=res("5", "1000M")))
        await second.settle()
        cs = second.container_state("c1", "1111")
        assert cs["allocatedResources"]["cpu"] == "1500m" and cs["resources"]["limits"]["cpu"] == "1500m"
        assert cs["restartCount"] == 0
        assert restarted.conditions("1111")["PodResizePending"]["reason"] == "Deferred"
        assert len([c for c in first.runtime.calls if c.op == "update_container_resources"]) == 1  # none since
    finally:
        await second.close()


async def test_pending_resizes_sorted_as_upstream(stack: ResizeNode) -> None:
    """TestSortPendingResizes: no increase first, then priority, then Guaranteed, then the longest pending."""
    node = stack.node
    allocation = stack.service.allocation
    pods = [api_pod(f"p{i}", f"u{i}", app("100m", "100M"), priority=prio) for i, prio in enumerate((0, 0, 10, 0))]
    stack.run(*pods)
    await node.settle()
    wants = [resized(pods[0], 2, c1=res("200m", "100M")),  # increase, priority 0
             resized(pods[1], 2, c1=res("50m", "100M")),  # decrease
             resized(pods[2], 2, c1=res("200m", "100M")),  # increase, priority 10
             resized(pods[3], 2, c1={"requests": {"cpu": "200m"}, "limits": {"cpu": "300m"}})]  # Burstable
    for p in wants:
        node.manager.desired[p["metadata"]["uid"]] = p
    for uid in ("u0", "u3", "u2", "u1"):
        allocation.push_pending_resize(uid)
    assert allocation._pending == ["u1", "u2", "u0", "u3"]
