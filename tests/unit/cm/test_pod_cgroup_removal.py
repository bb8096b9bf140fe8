"""PodCgroups removal: retried while busy, reported when left, orphans swept (v2 driver on a temp dir)."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from pathlib import Path

import pytest

from cgroups.detect import hybrid_unified_mount
from cgroups.manager import CgroupManager
from cgroups.naming import pod_cgroup_name
from cgroups.v2 import CgroupV2Driver
from minikubelet.base.podview import PodView
from minikubelet.base.safepath import UnsafePathError
from minikubelet.cm.pod_cgroups import PodCgroups
from tests.unit.cgroups.fixtures import ctr, pod, pod_dict

UID_A = "aaaaaaaa-0000-0000-0000-000000000001"
UID_B = "bbbbbbbb-0000-0000-0000-000000000002"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "cgroup"
    r.mkdir()
    (r / "cgroup.controllers").write_text("cpu memory pids\n")
    return r


@pytest.fixture
def pcg(root: Path, tmp_path: Path) -> PodCgroups:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    manager = CgroupManager(CgroupV2Driver(root, "/r", mountinfo), "cgroupfs", {"cpu": "2", "memory": "4Gi"}, {}, {},
                            [], cgroup_root="/r")
    manager.ensure_hierarchy()
    return PodCgroups(manager, 4 * 2**30, -1000, lambda: [])


def pod_dir(root: Path, uid: str) -> Path:
    return root / "r" / "kubepods" / "besteffort" / f"pod{uid}"


def test_try_remove_reports_busy_then_done(pcg: PodCgroups, root: Path) -> None:
    pcg.ensure_pod(pod([ctr()], uid=UID_A))
    (pod_dir(root, UID_A) / "cgroup.procs").write_text("4242\n")
    assert pcg.try_remove_pod(UID_A) is False and pod_dir(root, UID_A).is_dir()
    (pod_dir(root, UID_A) / "cgroup.procs").write_text("")
    assert pcg.try_remove_pod(UID_A) is True and not pod_dir(root, UID_A).exists()
    assert pcg.try_remove_pod(UID_A) is True  # nothing left is success, again


async def test_remove_eventually_waits_for_the_processes_to_leave(pcg: PodCgroups, root: Path) -> None:
    pcg.ensure_pod(pod([ctr()], uid=UID_A))
    procs = pod_dir(root, UID_A) / "cgroup.procs"
    procs.write_text("4242\n")
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        if len(slept) == 3:
            procs.write_text("")

    assert await pcg.remove_pod_eventually(UID_A, sleep=sleep) is True
    assert slept == [0.05, 0.1, 0.2] and not pod_dir(root, UID_A).exists()


async def test_remove_eventually_gives_up_after_its_timeout(pcg: PodCgroups, root: Path) -> None:
    pcg.ensure_pod(pod([ctr()], uid=UID_A))
    (pod_dir(root, UID_A) / "cgroup.procs").write_text("4242\n")
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    assert await pcg.remove_pod_eventually(UID_A, timeout=2.0, sleep=sleep) is False
    assert sum(slept[:-1]) < 2.0 <= sum(slept) and max(slept) <= 1.0
    assert pod_dir(root, UID_A).is_dir()


def test_orphan_sweep_removes_unknown_empty_pods_only(pcg: PodCgroups, root: Path) -> None:
    pcg.ensure_pod(pod([ctr()], uid=UID_A))
    pcg.ensure_pod(pod([ctr()], uid=UID_B))
    (pod_dir(root, UID_B) / "cgroup.procs").write_text("4242\n")
    assert pcg.cleanup_orphans([]) == [UID_B]
    assert not pod_dir(root, UID_A).exists() and pod_dir(root, UID_B).is_dir()
    assert pcg.cleanup_orphans([UID_B]) == [] and pod_dir(root, UID_B).is_dir()


def test_orphan_sweep_logs_every_orphan_in_one_line_before_removing_any(pcg: PodCgroups, root: Path) -> None:
    """upstream cleanupOrphanedPodCgroups logs each orphan before removing it; here one line lists them all, so
    a cgroup removed by mistake (another agent's on the same cgroupRoot) can be traced."""
    pcg.ensure_pod(pod([ctr()], uid=UID_A))
    pcg.ensure_pod(pod([ctr()], uid=UID_B))
    seen: list[tuple[str, bool, bool]] = []

    class Before(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.getMessage(), pod_dir(root, UID_A).is_dir(), pod_dir(root, UID_B).is_dir()))

    handler = Before()
    logger = logging.getLogger("minikubelet.cgroups")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        assert pcg.cleanup_orphans([]) == []
        assert pcg.cleanup_orphans([]) == []  # nothing left: no line
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert seen[0] == ("removing orphaned pod cgroups", True, True)
    assert [m for m, _, _ in seen] == ["removing orphaned pod cgroups", *["removed orphaned pod cgroup"] * 2]


