"""cgroupDriver: systemd. Pod and QoS cgroups are systemd slices started over D-Bus
(`org.freedesktop.systemd1.Manager.StartTransientUnit`), stopped with `StopUnit`, their limits set with
`SetUnitProperties`, as the kubelet's systemd cgroup manager does through runc's; the cgroup files are then also
written by the filesystem driver underneath (as runc does), which also reads usage and lists children and pids.
"""

from __future__ import annotations

from typing import Protocol

from cgroups.driver import CgroupDriver, CgroupError, ResourceConfig, Usage
from cgroups.systemd_units import Property, resource_properties, slice_chain, slice_properties


class SystemdError(CgroupError):
    pass


class SystemdManager(Protocol):
    """The three Manager calls, each waiting for its job to finish; raise SystemdError on failure."""

    def start_transient_unit(self, unit: str, properties: list[Property]) -> None: ...
    def stop_unit(self, unit: str) -> None: ...
    def set_unit_properties(self, unit: str, properties: list[Property]) -> None: ...


class SystemdCgroupDriver:
    def __init__(self, files: CgroupDriver, systemd: SystemdManager) -> None:
        self.files = files
        self.systemd = systemd
        self.version = files.version

    def create(self, name: str, config: ResourceConfig) -> None:
        for i, (unit, parent) in enumerate(chain := slice_chain(name)):
            path = "/" + "/".join(u for u, _ in chain[: i + 1])
            if self.files.exists(path):
                continue
            leaf = i == len(chain) - 1
            self.systemd.start_transient_unit(unit, slice_properties(
                unit, parent, config if leaf else ResourceConfig(), self.version))
            if not self.files.exists(path):
                raise SystemdError(f"systemd started {unit} but {path} does not exist")
        self.files.update(name, config)

    def update(self, name: str, config: ResourceConfig) -> None:
        props = resource_properties(config, self.version)
        if props:
            self.systemd.set_unit_properties(slice_chain(name)[-1][0], props)
        self.files.update(name, config)

    def exists(self, name: str) -> bool:
        return self.files.exists(name)

    def read_config(self, name: str) -> ResourceConfig:
        return self.files.read_config(name)

    def remove(self, name: str) -> None:
        """Child slices first. StopUnit would also kill what runs in a slice, so a busy tree is refused as the
        filesystem driver refuses it; a leftover empty non-slice child (a container's scope) is rmdir'ed."""
        for child in self.files.children(name):
            path = f"{name.rstrip('/')}/{child}"
            if child.endswith(".slice"):
                self.remove(path)
            else:
                self.files.remove(path)
        if self.files.pids(name):
            self.files.remove(name)  # raises CgroupBusyError
        self.systemd.stop_unit(slice_chain(name)[-1][0])

    def children(self, name: str) -> list[str]:
        return self.files.children(name)

    def read_usage(self, name: str) -> Usage:
        return self.files.read_usage(name)

    def pids(self, name: str) -> list[int]:
        return self.files.pids(name)
