"""The process series of a cgroup as cAdvisor counts them: the processes listed in the cgroup's own
`cgroup.procs` (not its descendants'), their open file descriptors (`/proc/<pid>/fd`) and how many of those are
sockets, and the soft open-files limit of the container's first process (`/proc/<pid>/limits`).

A process that exits between the listing and the read is skipped, as cAdvisor skips it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessStats:
    processes: int = 0
    fds: int = 0
    sockets: int = 0
    max_open_files: int | None = None  # the soft limit of the container's first process; None = not known


def parse_procs(text: str) -> list[int]:
    return [int(word) for word in text.split() if word.isdigit()]


def parse_max_open_files(limits: str) -> int | None:
    """The soft `Max open files` of a /proc/<pid>/limits table (`unlimited` reads as -1, as cAdvisor writes it)."""
    for line in limits.splitlines():
        if line.startswith("Max open files"):
            soft = line[len("Max open files"):].split()[0]
            return -1 if soft == "unlimited" else int(soft) if soft.isdigit() else None
    return None


def count_fds(proc: str, pid: int) -> tuple[int, int]:
    """(open descriptors, of which sockets) of one process; (0, 0) when it is gone or not readable."""
    fd_dir = f"{proc}/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return 0, 0
    sockets = 0
    for name in names:
        try:
            if os.readlink(f"{fd_dir}/{name}").startswith("socket:"):
                sockets += 1
        except OSError:
            continue
    return len(names), sockets


def process_stats(procs_file: str, proc: str = "/proc", first_pid: int = 0) -> ProcessStats | None:
    """None when the cgroup has no cgroup.procs (gone)."""
    try:
        with open(procs_file, encoding="ascii") as fh:
            pids = parse_procs(fh.read())
    except (FileNotFoundError, NotADirectoryError):
        return None
    fds = sockets = 0
    for pid in pids:
        f, s = count_fds(proc, pid)
        fds += f
        sockets += s
    max_open = None
    if first_pid > 0:
        try:
            with open(f"{proc}/{first_pid}/limits", encoding="ascii") as fh:
                max_open = parse_max_open_files(fh.read())
        except OSError:
            max_open = None
    return ProcessStats(len(pids), fds, sockets, max_open)
