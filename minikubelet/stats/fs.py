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


class DirWalk:
    """A `du` of one tree that can be run in slices (`step`), so a caller on the event loop can yield between them.

    Counts allocated bytes and inodes below the root on its own filesystem, hard links once; stops after
    `max_entries` entries so a huge tree cannot stall a sample. With `follow_file_links` the file a symlink points
    to is counted too: with cri-dockerd a container's log file is a symlink to the engine's json-file log, and
    that file is the log's real usage.
    """

    def __init__(self, path: str, max_entries: int = 100_000, *, follow_file_links: bool = False) -> None:
        self.max_entries = max_entries
        self.follow_file_links = follow_file_links
        self.count = 0
        self._seen: set[tuple[int, int]] = set()
        self._stack: list[str] = []
        try:
            top = os.lstat(path)
        except OSError:
            self.usage: DirUsage | None = None
            return
        self._dev = top.st_dev
        self._bytes = top.st_blocks * 512
        self._inodes = 1
        self._stack = [path] if stat.S_ISDIR(top.st_mode) else []
        self.usage = DirUsage(self._bytes, self._inodes)

    @property
    def done(self) -> bool:
        return not self._stack or self.count >= self.max_entries

    def step(self, budget: int) -> bool:
        """Walk about `budget` more entries (whole directories at a time); True when the walk is complete."""
        limit = self.count + budget
        while not self.done and self.count < limit:
            self._directory(self._stack.pop())
        if self.usage is not None:
            self.usage = DirUsage(self._bytes, self._inodes)
        return self.done

    def _directory(self, current: str) -> None:
        try:
            entries = list(os.scandir(current))
        except OSError:
            return
        for entry in entries:
            self.count += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if self.follow_file_links and stat.S_ISLNK(st.st_mode):
                self._link_target(entry.path)
            if st.st_dev != self._dev:
                continue
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if key in self._seen:
                    continue
                self._seen.add(key)
            self._bytes += st.st_blocks * 512
            self._inodes += 1
            if stat.S_ISDIR(st.st_mode):
                self._stack.append(entry.path)

    def _link_target(self, path: str) -> None:
        try:
            target = os.stat(path)
        except OSError:
            return
        if stat.S_ISREG(target.st_mode) and (target.st_dev, target.st_ino) not in self._seen:
            self._seen.add((target.st_dev, target.st_ino))
            self._bytes += target.st_blocks * 512
            self._inodes += 1


def dir_usage(path: str, max_entries: int = 100_000, *, follow_file_links: bool = False) -> DirUsage | None:
    """Allocated bytes and inodes below `path` (see DirWalk), in one go; None when it does not exist."""
    walk = DirWalk(path, max_entries, follow_file_links=follow_file_links)
    walk.step(max_entries)
    return walk.usage
