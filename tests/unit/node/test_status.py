from __future__ import annotations

import copy
from fractions import Fraction

import pytest

from cgroups.allocatable import hard_eviction_reservation
from cri.conditions import RuntimeCondition, condition_errors
from cri.types import Image
from minikubelet.node.machine import MachineInfo
from minikubelet.node.status import (
    KUBELET_PORT,
    NodeStatusInputs,
    binary_si,
    node_status_has_changed,
    runtime_errors,
    set_node_status,
)

GI = 1 << 30
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def inputs(**kw: object) -> NodeStatusInputs:
    base: dict[str, object] = dict(
        hostname="n1", node_ip="10.0.0.5",
        machine=MachineInfo("mid", "uuid", "boot", "6.1.0", "Debian GNU/Linux 12 (bookworm)"),
        capacity={"cpu": Fraction(2), "memory": Fraction(8 * GI), "ephemeral-storage": Fraction(100 * GI),
                  "pods": Fraction(110), "hugepages-2Mi": Fraction(GI), "hugepages-1Gi": Fraction(0)},
        reservation={"memory": Fraction(100 << 20), "ephemeral-storage": Fraction(10 * GI)},
        runtime_version="20.10.24", kubelet_version="v1.36.2",
    )
    base.update(kw)
    return NodeStatusInputs(**base)  # type: ignore[arg-type]


def test_a_fresh_node_gets_upstreams_status() -> None:
    node: dict[str, object] = {"metadata": {"name": "n1"}}
    events = set_node_status(node, inputs(), T0)
    status = node["status"]
    assert isinstance(status, dict)
    assert status["capacity"] == {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110",
                                  "hugepages-2Mi": "1Gi", "hugepages-1Gi": "0"}
    # huge pages come out of allocatable memory, reservations out of everything
    assert status["allocatable"]["memory"] == "7068Mi"  # 8Gi - 100Mi - 1Gi
    assert status["allocatable"]["ephemeral-storage"] == "90Gi"
    assert status["addresses"] == [{"type": "InternalIP", "address": "10.0.0.5"}, {"type": "Hostname", "address": "n1"}]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": KUBELET_PORT}}
    assert status["nodeInfo"] == {
        "machineID": "mid", "systemUUID": "uuid", "bootID": "boot", "kernelVersion": "6.1.0",
        "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "docker://20.10.24",
        "kubeletVersion": "v1.36.2", "kubeProxyVersion": "", "operatingSystem": "linux",
        "architecture": status["nodeInfo"]["architecture"]}
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    assert all(c["lastHeartbeatTime"] == c["lastTransitionTime"] == "2023-11-14T22:13:20Z"
               for c in status["conditions"])
    assert events == [("Normal", "NodeHasSufficientMemory"), ("Normal", "NodeHasNoDiskPressure"),
                      ("Normal", "NodeHasSufficientPID")]


def test_heartbeat_only_is_not_a_change_and_keeps_transition_times() -> None:
    node: dict[str, object] = {}
    set_node_status(node, inputs(), T0)
    original = copy.deepcopy(node)
    assert set_node_status(node, inputs(), T0 + 10) == []
    assert not node_status_has_changed(original["status"], node["status"])  # type: ignore[arg-type]
    ready = node["status"]["conditions"][3]  # type: ignore[index]
    assert ready["lastHeartbeatTime"] == "2023-11-14T22:13:30Z"
    assert ready["lastTransitionTime"] == "2023-11-14T22:13:20Z"


def test_runtime_down_makes_the_node_not_ready() -> None:
    node: dict[str, object] = {}
    set_node_status(node, inputs(), T0)
    original = copy.deepcopy(node)
    errors = runtime_errors(100.0, 10.0, 95.0)
    events = set_node_status(node, inputs(runtime_errors=errors, runtime_version=""), T0 + 90)
    ready = node["status"]["conditions"][3]  # type: ignore[index]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "KubeletNotReady",
                                                                    "container runtime is down")
    assert ready["lastTransitionTime"] == "2023-11-14T22:14:50Z"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "docker://Unknown"  # type: ignore[index]
    assert events == [("Normal", "NodeNotReady")]
    assert node_status_has_changed(original["status"], node["status"])  # type: ignore[arg-type]


def test_runtime_errors_messages_are_upstreams() -> None:
    assert runtime_errors(5.0, None, None) == ("container runtime status check may not have completed yet",
                                               "PLEG is not healthy: pleg has yet to be successful")
    assert runtime_errors(500.0, 499.0, 300.0) == (
        "PLEG is not healthy: pleg was last seen active 3m20s ago; threshold is 3m0s",)
    assert runtime_errors(500.0, 499.0, 499.0) == ()
    node: dict[str, object] = {}
    set_node_status(node, inputs(runtime_errors=runtime_errors(5.0, None, None)), T0)
    assert node["status"]["conditions"][3]["message"] == (  # type: ignore[index]
        "[container runtime status check may not have completed yet, PLEG is not healthy: pleg has yet to be successful]")


def test_missing_capacity_is_not_ready() -> None:
    node: dict[str, object] = {}
    set_node_status(node, inputs(capacity={"cpu": Fraction(1)}), T0)
    assert node["status"]["conditions"][3]["message"] == (  # type: ignore[index]
        "missing node capacity for resources: memory, pods, ephemeral-storage")


