"""Effective pod requests and limits, as upstream k8s.io/component-helpers/resource PodRequests/PodLimits.

Sidecar-aware (KEP-753): while init container i runs, the sidecars started before it run too, so
    InitContainerUse(i) = Σ sidecars[<i] + init(i)
    Effective           = max(max_i InitContainerUse(i), Σ sidecars + Σ regular containers) (+ overhead)
Pod-level `spec.resources` (PodLevelResources) replace the aggregate for the resources they name.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from minikubelet.base.podview import ContainerView, PodView, ResourceMap
from minikubelet.base.quantity import parse_quantity

ResourceList = dict[str, Fraction]
# Unlimited is None: some container has no limit for that resource.
LimitList = dict[str, Fraction | None]

_ALWAYS_REPORTED = ("cpu", "memory")
# Resources allowed in pod-level `spec.resources` (besides hugepages-*), as upstream.
_POD_LEVEL_RESOURCES = ("cpu", "memory")
HUGEPAGES_PREFIX = "hugepages-"


def _parse_list(raw: ResourceMap | None) -> ResourceList:
    return {name: parse_quantity(value) for name, value in (raw or {}).items()}


def _with_defaulted_requests(requests: ResourceList, limits: ResourceList) -> ResourceList:
    # API defaulting sets request := limit when only a limit is given. Static pods may not
    # have been through the API server, so apply it again (it is idempotent).
    merged = dict(requests)
    for name, value in limits.items():
        merged.setdefault(name, value)
    return merged


def container_limits(container: ContainerView) -> ResourceList:
    return _parse_list(container.limits)


def container_requests(container: ContainerView) -> ResourceList:
    return _with_defaulted_requests(_parse_list(container.requests), container_limits(container))


def is_pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def pod_level_limits(pod: PodView) -> ResourceList:
    return {k: v for k, v in _parse_list(pod.limits).items() if is_pod_level_resource(k)}


def pod_level_requests(pod: PodView) -> ResourceList:
    requests = {k: v for k, v in _parse_list(pod.requests).items() if is_pod_level_resource(k)}
    return _with_defaulted_requests(requests, pod_level_limits(pod))


def has_pod_level_resources(pod: PodView) -> bool:
    return bool(pod_level_requests(pod) or pod_level_limits(pod))


def overhead(pod: PodView) -> ResourceList:
    return _parse_list(pod.overhead)


def _add(total: dict[str, Fraction], part: ResourceList) -> None:
    for name, value in part.items():
        total[name] = total.get(name, Fraction(0)) + value


def _max_into(total: dict[str, Fraction], part: ResourceList) -> None:
    for name, value in part.items():
        if name not in total or value > total[name]:
            total[name] = value


def limits_as_declared(pod: PodView) -> list[ResourceList]:
    """The limits upstream's PodLimits hands its ContainerFn, container by container: a regular container's
    own; a sidecar's, the cumulative limits of the sidecars so far; a regular init container's, its own plus
    the sidecars started before it (they run beside it)."""
    seen = [container_limits(c) for c in pod.app_containers]
    sidecars: dict[str, Fraction] = {}
    for c in pod.init_containers:
        own = container_limits(c)
        if c.is_sidecar:
            _add(sidecars, own)
            seen.append(dict(sidecars))
        else:
            use = dict(own)
            _add(use, sidecars)
            seen.append(use)
    return seen


def aggregate(pod: PodView, read: Callable[[ContainerView], ResourceList]) -> ResourceList:
    """Sidecar-aware aggregate of one per-container resource list (requests or limits)."""
    result: dict[str, Fraction] = {}
    for c in pod.app_containers:
        _add(result, read(c))
    running_sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for c in pod.init_containers:
        own = read(c)
        if c.is_sidecar:
            _add(result, own)
            _add(running_sidecars, own)
            use = dict(running_sidecars)
        else:
            use = dict(own)
            _add(use, running_sidecars)
        _max_into(init_peak, use)
    _max_into(result, init_peak)
    return result


def pod_requests(pod: PodView) -> ResourceList:
    """Effective pod requests including spec.overhead (what the scheduler and the pod cgroup use)."""
    result = aggregate(pod, container_requests)
    result.update(pod_level_requests(pod))
    _add(result, overhead(pod))
    return result


def pod_limits(pod: PodView) -> LimitList:
    """Effective pod limits; None where the pod is unlimited for that resource.

    A resource is unlimited unless every container declares a non-zero limit for it, as upstream
    ResourceConfigForPod counts them (a regular init container is covered by the sidecars running beside
    it: `limits_as_declared`), or the pod-level spec.resources.limits sets it. Overhead is added to
    bounded limits only, as upstream adds it to non-zero limits.
    """
    summed = aggregate(pod, container_limits)
    pod_level = pod_level_limits(pod)
    names = set(_ALWAYS_REPORTED) | set(summed) | set(pod_level)
    declared = limits_as_declared(pod)  # ephemeral containers never count
    result: LimitList = {}
    extra = overhead(pod)
    for name in sorted(names):
        value: Fraction | None
        if name in pod_level:
            value = pod_level[name]
        elif declared and all(limits.get(name, Fraction(0)) > 0 for limits in declared):
            value = summed[name]
        else:
            value = None
        if value is not None and value > 0 and name in extra:
            value += extra[name]
        result[name] = value
    return result