def test_the_orphan_line_names_each_uid_and_path(pcg: PodCgroups, root: Path, caplog: pytest.LogCaptureFixture) -> None:
    pcg.ensure_pod(pod([ctr()], uid=UID_B))
    pcg.ensure_pod(pod([ctr()], uid=UID_A))
    with caplog.at_level(logging.INFO, "minikubelet.cgroups"):
        pcg.cleanup_orphans([])
    [line] = [r for r in caplog.records if r.getMessage() == "removing orphaned pod cgroups"]
    assert line.kv == {"count": 2, "cgroups": (  # type: ignore[attr-defined]
        f"{UID_A}=/r/kubepods/besteffort/pod{UID_A} {UID_B}=/r/kubepods/besteffort/pod{UID_B}")}


def test_a_uid_that_is_not_one_path_component_gets_no_cgroup(pcg: PodCgroups, root: Path) -> None:
    for uid in ("../../x", "a/b", ""):
        with pytest.raises((UnsafePathError, ValueError)):
            pod_cgroup_name(pod([ctr()], uid=uid))
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    for uid in ("../../x", "a/b"):
        with pytest.raises(UnsafePathError):
            pcg.ensure_pod(pod([ctr()], uid=uid))
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_hybrid_unified_mount_is_found_next_to_the_v1_mounts(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
    assert hybrid_unified_mount(Path("/sys/fs/cgroup"), mountinfo) == Path("/sys/fs/cgroup/unified")
    mountinfo.write_text("31 23 0:28 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    assert hybrid_unified_mount(Path("/sys/fs/cgroup"), mountinfo) is None


async def test_remove_pod_keeps_retrying_in_the_background_while_busy(pcg: PodCgroups, root: Path) -> None:

    pcg.ensure_pod(pod([ctr()], uid=UID_A))
    procs = pod_dir(root, UID_A) / "cgroup.procs"
    procs.write_text("4242\n")
    pcg.remove_pod(UID_A)
    await asyncio.sleep(0.1)
    assert pod_dir(root, UID_A).is_dir()
    procs.write_text("")
    for _ in range(50):
        if not pod_dir(root, UID_A).exists():
            break
        await asyncio.sleep(0.05)
    assert not pod_dir(root, UID_A).exists()


@pytest.mark.parametrize("single_process", [False, True])
def test_container_oom_group_on_cgroup_v2(pcg: PodCgroups, root: Path, single_process: bool) -> None:
    """Upstream sets memory.oom.group=1 on v2 unless singleProcessOOMKill: the OOM killer takes the container
    whole. Docker creates the container's cgroup (named after its id, under the pod's) when it starts it."""
    pcg.single_process_oom_kill = single_process
    p = pod([ctr()], uid=UID_A)
    pcg.ensure_pod(p)
    leaf = pod_dir(root, UID_A) / "c0ffee"
    leaf.mkdir()
    (leaf / "memory.oom.group").write_text("0")
    pcg.container_started(p, "c0ffee")
    assert (leaf / "memory.oom.group").read_text() == ("0" if single_process else "1")
    pcg.container_started(p, "gone")  # a container that already exited: nothing to do, no error


@pytest.mark.parametrize("single_process", [False, True])
def test_container_cgroup_made_with_oom_group_before_the_start(pcg: PodCgroups, root: Path,
                                                               single_process: bool) -> None:
    """Docker's cgroupfs driver starts the container in `<pod cgroup>/<id>`; made beforehand with
    memory.oom.group=1, the setting covers an allocation in the container's first instructions."""
    pcg.single_process_oom_kill = single_process
    p = pod([ctr()], uid=UID_A)
    pcg.ensure_pod(p)
    leaf = pod_dir(root, UID_A) / "c0ffee"
    pcg.container_created(p, "c0ffee")
    if single_process:
        assert not leaf.exists()
        return
    assert (leaf / "memory.oom.group").read_text() == "1"
    assert "memory" in (pod_dir(root, UID_A) / "cgroup.subtree_control").read_text().split()
    # a start that failed before the runtime used it: the leaf goes with the pod's cgroup
    assert pcg.try_remove_pod(UID_A) is True and not pod_dir(root, UID_A).exists()


def test_container_cgroup_not_made_for_a_systemd_scope(pcg: PodCgroups, root: Path) -> None:
    """The systemd driver's `docker-<id>.scope` is the runtime's to create; the setting waits for the start."""
    p = pod([ctr()], uid=UID_A)
    pcg.ensure_pod(p)
    assert pcg.manager is not None
    pcg.manager.naming = "systemd"
    before = sorted(path.name for path in root.rglob("*") if path.is_dir())
    pcg.container_created(p, "c0ffee")
    assert sorted(path.name for path in root.rglob("*") if path.is_dir()) == before


class _Pod(dict[str, object]):
    """A pod dict a weak reference can watch."""


def test_removing_a_pod_drops_its_cached_view_so_the_pod_is_freed(root: Path, tmp_path: Path) -> None:
    """As upstream's pod container manager keeps nothing of a removed pod: the (pod, view) kept to build the
    QoS tiers from must not hold a removed pod (a 3 MB manifest held 50+ MiB until the next pod start)."""
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    manager = CgroupManager(CgroupV2Driver(root, "/r", mountinfo), "cgroupfs", {"cpu": "2", "memory": "4Gi"}, {}, {},
                            [], cgroup_root="/r")
    manager.ensure_hierarchy()
    big = _Pod({"metadata": {"uid": UID_A, "name": "big", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "env": [{"name": f"V{i}", "value": "x"} for i in range(100)]}]}})
    active: list[dict[str, object]] = [big]
    pcg = PodCgroups(manager, 4 * 2**30, -1000, lambda: active)
    pcg.ensure_pod(PodView.of(big))
    ref = weakref.ref(big)
    active.clear()
    del big
    pcg.remove_pod(UID_A)
    gc.collect()
    assert ref() is None


def test_update_qos_follows_a_resized_burstable_pod(root: Path, tmp_path: Path) -> None:
    """upstream's periodic UpdateQOSCgroups: the Burstable cgroup's weight is the sum of its pods' CPU requests,
    also after an in-place resize changed a request without creating a pod cgroup."""
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    manager = CgroupManager(CgroupV2Driver(root, "/r", mountinfo), "cgroupfs", {"cpu": "2", "memory": "4Gi"}, {}, {},
                            [], cgroup_root="/r")
    manager.ensure_hierarchy()
    active = [pod_dict([ctr(req={"cpu": "100m"}, lim={"cpu": "200m"})], uid=UID_A)]
    pcg = PodCgroups(manager, 4 * 2**30, -1000, lambda: active)
    weight = root / "r" / "kubepods" / "burstable" / "cpu.weight"
    pcg.ensure_pod(PodView.of(active[0]))
    assert weight.read_text().strip() == "4"  # 102 shares
    active[0] = pod_dict([ctr(req={"cpu": "1"}, lim={"cpu": "2"})], uid=UID_A)
    pcg.update_qos()
    assert weight.read_text().strip() == "39"  # 1024 shares