def test_images_are_the_50_largest_with_5_names_each() -> None:
    images = [Image(id=f"sha256:{i}", repo_tags=tuple(f"r{i}:t{j}" for j in range(3)),
                    repo_digests=tuple(f"r{i}@sha256:{j}" for j in range(3)), size=i) for i in range(60)]
    node: dict[str, object] = {}
    set_node_status(node, inputs(images=images), T0)
    listed = node["status"]["images"]  # type: ignore[index]
    assert len(listed) == 50 and listed[0]["sizeBytes"] == 59 and listed[-1]["sizeBytes"] == 10
    assert listed[0]["names"] == ["r59@sha256:0", "r59@sha256:1", "r59@sha256:2", "r59:t0", "r59:t1"]


def test_pod_network_not_ready_makes_the_node_not_ready_with_the_runtimes_condition() -> None:
    from minikubelet.network.pod_network import NO_POD_CIDR, NOT_READY

    node: dict[str, object] = {}
    set_node_status(node, inputs(network_errors=(NOT_READY + NO_POD_CIDR,)), T0)
    ready = node["status"]["conditions"][3]  # type: ignore[index]
    assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady")
    assert ready["message"] == (
        "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
        "message:docker: network plugin is not ready: Kubenet does not have netConfig. "
        "This is most likely due to lack of PodCIDR")
    assert set_node_status(node, inputs(), T0 + 10) == [("Normal", "NodeReady")]


@pytest.mark.parametrize(("value", "want"), [
    (Fraction(15598016000), "15598016000"),  # 1024 does not divide it: the plain integer, not 15598016k
    (Fraction(8 * GI), "8Gi"),
    (Fraction(1 << 20), "1Mi"),
    (Fraction(1536), "1536"),
    (Fraction(1000), "1k"),  # below 1024 BinarySI prints as DecimalSI
    (Fraction(123), "123"),
    (Fraction(3, 2), "1500m"),  # not a whole number: DecimalSI
    (Fraction(0), "0"),
])
def test_quantity_string_canonicalize_bytes_binary_si(value: Fraction, want: str) -> None:
    """apimachinery resource.Quantity String() / CanonicalizeBytes for a BinarySI quantity."""
    assert binary_si(value) == want


@pytest.mark.parametrize(("resource", "signal", "threshold", "capacity", "want"), [
    ("ephemeral-storage", "nodefs.available", "10%", 52521566208, "47269409509"),  # not 47269409588
    ("memory", "memory.available", "5%", 8 * GI, "8160437856"),
    ("memory", "memory.available", "100Mi", 8 * GI, "8092Mi"),
    ("ephemeral-storage", "nodefs.available", "1Gi", 52521566208, "50242016Ki"),
])
def test_get_node_allocatable_reservation_hard_eviction_reservation(
        resource: str, signal: str, threshold: str, capacity: int, want: str) -> None:
    """cm GetNodeAllocatableReservation's hardEvictionReservation with eviction api GetThresholdQuantity: a
    percentage is a float32 (10% is 0.100000001490116…), its quantity int64(float64(capacity) * percentage)."""
    caps = {**inputs().capacity, resource: Fraction(capacity)}
    if resource == "memory":
        caps = {k: v for k, v in caps.items() if not k.startswith("hugepages-")}
    node: dict[str, object] = {"metadata": {"name": "n1"}}
    set_node_status(node, inputs(capacity=caps, reservation=hard_eviction_reservation({signal: threshold}, caps)), T0)
    status = node["status"]
    assert isinstance(status, dict)
    assert status["allocatable"][resource] == want


def test_images_by_image_size_ties_broken_by_id_descending_before_the_cap() -> None:
    """sliceutils.ByImageSize (the image cache's order): size descending, equal sizes by image ID descending;
    setters.go Images then keeps the first nodeStatusMaxImages (50)."""
    same = [Image(id=f"sha256:{i:02d}", repo_tags=(f"r{i}:t",), size=7) for i in range(55)]
    big = Image(id="sha256:00", repo_tags=("big:t",), size=8)
    node: dict[str, object] = {}
    set_node_status(node, inputs(images=[*same, big]), T0)
    listed = node["status"]["images"]  # type: ignore[index]
    assert [i["names"] for i in listed] == [["big:t"], *([f"r{i}:t"] for i in range(54, 5, -1))]


def test_ready_condition_runtime_errors_before_network_errors() -> None:
    """setters.go ReadyCondition aggregates runtimeErrors, networkErrors, storage and node shutdown errors in that
    order; updateRuntimeUp puts the CRI's RuntimeReady into the first and NetworkReady into the second."""
    from minikubelet.nodeshutdown.groups import NODE_SHUTTING_DOWN

    ready, runtime_errs, network_errs = condition_errors([
        RuntimeCondition("NetworkReady", False, "NetworkPluginNotReady", "cni plugin not initialized"),
        RuntimeCondition("RuntimeReady", False, "RuntimeDown", "socket gone")])
    assert not ready
    node: dict[str, object] = {}
    set_node_status(node, inputs(runtime_errors=(*runtime_errors(300.0, 200.0, 250.0), *runtime_errs),
                                 network_errors=network_errs, shutdown_errors=(NODE_SHUTTING_DOWN,)), T0)
    assert node["status"]["conditions"][3]["message"] == (  # type: ignore[index]
        "[container runtime is down, "
        "container runtime not ready: RuntimeReady=false reason:RuntimeDown message:socket gone, "
        "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
        "message:cni plugin not initialized, "
        f"{NODE_SHUTTING_DOWN}]")
    set_node_status(node, inputs(runtime_errors=("container runtime is down",),
                                 network_errors=("container runtime is down",)), T0)
    assert node["status"]["conditions"][3]["message"] == "container runtime is down"  # type: ignore[index]
