"""cgroupDriver systemd: slices started, updated and stopped over a real D-Bus bus (dbus-daemon) against a
double of systemd's Manager (tests/systemd_double.py), the cgroup files written underneath by the v2 driver."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cgroups.driver import CgroupBusyError, ResourceConfig
from cgroups.systemd_dbus import DbusSystemd
from cgroups.systemd_driver import SystemdCgroupDriver, SystemdError
from cgroups.systemd_units import UNLIMITED, resource_properties, slice_chain
from cgroups.v2 import CgroupV2Driver
from tests.systemd_double import SystemdDouble

POD = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b_2c3d.slice"


def test_slice_chain() -> None:
    assert slice_chain(POD) == [("kubepods.slice", "-.slice"), ("kubepods-burstable.slice", "kubepods.slice"),
                                ("kubepods-burstable-pod0a1b_2c3d.slice", "kubepods-burstable.slice")]
    for bad in ("/", "/kubepods/burstable", "/kubepods.slice/docker-1.scope"):
        with pytest.raises(ValueError, match="not a systemd slice path"):
            slice_chain(bad)


def test_resource_properties_as_runc_maps_them() -> None:
    config = ResourceConfig(cpu_shares=512, cpu_quota=25_000, cpu_period=100_000, memory_limit=64 << 20, pids_limit=-1)
    assert resource_properties(config, 2) == [
        ("CPUWeight", ("t", 20)), ("CPUQuotaPerSecUSec", ("t", 250_000)), ("CPUQuotaPeriodUSec", ("t", 100_000)),
        ("MemoryMax", ("t", 64 << 20)), ("TasksMax", ("t", UNLIMITED))]
    assert resource_properties(config, 1) == [
        ("CPUShares", ("t", 512)), ("CPUQuotaPerSecUSec", ("t", 250_000)), ("CPUQuotaPeriodUSec", ("t", 100_000)),
        ("MemoryLimit", ("t", 64 << 20)), ("TasksMax", ("t", UNLIMITED))]
    # 1234 µs per 100 ms is 12 340 µs/s, kept by systemd in 10 ms steps: rounded up
    assert resource_properties(ResourceConfig(cpu_quota=1234, cpu_period=100_000), 2)[0] == \
        ("CPUQuotaPerSecUSec", ("t", 20_000))
    assert resource_properties(ResourceConfig(cpu_quota=-1, memory_limit=-1), 2) == [
        ("CPUQuotaPerSecUSec", ("t", UNLIMITED)), ("MemoryMax", ("t", UNLIMITED))]
    assert resource_properties(ResourceConfig(), 2) == []


@pytest.fixture
async def systemd(tmp_path: Path) -> AsyncIterator[SystemdDouble]:
    if shutil.which("dbus-daemon") is None:
        pytest.skip("dbus-daemon is not installed (apt-get install dbus)")
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    double = SystemdDouble(tmp_path, root)
    await double.start()
    try:
        yield double
    finally:
        await double.stop()


@pytest.fixture
async def driver(systemd: SystemdDouble, tmp_path: Path) -> AsyncIterator[SystemdCgroupDriver]:
    (tmp_path / "mountinfo").write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    files = CgroupV2Driver(root=systemd.cgroup_root, prefix="/", mountinfo=tmp_path / "mountinfo")
    bus = await asyncio.to_thread(DbusSystemd, systemd.address, 5.0)
    try:
        yield SystemdCgroupDriver(files, bus)
    finally:
        await asyncio.to_thread(bus.close)


# the driver is synchronous and waits for the bus: it runs on a thread, the double on this loop
async def test_create_starts_each_missing_slice_then_writes_the_files(
        systemd: SystemdDouble, driver: SystemdCgroupDriver) -> None:
    config = ResourceConfig(cpu_shares=256, memory_limit=128 << 20, pids_limit=100)
    await asyncio.to_thread(driver.create, POD, config)
    starts = [(name, props) for call, name, props in systemd.calls if call == "StartTransientUnit"]
    assert [name for name, _ in starts] == [u for u, _ in slice_chain(POD)]
    for (_unit, parent), (_, props) in zip(slice_chain(POD), starts, strict=True):
        assert props["Wants"] == ("as", [parent]) and props["DefaultDependencies"] == ("b", False)
        assert props["MemoryAccounting"] == props["CPUAccounting"] == props["TasksAccounting"] == ("b", True)
        assert "Delegate" not in props
    assert "MemoryMax" not in starts[0][1] and "MemoryMax" not in starts[1][1]  # the parents' limits are their own
    assert (starts[2][1]["CPUWeight"], starts[2][1]["MemoryMax"], starts[2][1]["TasksMax"]) == \
        (("t", 10), ("t", 128 << 20), ("t", 100))
    pod_dir = systemd.cgroup_root / POD.lstrip("/")
    assert (pod_dir / "memory.max").read_text() == str(128 << 20) and (pod_dir / "pids.max").read_text() == "100"

    # a second pod in the same QoS class starts only its own slice; an update goes to systemd and the files
    systemd.calls.clear()
    other = POD.replace("pod0a1b_2c3d", "pod9f")
    await asyncio.to_thread(driver.create, other, ResourceConfig(cpu_shares=2))
    assert [(c, n) for c, n, _ in systemd.calls] == [("StartTransientUnit", "kubepods-burstable-pod9f.slice")]
    await asyncio.to_thread(driver.update, other, ResourceConfig(memory_limit=-1))
    assert systemd.calls[-1] == ("SetUnitProperties", "kubepods-burstable-pod9f.slice", {"MemoryMax": ("t", UNLIMITED)})
    assert (systemd.cgroup_root / other.lstrip("/") / "memory.max").read_text() == "max"
    assert systemd.units["kubepods-burstable-pod9f.slice"]["MemoryMax"] == ("t", UNLIMITED)


async def test_remove_stops_the_slice_and_refuses_a_busy_one(systemd: SystemdDouble,
                                                             driver: SystemdCgroupDriver) -> None:
    await asyncio.to_thread(driver.create, POD, ResourceConfig())
    pod_dir = systemd.cgroup_root / POD.lstrip("/")
    (pod_dir / "cgroup.procs").write_text("4242\n")
    with pytest.raises(CgroupBusyError):
        await asyncio.to_thread(driver.remove, POD)
    assert "kubepods-burstable-pod0a1b_2c3d.slice" in systemd.units
    (pod_dir / "cgroup.procs").write_text("")
    await asyncio.to_thread(driver.remove, POD)
    assert systemd.calls[-1][:2] == ("StopUnit", "kubepods-burstable-pod0a1b_2c3d.slice")
    assert not pod_dir.exists() and "kubepods-burstable.slice" in systemd.units
    # NoSuchUnit: already gone, not an error
    await asyncio.to_thread(driver.systemd.stop_unit, "kubepods-burstable-pod0a1b_2c3d.slice")


async def test_a_failed_job_and_an_unreachable_bus_are_errors(systemd: SystemdDouble, driver: SystemdCgroupDriver,
                                                              tmp_path: Path) -> None:
    systemd.fail.add("kubepods.slice")
    with pytest.raises(SystemdError, match=r"systemd StartTransientUnit kubepods\.slice: job failed"):
        await asyncio.to_thread(driver.create, "/kubepods.slice", ResourceConfig())
    with pytest.raises(SystemdError, match="cannot connect to systemd over D-Bus"):
        await asyncio.to_thread(DbusSystemd, f"unix:path={tmp_path}/nothing", 2.0)


async def test_a_slice_systemd_already_has_is_adopted(systemd: SystemdDouble, driver: SystemdCgroupDriver) -> None:
    # the agent restarted: systemd still has the unit, but its cgroup is gone (someone rmdir'ed it by hand)
    await asyncio.to_thread(driver.create, "/kubepods.slice", ResourceConfig())
    (systemd.cgroup_root / "kubepods.slice").rmdir()
    with pytest.raises(SystemdError, match=r"systemd started kubepods.slice but /kubepods.slice does not exist"):
        await asyncio.to_thread(driver.create, "/kubepods.slice", ResourceConfig())
