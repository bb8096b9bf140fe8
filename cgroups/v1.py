"""cgroup v1 driver: one directory per hierarchy (cpu, cpuacct, memory, pids, ...), plain file ops.

A pod cgroup is created in every mounted v1 hierarchy, because the runtime puts its containers'
cgroups below the same parent in every hierarchy and the kubelet must be able to find and remove
them all. Only cpu, memory and pids carry settings. On a hybrid host the controller-less cgroup2
mount (root/unified) is one more such hierarchy: runc creates the same path there.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from cgroups.detect import MOUNTINFO, cgroup_mounts, hybrid_unified_mount
from cgroups.driver import (
    DEFAULT_ROOT,
    V1_MEMORY_UNLIMITED_FLOOR,
    CgroupBusyError,
    CgroupError,
    ResourceConfig,
    Usage,
    ancestors_to_create,
    check_within,
    components,
    read_flat_keyed,
    read_int,
    read_procs,
    read_text,
    rmdir_cgroup,
    subdirs,
    walk_leaf_first,
    write_file,
)

_NOT_CONTROLLERS = {"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "xattr", "noprefix"}


def discover_hierarchies(root: Path = DEFAULT_ROOT, mountinfo: Path = MOUNTINFO) -> dict[str, Path]:
    """controller (or "name=systemd") -> mount point, for v1 mounts directly below root."""
    result: dict[str, Path] = {}
    for mount in cgroup_mounts(mountinfo):
        if mount.fstype != "cgroup" or mount.mount_point.parent != root:
            continue
        for option in mount.super_options:
            if option.startswith("name=") or (option not in _NOT_CONTROLLERS and "=" not in option):
                result.setdefault(option, mount.mount_point)
    return result


class CgroupV1Driver:
    version = 1

    def __init__(
        self,
        root: Path = DEFAULT_ROOT,
        prefix: str = "/",
        hierarchies: dict[str, Path] | None = None,
        mountinfo: Path = MOUNTINFO,
        unified: Path | None = None,
    ) -> None:
        self.root = root
        self.prefix = prefix
        self.hierarchies = hierarchies if hierarchies is not None else discover_hierarchies(root, mountinfo)
        # Only discovered along with the hierarchies: a caller naming its own hierarchies names this too.
        self.unified = unified if hierarchies is not None else hybrid_unified_mount(root, mountinfo)
        for needed in ("cpu", "cpuacct", "memory"):
            if needed not in self.hierarchies:
                raise CgroupError(errno.ENOENT, f"cgroup v1 controller {needed} is not mounted under {root}")

    @property
    def mount_points(self) -> list[Path]:
        """Every hierarchy a pod cgroup lives in: the v1 mounts and, on a hybrid host, unified."""
        mounts = set(self.hierarchies.values())
        if self.unified is not None:
            mounts.add(self.unified)
        return sorted(mounts)

    def path(self, controller: str, name: str) -> Path:
        return self.hierarchies[controller].joinpath(*components(name))

    def _mkdir(self, mount: Path, name: str) -> bool:
        """Create `name` in one hierarchy; False if its parent is missing. os.mkdir first, not a stat: a new
        pod's cgroup is one syscall per hierarchy, its (existing) ancestors none."""
        path = os.path.join(mount, *components(name))
        try:
            os.mkdir(path)
        except FileExistsError:
            return True
        except FileNotFoundError:
            return False
        if mount == self.hierarchies.get("cpuset"):
            # A new cpuset starts empty and cannot take tasks until it has CPUs and memory nodes.
            for key in ("cpuset.cpus", "cpuset.mems"):
                if not read_text(os.path.join(path, key)).strip():
                    write_file(Path(path, key), read_text(os.path.join(os.path.dirname(path), key)).strip())
        return True

    def create(self, name: str, config: ResourceConfig) -> None:
        check_within(name, self.prefix)
        for mount in self.mount_points:
            if not self._mkdir(mount, name):
                for step in ancestors_to_create(name, self.prefix):
                    if not self._mkdir(mount, step):
                        raise CgroupError(errno.ENOENT, f"cannot create cgroup {step} under {mount}")
        self.update(name, config)

    def _write_cpu(self, path: Path, config: ResourceConfig) -> None:
        if config.cpu_shares is not None:
            write_file(path / "cpu.shares", str(config.cpu_shares))
        writes: list[tuple[str, str]] = []
        if config.cpu_period:
            writes.append(("cpu.cfs_period_us", str(config.cpu_period)))
        if config.cpu_quota is not None:
            writes.append(("cpu.cfs_quota_us", str(config.cpu_quota if config.cpu_quota > 0 else -1)))
        try:
            for file, value in writes:
                write_file(path / file, value)
        except CgroupError as e:
            # The kernel checks quota/period against the old partner value; the other order works.
            if e.errno != errno.EINVAL:
                raise
            for file, value in reversed(writes):
                write_file(path / file, value)

    def update(self, name: str, config: ResourceConfig) -> None:
        check_within(name, self.prefix)
        self._write_cpu(self.path("cpu", name), config)
        if config.memory_limit is not None:
            limit = config.memory_limit if config.memory_limit >= 0 else -1
            write_file(self.path("memory", name) / "memory.limit_in_bytes", str(limit))
        if config.pids_limit is not None and "pids" in self.hierarchies:
            value = "max" if config.pids_limit < 0 else str(config.pids_limit)
            write_file(self.path("pids", name) / "pids.max", value)

    def exists(self, name: str) -> bool:
        parts = components(name)
        return all(os.path.isdir(os.path.join(mount, *parts)) for mount in self.mount_points)

    def remove(self, name: str) -> None:
        check_within(name, self.prefix, strictly_below_root=True)
        trees = [walk_leaf_first(mount.joinpath(*components(name))) for mount in self.mount_points]
        # Refuse before touching any hierarchy, so a busy pod is never left half-removed.
        for path in (p for tree in trees for p in tree):
            if read_procs(path):
                raise CgroupBusyError(errno.EBUSY, f"cgroup {path} still has processes")
        failures: list[CgroupError] = []
        for tree in trees:
            for path in tree:
                try:
                    rmdir_cgroup(path, plain_directory=False)
                except CgroupError as e:
                    failures.append(e)
        if failures:
            raise failures[0]

    def children(self, name: str) -> list[str]:
        """Child cgroups found in any hierarchy: a leftover in one of them is still a child."""
        return sorted({child for mount in self.mount_points for child in subdirs(mount.joinpath(*components(name)))})

    def read_usage(self, name: str) -> Usage:
        memory = self.path("memory", name)
        usage = read_int(memory / "memory.usage_in_bytes")
        inactive = read_flat_keyed(memory / "memory.stat").get("total_inactive_file", 0)
        pids = read_int(self.path("pids", name) / "pids.current") if "pids" in self.hierarchies else 0
        return Usage(
            cpu_usage_seconds=read_int(self.path("cpuacct", name) / "cpuacct.usage") / 1e9,
            memory_usage_bytes=usage,
            memory_working_set_bytes=max(0, usage - inactive),
            pids=pids,
        )

    def read_config(self, name: str) -> ResourceConfig:
        cpu = self.path("cpu", name)
        memory = read_int(self.path("memory", name) / "memory.limit_in_bytes", -1)
        return ResourceConfig(
            cpu_shares=read_int(cpu / "cpu.shares"),
            cpu_quota=read_int(cpu / "cpu.cfs_quota_us", -1),
            cpu_period=read_int(cpu / "cpu.cfs_period_us"),
            memory_limit=-1 if memory >= V1_MEMORY_UNLIMITED_FLOOR else memory,
        )

    def pids(self, name: str) -> list[int]:
        controller = "pids" if "pids" in self.hierarchies else "cpu"
        result: list[int] = []
        for path in walk_leaf_first(self.path(controller, name)):
            result.extend(read_procs(path))
        return sorted(result)
