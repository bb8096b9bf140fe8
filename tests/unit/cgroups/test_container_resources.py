"""Per-container LinuxResources (upstream kuberuntime calculateLinuxResources)."""

from __future__ import annotations

from typing import Any

from cgroups.container_resources import container_linux_resources
from cri.types import LinuxResources
from minikubelet.base.podview import PodView
from tests.unit.cgroups.fixtures import ctr, pod

CAP = 8_000_000_000


def resources(p: PodView, c: dict[str, Any], **kw: Any) -> LinuxResources:
    return container_linux_resources(p, p.container(c["name"]), CAP, **kw)


def test_guaranteed_container() -> None:
    c = ctr("a", {"cpu": "500m", "memory": "128Mi"}, {"cpu": "500m", "memory": "128Mi"})
    got = resources(pod([c]), c, min_oom_score_adj=-1000)
    assert got == LinuxResources(
        cpu_period=100000, cpu_quota=50000, cpu_shares=512, memory_limit_bytes=128 * 2**20, oom_score_adj=-997
    )


def test_guaranteed_oom_score_clamped_for_unprivileged_runtime() -> None:
    c = ctr("a", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})
    assert resources(pod([c]), c, min_oom_score_adj=0).oom_score_adj == 0


def test_shares_from_limit_when_no_request() -> None:
    c = ctr("a", None, {"cpu": "250m"})
    got = resources(pod([c]), c, min_oom_score_adj=-1000)
    assert (got.cpu_shares, got.cpu_quota, got.memory_limit_bytes) == (256, 25000, 0)


def test_best_effort_container() -> None:
    c = ctr("a")
    got = resources(pod([c]), c, min_oom_score_adj=-1000)
    assert got == LinuxResources(cpu_period=100000, cpu_quota=0, cpu_shares=2, memory_limit_bytes=0, oom_score_adj=1000)


def test_quota_disabled() -> None:
    c = ctr("a", {"cpu": "100m"}, {"cpu": "200m", "memory": "64Mi"})
    got = resources(pod([c]), c, min_oom_score_adj=-1000, cpu_cfs_quota=False)
    assert (got.cpu_period, got.cpu_quota, got.cpu_shares) == (0, 0, 102)


def test_custom_period() -> None:
    c = ctr("a", {"cpu": "100m"}, {"cpu": "200m"})
    got = resources(pod([c]), c, min_oom_score_adj=-1000, period_us=50000)
    assert (got.cpu_period, got.cpu_quota) == (50000, 10000)


def test_pod_level_limit_applies_to_unlimited_container() -> None:
    c = ctr("a", {"cpu": "100m", "memory": "64Mi"})
    p = pod([c], pod_resources={"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
    got = resources(p, c, min_oom_score_adj=-1000)
    assert (got.cpu_quota, got.memory_limit_bytes) == (100000, 2**30)


def test_burstable_oom_score() -> None:
    c = ctr("a", {"memory": "800M"}, {"memory": "1G"})
    assert resources(pod([c]), c, min_oom_score_adj=-1000).oom_score_adj == 900
