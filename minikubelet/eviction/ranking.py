"""Which pod goes first, and what its eviction says (upstream eviction/helpers.go ranking and messages). Pure.

Memory: pods whose usage exceeds their requests first, then lower priority, then the most usage above
requests. Disk: the same with ephemeral storage (or inodes). PIDs: lower priority, then more processes.
A pod without stats ranks before every pod with stats. Python's sort is stable, as the ranking needs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from fractions import Fraction
from typing import Any

from minikubelet.base.podview import Pod, PodView
from minikubelet.base.quantity import QuantityError, format_quantity, is_binary, parse_quantity
from minikubelet.eviction.filesystems import ALL_FS_STATS, FS_LOCAL_VOLUMES, FS_LOGS, FS_ROOT
from minikubelet.eviction.thresholds import (
    RESOURCE_EPHEMERAL_STORAGE,
    RESOURCE_INODES,
    RESOURCE_MEMORY,
    RESOURCE_PIDS,
    SIGNAL_RESOURCE,
    Observation,
    Threshold,
    format_amount,
)
from minikubelet.pod.admission_fit import pod_request_units

Json = Mapping[str, Any]
StatsOf = Callable[[Pod], Json | None]

REASON = "Evicted"
_NODE_LOW = "The node was low on resource: {}. "
_NODE_CONDITION = "The node had condition: {}. "
_THRESHOLD_MET = "Threshold quantity: {}, available: {}. "
_CONTAINER = "Container {} was using {}, request is {}, has larger consumption of {}. "
_POD = "Pod {} was using {}, request is {}, has larger consumption of {}. "
_CONTAINER_EPHEMERAL = "Container {} exceeded its local ephemeral storage limit \"{}\". "
_POD_EPHEMERAL = "Pod ephemeral local storage usage exceeds the total limit of containers {}. "
_EMPTY_DIR = "Usage of EmptyDir volume \"{}\" exceeds the limit \"{}\". "


def node_condition_message(conditions: Sequence[str]) -> str:
    """Go's %v of a []NodeConditionType: `[MemoryPressure DiskPressure]`."""
    return _NODE_CONDITION.format("[" + " ".join(conditions) + "]")


def _memory_usage(stats: Json) -> int:
    return int((stats.get("memory") or {}).get("workingSetBytes", 0))


def _fs_used(fs: Json | None, resource: str) -> int:
    if not fs:
        return 0
    return int(fs.get("inodesUsed", 0) if resource == RESOURCE_INODES else fs.get("usedBytes", 0))


def local_volume_names(pod: Pod) -> set[str]:
    """hostPath volumes and the local ephemeral ones: disk-backed emptyDir, configMap, secret, downwardAPI, gitRepo."""
    out = set()
    for v in PodView.of(pod).volumes:
        ed = v.get("emptyDir")
        if (isinstance(ed, dict) and ed.get("medium") != "Memory") or any(
                isinstance(v.get(k), dict) for k in ("hostPath", "configMap", "secret", "downwardAPI", "gitRepo")):
            out.add(str(v.get("name", "")))
    return out


def pod_disk_usage(pod: Pod, stats: Json, resource: str, fs_stats: AbstractSet[str] = ALL_FS_STATS) -> int:
    """The pod's usage of the kinds in `fs_stats` (upstream podDiskUsage): container writable layers, container
    logs, local volumes; which kinds count depends on the disk layout and the signal (filesystems.py)."""
    total = 0
    for c in stats.get("containers") or []:
        if FS_ROOT in fs_stats:
            total += _fs_used(c.get("rootfs"), resource)
        if FS_LOGS in fs_stats:
            total += _fs_used(c.get("logs"), resource)
    if FS_LOCAL_VOLUMES not in fs_stats:
        return total
    names = local_volume_names(pod)
    for v in stats.get("volume") or []:
        if v.get("name") in names:
            total += _fs_used(v, resource)
    return total


def _request(pod: Pod, resource: str) -> int:
    return pod_request_units(PodView.of(pod)).get(resource, 0)


def _priority(pod: Pod) -> int:
    return PodView.of(pod).priority or 0


def _usage(resource: str, fs_stats: AbstractSet[str]) -> Callable[[Pod, Json], int]:
    if resource == RESOURCE_MEMORY:
        return lambda _pod, s: _memory_usage(s)
    if resource == RESOURCE_PIDS:
        return lambda _pod, s: int((s.get("process_stats") or {}).get("process_count", 0))
    return lambda pod, s: pod_disk_usage(pod, s, resource, fs_stats)


