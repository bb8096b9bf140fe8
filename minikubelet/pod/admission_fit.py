"""Resource fit and host ports, as the scheduler's noderesources.Fits and nodeports.Fits the kubelet reuses.

Requests are the effective pod requests of upstream resourcehelper.PodRequests (sidecars, init containers,
pod-level resources, overhead: `cgroups.resources.pod_requests`), in the scheduler's integer units: cpu in
millicores, everything else in units, both rounded up as Quantity.MilliValue()/Value() do. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from cgroups.resources import overhead, pod_requests
from minikubelet.base.podview import PodView

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
_FIRST_CLASS = (CPU, MEMORY, EPHEMERAL_STORAGE)


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """v1helper.IsExtendedResourceName: outside the kubernetes.io namespace, not a quota `requests.` name."""
    return not is_native_resource(name) and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """schedutil.IsScalarResourceName: the resources besides cpu/memory/ephemeral-storage the scheduler counts."""
    return (is_extended_resource(name) or name.startswith("hugepages-")
            or (is_native_resource(name) and "/" in name) or name.startswith("attachable-volumes-"))


def _units(name: str, value: Fraction) -> int:
    return math.ceil(value * 1000) if name == CPU else math.ceil(value)


def to_units(resources: Mapping[str, Fraction]) -> dict[str, int]:
    """A resource list as the scheduler's Resource: the resources it counts, in integer units."""
    return {name: _units(name, v) for name, v in resources.items() if name in _FIRST_CLASS or is_scalar_resource(name)}


def pod_request_units(pod: PodView) -> dict[str, int]:
    """What one admitted pod holds (upstream PodInfo.CalculateResource)."""
    return to_units(pod_requests(pod))


def admitting_pod_request_units(pod: PodView, allocatable: Mapping[str, Fraction]) -> dict[str, int]:
    """The requests of the pod being admitted, without the extended resources the node does not have at all:
    upstream drops them (removeMissingExtendedResources) so that cluster-level resources do not block pods."""
    requests = pod_requests(pod)
    extra = overhead(pod)
    for name in [n for n in requests if is_extended_resource(n) and n not in allocatable]:
        if name in extra:
            requests[name] = extra[name]
        else:
            del requests[name]
    return to_units(requests)


@dataclass(frozen=True)
class InsufficientResource:
    resource: str
    requested: int
    used: int
    capacity: int

    @property
    def message(self) -> str:
        return (f"Node didn't have enough resource: {self.resource}, requested: {self.requested}, "
                f"used: {self.used}, capacity: {self.capacity}")

    @property
    def reason(self) -> str:
        """The kubelet's rejection reason: OutOfcpu, OutOfmemory, ..., OutOf<name> for the others."""
        return f"OutOf{self.resource}"

    @property
    def shortfall(self) -> int:
        """GetInsufficientAmount: what would have to be freed."""
        return self.requested - (self.capacity - self.used)


def sum_units(pods: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for p in pods:
        for name, v in p.items():
            total[name] = total.get(name, 0) + v
    return total


def fits_request(request: Mapping[str, int], admitted: int, used: Mapping[str, int],
                 allocatable: Mapping[str, int]) -> list[InsufficientResource]:
    """noderesources.fitsRequest: the pod count first, then cpu, memory, ephemeral-storage, the scalars.

    A request of exactly what is left fits; a zero request never fails.
    """
    out: list[InsufficientResource] = []
    allowed = allocatable.get(PODS, 0)
    if admitted + 1 > allowed:
        out.append(InsufficientResource(PODS, 1, admitted, allowed))
    if not any(request.values()):
        return out
    for name in (*_FIRST_CLASS, *sorted(n for n in request if n not in _FIRST_CLASS)):
        want = request.get(name, 0)
        if want > 0 and want > allocatable.get(name, 0) - used.get(name, 0):
            out.append(InsufficientResource(name, want, used.get(name, 0), allocatable.get(name, 0)))
    return out


# --- host ports ----------------------------------------------------------------------------------

BIND_ALL = "0.0.0.0"
HostPort = tuple[str, str, int]  # (host IP, protocol, port)


def host_ports(pod: PodView) -> list[HostPort]:
    """schedutil.GetHostPorts: ports with a hostPort of the app containers and the sidecars (which run for the
    pod's whole life); an empty IP means every address, an empty protocol TCP."""
    ports: list[HostPort] = []
    for c in (*pod.sidecars, *pod.app_containers):
        for p in c.ports:
            if p.host_port > 0:
                ports.append((p.host_ip or BIND_ALL, p.protocol or "TCP", p.host_port))
    return ports


def ports_conflict(want: Sequence[HostPort], in_use: Iterable[HostPort]) -> bool:
    """HostPortInfo.CheckConflict: 0.0.0.0 clashes with the same protocol/port on any IP, and any IP with
    0.0.0.0 or itself."""
    used = set(in_use)
    used_any_ip = {(proto, port) for _, proto, port in used}
    for ip, proto, port in want:
        if ip == BIND_ALL:
            if (proto, port) in used_any_ip:
                return True
        elif (BIND_ALL, proto, port) in used or (ip, proto, port) in used:
            return True
    return False
