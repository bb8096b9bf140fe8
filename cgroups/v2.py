"""cgroup v2 driver: plain file operations on the unified hierarchy."""

from __future__ import annotations

import errno
from pathlib import Path

from cgroups.cpu import shares_to_weight, weight_to_shares
from cgroups.detect import MOUNTINFO, is_cgroup2_mount
from cgroups.driver import (
    DEFAULT_ROOT,
    CgroupBusyError,
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

WANTED_CONTROLLERS = ("cpu", "memory", "pids")


def _max_or(value: int) -> str:
    return "max" if value < 0 else str(value)


class CgroupV2Driver:
    version = 2

    def __init__(self, root: Path = DEFAULT_ROOT, prefix: str = "/", mountinfo: Path = MOUNTINFO) -> None:
        self.root = root
        self.prefix = prefix
        self._plain_directory = not is_cgroup2_mount(root, mountinfo)

    def path(self, name: str) -> Path:
        return self.root.joinpath(*components(name))

    def _enable_controllers(self, parent: Path) -> None:
        try:
            available = (parent / "cgroup.controllers").read_text().split()
        except FileNotFoundError:
            available = list(WANTED_CONTROLLERS) if self._plain_directory else []
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
        except FileNotFoundError:
            enabled = []
        missing = [c for c in WANTED_CONTROLLERS if c in available and c not in enabled]
        if not missing:
            return
        if self._plain_directory:
            # An ordinary file keeps what is written; the kernel file lists what is enabled.
            write_file(parent / "cgroup.subtree_control", " ".join([*enabled, *missing]))
        else:
            write_file(parent / "cgroup.subtree_control", " ".join("+" + c for c in missing))

    def create(self, name: str, config: ResourceConfig) -> None:
        check_within(name, self.prefix)
        for step in ancestors_to_create(name, self.prefix):
            path = self.path(step)
            if path.is_dir():
                continue
            self._enable_controllers(path.parent)
            path.mkdir()
            if self._plain_directory:
                # The kernel gives a child the controllers its parent enabled for it.
                write_file(path / "cgroup.controllers", (path.parent / "cgroup.subtree_control").read_text())
        self.update(name, config)

    def update(self, name: str, config: ResourceConfig) -> None:
        check_within(name, self.prefix)
        path = self.path(name)
        if config.cpu_shares is not None:
            write_file(path / "cpu.weight", str(shares_to_weight(config.cpu_shares)))
        if config.cpu_quota is not None or config.cpu_period is not None:
            quota = config.cpu_quota or 0
            value = str(quota) if quota > 0 else "max"
            if config.cpu_period:
                value += f" {config.cpu_period}"
            write_file(path / "cpu.max", value)
        if config.memory_min is not None:
            write_file(path / "memory.min", str(config.memory_min))
        if config.memory_high is not None:
            write_file(path / "memory.high", _max_or(config.memory_high))
        if config.memory_limit is not None:
            write_file(path / "memory.max", _max_or(config.memory_limit))
        if config.pids_limit is not None:
            write_file(path / "pids.max", _max_or(config.pids_limit))

    def set_oom_group(self, name: str) -> bool:
        """memory.oom.group=1: the OOM killer takes the whole cgroup, not one process of it. False when the
        cgroup or the file is not there (a kernel before 4.19, or the container is already gone)."""
        check_within(name, self.prefix)
        target = self.path(name) / "memory.oom.group"
        if not (target.exists() or (self._plain_directory and target.parent.is_dir())):
            return False
        write_file(target, "1")
        return True

    def create_with_oom_group(self, name: str) -> bool:
        """An empty cgroup with memory.oom.group=1 for the runtime to start a container in. runc takes a cgroup
        that exists and is empty as it is, so the setting holds from the container's first instruction."""
        self.create(name, ResourceConfig())
        return self.set_oom_group(name)

    def exists(self, name: str) -> bool:
        return self.path(name).is_dir()

    def remove(self, name: str) -> None:
        check_within(name, self.prefix, strictly_below_root=True)
        tree = walk_leaf_first(self.path(name))
        for path in tree:
            if read_procs(path):
                raise CgroupBusyError(errno.EBUSY, f"cgroup {path} still has processes")
        for path in tree:
            rmdir_cgroup(path, plain_directory=self._plain_directory)

    def children(self, name: str) -> list[str]:
        return subdirs(self.path(name))

    def read_usage(self, name: str) -> Usage:
        path = self.path(name)
        usage = read_int(path / "memory.current")
        inactive = read_flat_keyed(path / "memory.stat").get("inactive_file", 0)
        return Usage(
            cpu_usage_seconds=read_flat_keyed(path / "cpu.stat").get("usage_usec", 0) / 1e6,
            memory_usage_bytes=usage,
            memory_working_set_bytes=max(0, usage - inactive),
            pids=read_int(path / "pids.current"),
        )

    def read_config(self, name: str) -> ResourceConfig:
        path = self.path(name)
        quota, _, period = read_text(path / "cpu.max").strip().partition(" ")
        return ResourceConfig(
            cpu_shares=weight_to_shares(read_int(path / "cpu.weight", 100)),
            cpu_quota=-1 if quota in ("", "max") else int(quota),
            cpu_period=int(period) if period else None,
            memory_limit=read_int(path / "memory.max", -1),
        )

    def pids(self, name: str) -> list[int]:
        result: list[int] = []
        for path in walk_leaf_first(self.path(name)):
            result.extend(read_procs(path))
        return sorted(result)
