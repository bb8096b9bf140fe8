"""The pod-level `status.allocatedResources` and `status.resources` a 1.36 kubelet reports
(InPlacePodLevelResourcesVerticalScaling, beta and on by default): the effective pod requests, and the
requests and limits the pod was given (upstream resourcehelper.PodRequests/PodLimits, sidecar-aware,
with pod-level `spec.resources` and overhead).

Upstream reads the pod cgroup for a Running pod (so a pod whose containers do not all set a memory
limit shows the cgroup's "unlimited" value there); this reports the values the cgroup was set from.
Sums print in the format of the quantities they came from (binary when one was written `…Mi`). Pure.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from cgroups.resources import aggregate, container_limits, overhead, pod_level_limits, pod_requests
from minikubelet.base.podview import PodView
from minikubelet.base.quantity import format_quantity, is_binary


def _binary_names(pod: PodView) -> set[str]:
    raws = [pod.requests, pod.limits, pod.overhead]
    for c in (*pod.init_containers, *pod.app_containers):
        raws += [c.requests, c.limits]
    return {name for raw in raws for name, text in (raw or {}).items() if is_binary(text)}


def _render(values: dict[str, Fraction], binary: set[str]) -> dict[str, str]:
    return {name: format_quantity(values[name], name in binary) for name in sorted(values) if values[name] > 0}


def pod_limits(pod: PodView) -> dict[str, Fraction]:
    """PodLimits: the declared limits, summed sidecar-aware; pod-level limits win; overhead on the non-zero."""
    limits = aggregate(pod, container_limits)
    limits.update(pod_level_limits(pod))
    for name, extra in overhead(pod).items():
        if limits.get(name):
            limits[name] += extra
    return limits


def pod_resources_status(pod: PodView) -> dict[str, Any]:
    """`allocatedResources` (omitted when empty) and `resources` ({} for a BestEffort pod)."""
    binary = _binary_names(pod)
    out: dict[str, Any] = {}
    requests = _render(pod_requests(pod), binary)
    if requests:
        out["allocatedResources"] = dict(requests)
    resources: dict[str, Any] = {}
    limits = _render(pod_limits(pod), binary)
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    out["resources"] = resources
    return out
