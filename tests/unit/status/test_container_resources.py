"""A container status's `resources` against upstream's TestConvertToAPIContainerStatusesForResources
(kubelet_pods_test.go): read back from the runtime while running, the allocation otherwise."""

from __future__ import annotations

from typing import Any

from cri.types import LinuxResources
from minikubelet.status.container_resources import quota_to_milli_cpu, shares_to_milli_cpu, status_resources

CPU1_MEM1G = {"cpu": "1", "memory": "1Gi"}
CPU2_MEM2G = {"cpu": "2", "memory": "2Gi"}
ONE_CPU_1G = LinuxResources(cpu_period=100_000, cpu_quota=100_000, cpu_shares=1024, memory_limit_bytes=1 << 30)


def test_guaranteed_with_cpu_and_memory_cri_status() -> None:
    out = status_resources(CPU1_MEM1G, CPU1_MEM1G, True, ONE_CPU_1G, {"requests": CPU1_MEM1G}, None)
    assert out == {"limits": CPU1_MEM1G, "requests": CPU1_MEM1G}


def test_burstable_reports_the_runtime_not_the_old_status() -> None:
    """'BurstableQoSPod with CPU and memory CRI status': the old status said 2 CPUs; the runtime says 1."""
    old = {"limits": CPU2_MEM2G, "requests": CPU1_MEM1G}
    assert status_resources(CPU1_MEM1G, CPU1_MEM1G, True, ONE_CPU_1G, {"requests": CPU1_MEM1G}, old) == {
        "limits": CPU1_MEM1G, "requests": CPU1_MEM1G}


def test_burstable_without_cpu_and_below_the_minimums() -> None:
    """'BurstableQoSPod without CPU' and 'BurstableQoSPod with below min CPU': 2 shares and a 10m quota are the
    kernel's floor; an allocation at or below them is kept."""
    min_shares = LinuxResources(cpu_shares=2)
    assert status_resources({"memory": "100M"}, None, True, min_shares, {"requests": {"memory": "100M"}},
                            None) == {"requests": {"memory": "100M"}}
    floor = LinuxResources(cpu_period=100_000, cpu_quota=1_000, cpu_shares=2)
    assert status_resources({"memory": "100M", "cpu": "1m"}, {"cpu": "5m"}, True, floor,
                            {"requests": {"memory": "100M", "cpu": "1m"}}, None) == {
        "limits": {"cpu": "5m"}, "requests": {"memory": "100M", "cpu": "1m"}}


def test_extended_resources_and_storage_stay_as_allocated() -> None:
    allocated = {**CPU1_MEM1G, "ephemeral-storage": "2G", "example.com/gpu": "1"}
    out = status_resources(allocated, allocated, True, ONE_CPU_1G, {"requests": allocated}, None)
    assert out == {"limits": allocated, "requests": allocated}


def test_best_effort_and_not_running() -> None:
    """'BestEffortQoSPod', 'newly created Pod', 'newly terminated Pod': the allocation as it is."""
    assert status_resources(None, None, True, LinuxResources(cpu_shares=2), None, None) == {}
    assert status_resources(CPU2_MEM2G, CPU2_MEM2G, False, ONE_CPU_1G, None, None) == {
        "limits": CPU2_MEM2G, "requests": CPU2_MEM2G}


def test_resizing_pod_reports_what_runs() -> None:
    """'resizing Pod': allocated 2 CPUs / 2Gi, the runtime still at 1 / 1Gi (and the actuated memory request)."""
    out = status_resources(CPU2_MEM2G, CPU2_MEM2G, True, ONE_CPU_1G, {"requests": CPU1_MEM1G, "limits": CPU1_MEM1G},
                           None)
    assert out == {"limits": CPU1_MEM1G, "requests": CPU1_MEM1G}


def test_values_the_runtime_does_not_give_keep_the_last_status() -> None:
    """preserveOldResourcesValue: same running container, nothing from the runtime for that value."""
    old: dict[str, Any] = {"limits": {"cpu": "300m", "memory": "64Mi"}, "requests": {"cpu": "200m", "memory": "32Mi"}}
    out = status_resources({"cpu": "250m", "memory": "48Mi"}, {"cpu": "500m", "memory": "96Mi"}, True,
                           LinuxResources(), None, old)
    assert out == old
    # and with nothing from the runtime and no record: the allocation (upstream's default)
    assert status_resources({"cpu": "250m"}, {"cpu": "500m"}, True, None, None, None) == {
        "limits": {"cpu": "500m"}, "requests": {"cpu": "250m"}}


def test_unit_conversions() -> None:
    """cm.SharesToMilliCPU and cm.QuotaToMilliCPU."""
    assert [shares_to_milli_cpu(s) for s in (0, 1, 2, 102, 1024, 1536)] == [0, 0, 2, 100, 1000, 1500]
    assert [quota_to_milli_cpu(q, 100_000) for q in (-1, 0, 1_000, 20_000, 150_000)] == [0, 0, 10, 200, 1500]
