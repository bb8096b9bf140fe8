"""cgroupDriver systemd wired in: the cgroup manager's node, QoS and pod slices are started through systemd over
D-Bus (the double of tests/systemd_double.py on a real dbus-daemon), and no bus is a clear error."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from cgroups.manager import CgroupManager
from cgroups.systemd_dbus import DbusSystemd
from cgroups.systemd_driver import SystemdCgroupDriver, SystemdError
from cgroups.v2 import CgroupV2Driver
from minikubelet.cm.pod_cgroups import systemd_cgroup_driver
from tests.systemd_double import SystemdDouble
from tests.unit.cgroups.fixtures import ctr, pod

UID = "bbbbbbbb-0000-0000-0000-000000000002"


def files_driver(tmp_path: Path) -> CgroupV2Driver:
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "mountinfo").write_text("")
    return CgroupV2Driver(root=root, prefix="/mkl.slice", mountinfo=tmp_path / "mountinfo")


async def test_the_manager_gets_its_slices_from_systemd(tmp_path: Path) -> None:
    if shutil.which("dbus-daemon") is None:
        pytest.skip("dbus-daemon is not installed (apt-get install dbus)")
    files = files_driver(tmp_path)
    systemd = SystemdDouble(tmp_path, files.root)
    await systemd.start()
    bus = await asyncio.to_thread(DbusSystemd, systemd.address, 5.0)
    try:
        manager = CgroupManager(SystemdCgroupDriver(files, bus), "systemd", {"cpu": "2", "memory": "4Gi"}, {}, {},
                                ["pods"], cgroup_root="/mkl")
        burstable = pod([ctr("a", {"cpu": "250m", "memory": "64Mi"}, {"memory": "128Mi"})], uid=UID)
        await asyncio.to_thread(manager.ensure_hierarchy, [burstable])
        parent = await asyncio.to_thread(manager.ensure_pod, burstable)
        pod_slice = f"mkl-kubepods-burstable-pod{UID.replace('-', '_')}.slice"
        assert parent == pod_slice  # Docker's --cgroup-parent with its systemd driver
        started = [name for call, name, _ in systemd.calls if call == "StartTransientUnit"]
        assert started[:2] == ["mkl.slice", "mkl-kubepods.slice"]
        assert {"mkl-kubepods-burstable.slice", "mkl-kubepods-besteffort.slice", pod_slice} <= set(started)
        assert systemd.units[pod_slice]["MemoryMax"] == ("t", 128 << 20)
        assert systemd.units["mkl-kubepods.slice"]["Wants"] == ("as", ["mkl.slice"])
        await asyncio.to_thread(manager.remove_pod, UID)
        assert systemd.calls[-1][:2] == ("StopUnit", pod_slice) and pod_slice not in systemd.units
    finally:
        await asyncio.to_thread(bus.close)
        await systemd.stop()


def test_no_system_bus_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path}/no-bus")
    with pytest.raises(SystemdError, match="cannot connect to systemd over D-Bus"):
        systemd_cgroup_driver(files_driver(tmp_path))
