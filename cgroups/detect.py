"""Which cgroup version the host runs, from /proc/self/mountinfo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cgroups.driver import DEFAULT_ROOT

MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True)
class CgroupMount:
    mount_point: Path
    fstype: str  # "cgroup" (v1) or "cgroup2"
    super_options: tuple[str, ...]  # for v1: the controllers, e.g. ("rw", "cpu", "cpuacct")


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    return field.encode().decode("unicode_escape")


def parse_mountinfo(text: str) -> list[CgroupMount]:
    mounts: list[CgroupMount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        mounts.append(CgroupMount(Path(_unescape(fields[4])), tail[0], tuple(tail[2].split(","))))
    return mounts


def cgroup_mounts(mountinfo: Path = MOUNTINFO) -> list[CgroupMount]:
    return parse_mountinfo(mountinfo.read_text())


def is_cgroup2_mount(path: Path, mountinfo: Path = MOUNTINFO) -> bool:
    return any(m.fstype == "cgroup2" and m.mount_point == path for m in cgroup_mounts(mountinfo))


def hybrid_unified_mount(root: Path = DEFAULT_ROOT, mountinfo: Path = MOUNTINFO) -> Path | None:
    """The cgroup2 mount next to the v1 controllers on a hybrid host (root/unified), if any.

    It carries no controllers, but runc (cgroupfs driver) creates every container's cgroup path
    there too, parents included, and removes only the container's own leaf on delete.
    """
    for m in cgroup_mounts(mountinfo):
        if m.fstype == "cgroup2" and m.mount_point.parent == root:
            return m.mount_point
    return None


def detect_cgroup_version(root: Path = DEFAULT_ROOT, mountinfo: Path = MOUNTINFO) -> int:
    """2 when root is a cgroup2 mount offering controllers (unified mode), else 1.

    A hybrid host mounts an empty cgroup2 at root/unified next to the v1 controllers; that
    counts as v1 because the controllers the kubelet needs live in v1.
    """
    if is_cgroup2_mount(root, mountinfo):
        controllers = (root / "cgroup.controllers").read_text().split()
        if controllers:
            return 2
    return 1