def pod_usage(pod: Pod, stats: Json, resource: str, fs_stats: AbstractSet[str] = ALL_FS_STATS) -> int:
    """The usage of the starved resource the ranking compares for this pod."""
    return _usage(resource, fs_stats)(pod, stats)


def rank(pods: Sequence[Pod], stats_of: StatsOf, resource: str,
         fs_stats: AbstractSet[str] = ALL_FS_STATS) -> list[Pod]:
    """The pods in eviction order for the starved resource (a disk signal's: the usages in `fs_stats`)."""
    usage = _usage(resource, fs_stats)
    request_resource = RESOURCE_MEMORY if resource == RESOURCE_MEMORY else RESOURCE_EPHEMERAL_STORAGE

    def cmp(a: Pod, b: Pod) -> int:
        sa, sb = stats_of(a), stats_of(b)
        if sa is None or sb is None:
            return (sa is not None) - (sb is not None)
        ua, ub = usage(a, sa), usage(b, sb)
        if resource == RESOURCE_PIDS:
            return (_priority(a) > _priority(b)) - (_priority(a) < _priority(b)) or (ub > ua) - (ub < ua)
        # upstream compares inodes against the request of the inodes resource, which pods never have
        req_a = _request(a, request_resource if resource != RESOURCE_INODES else RESOURCE_INODES)
        req_b = _request(b, request_resource if resource != RESOURCE_INODES else RESOURCE_INODES)
        exceeds_a, exceeds_b = ua > req_a, ub > req_b
        if exceeds_a != exceeds_b:
            return -1 if exceeds_a else 1
        pa, pb = _priority(a), _priority(b)
        if pa != pb:
            return -1 if pa < pb else 1
        # the relative usage subtracts the ephemeral-storage request for inodes too, as upstream's disk()
        da = ua - _request(a, request_resource)
        db = ub - _request(b, request_resource)
        return (db > da) - (db < da)

    return sorted(pods, key=functools.cmp_to_key(cmp))


def _quantity_text(raw: object) -> str:
    """resource.Quantity.String() of a request as written ("0" when absent)."""
    if raw is None:
        return "0"
    try:
        return format_quantity(parse_quantity(raw), binary=is_binary(raw))
    except QuantityError:
        return str(raw)


def eviction_message(resource: str, pod: Pod, stats: Json | None, thresholds: Sequence[Threshold],
                     observations: Mapping[str, Observation]) -> tuple[str, dict[str, str]]:
    """evictionMessage: the starved resource, the threshold and what was available, the pod's memory usage and
    request when it has a pod-level memory request (PodLevelResources, on in 1.36), and each container using
    more than it requested; plus the Event's annotations."""
    message = _NODE_LOW.format(resource)
    for t in thresholds:
        if SIGNAL_RESOURCE.get(t.signal) == resource and (obs := observations.get(t.signal)) is not None:
            message += _THRESHOLD_MET.format(t.value.format(obs.capacity), format_amount(t.signal, obs.available))
            break
    annotations: dict[str, str] = {}
    if stats is None:
        return message, annotations
    view = PodView.of(pod)
    pod_requests = view.requests or {}
    if resource == RESOURCE_MEMORY and RESOURCE_MEMORY in pod_requests and isinstance(stats.get("memory"), dict):
        # upstream names the pod whether or not its usage is above the request
        usage = format_quantity(Fraction(_memory_usage(stats)), binary=True)
        message += _POD.format(view.name, usage, _quantity_text(pod_requests[RESOURCE_MEMORY]), resource)
        annotations["offending_pod"] = view.name
        annotations["offending_pod_usage"] = usage
    containers = {c.name: c for c in (*view.app_containers, *view.init_containers)}
    exceeded: list[str] = []
    usages: list[str] = []
    for cs in stats.get("containers") or []:
        c = containers.get(str(cs.get("name", "")))
        if c is None:
            continue
        raw_request = (c.requests or {}).get(resource)
        request = Fraction(0)
        if raw_request is not None:
            try:
                request = parse_quantity(raw_request)
            except QuantityError:
                request = Fraction(0)
        used: int | None = None
        if resource == RESOURCE_MEMORY and "workingSetBytes" in (cs.get("memory") or {}):
            used = int(cs["memory"]["workingSetBytes"])
        elif resource == RESOURCE_EPHEMERAL_STORAGE and cs.get("rootfs") and cs.get("logs"):
            used = _fs_used(cs["rootfs"], resource) + _fs_used(cs["logs"], resource)
        if used is not None and used > request:
            text = format_quantity(Fraction(used), binary=True)
            message += _CONTAINER.format(c.name, text, _quantity_text(raw_request), resource)
            exceeded.append(c.name)
            usages.append(text)
    annotations["offending_containers"] = ",".join(exceeded)
    annotations["offending_containers_usage"] = ",".join(usages)
    annotations["starved_resource"] = resource
    return message, annotations


