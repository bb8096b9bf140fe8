"""Filesystem capacity (statvfs) and the disk usage of a directory tree (what `du` counts: allocated blocks, inodes)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass


@dataclass(frozen=True)
class FsCapacity:
    capacity: int
    available: int
    inodes: int
    inodes_free: int
    used: int  # blocks not free, as cAdvisor and `df` count (more than capacity − available: reserved blocks)


@dataclass(frozen=True)
class DirUsage:
    bytes: int
    inodes: int


def capacity(path: str) -> FsCapacity | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return FsCapacity(capacity=st.f_blocks * st.f_frsize, available=st.f_bavail * st.f_frsize,
                      inodes=st.f_files, inodes_free=st.f_ffree, used=(st.f_blocks - st.f_bfree) * st.f_frsize)


def dir_usage(path: str, max_entries: int = 100_000, *, follow_file_links: bool = False) -> DirUsage | None:
    """Allocated bytes and inodes below `path` on its own filesystem, hard links counted once; None when it
    does not exist. Stops counting after `max_entries` entries so a huge tree cannot stall a sample.

    `follow_file_links` also counts the file a symlink points to: with cri-dockerd a container's log file is a
    symlink to the engine's json-file log, and that file is the log's real usage.
    """
    try:
        top = os.lstat(path)
    except OSError:
        return None
    seen: set[tuple[int, int]] = set()
    total_bytes = top.st_blocks * 512
    inodes = 1
    stack = [path] if stat.S_ISDIR(top.st_mode) else []
    count = 0
    while stack and count < max_entries:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            count += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if follow_file_links and stat.S_ISLNK(st.st_mode):
                try:
                    target = os.stat(entry.path)
                except OSError:
                    target = None
                if target is not None and stat.S_ISREG(target.st_mode) and (target.st_dev, target.st_ino) not in seen:
                    seen.add((target.st_dev, target.st_ino))
                    total_bytes += target.st_blocks * 512
                    inodes += 1
            if st.st_dev != top.st_dev:
                continue
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                seen.add(key)
            total_bytes += st.st_blocks * 512
            inodes += 1
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
    return DirUsage(bytes=total_bytes, inodes=inodes)
