"""Per-container Linux resources for the runtime (upstream kuberuntime generateLinuxContainerResources)."""

from __future__ import annotations

import math
from fractions import Fraction

from cgroups.cpu import QUOTA_PERIOD_US, milli_cpu_to_quota, milli_cpu_to_shares, shares_to_weight, weight_to_shares
from cgroups.driver import ResourceConfig
from cgroups.oom import clamp_oom_score_adj, container_oom_score_adj
from cgroups.resources import container_limits, container_requests, pod_level_limits
from cri.types import LinuxResources
from minikubelet.base.podview import ContainerView, PodView


def _effective_limit(pod: PodView, container: ContainerView, name: str) -> Fraction:
    # With pod-level limits, a container without its own limit is bounded by the pod's.
    own = container_limits(container).get(name, Fraction(0))
    if own > 0:
        return own
    return pod_level_limits(pod).get(name, Fraction(0))


def container_linux_resources(
    pod: PodView,
    container: ContainerView,
    memory_capacity: int,
    min_oom_score_adj: int,
    cpu_cfs_quota: bool = True,
    period_us: int = QUOTA_PERIOD_US,
) -> LinuxResources:
    """Shares from the CPU request (request defaults to the limit), quota from the CPU limit,
    memory limit, and the policy oom_score_adj clamped to what this process may grant."""
    cpu_request = container_requests(container).get("cpu", Fraction(0))
    cpu_limit = _effective_limit(pod, container, "cpu")
    memory_limit = _effective_limit(pod, container, "memory")
    oom = container_oom_score_adj(pod, container.name, memory_capacity)
    quota = milli_cpu_to_quota(math.ceil(cpu_limit * 1000), period_us) if cpu_cfs_quota else 0
    return LinuxResources(
        cpu_period=period_us if cpu_cfs_quota else 0,
        cpu_quota=quota,
        cpu_shares=milli_cpu_to_shares(math.ceil(cpu_request * 1000)),
        memory_limit_bytes=math.ceil(memory_limit),
        oom_score_adj=clamp_oom_score_adj(oom, min_oom_score_adj),
    )


def kernel_readback(resources: LinuxResources, version: int) -> ResourceConfig:
    """What a container's cgroup files read back as (`CgroupDriver.read_config`) once the runtime applied
    `resources`: an unset (0) quota or memory limit is the kernel's unlimited (-1), an unset period its default;
    on cgroup v2 the shares went to cpu.weight and come back through the inverse map, not always to the same
    number. Shares left unset (0) are the runtime's default, not compared."""
    shares: int | None = resources.cpu_shares or None
    if shares is not None and version == 2:
        shares = weight_to_shares(shares_to_weight(shares))
    return ResourceConfig(
        cpu_shares=shares,
        cpu_quota=resources.cpu_quota if resources.cpu_quota > 0 else -1,
        cpu_period=resources.cpu_period or QUOTA_PERIOD_US,
        memory_limit=resources.memory_limit_bytes if resources.memory_limit_bytes > 0 else -1,
    )
