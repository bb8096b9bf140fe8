"""Mounting and unmounting tmpfs on the host (upstream k8s.io/mount-utils), and reading the mount table."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from minikubelet.base.safepath import unescape_mount_field

MOUNTINFO = Path("/proc/self/mountinfo")
MNT_DETACH = 2
_O_PATH = getattr(os, "O_PATH", 0o10000000)


@dataclass(frozen=True)
class MountPoint:
    path: str
    fstype: str


class Mounter(Protocol):
    def mount_tmpfs(self, path: str, options: Sequence[str]) -> None: ...

    def unmount(self, path: str) -> None: ...

    def mount_points(self) -> list[MountPoint]: ...


def parse_mountinfo(text: str) -> list[MountPoint]:
    """Mount points and filesystem types of /proc/<pid>/mountinfo (proc(5)); the fs type follows ' - '."""
    points = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 5 or not tail:
            continue
        points.append(MountPoint(unescape_mount_field(fields[4]), tail.split()[0]))
    return points


class HostMounter:
    """mount(2)/umount2(2) through libc, on the agent's own mount namespace."""

    def __init__(self, mountinfo: Path = MOUNTINFO) -> None:
        self._mountinfo = mountinfo
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)

    def mount_tmpfs(self, path: str, options: Sequence[str]) -> None:
        # Through /proc/self/fd of a directory opened without following its last component: the target
        # cannot be swapped for a symlink between the check and the mount.
        fd = os.open(path, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            target = f"/proc/self/fd/{fd}".encode()
            data = ",".join(options).encode()
            if self._libc.mount(b"tmpfs", target, b"tmpfs", ctypes.c_ulong(0), data or None) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mount -t tmpfs -o {','.join(options)} tmpfs {path}: {os.strerror(err)}")
        finally:
            os.close(fd)

    def unmount(self, path: str) -> None:
        if self._libc.umount2(path.encode(), 0) != 0:
            err = ctypes.get_errno()
            if err == errno.EBUSY:
                # still held by a process in this namespace: detach it now, the kernel frees it when unused
                if self._libc.umount2(path.encode(), MNT_DETACH) == 0:
                    return
                err = ctypes.get_errno()
            raise OSError(err, f"unmount {path}: {os.strerror(err)}")

    def mount_points(self) -> list[MountPoint]:
        return parse_mountinfo(self._mountinfo.read_text(errors="surrogateescape"))
