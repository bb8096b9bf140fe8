"""What the systemd cgroup driver asks systemd for: the slice units behind a cgroup path, and their
properties, as runc's systemd cgroup manager (libcontainer/cgroups/systemd) builds them for the kubelet.

A path `/kubepods.slice/kubepods-burstable.slice` is two slice units, each the child of the one before
(`-.slice` is the root). Each is started as a transient unit with `Wants=` its parent,
`DefaultDependencies=no`, CPU/memory/tasks accounting on, and the resource limits as properties, so that
systemd itself keeps them (a `daemon-reload` rewrites cgroup files from the unit's properties). Slices get no
`Delegate=` (runc sets it only on scopes: systemd refuses it on slices before v251).
"""

from __future__ import annotations

from typing import Final

from cgroups.cpu import shares_to_weight
from cgroups.driver import ResourceConfig

ROOT_SLICE: Final = "-.slice"
UNLIMITED: Final = 2**64 - 1  # systemd's "infinity" for MemoryMax/TasksMax/CPUQuotaPerSecUSec
Property = tuple[str, tuple[str, object]]  # (name, (D-Bus signature, value))


def slice_chain(path: str) -> list[tuple[str, str]]:
    """[(unit, parent unit)] from the top: "/a.slice/a-b.slice" -> [("a.slice", "-.slice"), ("a-b.slice", "a.slice")]."""
    units = [part for part in path.split("/") if part]
    if not units or not all(u.endswith(".slice") for u in units):
        raise ValueError(f"not a systemd slice path: {path!r}")
    return [(unit, units[i - 1] if i else ROOT_SLICE) for i, unit in enumerate(units)]


def _quota_per_sec_usec(quota: int, period: int) -> int:
    # systemd keeps CPUQuota as a per-second value with 10 ms granularity; runc rounds up to it
    per_sec = quota * 1_000_000 // period
    return -(-per_sec // 10_000) * 10_000


def resource_properties(config: ResourceConfig, version: int) -> list[Property]:
    props: list[Property] = []
    if config.cpu_shares is not None:
        props.append(("CPUWeight", ("t", shares_to_weight(config.cpu_shares))) if version == 2
                     else ("CPUShares", ("t", config.cpu_shares)))
    if config.cpu_quota is not None or config.cpu_period is not None:
        quota, period = config.cpu_quota or 0, config.cpu_period or 100_000
        props.append(("CPUQuotaPerSecUSec", ("t", _quota_per_sec_usec(quota, period) if quota > 0 else UNLIMITED)))
        if config.cpu_period:
            props.append(("CPUQuotaPeriodUSec", ("t", config.cpu_period)))
    if config.memory_limit is not None:
        limit = config.memory_limit if config.memory_limit >= 0 else UNLIMITED
        props.append(("MemoryMax", ("t", limit)) if version == 2 else ("MemoryLimit", ("t", limit)))
    if version == 2 and config.memory_min is not None:
        props.append(("MemoryMin", ("t", config.memory_min)))
    if version == 2 and config.memory_high is not None:
        props.append(("MemoryHigh", ("t", config.memory_high if config.memory_high >= 0 else UNLIMITED)))
    if config.pids_limit is not None:
        props.append(("TasksMax", ("t", config.pids_limit if config.pids_limit >= 0 else UNLIMITED)))
    return props


def slice_properties(unit: str, parent: str, config: ResourceConfig, version: int) -> list[Property]:
    return [
        ("Description", ("s", f"minikubelet {unit}")),
        ("Wants", ("as", [parent])),
        ("DefaultDependencies", ("b", False)),
        ("MemoryAccounting", ("b", True)),
        ("CPUAccounting", ("b", True)),
        ("TasksAccounting", ("b", True)),
        *resource_properties(config, version),
    ]
