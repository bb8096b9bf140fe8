"""`explain`'s resources per container read back from the kernel: the container's own cgroup files (cgroup v1:
cpu.cfs_quota_us / cpu.cfs_period_us / cpu.shares / memory.limit_in_bytes; v2: cpu.max / cpu.weight / memory.max)
beside the pod cgroup, on fixture trees laid out as each hierarchy, with a difference against what the spec asks
flagged (the real v1 kernel: tests/integration/test_agent_explain.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cgroups.cpu import shares_to_weight, weight_to_shares
from cgroups.manager import CgroupManager
from cgroups.v1 import CgroupV1Driver
from cgroups.v2 import CgroupV2Driver
from cri.types import ContainerState
from minikubelet.base.podview import PodView
from minikubelet.cm.pod_cgroups import PodCgroups
from tests.unit.explain.explained import ExplainedNode, explained_node
from tests.unit.fake_node import IMAGE, make_pod

LIMITED = {"name": "app", "image": IMAGE,
           "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "64Mi"}}}
SHARES = 256  # 250m
QUOTA = 50000  # 500m of a 100 ms period
MEMORY = 64 << 20


def v1_cgroups(tmp_path: Path) -> PodCgroups:
    hierarchies = {name: tmp_path / "cgroup" / name for name in ("cpu", "cpuacct", "memory", "pids")}
    for mount in hierarchies.values():
        mount.mkdir(parents=True)
    driver = CgroupV1Driver(root=tmp_path / "cgroup", prefix="/", hierarchies=hierarchies)
    manager = CgroupManager(driver, "cgroupfs", {"cpu": "2", "memory": "4Gi"}, {}, {}, [])
    manager.ensure_hierarchy()
    return PodCgroups(manager, 4 << 30, -1000, lambda: [])


def v2_cgroups(tmp_path: Path) -> PodCgroups:
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    manager = CgroupManager(CgroupV2Driver(root, "/", mountinfo), "cgroupfs", {"cpu": "2", "memory": "4Gi"}, {}, {},
                            [])
    manager.ensure_hierarchy()
    return PodCgroups(manager, 4 << 30, -1000, lambda: [])


def runtime_writes_v1(root: Path, literal: str, shares: int, quota: int, memory: int) -> None:
    """What runc writes for the container on v1 (the runtime's side, on the fixture tree)."""
    rel = literal.strip("/")
    for controller, files in (("cpu", {"cpu.shares": shares, "cpu.cfs_quota_us": quota, "cpu.cfs_period_us": 100000}),
                              ("memory", {"memory.limit_in_bytes": memory}), ("cpuacct", {}), ("pids", {})):
        d = root / controller / rel
        d.mkdir(parents=True, exist_ok=True)
        for name, value in files.items():  # (every hierarchy gets the cgroup)
            (d / name).write_text(f"{value}\n")


def runtime_writes_v2(root: Path, literal: str, shares: int, quota: int, memory: int) -> None:
    d = root / literal.strip("/")
    d.mkdir(parents=True, exist_ok=True)
    (d / "cpu.weight").write_text(f"{shares_to_weight(shares)}\n")
    (d / "cpu.max").write_text(f"{quota if quota > 0 else 'max'} 100000\n")
    (d / "memory.max").write_text(f"{memory if memory > 0 else 'max'}\n")


async def running(en: ExplainedNode, cgroups: PodCgroups) -> tuple[PodView, str]:
    pod = make_pod(containers=[LIMITED])
    view = PodView.of(pod)
    cgroups.ensure_pod(view)  # as the syncer makes it before the sandbox
    en.node.config.set_source_pods("file", [pod])
    await en.node.settle()
    [ctr] = [c for c in await en.node.runtime.list_containers() if c.state is ContainerState.RUNNING]
    return view, ctr.id


def kernel_of(doc: dict[str, Any]) -> dict[str, Any]:
    [entry] = doc["resources"]["containers"]
    kernel: dict[str, Any] = entry["kernel"]
    return kernel


@pytest.fixture
async def v1(tmp_path: Path) -> AsyncIterator[tuple[ExplainedNode, PodCgroups]]:
    cgroups = v1_cgroups(tmp_path)
    async for en in explained_node(tmp_path / "node", cgroups=cgroups):
        yield en, cgroups


@pytest.fixture
async def v2(tmp_path: Path) -> AsyncIterator[tuple[ExplainedNode, PodCgroups]]:
    cgroups = v2_cgroups(tmp_path)
    async for en in explained_node(tmp_path / "node", cgroups=cgroups):
        yield en, cgroups


async def test_v1_container_cgroup_read_back_matches_the_spec(v1: tuple[ExplainedNode, PodCgroups],
                                                              tmp_path: Path) -> None:
    en, cgroups = v1
    view, cid = await running(en, cgroups)
    assert cgroups.manager is not None
    runtime_writes_v1(tmp_path / "cgroup", cgroups.manager.container_cgroup(view, cid), SHARES, QUOTA, MEMORY)
    kernel = kernel_of(await en.explain())
    assert kernel["actual"] == {"cpuShares": SHARES, "cpuQuota": QUOTA, "cpuPeriod": 100000, "memoryLimit": MEMORY}
    assert kernel["expected"] == kernel["actual"] and kernel["differences"] == []


async def test_v1_a_memory_limit_the_kernel_does_not_hold_is_flagged(v1: tuple[ExplainedNode, PodCgroups],
                                                                     tmp_path: Path) -> None:
    en, cgroups = v1
    view, cid = await running(en, cgroups)
    assert cgroups.manager is not None
    # the v1 kernel's "unlimited" (a page-rounded 2^63-1): read back as -1
    runtime_writes_v1(tmp_path / "cgroup", cgroups.manager.container_cgroup(view, cid), SHARES, -1,
                      9223372036854771712)
    kernel = kernel_of(await en.explain())
    assert kernel["differences"] == [{"setting": "cpuQuota", "expected": QUOTA, "actual": -1},
                                     {"setting": "memoryLimit", "expected": MEMORY, "actual": -1}]


async def test_v2_container_cgroup_read_back_through_cpu_max_and_weight(v2: tuple[ExplainedNode, PodCgroups],
                                                                        tmp_path: Path) -> None:
    en, cgroups = v2
    view, cid = await running(en, cgroups)
    assert cgroups.manager is not None
    runtime_writes_v2(tmp_path / "cgroup", cgroups.manager.container_cgroup(view, cid), SHARES, QUOTA, MEMORY)
    kernel = kernel_of(await en.explain())
    # 256 shares are cpu.weight 10, which maps back to 237: not a difference, the map's rounding
    round_trip = weight_to_shares(shares_to_weight(SHARES))
    assert round_trip != SHARES
    assert kernel["actual"] == {"cpuShares": round_trip, "cpuQuota": QUOTA, "cpuPeriod": 100000, "memoryLimit": MEMORY}
    assert kernel["differences"] == []


async def test_v2_a_cpu_weight_and_quota_that_differ_are_flagged(v2: tuple[ExplainedNode, PodCgroups],
                                                                 tmp_path: Path) -> None:
    en, cgroups = v2
    view, cid = await running(en, cgroups)
    assert cgroups.manager is not None
    runtime_writes_v2(tmp_path / "cgroup", cgroups.manager.container_cgroup(view, cid), 1024, 20000, MEMORY)
    kernel = kernel_of(await en.explain())
    assert kernel["differences"] == [
        {"setting": "cpuShares", "expected": weight_to_shares(shares_to_weight(SHARES)),
         "actual": weight_to_shares(shares_to_weight(1024))},
        {"setting": "cpuQuota", "expected": QUOTA, "actual": 20000}]


async def test_no_kernel_entry_before_the_runtime_made_the_container_cgroup(v2: tuple[ExplainedNode, PodCgroups]) -> None:
    en, cgroups = v2
    await running(en, cgroups)
    [entry] = (await en.explain())["resources"]["containers"]
    assert "kernel" not in entry and "expected" in entry
