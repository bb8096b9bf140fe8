"""The disk layout (KEP-4191 split image filesystem): containerfs thresholds, ranking, reclaim and whether a
container's writable layer counts against its own limit, as upstream v1.36's eviction helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minikubelet.eviction.filesystems import (
    FS_IMAGES,
    FS_LOCAL_VOLUMES,
    FS_LOGS,
    FS_ROOT,
    DiskLayout,
    containerfs_thresholds,
    detect,
    rank_fs_stats,
    reclaim_steps,
)
from minikubelet.eviction.manager import Settings
from minikubelet.eviction.ranking import local_storage_violation, pod_disk_usage, rank
from minikubelet.eviction.thresholds import Threshold, parse_thresholds
from tests.unit.eviction.test_manager import GI, MI, Harness, mkpod, pod_stats, summary

ONE = DiskLayout()
IMAGEFS = DiskLayout(dedicated_image_fs=True)
SPLIT = DiskLayout(dedicated_image_fs=True, split_container_fs=True)


def containerfs(ts: list[Threshold]) -> dict[tuple[str, bool], str]:
    return {(t.signal, t.hard): t.describe() for t in ts if t.signal.startswith("containerfs.")}


def test_containerfs_thresholds_copy_nodefs_or_imagefs_and_override_configured_ones() -> None:
    base = parse_thresholds({"nodefs.available": "10%", "imagefs.available": "15%", "nodefs.inodesFree": "5%",
                             "imagefs.inodesFree": "4%", "containerfs.available": "50%"},
                            {"nodefs.available": "20%", "imagefs.available": "25%"},
                            {"nodefs.available": "1m", "imagefs.available": "2m"})
    for layout, avail, inodes, soft in ((ONE, "10%", "5%", "20% (grace 60s)"), (SPLIT, "10%", "5%", "20% (grace 60s)"),
                                        (IMAGEFS, "15%", "4%", "25% (grace 120s)")):
        got, warnings = containerfs_thresholds(base, layout)
        assert containerfs(got) == {
            ("containerfs.available", True): f"containerfs.available<{avail}",
            ("containerfs.inodesFree", True): f"containerfs.inodesFree<{inodes}",
            ("containerfs.available", False): f"containerfs.available<{soft}"}, layout
        assert warnings == ["found containerfs.available for hard eviction. ignoring"]
        assert [t for t in got if not t.signal.startswith("containerfs.")] == [
            t for t in base if not t.signal.startswith("containerfs.")]


def test_detect_compares_devices(tmp_path: Path) -> None:
    assert detect(str(tmp_path), str(tmp_path)) == ONE
    assert detect(str(tmp_path), "/proc") == IMAGEFS  # procfs is another device
    assert detect(str(tmp_path), "/proc", str(tmp_path)) == SPLIT
    assert detect(str(tmp_path), "/proc", "/proc") == IMAGEFS
    assert detect(str(tmp_path), str(tmp_path / "missing")) == ONE  # unreadable: the node's filesystem


def test_rank_and_reclaim_per_layout() -> None:
    assert rank_fs_stats(ONE)["nodefs.available"] == {FS_IMAGES, FS_ROOT, FS_LOGS, FS_LOCAL_VOLUMES}
    assert rank_fs_stats(IMAGEFS)["nodefs.available"] == {FS_LOGS, FS_LOCAL_VOLUMES}
    assert rank_fs_stats(IMAGEFS)["containerfs.available"] == {FS_ROOT, FS_IMAGES}
    assert rank_fs_stats(SPLIT)["containerfs.inodesFree"] == {FS_LOGS, FS_LOCAL_VOLUMES, FS_ROOT}
    assert rank_fs_stats(SPLIT)["imagefs.available"] == {FS_IMAGES}

    async def containers() -> None: ...

    async def images() -> None: ...

    assert reclaim_steps(ONE, containers, images)["containerfs.available"] == (containers, images)
    assert reclaim_steps(IMAGEFS, containers, images)["nodefs.available"] == ()
    assert reclaim_steps(IMAGEFS, containers, images)["containerfs.inodesFree"] == (containers, images)
    assert reclaim_steps(SPLIT, containers, images)["imagefs.available"] == (images,)
    assert reclaim_steps(SPLIT, containers, images)["containerfs.available"] == (containers,)


def layered(uid: str, rootfs: int, logs: int, volume: int = 0) -> dict[str, Any]:
    return {"containers": [{"name": "c", "rootfs": {"usedBytes": rootfs}, "logs": {"usedBytes": logs}}],
            "volume": [{"name": "v", "usedBytes": volume}], "podRef": {"uid": uid}}


def test_disk_usage_and_ranking_follow_the_stats_kinds() -> None:
    a = mkpod("a", volumes=[{"name": "v", "emptyDir": {}}])
    b = mkpod("b", volumes=[{"name": "v", "emptyDir": {}}])
    stats = {"uid-a": layered("uid-a", rootfs=300 * MI, logs=MI), "uid-b": layered("uid-b", 0, MI, volume=100 * MI)}
    assert pod_disk_usage(a, stats["uid-a"], "ephemeral-storage") == 301 * MI
    assert pod_disk_usage(a, stats["uid-a"], "ephemeral-storage", {FS_LOGS, FS_LOCAL_VOLUMES}) == MI
    by_layer = rank([b, a], lambda p: stats[p["metadata"]["uid"]], "ephemeral-storage",
                    rank_fs_stats(IMAGEFS)["imagefs.available"])
    by_node = rank([a, b], lambda p: stats[p["metadata"]["uid"]], "ephemeral-storage",
                   rank_fs_stats(IMAGEFS)["nodefs.available"])
    assert [p["metadata"]["name"] for p in by_layer] == ["a", "b"]
    assert [p["metadata"]["name"] for p in by_node] == ["b", "a"]


def test_a_container_limit_counts_its_writable_layer_only_without_a_dedicated_imagefs() -> None:
    two = mkpod("two")
    two["spec"]["containers"] = [
        {"name": "w", "image": "busybox", "resources": {"limits": {"ephemeral-storage": "5Mi"}}},
        {"name": "q", "image": "busybox", "resources": {"limits": {"ephemeral-storage": "50Mi"}}}]
    stats: dict[str, Any] = {"ephemeral-storage": {"usedBytes": 9 * MI},
             "containers": [{"name": "w", "rootfs": {"usedBytes": 8 * MI}, "logs": {"usedBytes": MI}},
                            {"name": "q", "rootfs": {"usedBytes": 0}, "logs": {"usedBytes": 0}}]}
    assert local_storage_violation(two, stats) == 'Container w exceeded its local ephemeral storage limit "5Mi". '
    assert local_storage_violation(two, stats, dedicated_image_fs=True) is None
    # one container: the pod's total (writable layer included, wherever it lives) is checked first
    one = mkpod("one")
    one["spec"]["containers"][0]["resources"] = {"limits": {"ephemeral-storage": "5Mi"}}
    assert local_storage_violation(one, {**stats, "containers": stats["containers"][:1]}, True) == \
        "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. "


async def test_the_manager_applies_the_layout() -> None:
    settings = Settings(parse_thresholds({"nodefs.available": "10%", "imagefs.available": "15%"}))
    h = Harness(settings, [mkpod("a"), mkpod("b")])
    calls: list[str] = []

    async def containers() -> None:
        calls.append("containers")

    async def images() -> None:
        calls.append("images")

    h.m.use_disk_layout(IMAGEFS, containers, images)
    assert containerfs(list(settings.thresholds)) == {("containerfs.available", True): "containerfs.available<15%"}
    # nodefs low with a dedicated imagefs: no node-level reclaim frees it; ranked by logs and volumes only,
    # so b (big logs) goes before a (big writable layer)
    doc = summary(4 * GI, [{**pod_stats("a", MI), **layered("uid-a", 900 * MI, MI)},
                           {**pod_stats("b", MI), **layered("uid-b", 0, 200 * MI)}], fs_available=5 * GI)
    doc["node"]["runtime"] = {"imageFs": {"time": "2026-01-01T00:00:00Z", "availableBytes": 50 * GI,
                                          "capacityBytes": 100 * GI}}
    h.doc = doc
    assert [p["metadata"]["name"] for p in await h.m.synchronize()] == ["b"]
    assert calls == []
    # the container's usage in the message is its writable layer plus its logs, as upstream's evictionMessage
    assert h.killed[0][2]["message"] == (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. "
        "Container c was using 200Mi, request is 0, has larger consumption of ephemeral-storage. ")
