"""Host facts the agent reads once at start, straight from the kernel: the memory size, the boot time, the mount
table and the interfaces' IPv4 addresses. These were psutil's; the agent used four of its calls, and psutil's
package (its C extension, named-tuple modules and platform layer) stayed in the process for them (~0.65 MiB)."""

from __future__ import annotations

import ctypes
import os
import socket
from pathlib import Path

from minikubelet.base.safepath import unescape_mount_field

PROC = Path("/proc")


def memory_total(proc: Path = PROC) -> int:
    """Bytes of RAM the kernel manages: /proc/meminfo's MemTotal (what psutil's virtual_memory().total reads)."""
    with open(proc / "meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no MemTotal in {proc / 'meminfo'}")


def boot_time(proc: Path = PROC) -> float:
    """The boot time in seconds since the epoch: /proc/stat's btime."""
    with open(proc / "stat", encoding="ascii") as f:
        for line in f:
            if line.startswith("btime"):
                return float(line.split()[1])
    raise ValueError(f"no btime in {proc / 'stat'}")


def _root_device(proc: Path) -> str:
    """The block device holding "/" by its number, for a table that names it /dev/root or rootfs."""
    dev = os.stat("/").st_dev
    major, minor = os.major(dev), os.minor(dev)
    try:
        for line in (proc / "partitions").read_text().splitlines()[2:]:
            fields = line.split()
            if len(fields) >= 4 and fields[:2] == [str(major), str(minor)]:
                return f"/dev/{fields[3]}"
    except OSError:
        pass
    try:
        for line in Path(f"/sys/dev/block/{major}:{minor}/uevent").read_text().splitlines():
            if line.startswith("DEVNAME=") and line[8:]:
                return f"/dev/{line[8:]}"
    except OSError:
        pass
    return ""


def mounts(proc: Path = PROC) -> list[tuple[str, str]]:
    """(device, mount point) of every mount in the agent's mount namespace, in the table's order (/proc/self/mounts;
    device "" for "none", the real device for /dev/root and rootfs)."""
    table: list[tuple[str, str]] = []
    root = None
    for line in (proc / "self/mounts").read_text(errors="surrogateescape").splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        device = unescape_mount_field(fields[0])
        if device == "none":
            device = ""
        elif device in ("/dev/root", "rootfs"):
            root = _root_device(proc) if root is None else root
            device = root or device
        table.append((device, unescape_mount_field(fields[1])))
    return table


class _Sockaddr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 14)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [("next", ctypes.POINTER(_Ifaddrs)), ("name", ctypes.c_char_p), ("flags", ctypes.c_uint),
                     ("addr", ctypes.POINTER(_Sockaddr)), ("netmask", ctypes.POINTER(_Sockaddr)),
                     ("ifu", ctypes.POINTER(_Sockaddr)), ("data", ctypes.c_void_p)]


def ipv4_addresses() -> dict[str, list[str]]:
    """Interface (address label) -> its IPv4 addresses, primary first: getifaddrs(3), as psutil's net_if_addrs."""
    libc = ctypes.CDLL(None, use_errno=True)
    head = ctypes.POINTER(_Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    found: dict[str, list[str]] = {}
    try:
        entry = head
        while entry:
            ifa = entry.contents
            if ifa.addr and ifa.addr.contents.family == socket.AF_INET and ifa.name is not None:
                # sockaddr_in: the port's 2 bytes, then the address
                address = socket.inet_ntoa(bytes(ifa.addr.contents.data[2:6]))
                found.setdefault(ifa.name.decode(errors="surrogateescape"), []).append(address)
            entry = ifa.next
    finally:
        libc.freeifaddrs(head)
    return found
