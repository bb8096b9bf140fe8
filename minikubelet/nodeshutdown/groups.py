"""Which pods stop in which order during a node shutdown, and with what grace (pure).

Upstream's podManager in nodeshutdown_manager.go: `shutdownGracePeriod`/`shutdownGracePeriodCriticalPods` become
two priority groups (regular pods below system-critical priority, then critical pods); with
`shutdownGracePeriodByPodPriority` the groups are the configured ones. Groups stop from the lowest priority up,
each within its own share of the grace.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig, ShutdownGracePeriodByPodPriority
from minikubelet.worker.lifecycle import PodStatusFn

# k8s.io/kubernetes/pkg/apis/scheduling
DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS = 0
SYSTEM_CRITICAL_PRIORITY = 2 * 1_000_000_000

SHUTDOWN_REASON = "Terminated"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
NOT_ADMITTED_REASON = "NodeShutdown"
NOT_ADMITTED_MESSAGE = "Pod was rejected as the node is shutting down."
NODE_SHUTTING_DOWN = "node is shutting down"  # the node's Ready message while it shuts down


def migrate_config(grace: float, critical: float) -> list[ShutdownGracePeriodByPodPriority]:
    """The two groups the two plain settings stand for (upstream migrateConfig); none when `grace` is 0."""
    if grace == 0 or critical > grace:
        return []
    regular = int(grace - critical)
    return [ShutdownGracePeriodByPodPriority(DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS, regular),
            ShutdownGracePeriodByPodPriority(SYSTEM_CRITICAL_PRIORITY, int(grace) - regular)]


def shutdown_periods(config: KubeletConfig, by_priority_gate: bool = True) -> list[ShutdownGracePeriodByPodPriority]:
    """The configured groups sorted from the lowest priority up; empty: graceful shutdown is off."""
    periods = list(config.shutdown_grace_period_by_pod_priority)
    if not by_priority_gate or not periods:
        periods = migrate_config(config.shutdown_grace_period, config.shutdown_grace_period_critical_pods)
    return sorted(periods, key=lambda p: p.priority)


def period_requested(periods: Sequence[ShutdownGracePeriodByPodPriority]) -> int:
    """Seconds the whole shutdown may take: what logind's InhibitDelayMaxSec must allow."""
    return sum(p.grace_seconds for p in periods)


@dataclass
class ShutdownGroup:
    priority: int
    grace_seconds: int
    pods: list[Pod] = field(default_factory=list)


def group_by_priority(periods: Sequence[ShutdownGracePeriodByPodPriority], pods: Sequence[Pod]) -> list[ShutdownGroup]:
    """Each pod in the group of the highest priority not above its own (upstream groupByPriority): a pod below
    every group lands in the lowest, one above every group in the highest."""
    groups = [ShutdownGroup(p.priority, p.grace_seconds) for p in periods]
    if not groups:
        return groups
    keys = [g.priority for g in groups]
    for pod in pods:
        priority = (pod.get("spec") or {}).get("priority")
        priority = priority if isinstance(priority, int) and not isinstance(priority, bool) else 0
        index = bisect.bisect_right(keys, priority) - 1
        groups[max(index, 0)].pods.append(pod)
    return groups


def pod_grace(pod: Pod, group_grace: int) -> int:
    """The group's grace, or the pod's own terminationGracePeriodSeconds when that is shorter."""
    own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if isinstance(own, int) and not isinstance(own, bool) and own <= group_grace:
        return own
    return group_grace


def shutdown_status_fn(pod: Pod, now: str) -> PodStatusFn:
    """The terminal status a pod gets (upstream's statusFn in killPods): Failed unless it already Succeeded,
    reason Terminated, and a DisruptionTarget condition by the kubelet."""
    generation = (pod.get("metadata") or {}).get("generation")

    def apply(status: dict[str, Any]) -> None:
        if status.get("phase") != "Succeeded":
            status["phase"] = "Failed"
        status["reason"] = SHUTDOWN_REASON
        status["message"] = SHUTDOWN_MESSAGE
        conditions = status.get("conditions", [])
        old = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
        condition: dict[str, Any] = {"type": "DisruptionTarget"}
        if isinstance(generation, int):
            condition["observedGeneration"] = generation
        condition.update({"status": "True", "lastProbeTime": None, "lastTransitionTime": now,
                          "reason": "TerminationByKubelet", "message": SHUTDOWN_MESSAGE})
        if old is not None and old.get("status") == "True":
            condition["lastTransitionTime"] = old.get("lastTransitionTime", now)
        status["conditions"] = [c for c in conditions if c.get("type") != "DisruptionTarget"] + [condition]

    return apply
