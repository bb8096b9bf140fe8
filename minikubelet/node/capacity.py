"""The node's capacity and allocatable resources (upstream cm's GetCapacity / GetNodeAllocatableAbsolute)."""

from __future__ import annotations

import os
from fractions import Fraction

from cgroups.allocatable import hard_eviction_reservation, parse_resource_list, subtract
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.node.procfs import memory_total


def node_capacity(root_dir: str, max_pods: int) -> dict[str, Fraction]:
    """cpu (cores), memory and ephemeral-storage (bytes of the filesystem holding the root dir), pods."""
    path = root_dir if os.path.isdir(root_dir) else "/"
    st = os.statvfs(path)
    return {
        "cpu": Fraction(os.cpu_count() or 1),
        "memory": Fraction(memory_total()),
        "ephemeral-storage": Fraction(st.f_blocks * st.f_frsize),
        "pods": Fraction(max_pods),
    }


def node_allocatable(config: KubeletConfig, capacity: dict[str, Fraction]) -> dict[str, Fraction]:
    """capacity - kubeReserved - systemReserved - hard eviction thresholds."""
    return subtract(capacity, parse_resource_list(config.kube_reserved), parse_resource_list(config.system_reserved),
                    hard_eviction_reservation(config.eviction_hard, capacity))
