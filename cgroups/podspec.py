"""Read-only views of the parts of a pod dict (Kubernetes JSON shape) the cgroup rules need."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from minikubelet.base.quantity import parse_quantity

Pod = Mapping[str, Any]
Container = Mapping[str, Any]
ResourceList = dict[str, Fraction]

# Resources allowed in pod-level `spec.resources` (besides hugepages-*), as upstream.
_POD_LEVEL_RESOURCES = ("cpu", "memory")
HUGEPAGES_PREFIX = "hugepages-"


def spec(pod: Pod) -> Mapping[str, Any]:
    return pod.get("spec") or {}


def containers(pod: Pod) -> list[Container]:
    return list(spec(pod).get("containers") or [])


def init_containers(pod: Pod) -> list[Container]:
    return list(spec(pod).get("initContainers") or [])


def is_restartable_init(container: Container) -> bool:
    """A sidecar: an init container with restartPolicy Always."""
    return container.get("restartPolicy") == "Always"


def is_sidecar(pod: Pod, container: Container) -> bool:
    if not is_restartable_init(container):
        return False
    return any(c.get("name") == container.get("name") for c in init_containers(pod))


def _parse_list(raw: Mapping[str, Any] | None) -> ResourceList:
    return {name: parse_quantity(value) for name, value in (raw or {}).items()}


def _with_defaulted_requests(requests: ResourceList, limits: ResourceList) -> ResourceList:
    # API defaulting sets request := limit when only a limit is given. Static pods may not
    # have been through the API server, so apply it again (it is idempotent).
    merged = dict(requests)
    for name, value in limits.items():
        merged.setdefault(name, value)
    return merged


def container_limits(container: Container) -> ResourceList:
    return _parse_list((container.get("resources") or {}).get("limits"))


def container_requests(container: Container) -> ResourceList:
    resources = container.get("resources") or {}
    return _with_defaulted_requests(_parse_list(resources.get("requests")), container_limits(container))


def is_pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def pod_level_limits(pod: Pod) -> ResourceList:
    raw = (spec(pod).get("resources") or {}).get("limits")
    return {k: v for k, v in _parse_list(raw).items() if is_pod_level_resource(k)}


def pod_level_requests(pod: Pod) -> ResourceList:
    raw = (spec(pod).get("resources") or {}).get("requests")
    requests = {k: v for k, v in _parse_list(raw).items() if is_pod_level_resource(k)}
    return _with_defaulted_requests(requests, pod_level_limits(pod))


def has_pod_level_resources(pod: Pod) -> bool:
    return bool(pod_level_requests(pod) or pod_level_limits(pod))


def overhead(pod: Pod) -> ResourceList:
    return _parse_list(spec(pod).get("overhead"))


def all_containers(pod: Pod) -> Iterator[Container]:
    """Regular and init containers; ephemeral containers never count for resources or QoS."""
    yield from containers(pod)
    yield from init_containers(pod)


def pod_uid(pod: Pod) -> str:
    uid = (pod.get("metadata") or {}).get("uid")
    if not uid:
        raise ValueError("pod has no metadata.uid")
    return str(uid)
