"""The v1 driver and the manager on the real kernel, inside an isolated /mkltest-<random> subtree.

Runs as root on a cgroup v1 host. Nothing outside the test's own subtree is touched, and the
subtree is removed (and checked gone) at the end of every test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from cgroups.detect import detect_cgroup_version
from cgroups.driver import CgroupBusyError, CgroupOutsidePrefixError, ResourceConfig, walk_leaf_first
from cgroups.manager import CgroupManager
from cgroups.v1 import CgroupV1Driver, discover_hierarchies
from tests.unit.cgroups.fixtures import ctr, pod

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
    pytest.mark.skipif(detect_cgroup_version() != 1, reason="needs a cgroup v1 host"),
]

G = {"cpu": "500m", "memory": "256Mi"}
UID_G = str(uuid.uuid4())
UID_B = str(uuid.uuid4())
UID_E = str(uuid.uuid4())


def _force_cleanup(prefix: str) -> None:
    # Last-resort cleanup of our own subtree only: move stray tasks to the hierarchy root, rmdir.
    for mount in CgroupV1Driver().mount_points:
        top = mount / prefix.strip("/")
        if not top.exists():
            continue
        for path in walk_leaf_first(top):
            for pid in (path / "cgroup.procs").read_text().split():
                try:
                    (mount / "cgroup.procs").write_text(pid)
                except OSError:
                    pass
            path.rmdir()


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"/mkltest-{uuid.uuid4().hex[:10]}"
    for mount in discover_hierarchies().values():
        assert not (mount / name.strip("/")).exists()
    try:
        yield name
    finally:
        _force_cleanup(name)
    for mount in discover_hierarchies().values():
        assert not (mount / name.strip("/")).exists(), f"left behind in {mount}"


@pytest.fixture
def driver(prefix: str) -> CgroupV1Driver:
    return CgroupV1Driver(prefix=prefix)


def read(driver: CgroupV1Driver, controller: str, name: str, file: str) -> str:
    return (driver.path(controller, name) / file).read_text().strip()


def test_create_update_read_back_remove(driver: CgroupV1Driver, prefix: str) -> None:
    name = f"{prefix}/kubepods/podx"
    driver.create(
        name, ResourceConfig(cpu_shares=512, cpu_quota=25000, cpu_period=50000, memory_limit=64 * 2**20, pids_limit=50)
    )
    assert driver.exists(name)
    assert read(driver, "cpu", name, "cpu.shares") == "512"
    assert read(driver, "cpu", name, "cpu.cfs_period_us") == "50000"
    assert read(driver, "cpu", name, "cpu.cfs_quota_us") == "25000"
    assert read(driver, "memory", name, "memory.limit_in_bytes") == str(64 * 2**20)
    assert read(driver, "pids", name, "pids.max") == "50"
    if "cpuset" in driver.hierarchies:
        assert read(driver, "cpuset", name, "cpuset.cpus") == read(driver, "cpuset", "/", "cpuset.cpus")

    driver.update(name, ResourceConfig(cpu_quota=-1, cpu_period=100000, memory_limit=-1, pids_limit=-1))
    assert read(driver, "cpu", name, "cpu.cfs_quota_us") == "-1"
    assert read(driver, "cpu", name, "cpu.cfs_period_us") == "100000"
    assert int(read(driver, "memory", name, "memory.limit_in_bytes")) >= 2**62
    assert read(driver, "pids", name, "pids.max") == "max"

    driver.remove(prefix)
    for mount in driver.mount_points:
        assert not (mount / prefix.strip("/")).exists()


def test_refuses_to_touch_anything_outside_prefix(driver: CgroupV1Driver) -> None:
    with pytest.raises(CgroupOutsidePrefixError):
        driver.create("/mkl-not-mine", ResourceConfig())
    with pytest.raises(CgroupOutsidePrefixError):
        driver.remove("/docker")
    assert not (driver.hierarchies["cpu"] / "mkl-not-mine").exists()


def test_busy_cgroup_is_not_removed_then_usage_and_removal(driver: CgroupV1Driver, prefix: str) -> None:
    name = f"{prefix}/p/ctr"
    driver.create(name, ResourceConfig(memory_limit=256 * 2**20))
    proc = subprocess.Popen(
        ["sh", "-c", "x=$(head -c 2000000 /dev/urandom | md5sum); sleep 60"], start_new_session=True
    )
    try:
        for controller in ("cpu", "cpuacct", "memory", "pids"):
            (driver.path(controller, name) / "cgroup.procs").write_text(str(proc.pid))
        assert proc.pid in driver.pids(f"{prefix}/p")
        usage = driver.read_usage(f"{prefix}/p")
        assert usage.pids >= 1
        assert usage.memory_usage_bytes > 0
        assert 0 <= usage.memory_working_set_bytes <= usage.memory_usage_bytes
        with pytest.raises(CgroupBusyError):
            driver.remove(f"{prefix}/p")
        assert driver.exists(name)
    finally:
        # The shell's children inherit the cgroup: end the whole process group we started.
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 5
    while driver.pids(f"{prefix}/p") and time.monotonic() < deadline:
        time.sleep(0.05)
    driver.remove(prefix)
    assert not driver.exists(f"{prefix}/p")


def test_manager_hierarchy_on_the_kernel(driver: CgroupV1Driver, prefix: str) -> None:
    m = CgroupManager(
        driver,
        "cgroupfs",
        {"cpu": "2", "memory": "4Gi", "pid": "4096"},
        {"cpu": "500m", "memory": "512Mi"},
        {"memory.available": "100Mi"},
        ["pods"],
        cgroup_root=prefix,
    )
    g = pod([ctr("a", G, G)], uid=UID_G)
    b = pod([ctr("a", {"cpu": "250m"}, {"cpu": "1", "memory": "128Mi"})], uid=UID_B)
    e = pod([ctr("a")], uid=UID_E)
    m.ensure_hierarchy([g, b, e])
    kp = f"{prefix}/kubepods"
    assert read(driver, "cpu", kp, "cpu.shares") == "1536"
    assert read(driver, "memory", kp, "memory.limit_in_bytes") == str(4 * 2**30 - 512 * 2**20)
    assert read(driver, "pids", kp, "pids.max") == "4096"
    assert read(driver, "cpu", f"{kp}/besteffort", "cpu.shares") == "2"
    assert read(driver, "cpu", f"{kp}/burstable", "cpu.shares") == "256"

    assert m.ensure_pod(g) == f"{kp}/pod{UID_G}"
    assert m.ensure_pod(b) == f"{kp}/burstable/pod{UID_B}"
    assert m.ensure_pod(e) == f"{kp}/besteffort/pod{UID_E}"
    assert read(driver, "cpu", f"{kp}/pod{UID_G}", "cpu.cfs_quota_us") == "50000"
    assert read(driver, "memory", f"{kp}/pod{UID_G}", "memory.limit_in_bytes") == str(256 * 2**20)
    assert read(driver, "cpu", f"{kp}/burstable/pod{UID_B}", "cpu.shares") == "256"
    assert read(driver, "cpu", f"{kp}/burstable/pod{UID_B}", "cpu.cfs_quota_us") == "100000"
    assert read(driver, "cpu", f"{kp}/besteffort/pod{UID_E}", "cpu.shares") == "2"
    # the pod cgroup exists in every v1 hierarchy, so the runtime's cgroups below it can be found
    for mount in driver.mount_points:
        assert (mount / prefix.strip("/") / "kubepods" / "burstable" / f"pod{UID_B}").is_dir()

    # a fresh manager (agent restart) sees the same pods from the filesystem alone
    again = CgroupManager(CgroupV1Driver(prefix=prefix), "cgroupfs", {}, {}, {}, [], cgroup_root=prefix)
    assert again.orphans([UID_G]) == sorted([UID_B, UID_E])
    usage = again.pod_usage(UID_G)
    assert usage is not None and usage.pids == 0
    for uid in again.orphans([UID_G]):
        again.remove_pod(uid)
    assert list(again.pod_cgroups()) == [UID_G]
    for mount in driver.mount_points:
        assert not (mount / prefix.strip("/") / "kubepods" / "burstable" / f"pod{UID_B}").exists()
    driver.remove(prefix)
