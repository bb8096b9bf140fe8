"""The node's status, set field by field as upstream's nodestatus setters do (pure: JSON in, JSON out).

`set_node_status(node, inputs, now)` runs the setters in upstream's order (addresses, machine info,
versions, daemon endpoints, images, OS/arch, then the MemoryPressure, DiskPressure, PIDPressure and
Ready conditions) and returns the node events the conditions' transitions call for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from cri.types import Image
from minikubelet.base.durations import go_duration
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.quantity import format_quantity
from minikubelet.node.labels import NODE_OS, go_arch
from minikubelet.node.machine import MachineInfo

Json = dict[str, Any]

KUBELET_PORT = 10250  # upstream's default `port`: where the API server reaches the kubelet
# The one switch for declaring ExtendWebSocketsToKubelet (status.declaredFeatures; the 1.36 kubelet does): an
# API server then passes kubectl's WebSocket straight through for exec, attach and port-forward instead of
# translating to SPDY. Only a node whose /exec, /attach and /portForward all serve WebSocket may declare it; ours
# do (v5/v4 channels, and the SPDY tunnel for port-forward), so it is on; the feature gate overrides it.
DECLARE_EXTEND_WEBSOCKETS_TO_KUBELET = True
EXTEND_WEBSOCKETS_TO_KUBELET = "ExtendWebSocketsToKubelet"
MAX_IMAGES = 50  # nodeStatusMaxImages
MAX_NAMES_PER_IMAGE = 5
CONDITION_ORDER = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
_REQUIRED_CAPACITY = ("cpu", "memory", "pods", "ephemeral-storage")


@dataclass(frozen=True)
class NodeStatusInputs:
    hostname: str
    node_ip: str  # "" when no address could be found
    machine: MachineInfo
    capacity: Mapping[str, Fraction]  # cpu, memory, ephemeral-storage, pods, hugepages-*
    reservation: Mapping[str, Fraction]  # kube + system reserved + hard eviction thresholds
    runtime_type: str = "docker"
    runtime_version: str = ""  # "" when the runtime did not answer: "Unknown"
    kubelet_version: str = ""
    kubelet_port: int = KUBELET_PORT
    images: Sequence[Image] = ()
    memory_pressure: bool = False
    disk_pressure: bool = False
    pid_pressure: bool = False
    runtime_errors: tuple[str, ...] = ()  # container runtime down, PLEG unhealthy, ...
    network_errors: tuple[str, ...] = ()  # the runtime's pod network not ready
    shutdown_errors: tuple[str, ...] = ()  # the node is shutting down
    declared_features: tuple[str, ...] = ()


def binary_si(value: Fraction) -> str:
    """resource.Quantity's canonical BinarySI String(): the largest power of 1024 that divides a whole number
    of at least 1024, else the plain integer (15598016000); a fraction or a number below 1024 as DecimalSI."""
    return format_quantity(value, binary=True)


def decimal_si(value: Fraction) -> str:
    return format_quantity(value)


def _format(resource: str, value: Fraction) -> str:
    return decimal_si(value) if resource in ("cpu", "pods") else binary_si(value)


def allocatable(capacity: Mapping[str, Fraction], reservation: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """capacity - reservation (never negative); huge page pools come out of memory (upstream MachineInfo)."""
    out = {k: max(Fraction(0), v - reservation.get(k, Fraction(0))) for k, v in capacity.items()}
    for name, value in capacity.items():
        if name.startswith("hugepages-") and "memory" in out:
            out["memory"] = max(Fraction(0), out["memory"] - value)
    return out


def set_addresses(node: Json, inputs: NodeStatusInputs) -> None:
    status = node.setdefault("status", {})
    addresses = [{"type": "InternalIP", "address": inputs.node_ip}] if inputs.node_ip else []
    status["addresses"] = [*addresses, {"type": "Hostname", "address": inputs.hostname}]


def set_machine_info(node: Json, inputs: NodeStatusInputs) -> None:
    status = node.setdefault("status", {})
    info = status.setdefault("nodeInfo", {})
    info["machineID"] = inputs.machine.machine_id
    info["systemUUID"] = inputs.machine.system_uuid
    info["bootID"] = inputs.machine.boot_id
    capacity = dict(status.get("capacity") or {})
    capacity.update({k: _format(k, v) for k, v in inputs.capacity.items()})
    status["capacity"] = capacity
    alloc = dict(status.get("allocatable") or {})
    alloc.update({k: _format(k, v) for k, v in allocatable(inputs.capacity, inputs.reservation).items()})
    status["allocatable"] = alloc


def set_version_info(node: Json, inputs: NodeStatusInputs) -> None:
    info = node.setdefault("status", {}).setdefault("nodeInfo", {})
    info["kernelVersion"] = inputs.machine.kernel_version
    info["osImage"] = inputs.machine.os_image
    info["containerRuntimeVersion"] = f"{inputs.runtime_type}://{inputs.runtime_version or 'Unknown'}"
    info["kubeletVersion"] = inputs.kubelet_version
    info["kubeProxyVersion"] = ""  # DisableNodeKubeProxyVersion is on by default since v1.33


def set_daemon_endpoints(node: Json, inputs: NodeStatusInputs) -> None:
    node.setdefault("status", {})["daemonEndpoints"] = {"kubeletEndpoint": {"Port": inputs.kubelet_port}}


def set_images(node: Json, inputs: NodeStatusInputs) -> None:
    # sliceutils.ByImageSize, as the image cache keeps the list: size, then image ID, both descending
    ordered = sorted(inputs.images, key=lambda i: (i.size, i.id), reverse=True)[:MAX_IMAGES]
    node.setdefault("status", {})["images"] = [
        {"names": [*i.repo_digests, *i.repo_tags][:MAX_NAMES_PER_IMAGE], "sizeBytes": i.size} for i in ordered
    ]


def declared_features(feature_gates: Mapping[str, bool]) -> tuple[str, ...]:
    """What the node declares: the ExtendWebSocketsToKubelet gate when set, else the switch above."""
    if feature_gates.get(EXTEND_WEBSOCKETS_TO_KUBELET, DECLARE_EXTEND_WEBSOCKETS_TO_KUBELET):
        return (EXTEND_WEBSOCKETS_TO_KUBELET,)
    return ()


def set_declared_features(node: Json, inputs: NodeStatusInputs) -> None:
    status = node.setdefault("status", {})
    if inputs.declared_features:
        status["declaredFeatures"] = sorted(inputs.declared_features)
    else:
        status.pop("declaredFeatures", None)


def set_go_runtime(node: Json, inputs: NodeStatusInputs) -> None:
    info = node.setdefault("status", {}).setdefault("nodeInfo", {})
    info["operatingSystem"] = NODE_OS
    info["architecture"] = go_arch()


def _condition(node: Json, kind: str) -> Json | None:
    for c in node.setdefault("status", {}).setdefault("conditions", []):
        if c.get("type") == kind:
            return dict(c)
    return None


def _put_condition(node: Json, condition: Json) -> None:
    conditions = node["status"]["conditions"]
    for i, c in enumerate(conditions):
        if c.get("type") == condition["type"]:
            conditions[i] = condition
            return
    conditions.append(condition)


_PRESSURE = {
    "MemoryPressure": (("KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
                        "NodeHasInsufficientMemory"),
                       ("KubeletHasSufficientMemory", "kubelet has sufficient memory available",
                        "NodeHasSufficientMemory")),
    "DiskPressure": (("KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure"),
                     ("KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasNoDiskPressure")),
    "PIDPressure": (("KubeletHasInsufficientPID", "kubelet has insufficient PID available", "NodeHasInsufficientPID"),
                    ("KubeletHasSufficientPID", "kubelet has sufficient PID available", "NodeHasSufficientPID")),
}


def set_pressure_condition(node: Json, kind: str, pressure: bool, now: str, events: list[tuple[str, str]]) -> None:
    condition = _condition(node, kind) or {"type": kind, "status": "Unknown"}
    condition["lastHeartbeatTime"] = now
    want = "True" if pressure else "False"
    if condition.get("status") != want:
        reason, message, event = _PRESSURE[kind][0 if pressure else 1]
        condition.update(status=want, reason=reason, message=message, lastTransitionTime=now)
        events.append(("Normal", event))
    ordered: Json = {k: condition[k] for k in ("type", "status", "lastHeartbeatTime", "lastTransitionTime", "reason",
                                          "message") if k in condition}
    _put_condition(node, ordered)


def _aggregate(errors: Sequence[str]) -> str:
    """apimachinery's errors.NewAggregate(...).Error() of nested aggregates: flattened, repeats dropped,
    bracketed when more than one message is left."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def set_ready_condition(node: Json, inputs: NodeStatusInputs, now: str, events: list[tuple[str, str]]) -> None:
    # ReadyCondition's order: runtime, network, (storage,) node shutdown, then missing capacity
    errors = [*inputs.runtime_errors, *inputs.network_errors, *inputs.shutdown_errors]
    capacity = node.get("status", {}).get("capacity") or {}
    missing = [r for r in _REQUIRED_CAPACITY if r not in capacity]
    if missing:
        errors.append(f"missing node capacity for resources: {', '.join(missing)}")
    if errors:
        new: Json = {"type": "Ready", "status": "False", "lastHeartbeatTime": now, "lastTransitionTime": now,
                     "reason": "KubeletNotReady", "message": _aggregate(errors)}
    else:
        new = {"type": "Ready", "status": "True", "lastHeartbeatTime": now, "lastTransitionTime": now,
               "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    old = _condition(node, "Ready")
    if old is not None:
        if old.get("status") == new["status"]:
            new["lastTransitionTime"] = old.get("lastTransitionTime", now)
        else:
            events.append(("Normal", "NodeReady" if new["status"] == "True" else "NodeNotReady"))
    _put_condition(node, new)


def set_node_status(node: Json, inputs: NodeStatusInputs, now: float) -> list[tuple[str, str]]:
    """Every setter on `node` (in place); the (type, reason) node events to record."""
    ts = rfc3339(now)
    events: list[tuple[str, str]] = []
    set_addresses(node, inputs)
    set_machine_info(node, inputs)
    set_version_info(node, inputs)
    set_daemon_endpoints(node, inputs)
    set_images(node, inputs)
    set_declared_features(node, inputs)
    set_go_runtime(node, inputs)
    set_pressure_condition(node, "MemoryPressure", inputs.memory_pressure, ts, events)
    set_pressure_condition(node, "DiskPressure", inputs.disk_pressure, ts, events)
    set_pressure_condition(node, "PIDPressure", inputs.pid_pressure, ts, events)
    set_ready_condition(node, inputs, ts, events)
    return events


def _without_heartbeats(status: Json) -> Json:
    """For comparison only: shares everything with `status` but the conditions (no deep copy)."""
    out = dict(status)
    conditions = sorted(out.pop("conditions", None) or [], key=lambda c: str(c.get("type")))
    out["conditions"] = [{k: v for k, v in c.items() if k != "lastHeartbeatTime"} for c in conditions]
    return out


def node_status_has_changed(original: Json, status: Json) -> bool:
    """Upstream nodeStatusHasChanged: anything but the conditions' heartbeat times."""
    return _without_heartbeats(original) != _without_heartbeats(status)


RUNTIME_SYNC_THRESHOLD = 30.0  # upstream maxWaitForContainerRuntime
PLEG_RELIST_THRESHOLD = 180.0  # upstream relistThreshold


def runtime_errors(now: float, last_runtime_ok: float | None, last_relist: float | None) -> tuple[str, ...]:
    """Why the node is not ready as upstream's runtimeState says it (monotonic seconds; None: never)."""
    errors: list[str] = []
    if last_runtime_ok is None:
        errors.append("container runtime status check may not have completed yet")
    elif now - last_runtime_ok > RUNTIME_SYNC_THRESHOLD:
        errors.append("container runtime is down")
    if last_relist is None:
        errors.append("PLEG is not healthy: pleg has yet to be successful")
    elif now - last_relist > PLEG_RELIST_THRESHOLD:
        errors.append(f"PLEG is not healthy: pleg was last seen active {go_duration(now - last_relist)} ago; "
                      f"threshold is {go_duration(PLEG_RELIST_THRESHOLD)}")
    return tuple(errors)