def local_storage_signal(message: str) -> str:
    """The kubelet_evictions signal label of a local storage eviction's message."""
    if message.startswith(_EMPTY_DIR.split("{", 1)[0]):
        return "emptydirfs.limit"
    if message.startswith(_POD_EPHEMERAL.split("{", 1)[0]):
        return "ephemeralpodfs.limit"
    return "ephemeralcontainerfs.limit"


def _has_local_storage_limit(pod: Pod) -> bool:
    """An emptyDir with a sizeLimit or a container with an ephemeral-storage limit, read off the raw spec: most
    pods have neither, and the eviction manager asks for every pod every 10 s."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return False
    for v in spec.get("volumes") or ():
        ed = v.get("emptyDir") if isinstance(v, dict) else None
        if isinstance(ed, dict) and ed.get("sizeLimit") not in (None, ""):
            return True
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or ():
            res = c.get("resources") if isinstance(c, dict) else None
            limits = res.get("limits") if isinstance(res, dict) else None
            if isinstance(limits, dict) and RESOURCE_EPHEMERAL_STORAGE in limits:
                return True
    return False


def local_storage_violation(pod: Pod, stats: Json | None, dedicated_image_fs: bool = False) -> str | None:
    """The message of the first local storage limit the pod exceeds (an emptyDir's sizeLimit, the pod's
    total ephemeral-storage limit, one container's limit), or None (upstream localStorageEviction). The pod's
    total counts writable layers always; a container's own limit counts its writable layer only when the
    image filesystem is the node's, as upstream's containerEphemeralStorageLimitEviction."""
    if stats is None or not _has_local_storage_limit(pod):
        return None
    view = PodView.of(pod)
    used = {str(v.get("name")): int(v.get("usedBytes", 0)) for v in stats.get("volume") or []}
    for v in view.volumes:
        ed = v.get("emptyDir")
        if not isinstance(ed, dict) or ed.get("sizeLimit") in (None, ""):
            continue
        try:
            limit = parse_quantity(ed["sizeLimit"])
        except QuantityError:
            continue
        name = str(v.get("name", ""))
        if limit > 0 and name in used and used[name] > limit:
            return _EMPTY_DIR.format(name, format_quantity(limit, binary=is_binary(ed["sizeLimit"])))
    limits: dict[str, tuple[Fraction, str]] = {}
    for c in view.app_containers:
        raw = (c.limits or {}).get(RESOURCE_EPHEMERAL_STORAGE)
        if raw is None:
            continue
        try:
            limits[c.name] = (parse_quantity(raw), format_quantity(parse_quantity(raw), binary=is_binary(raw)))
        except QuantityError:
            continue
    if limits:
        total = sum((q for q, _ in limits.values()), Fraction(0))
        eph = stats.get("ephemeral-storage") or {}
        if int(eph.get("usedBytes", 0)) > total:
            return _POD_EPHEMERAL.format(format_quantity(total, binary=all(
                is_binary((c.limits or {}).get(RESOURCE_EPHEMERAL_STORAGE)) for c in view.app_containers
                if c.name in limits)))
    for cs in stats.get("containers") or []:
        name = str(cs.get("name", ""))
        if name in limits and limits[name][0] != 0:
            container_used = _fs_used(cs.get("logs"), RESOURCE_EPHEMERAL_STORAGE)
            if not dedicated_image_fs:
                container_used += _fs_used(cs.get("rootfs"), RESOURCE_EPHEMERAL_STORAGE)
            if container_used > limits[name][0]:
                return _CONTAINER_EPHEMERAL.format(name, limits[name][1])
    return None
