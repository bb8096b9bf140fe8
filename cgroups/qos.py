"""Pod QoS class, as upstream pkg/apis/core/v1/helper/qos (ComputePodQOS / GetPodQOS)."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Final

from cgroups.resources import (
    ResourceList,
    container_limits,
    container_requests,
    has_pod_level_resources,
    pod_level_limits,
    pod_level_requests,
)
from minikubelet.base.podview import PodView

GUARANTEED: Final = "Guaranteed"
BURSTABLE: Final = "Burstable"
BEST_EFFORT: Final = "BestEffort"
QOS_CLASSES: Final = (GUARANTEED, BURSTABLE, BEST_EFFORT)

# Only compute resources decide the class; hugepages, ephemeral-storage etc. do not.
_QOS_RESOURCES: Final = ("cpu", "memory")


def _positive_qos(resources: ResourceList) -> ResourceList:
    return {k: v for k, v in resources.items() if k in _QOS_RESOURCES and v > 0}


def _add(total: dict[str, Fraction], part: ResourceList) -> None:
    for name, value in part.items():
        total[name] = total.get(name, Fraction(0)) + value


def _classify(pairs: Iterable[tuple[ResourceList, ResourceList]]) -> str:
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for reqs, lims in pairs:
        _add(requests, _positive_qos(reqs))
        found = _positive_qos(lims)
        _add(limits, found)
        if not all(r in found for r in _QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()):
        if len(requests) == len(limits):
            return GUARANTEED
    return BURSTABLE


def compute_qos_class(pod: PodView) -> str:
    """The class from the spec alone (upstream ComputePodQOS, PodLevelResources enabled)."""
    if has_pod_level_resources(pod):
        return _classify([(pod_level_requests(pod), pod_level_limits(pod))])
    return _classify((container_requests(c), container_limits(c)) for c in pod.containers)


def qos_class(pod: PodView) -> str:
    """status.qosClass when the API server already set it (it never changes), else computed."""
    reported = pod.api_status.get("qosClass")
    if reported in QOS_CLASSES:
        return str(reported)
    return compute_qos_class(pod)
