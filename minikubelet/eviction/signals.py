"""Signal observations from the Summary API (upstream makeSignalObservations). Pure.

The eviction manager reads what `/stats/summary` serves, as upstream's does: `memory.available` is the node's
memory (capacity minus the root cgroup's working set), `allocatableMemory.available` the `pods` system
container's, the filesystems come from `fs` and `runtime.imageFs`/`containerFs`, PIDs from `rlimit`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from minikubelet.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    CONTAINERFS_AVAILABLE,
    CONTAINERFS_INODES_FREE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    PID_AVAILABLE,
    Observation,
)

Json = Mapping[str, Any]


def _time(d: Json) -> float:
    t = d.get("time")
    try:
        return datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() if isinstance(t, str) else 0.0
    except ValueError:
        return 0.0


def _memory(mem: Json | None) -> Observation | None:
    if not mem or "availableBytes" not in mem or "workingSetBytes" not in mem:
        return None
    avail = int(mem["availableBytes"])
    return Observation(avail, avail + int(mem["workingSetBytes"]), _time(mem))


def _fs(out: dict[str, Observation], fs: Json | None, bytes_signal: str, inodes_signal: str) -> None:
    if not fs:
        return
    if "availableBytes" in fs and "capacityBytes" in fs:
        out[bytes_signal] = Observation(int(fs["availableBytes"]), int(fs["capacityBytes"]), _time(fs))
    if "inodesFree" in fs and "inodes" in fs:
        out[inodes_signal] = Observation(int(fs["inodesFree"]), int(fs["inodes"]), _time(fs))


def observations(summary: Json) -> dict[str, Observation]:
    node: Json = summary.get("node") or {}
    out: dict[str, Observation] = {}
    if (m := _memory(node.get("memory"))) is not None:
        out[MEMORY_AVAILABLE] = m
    pods = next((c for c in node.get("systemContainers") or [] if c.get("name") == "pods"), None)
    if pods is not None and (m := _memory(pods.get("memory"))) is not None:
        out[ALLOCATABLE_MEMORY_AVAILABLE] = m
    _fs(out, node.get("fs"), NODEFS_AVAILABLE, NODEFS_INODES_FREE)
    runtime: Json = node.get("runtime") or {}
    _fs(out, runtime.get("imageFs"), IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE)
    _fs(out, runtime.get("containerFs"), CONTAINERFS_AVAILABLE, CONTAINERFS_INODES_FREE)
    rlimit: Json = node.get("rlimit") or {}
    if "maxpid" in rlimit and "curproc" in rlimit:
        out[PID_AVAILABLE] = Observation(int(rlimit["maxpid"]) - int(rlimit["curproc"]), int(rlimit["maxpid"]),
                                         _time(rlimit))
    return out


def pod_stats(summary: Json) -> dict[str, Json]:
    """The summary's pod stats by pod UID (upstream cachedStatsFunc)."""
    return {str(p.get("podRef", {}).get("uid", "")): p for p in summary.get("pods") or []}
