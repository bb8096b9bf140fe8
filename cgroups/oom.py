"""OOM score policy (upstream pkg/kubelet/qos/policy.go) and the runtime's clamp of it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final

from cgroups.qos import BEST_EFFORT, GUARANTEED, qos_class
from cgroups.resources import aggregate, container_requests, pod_level_requests
from minikubelet.base.podview import ContainerView, PodView

KUBELET_OOM_SCORE_ADJ: Final = -999
SANDBOX_OOM_SCORE_ADJ: Final = -998
GUARANTEED_OOM_SCORE_ADJ: Final = -997
BEST_EFFORT_OOM_SCORE_ADJ: Final = 1000
MIN_OOM_SCORE_ADJ: Final = -1000
MAX_OOM_SCORE_ADJ: Final = 1000

CONFIG_SOURCE_ANNOTATION: Final = "kubernetes.io/config.source"
CONFIG_MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
SYSTEM_NODE_CRITICAL: Final = "system-node-critical"
SYSTEM_CRITICAL_PRIORITY: Final = 2_000_000_000

CAP_SYS_RESOURCE: Final = 24


def is_critical_pod(pod: PodView) -> bool:
    """Static pods, mirror pods and pods at system-critical priority (upstream IsCriticalPod)."""
    annotations = pod.annotations
    source = annotations.get(CONFIG_SOURCE_ANNOTATION)
    if source is not None and source != "api":
        return True
    if CONFIG_MIRROR_ANNOTATION in annotations:
        return True
    return pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY


def is_node_critical_pod(pod: PodView) -> bool:
    return is_critical_pod(pod) and pod.priority_class_name == SYSTEM_NODE_CRITICAL


def _memory_request(c: ContainerView) -> int:
    return math.ceil(container_requests(c).get("memory", 0))


def _go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's int64 '/'."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _remaining_pod_memory_per_container(pod: PodView) -> int:
    # Pod-level memory request not claimed by any container, shared out evenly (KEP-2837).
    pod_request = pod_level_requests(pod).get("memory", 0)
    if not pod_request:
        return 0
    count = len(pod.containers)
    claimed = math.ceil(aggregate(pod, container_requests).get("memory", 0))
    return _go_div(math.ceil(pod_request) - claimed, count)


def container_oom_score_adj(pod: PodView, container_name: str, memory_capacity_bytes: int) -> int:
    """oom_score_adj for one container of a pod on a node with this much memory."""
    container = pod.container(container_name)
    if is_node_critical_pod(pod):
        return GUARANTEED_OOM_SCORE_ADJ
    qos = qos_class(pod)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BEST_EFFORT:
        return BEST_EFFORT_OOM_SCORE_ADJ

    extra = _remaining_pod_memory_per_container(pod) if pod_level_requests(pod) else 0
    adj = 1000 - _go_div(1000 * (_memory_request(container) + extra), memory_capacity_bytes)
    if container.is_sidecar:
        regular = pod.app_containers
        # A sidecar must not outlive the containers it serves: at most their lowest score.
        smallest = min((_memory_request(c) for c in regular), default=0) + extra
        adj = min(adj, 1000 - _go_div(1000 * smallest, memory_capacity_bytes))
    # Keep burstable above any guaranteed container and below best-effort ones.
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adj == BEST_EFFORT_OOM_SCORE_ADJ:
        return adj - 1
    return adj


def _has_cap_sys_resource(status_text: str) -> bool:
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def detect_min_oom_score_adj(proc_self: Path = Path("/proc/self")) -> int:
    """The lowest oom_score_adj this process can give its children.

    Without CAP_SYS_RESOURCE the kernel refuses to lower oom_score_adj below the caller's own
    value, so a runtime must clamp to it (containerd's restrict_oom_score_adj rule); runc
    otherwise fails with "can't get final child's PID from pipe".
    """
    if _has_cap_sys_resource((proc_self / "status").read_text()):
        return MIN_OOM_SCORE_ADJ
    return int((proc_self / "oom_score_adj").read_text().strip())


def clamp_oom_score_adj(value: int, minimum: int) -> int:
    return max(minimum, min(MAX_OOM_SCORE_ADJ, value))
