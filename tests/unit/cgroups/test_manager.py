"""CgroupManager over the v2 driver in a temp dir: hierarchy, pod cgroups, recovery after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from cgroups.driver import ResourceConfig
from cgroups.manager import CgroupManager, pod_resource_config
from cgroups.naming import Naming
from cgroups.v2 import CgroupV2Driver
from minikubelet.base.podview import PodView
from tests.unit.cgroups.fixtures import ctr, pod

UID_G = "aaaaaaaa-0000-0000-0000-000000000001"
UID_B = "bbbbbbbb-0000-0000-0000-000000000002"
UID_E = "eeeeeeee-0000-0000-0000-000000000003"
G = {"cpu": "500m", "memory": "256Mi"}
CAPACITY = {"cpu": "2", "memory": "4Gi", "pid": "4096"}
RESERVED = {"cpu": "500m", "memory": "512Mi", "pid": "96"}
EVICTION = {"memory.available": "100Mi", "nodefs.available": "10%"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "cgroup"
    r.mkdir()
    (r / "cgroup.controllers").write_text("cpu memory pids\n")
    return r


def make(
    root: Path, tmp_path: Path, naming: Naming = "cgroupfs", enforce: tuple[str, ...] = ("pods",)
) -> CgroupManager:
    mi = tmp_path / "mountinfo"
    mi.write_text("")
    prefix = "/mkl" if naming == "cgroupfs" else "/mkl.slice"
    driver = CgroupV2Driver(root=root, prefix=prefix, mountinfo=mi)
    return CgroupManager(driver, naming, CAPACITY, RESERVED, EVICTION, list(enforce), cgroup_root="/mkl")


def pods() -> tuple[PodView, PodView, PodView]:
    guaranteed = pod([ctr("a", G, G)], uid=UID_G)
    burstable = pod(
        [ctr("a", {"cpu": "250m", "memory": "64Mi"}, {"memory": "128Mi"}), ctr("b", {"cpu": "1"})], uid=UID_B
    )
    best_effort = pod([ctr("a")], uid=UID_E)
    return guaranteed, burstable, best_effort


def test_hierarchy_cgroupfs(root: Path, tmp_path: Path) -> None:
    m = make(root, tmp_path)
    g, b, e = pods()
    m.ensure_hierarchy([g, b, e])
    kubepods = root / "mkl" / "kubepods"
    # allocatable = capacity - reserved: 1500m -> 1536 shares -> weight 1 + 1534*9999//262142 = 59
    assert (kubepods / "cpu.weight").read_text() == "59"
    assert (kubepods / "memory.max").read_text() == str(4 * 2**30 - 512 * 2**20)
    assert (kubepods / "pids.max").read_text() == "4000"
    assert (kubepods / "besteffort" / "cpu.weight").read_text() == "1"
    # burstable pods request 1250m -> 1280 shares -> weight 1 + 1278*9999//262142 = 49
    assert (kubepods / "burstable" / "cpu.weight").read_text() == "49"
    assert not (kubepods / "memory.min").exists()


def test_kubepods_uses_capacity_without_pods_enforcement(root: Path, tmp_path: Path) -> None:
    m = make(root, tmp_path, enforce=())
    assert m.kubepods_config() == ResourceConfig(cpu_shares=2048, memory_limit=4 * 2**30, pids_limit=4096)


def test_node_allocatable_subtracts_eviction_threshold(root: Path, tmp_path: Path) -> None:
    alloc = make(root, tmp_path).node_allocatable()
    assert alloc["memory"] == 4 * 2**30 - 512 * 2**20 - 100 * 2**20
    assert alloc["cpu"] == 1.5
    assert alloc["pid"] == 4000


def test_pod_cgroups_and_docker_parent_cgroupfs(root: Path, tmp_path: Path) -> None:
    m = make(root, tmp_path)
    g, b, e = pods()
    m.ensure_hierarchy([g, b, e])
    assert m.ensure_pod(g) == f"/mkl/kubepods/pod{UID_G}"
    assert m.ensure_pod(b) == f"/mkl/kubepods/burstable/pod{UID_B}"
    assert m.ensure_pod(e) == f"/mkl/kubepods/besteffort/pod{UID_E}"
    gdir = root / "mkl" / "kubepods" / f"pod{UID_G}"
    assert (gdir / "cpu.max").read_text() == "50000 100000"
    assert (gdir / "memory.max").read_text() == str(256 * 2**20)
    bdir = root / "mkl" / "kubepods" / "burstable" / f"pod{UID_B}"
    # container b has no memory limit and no CPU limits anywhere: neither is set on the pod
    assert not (bdir / "cpu.max").exists() and not (bdir / "memory.max").exists()
    assert (bdir / "cpu.weight").read_text() == "49"
    edir = root / "mkl" / "kubepods" / "besteffort" / f"pod{UID_E}"
    assert (edir / "cpu.weight").read_text() == "1"


def test_recovery_after_restart_finds_orphans_and_removes(root: Path, tmp_path: Path) -> None:
    g, b, e = pods()
    first = make(root, tmp_path)
    first.ensure_hierarchy([g, b, e])
    for p in (g, b, e):
        first.ensure_pod(p)
    # a new manager (after a crash) knows only about g
    second = make(root, tmp_path)
    assert second.pod_cgroups() == {
        UID_G: f"/mkl/kubepods/pod{UID_G}",
        UID_B: f"/mkl/kubepods/burstable/pod{UID_B}",
        UID_E: f"/mkl/kubepods/besteffort/pod{UID_E}",
    }
    assert second.orphans([UID_G]) == sorted([UID_B, UID_E])
    for uid in second.orphans([UID_G]):
        second.remove_pod(uid)
    assert second.orphans([UID_G]) == []
    assert list(second.pod_cgroups()) == [UID_G]
    second.remove_pod("not-there")


def test_systemd_naming(root: Path, tmp_path: Path) -> None:
    m = make(root, tmp_path, naming="systemd")
    g, b, _ = pods()
    m.ensure_hierarchy([b])
    assert m.ensure_pod(b) == f"mkl-kubepods-burstable-pod{UID_B.replace('-', '_')}.slice"
    leaf = root / "mkl.slice" / "mkl-kubepods.slice" / "mkl-kubepods-burstable.slice"
    assert (leaf / f"mkl-kubepods-burstable-pod{UID_B.replace('-', '_')}.slice").is_dir()
    m.ensure_pod(g)
    assert set(m.pod_cgroups()) == {UID_B, UID_G}
    m.remove_pod(UID_B)
    assert set(m.pod_cgroups()) == {UID_G}


def test_pod_usage(root: Path, tmp_path: Path) -> None:
    m = make(root, tmp_path)
    _, _, e = pods()
    m.ensure_hierarchy()
    m.ensure_pod(e)
    (root / "mkl" / "kubepods" / "besteffort" / f"pod{UID_E}" / "memory.current").write_text("4096\n")
    usage = m.pod_usage(UID_E)
    assert usage is not None and usage.memory_usage_bytes == 4096
    assert m.pod_usage("missing") is None


def test_pod_resource_config_options() -> None:
    g, b, e = pods()
    assert pod_resource_config(g, enforce_cpu_limits=False).cpu_quota == -1
    assert pod_resource_config(g, cpu_period_us=50000) == ResourceConfig(
        cpu_shares=512, cpu_quota=25000, cpu_period=50000, memory_limit=256 * 2**20
    )
    assert pod_resource_config(b, memory_qos=True).memory_min == 64 * 2**20
    assert pod_resource_config(e, pids_limit=100) == ResourceConfig(cpu_shares=2, pids_limit=100)
    # burstable with every container CPU-limited gets a quota but no memory limit
    p = pod([ctr("a", {"cpu": "100m"}, {"cpu": "200m"}), ctr("b", None, {"cpu": "300m", "memory": "1Gi"})])
    assert pod_resource_config(p) == ResourceConfig(cpu_shares=409, cpu_quota=50000, cpu_period=100000)
    # overhead is added to requests and bounded limits (upstream TestResourceConfigForPodWithCustomCPUCFSQuotaPeriod shape)
    o = pod([ctr("a", G, G)], overhead={"cpu": "100m", "memory": "64Mi"})
    assert pod_resource_config(o) == ResourceConfig(
        cpu_shares=614, cpu_quota=60000, cpu_period=100000, memory_limit=320 * 2**20
    )
