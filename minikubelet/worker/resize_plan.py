"""The pure half of an in-place resize (upstream kuberuntime_manager.go computePodResizeAction and
IsPodResizeInProgress): which running containers need new CPU or memory values, in which order, and which must
restart for them. The values compared are the allocation (the pod's spec as the worker has it) and the *actuated*
record (what the agent last gave the runtime), in bytes and millicores. The executor is `worker/resize.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from cgroups.resources import is_pod_level_resource, pod_level_limits
from cri.types import ContainerState, ContainerStatus
from minikubelet.base.podview import ContainerView, PodView
from minikubelet.base.quantity import format_quantity, parse_quantity
from minikubelet.runtime.state import PodRuntimeState

Requirements = dict[str, dict[str, str]]  # {"requests": {name: quantity}, "limits": {...}}

MEMORY, CPU = "memory", "cpu"
ActuatedLookup = Callable[[str], Requirements | None]  # container name -> its actuated record


@dataclass(frozen=True)
class ResourceValues:
    """upstream resourceRequirements: bytes and millicores, 0 for none."""

    memory_limit: int = 0
    memory_request: int = 0
    cpu_limit: int = 0
    cpu_request: int = 0


def _millis(v: Fraction) -> int:
    return math.ceil(v * 1000)


def _parse(raw: Mapping[str, Any] | None) -> dict[str, Fraction]:
    return {name: parse_quantity(v) for name, v in (raw or {}).items()}


def values_of(pod: PodView, requirements: Mapping[str, Any] | None) -> ResourceValues:
    """containerResourcesFromRequirements: requests as given, limits bounded by the pod-level ones when the
    container has none of its own (InPlacePodLevelResourcesVerticalScaling on)."""
    requests = _parse((requirements or {}).get("requests"))
    limits = _parse((requirements or {}).get("limits"))
    pod_limits = pod_level_limits(pod)
    mem_limit = limits.get(MEMORY) or pod_limits.get(MEMORY, Fraction(0))
    cpu_limit = limits.get(CPU) or pod_limits.get(CPU, Fraction(0))
    return ResourceValues(math.ceil(mem_limit), math.ceil(requests.get(MEMORY, Fraction(0))), _millis(cpu_limit),
                          _millis(requests.get(CPU, Fraction(0))))


def effective_requirements(pod: PodView, c: ContainerView) -> Requirements:
    """What a container is given, as its spec writes it: its requests and its limits, the pod-level limits standing
    in for those it lacks (upstream setActuatedContainerResources with GetLimits)."""
    requests = {str(k): str(v) for k, v in (c.requests or {}).items()}
    limits = {str(k): str(v) for k, v in (pod.limits or {}).items() if is_pod_level_resource(str(k))}
    limits.update({str(k): str(v) for k, v in (c.limits or {}).items()})
    out: Requirements = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def requirements_of_values(v: ResourceValues) -> Requirements:
    out: Requirements = {}
    req = {k: q for k, q in ((CPU, format_quantity(Fraction(v.cpu_request, 1000))),
                             (MEMORY, format_quantity(Fraction(v.memory_request), True))) if q != "0"}
    lim = {k: q for k, q in ((CPU, format_quantity(Fraction(v.cpu_limit, 1000))),
                             (MEMORY, format_quantity(Fraction(v.memory_limit), True))) if q != "0"}
    if req:
        out["requests"] = req
    if lim:
        out["limits"] = lim
    return out


@dataclass
class Actuated:
    """What a container runs with now, shared by its memory and CPU updates (the CPU update sends the memory
    values the memory update just set)."""

    values: ResourceValues


@dataclass
class ContainerUpdate:
    """containerToUpdateInfo: `actuated` follows each step the runtime accepted."""

    name: str
    container_id: str
    desired: ResourceValues
    actuated: Actuated

    @property
    def current(self) -> ResourceValues:
        return self.actuated.values


@dataclass
class ResizeActions:
    updates: dict[str, list[ContainerUpdate]] = field(default_factory=lambda: {MEMORY: [], CPU: []})
    update_pod_resources: bool = False  # a container restarts for its resize: the pod cgroup follows

    @property
    def idle(self) -> bool:
        return not (self.updates[MEMORY] or self.updates[CPU] or self.update_pod_resources)


def compute_container_resize(pod: PodView, c: ContainerView, status: ContainerStatus,
                             actuated: ActuatedLookup, actions: ResizeActions) -> bool:
    """computePodResizeAction for one running container: False when its resize policy restarts it (the caller
    kills and starts it), else True (and its updates are queued, decreases before increases)."""
    if status.state is not ContainerState.RUNNING:
        return True
    desired = values_of(pod, {"requests": c.requests, "limits": c.limits})
    current = values_of(pod, actuated(c.name))
    if desired == current:
        return True
    policies = {str(p.get("resourceName")): str(p.get("restartPolicy")) for p in c.raw.get("resizePolicy") or []
                if isinstance(p, dict)}

    def changes(resource: str, want: int, have: int) -> tuple[bool, bool]:
        if want == have:
            return False, False
        return True, policies.get(resource) == "RestartContainer"

    mem_lim, restart_mem_lim = changes(MEMORY, desired.memory_limit, current.memory_limit)
    mem_req, restart_mem_req = changes(MEMORY, desired.memory_request, current.memory_request)
    cpu_lim, restart_cpu_lim = changes(CPU, desired.cpu_limit, current.cpu_limit)
    cpu_req, restart_cpu_req = changes(CPU, desired.cpu_request, current.cpu_request)
    if restart_mem_lim or restart_mem_req or restart_cpu_lim or restart_cpu_req:
        actions.update_pod_resources = True
        return False

    shared = Actuated(current)

    def mark(resource: str, want: int, have: int) -> None:
        update = ContainerUpdate(c.name, status.id, desired, shared)
        if want > have:
            actions.updates[resource].append(update)
        elif want < have:
            actions.updates[resource].insert(0, update)

    if mem_lim:
        mark(MEMORY, desired.memory_limit, current.memory_limit)
    elif mem_req:
        mark(MEMORY, desired.memory_request, current.memory_request)
    if cpu_lim:
        mark(CPU, desired.cpu_limit, current.cpu_limit)
    elif cpu_req:
        mark(CPU, desired.cpu_request, current.cpu_request)
    return True


def resize_in_progress(pod: PodView, state: PodRuntimeState, actuated: ActuatedLookup) -> bool:
    """IsPodResizeInProgress: a running sidecar or regular container whose actuated CPU or memory differ from
    its allocation (not-running ones get theirs when they start)."""
    for c in (*pod.sidecars, *pod.app_containers):
        status = state.latest(c.name)
        if status is None or status.state is not ContainerState.RUNNING:
            continue
        if values_of(pod, {"requests": c.requests, "limits": c.limits}) != values_of(pod, actuated(c.name)):
            return True
    return False
