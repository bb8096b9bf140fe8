"""Downward-API resource fields (`resourceFieldRef`) as the kubelet resolves them: a container's limit or
request divided by the divisor and rounded up; a limit the container does not set is the node's allocatable
(upstream resource.ExtractResourceValueByContainerNameAndNodeAllocatable)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from minikubelet.base.quantity import QuantityError, parse_quantity


class ResourceFieldError(ValueError):
    pass


SUPPORTED = ("limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory",
             "requests.ephemeral-storage")


def _find_container(pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:  # type: ignore[union-attr]
            if isinstance(c, dict) and c.get("name") == name:
                return c
    return None


def _resources(container: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    res = container.get("resources")
    section = res.get(kind) if isinstance(res, dict) else None
    return section if isinstance(section, dict) else {}


def resource_field_value(ref: Mapping[str, Any], pod: Mapping[str, Any], container: Mapping[str, Any],
                         allocatable: Mapping[str, Fraction]) -> str:
    """The env value of one resourceFieldRef of `container` (or of `ref.containerName`)."""
    resource = ref.get("resource")
    if resource not in SUPPORTED and not (isinstance(resource, str) and resource.startswith(("limits.hugepages-",
                                                                                               "requests.hugepages-"))):
        raise ResourceFieldError(f"unsupported container resource : {resource}")
    target = container
    named = ref.get("containerName")
    if isinstance(named, str) and named:
        found = _find_container(pod, named)
        if found is None:
            raise ResourceFieldError(f"container {named!r} not found")
        target = found
    kind, _, name = str(resource).partition(".")
    try:
        divisor = parse_quantity(ref.get("divisor") or "1")
        raw = _resources(target, kind).get(name)
        value = parse_quantity(raw) if raw is not None else None
    except QuantityError as e:
        raise ResourceFieldError(str(e)) from e
    if divisor == 0:
        divisor = Fraction(1)  # the API server serialises an unset divisor as "0": upstream reads it as 1
    if divisor < 0:
        raise ResourceFieldError(f"invalid divisor {ref.get('divisor')!r}")
    if value is None:
        # upstream MergeContainerResourceLimits: an unset limit is the node's allocatable; an unset request is 0
        value = allocatable.get(name, Fraction(0)) if kind == "limits" else Fraction(0)
    if name == "cpu":
        # convertResourceCPUToString: millicores, rounded up, then divided by the divisor's millicores
        millis = math.ceil(value * 1000)
        return str(math.ceil(Fraction(millis) / Fraction(math.ceil(divisor * 1000)))) if divisor * 1000 >= 1 else "0"
    return str(math.ceil(Fraction(math.ceil(value)) / Fraction(math.ceil(divisor))))
