"""Effective pod requests and limits, as upstream k8s.io/component-helpers/resource PodRequests/PodLimits.

Sidecar-aware (KEP-753): while init container i runs, the sidecars started before it run too, so
    InitContainerUse(i) = Σ sidecars[<i] + init(i)
    Effective           = max(max_i InitContainerUse(i), Σ sidecars + Σ regular containers) (+ overhead)
Pod-level `spec.resources` (PodLevelResources) replace the aggregate for the resources they name.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from cgroups.podspec import (
    Container,
    Pod,
    ResourceList,
    all_containers,
    container_limits,
    container_requests,
    containers,
    init_containers,
    is_restartable_init,
    overhead,
    pod_level_limits,
    pod_level_requests,
)

# Unlimited is None: some container has no limit for that resource.
LimitList = dict[str, Fraction | None]

_ALWAYS_REPORTED = ("cpu", "memory")


def _add(total: dict[str, Fraction], part: ResourceList) -> None:
    for name, value in part.items():
        total[name] = total.get(name, Fraction(0)) + value


def _max_into(total: dict[str, Fraction], part: ResourceList) -> None:
    for name, value in part.items():
        if name not in total or value > total[name]:
            total[name] = value


def aggregate(pod: Pod, read: Callable[[Container], ResourceList]) -> ResourceList:
    """Sidecar-aware aggregate of one per-container resource list (requests or limits)."""
    result: dict[str, Fraction] = {}
    for c in containers(pod):
        _add(result, read(c))
    running_sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for c in init_containers(pod):
        own = read(c)
        if is_restartable_init(c):
            _add(result, own)
            _add(running_sidecars, own)
            use = dict(running_sidecars)
        else:
            use = dict(own)
            _add(use, running_sidecars)
        _max_into(init_peak, use)
    _max_into(result, init_peak)
    return result


def pod_requests(pod: Pod) -> ResourceList:
    """Effective pod requests including spec.overhead (what the scheduler and the pod cgroup use)."""
    result = aggregate(pod, container_requests)
    result.update(pod_level_requests(pod))
    _add(result, overhead(pod))
    return result


def pod_limits(pod: Pod) -> LimitList:
    """Effective pod limits; None where the pod is unlimited for that resource.

    A resource is unlimited unless every container (regular, init and sidecar) declares a
    non-zero limit for it, or the pod-level spec.resources.limits sets it. Overhead is added to
    bounded limits only, as upstream adds it to non-zero limits.
    """
    summed = aggregate(pod, container_limits)
    pod_level = pod_level_limits(pod)
    names = set(_ALWAYS_REPORTED) | set(summed) | set(pod_level)
    cs = list(all_containers(pod))
    result: LimitList = {}
    extra = overhead(pod)
    for name in sorted(names):
        value: Fraction | None
        if name in pod_level:
            value = pod_level[name]
        elif cs and all(container_limits(c).get(name, Fraction(0)) > 0 for c in cs):
            value = summed[name]
        else:
            value = None
        if value is not None and value > 0 and name in extra:
            value += extra[name]
        result[name] = value
    return result
