"""Per-device I/O counters from /proc/diskstats, which cAdvisor reports on the node (`id="/"`) for the device of
each filesystem it reports.

cAdvisor converts the kernel's millisecond times to seconds by dividing by 1e9 (as if they were nanoseconds); the
kubelet's series carry that scale, and so do ours, so that a dashboard reads the same number from either.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class DiskStats:
    reads: int
    reads_merged: int
    sectors_read: int
    read_ms: int
    writes: int
    writes_merged: int
    sectors_written: int
    write_ms: int
    io_in_progress: int
    io_ms: int
    weighted_io_ms: int


def parse_diskstats(text: str) -> dict[str, DiskStats]:
    """Device name (as /dev names it) to its counters; lines with fewer than the 11 classic fields are skipped."""
    result: dict[str, DiskStats] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        try:
            n = [int(v) for v in parts[3:14]]
        except ValueError:
            continue
        result[parts[2]] = DiskStats(*n)
    return result


def device_name(device: str) -> str:
    """`/dev/vda` → `vda` (diskstats' name); mapper and other non-/dev sources keep their base name."""
    return device.rsplit("/", 1)[-1]


def block_devices(sys_dev_block: str = "/sys/dev/block") -> dict[tuple[int, int], str]:
    """`major:minor` → `/dev/<name>`, the device label cAdvisor gives a cgroup's per-device I/O."""
    result: dict[tuple[int, int], str] = {}
    try:
        entries = os.listdir(sys_dev_block)
    except OSError:
        return result
    for entry in entries:
        major, _, minor = entry.partition(":")
        try:
            target = os.readlink(f"{sys_dev_block}/{entry}")
            result[(int(major), int(minor))] = "/dev/" + target.rstrip("/").rsplit("/", 1)[-1]
        except (OSError, ValueError):
            continue
    return result
