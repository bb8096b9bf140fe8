"""The node's start-up events, in upstream's order (kubelet-flows/kubelet-startup-sequence.json)."""

from __future__ import annotations

from cgroups.detect import detect_cgroup_version
from minikubelet.cm.pod_cgroups import PodCgroups
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.events import CGROUP_V1, CGROUP_V1_MESSAGE, NODE_ALLOCATABLE_ENFORCED, STARTING_KUBELET, EventRecorder
from minikubelet.worker.dependencies import CgroupSource


def birth_cry(recorder: EventRecorder, config: KubeletConfig, cgroups: CgroupSource | None) -> None:
    recorder.node_event("Normal", STARTING_KUBELET, "Starting kubelet.")
    if detect_cgroup_version() == 1:
        recorder.node_event("Warning", CGROUP_V1, CGROUP_V1_MESSAGE)
    if config.cgroups_per_qos and "pods" in config.enforce_node_allocatable and isinstance(
            cgroups, PodCgroups) and cgroups.manager is not None:
        recorder.node_event("Normal", NODE_ALLOCATABLE_ENFORCED, "Updated Node Allocatable limit across pods")
