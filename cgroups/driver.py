"""What every cgroup driver offers, and the values it reads and writes.

Drivers take literal cgroup paths ("/kubepods/burstable/pod<uid>" or the systemd slice path),
relative to the hierarchy root, and confine every change to the subtree below `prefix`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

DEFAULT_ROOT = Path("/sys/fs/cgroup")


class CgroupError(OSError):
    """A cgroup operation failed."""


class CgroupOutsidePrefixError(CgroupError):
    """The driver was asked to change a cgroup outside the subtree it owns."""


class CgroupBusyError(CgroupError):
    """A cgroup still holds processes (or child cgroups that do)."""


@dataclass(frozen=True)
class ResourceConfig:
    """Settings for one cgroup; None leaves a setting untouched.

    cpu_quota -1 (or 0 with a period) means unlimited, memory_limit -1 unlimited,
    pids_limit -1 unlimited. cpu_shares is in v1 units and converted to cpu.weight on v2.
    """

    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory_limit: int | None = None
    pids_limit: int | None = None
    memory_min: int | None = None  # v2 only (MemoryQoS)
    memory_high: int | None = None  # v2 only (MemoryQoS)


@dataclass(frozen=True)
class Usage:
    cpu_usage_seconds: float
    memory_usage_bytes: int
    memory_working_set_bytes: int
    pids: int


class CgroupDriver(Protocol):
    version: int

    def create(self, name: str, config: ResourceConfig) -> None: ...
    def update(self, name: str, config: ResourceConfig) -> None: ...
    def exists(self, name: str) -> bool: ...
    def remove(self, name: str) -> None: ...
    def children(self, name: str) -> list[str]: ...
    def read_usage(self, name: str) -> Usage: ...
    def read_config(self, name: str) -> ResourceConfig:
        """The CPU and memory settings in force: shares, quota (-1 none), period, memory limit (-1 none)."""
    def pids(self, name: str) -> list[int]: ...


def components(name: str) -> list[str]:
    parts = [p for p in name.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"invalid cgroup name {name!r}")
    return parts


def normalize(name: str) -> str:
    return "/" + "/".join(components(name))


def is_within(name: str, prefix: str) -> bool:
    """name is prefix itself or below it."""
    n, p = components(name), components(prefix)
    return n[: len(p)] == p


def check_within(name: str, prefix: str, *, strictly_below_root: bool = False) -> None:
    if not is_within(name, prefix):
        raise CgroupOutsidePrefixError(errno.EPERM, f"cgroup {name} is outside the driver's prefix {prefix}")
    if strictly_below_root and not components(name):
        raise CgroupOutsidePrefixError(errno.EPERM, "refusing to remove the root cgroup")


def ancestors_to_create(name: str, prefix: str) -> Iterator[str]:
    """Paths from the prefix (inclusive) down to name; only these may be created."""
    p = components(prefix)
    n = components(name)
    start = max(len(p), 1)
    for i in range(start, len(n) + 1):
        yield "/" + "/".join(n[:i])


def write_file(path: Path, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as e:
        raise CgroupError(e.errno, f"writing {value!r} to {path}: {e.strerror}") from e


def read_bytes(path: str | Path) -> bytes:
    """A kernel interface file's bytes: plain os.open/os.read, no buffered io layer (a stats pass reads ~7 files
    per cgroup, and Path.read_text's io stack cost 2-4x the read itself)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path: str | Path) -> str:
    """A cgroup interface file's text (`read_bytes`)."""
    return read_bytes(path).decode()


def read_int(path: str | Path, default: int = 0) -> int:
    try:
        text = read_text(path).strip()
    except FileNotFoundError:
        return default
    return default if text in ("", "max") else int(text)


# memory.limit_in_bytes of an unlimited cgroup v1 (the page-rounded int64 maximum)
V1_MEMORY_UNLIMITED_FLOOR = 1 << 62


def read_flat_keyed(path: str | Path) -> dict[str, int]:
    """A "key value" per line file such as memory.stat or cpu.stat."""
    try:
        text = read_text(path)
    except FileNotFoundError:
        return {}
    words = text.split()
    if len(words) == 2 * text.count("\n"):
        try:  # the common case, "key value\n" lines with integer values: one split, no per-line parsing
            return {key: int(value) for key, value in zip(words[::2], words[1::2], strict=True)}
        except ValueError:
            pass
    result: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            result[key] = int(value)
    return result


def subdirs(path: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []


def walk_leaf_first(path: Path) -> list[Path]:
    """path and every cgroup below it, deepest first (the order rmdir needs)."""
    result: list[Path] = []
    for child in subdirs(path):
        result.extend(walk_leaf_first(path / child))
    result.append(path)
    return result


def read_procs(path: Path) -> list[int]:
    try:
        return [int(line) for line in (path / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def rmdir_cgroup(path: Path, *, plain_directory: bool) -> None:
    try:
        if plain_directory:
            # A test tree on an ordinary filesystem: interface files are real files there.
            for entry in os.scandir(path):
                if entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)
        os.rmdir(path)
    except FileNotFoundError:
        return
    except OSError as e:
        if e.errno in (errno.EBUSY, errno.ENOTEMPTY):
            raise CgroupBusyError(e.errno, f"cgroup {path} is busy: {e.strerror}") from e
        raise CgroupError(e.errno, f"removing {path}: {e.strerror}") from e
