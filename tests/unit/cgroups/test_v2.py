"""cgroup v2 driver against a temp dir laid out like a unified hierarchy."""

from __future__ import annotations

from pathlib import Path

import pytest

from cgroups.detect import detect_cgroup_version, parse_mountinfo
from cgroups.driver import CgroupBusyError, CgroupOutsidePrefixError, ResourceConfig
from cgroups.v2 import CgroupV2Driver

NO_MOUNTS = "22 1 0:21 / /proc rw - proc proc rw\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "cgroup"
    r.mkdir()
    (r / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (r / "cgroup.subtree_control").write_text("")
    return r


@pytest.fixture
def driver(root: Path, tmp_path: Path) -> CgroupV2Driver:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(NO_MOUNTS)
    return CgroupV2Driver(root=root, prefix="/mkl", mountinfo=mountinfo)


def test_create_writes_v2_files_and_enables_controllers(driver: CgroupV2Driver, root: Path) -> None:
    cfg = ResourceConfig(cpu_shares=1024, cpu_quota=50000, cpu_period=100000, memory_limit=64 * 2**20, pids_limit=100)
    driver.create("/mkl/kubepods/pod1", cfg)
    leaf = root / "mkl" / "kubepods" / "pod1"
    assert (leaf / "cpu.weight").read_text() == "39"
    assert (leaf / "cpu.max").read_text() == "50000 100000"
    assert (leaf / "memory.max").read_text() == str(64 * 2**20)
    assert (leaf / "pids.max").read_text() == "100"
    for parent in (root, root / "mkl", root / "mkl" / "kubepods"):
        assert set((parent / "cgroup.subtree_control").read_text().split()) == {"cpu", "memory", "pids"}
    assert driver.exists("/mkl/kubepods/pod1")


@pytest.mark.parametrize(
    ("cfg", "file", "value"),
    [
        (ResourceConfig(cpu_quota=-1, cpu_period=100000), "cpu.max", "max 100000"),
        (ResourceConfig(cpu_quota=0, cpu_period=50000), "cpu.max", "max 50000"),
        (ResourceConfig(memory_limit=-1), "memory.max", "max"),
        (ResourceConfig(pids_limit=-1), "pids.max", "max"),
        (ResourceConfig(cpu_shares=2), "cpu.weight", "1"),
        (ResourceConfig(memory_min=1024), "memory.min", "1024"),
        (ResourceConfig(memory_high=4096), "memory.high", "4096"),
    ],
)
def test_update_values(driver: CgroupV2Driver, root: Path, cfg: ResourceConfig, file: str, value: str) -> None:
    driver.create("/mkl/x", ResourceConfig())
    driver.update("/mkl/x", cfg)
    assert (root / "mkl" / "x" / file).read_text() == value


def test_none_leaves_settings_untouched(driver: CgroupV2Driver, root: Path) -> None:
    driver.create("/mkl/x", ResourceConfig(memory_limit=100))
    driver.update("/mkl/x", ResourceConfig(cpu_shares=1024))
    assert (root / "mkl" / "x" / "memory.max").read_text() == "100"


def test_refuses_outside_prefix(driver: CgroupV2Driver, root: Path) -> None:
    with pytest.raises(CgroupOutsidePrefixError):
        driver.create("/other/pod", ResourceConfig())
    with pytest.raises(CgroupOutsidePrefixError):
        driver.remove("/")
    with pytest.raises(ValueError):
        driver.create("/mkl/../etc", ResourceConfig())
    assert not (root / "other").exists()


def test_remove_leaf_first(driver: CgroupV2Driver, root: Path) -> None:
    driver.create("/mkl/kubepods/pod1/ctr", ResourceConfig(cpu_shares=2))
    driver.remove("/mkl/kubepods/pod1")
    assert not (root / "mkl" / "kubepods" / "pod1").exists()
    assert (root / "mkl" / "kubepods").is_dir()
    assert driver.children("/mkl/kubepods") == []


def test_remove_missing_is_fine(driver: CgroupV2Driver) -> None:
    driver.remove("/mkl/nothing")


def test_remove_refuses_busy_cgroup_on_kernel(tmp_path: Path) -> None:
    # On the real kernel rmdir of a cgroup with processes fails EBUSY; simulate with a non-empty dir.
    r = tmp_path / "r"
    (r / "mkl" / "busy").mkdir(parents=True)
    (r / "mkl" / "busy" / "somefile").write_text("x")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"41 31 0:38 / {r} rw,relatime - cgroup2 cgroup2 rw\n")
    d = CgroupV2Driver(root=r, prefix="/mkl", mountinfo=mountinfo)
    with pytest.raises(CgroupBusyError):
        d.remove("/mkl/busy")


def test_read_usage_and_pids(driver: CgroupV2Driver, root: Path) -> None:
    driver.create("/mkl/p/c", ResourceConfig())
    p = root / "mkl" / "p"
    (p / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    (p / "memory.current").write_text("10485760\n")
    (p / "memory.stat").write_text("anon 1000\nfile 5000\ninactive_file 4194304\nactive_file 100\n")
    (p / "pids.current").write_text("3\n")
    (p / "cgroup.procs").write_text("10\n")
    (p / "c" / "cgroup.procs").write_text("11\n12\n")
    usage = driver.read_usage("/mkl/p")
    assert usage.cpu_usage_seconds == pytest.approx(2.5)
    assert usage.memory_usage_bytes == 10485760
    assert usage.memory_working_set_bytes == 10485760 - 4194304
    assert usage.pids == 3
    assert driver.pids("/mkl/p") == [10, 11, 12]


MOUNTINFO_V1 = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_detect_hybrid_is_v1(tmp_path: Path) -> None:
    mi = tmp_path / "mi"
    mi.write_text(MOUNTINFO_V1)
    assert detect_cgroup_version(Path("/sys/fs/cgroup"), mi) == 1
    mounts = parse_mountinfo(MOUNTINFO_V1)
    assert [(str(m.mount_point), m.fstype) for m in mounts] == [
        ("/sys/fs/cgroup/cpu", "cgroup"),
        ("/sys/fs/cgroup/memory", "cgroup"),
        ("/sys/fs/cgroup/unified", "cgroup2"),
    ]


def test_detect_unified_is_v2(tmp_path: Path, root: Path) -> None:
    mi = tmp_path / "mi"
    mi.write_text(f"30 23 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    assert detect_cgroup_version(root, mi) == 2
    (root / "cgroup.controllers").write_text("\n")
    assert detect_cgroup_version(root, mi) == 1


def test_detect_this_host() -> None:
    assert detect_cgroup_version() in (1, 2)
