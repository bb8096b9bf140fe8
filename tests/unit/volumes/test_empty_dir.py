"""emptyDir: the tmpfs size of a memory-backed one (calculateEmptyDirMemorySize), its mount options, set-up,
and its unmount before any teardown or orphan sweep removes the pod directory."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from minikubelet.base.podview import PodView
from minikubelet.volumes.empty_dir import memory_size_limit, noswap_supported, tmpfs_options
from minikubelet.volumes.manager import (
    VolumeError,
    cleanup_orphaned_pod_dirs,
    setup_volumes,
    teardown_pod_dir,
    unmount_pod_volumes,
)
from minikubelet.volumes.mounter import MountPoint, parse_mountinfo
from tests.unit.volumes.fake_mounter import FakeMounter

GI = 1 << 30
MI = 1 << 20


def view(*limits: str | None, pod_level: str | None = None) -> PodView:
    containers = [{"name": f"c{i}", "resources": {"limits": {"memory": m}} if m else {}} for i, m in enumerate(limits)]
    spec: dict[str, Any] = {"containers": containers}
    if pod_level:
        spec["resources"] = {"limits": {"memory": pod_level}}
    return PodView.of({"metadata": {"uid": "u1", "name": "p"}, "spec": spec})


@pytest.mark.parametrize(("pod", "size_limit", "allocatable", "expected"), [
    (view(None), None, Fraction(8 * GI), 8 * GI),            # no limits: node allocatable
    (view("1Gi", "512Mi"), None, Fraction(8 * GI), GI + 512 * MI),  # the pod's memory limit (the sum)
    (view("1Gi", None), None, Fraction(8 * GI), 8 * GI),     # one unlimited container: the pod is unlimited
    (view("16Gi"), None, Fraction(8 * GI), 8 * GI),          # a pod limit above allocatable does not count
    (view("1Gi"), "64Mi", Fraction(8 * GI), 64 * MI),        # sizeLimit below the pod limit wins
    (view("1Gi"), "2Gi", Fraction(8 * GI), GI),              # ... but never above it
    (view(None), "0", Fraction(8 * GI), 8 * GI),             # zero is ignored
    (view(None, pod_level="256Mi"), None, Fraction(8 * GI), 256 * MI),  # pod-level resources
    (view(None), "1.5", None, 2),                            # rounded up to whole bytes
    (view(None), None, None, None),                          # nothing known: the kernel's default
])
def test_memory_size_limit(pod: PodView, size_limit: str | None, allocatable: Fraction | None,
                           expected: int | None) -> None:
    assert memory_size_limit(pod, size_limit, allocatable) == expected


def test_tmpfs_options_and_noswap_support(tmp_path: Path) -> None:
    assert tmpfs_options(64 * MI, noswap=True) == [f"size={64 * MI}", "noswap"]
    assert tmpfs_options(None, noswap=False) == []
    host = tmp_path / "uid_map_host"
    host.write_text("         0          0 4294967295\n")
    userns = tmp_path / "uid_map_userns"
    userns.write_text("         0     100000      65536\n")
    assert noswap_supported("6.4.0-1-amd64", host) and noswap_supported("6.18.44-fc", host)
    assert not noswap_supported("6.1.0-18-amd64", host)
    assert not noswap_supported("6.8.0", userns)


def test_mountinfo_is_parsed_with_escapes() -> None:
    text = ("36 35 98:0 / /mnt/a\\040b rw,noatime master:1 - tmpfs tmpfs rw,size=1024k\n"
            "37 35 98:0 / /var/lib/x rw shared:2 master:3 - ext4 /dev/sda1 rw\n")
    assert parse_mountinfo(text) == [MountPoint("/mnt/a b", "tmpfs"), MountPoint("/var/lib/x", "ext4")]


def memory_pod(uid: str = "u1", **empty_dir: Any) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "128Mi"}}}],
                     "volumes": [{"name": "mem", "emptyDir": {"medium": "Memory", **empty_dir}},
                                 {"name": "disk", "emptyDir": {"sizeLimit": "1Gi"}}]}}


def test_memory_empty_dir_is_mounted_once_with_its_size(tmp_path: Path) -> None:
    m = FakeMounter()
    paths = setup_volumes(memory_pod(sizeLimit="16Mi"), str(tmp_path), m, {"memory": Fraction(8 * GI)})
    assert paths["mem"] == str(tmp_path / "pods/u1/volumes/kubernetes.io~empty-dir/mem")
    [(where, options)] = m.mounted
    assert where == paths["mem"] and options[0] == f"size={16 * MI}"
    setup_volumes(memory_pod(sizeLimit="16Mi"), str(tmp_path), m, {"memory": Fraction(8 * GI)})
    assert len(m.mounted) == 1  # SetUp is idempotent
    assert Path(paths["disk"]).is_dir()  # disk-backed: a directory, sizeLimit left to eviction


def test_unsupported_medium_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    pod = memory_pod()
    pod["spec"]["volumes"][1]["emptyDir"]["medium"] = "HugePages-2Mi"
    m = FakeMounter()
    with pytest.raises(VolumeError, match="medium 'HugePages-2Mi' is not supported") as e:
        setup_volumes(pod, str(tmp_path), m)
    assert e.value.volume == "disk" and m.mounted == [] and not (tmp_path / "pods").exists()


def test_teardown_unmounts_our_tmpfs_first_and_never_deletes_through_other_mounts(tmp_path: Path) -> None:
    root = tmp_path / "root"
    m = FakeMounter()
    paths = setup_volumes(memory_pod(), str(root), m)
    (Path(paths["mem"]) / "data").write_text("x")
    assert teardown_pod_dir(str(root), "u1", m) is True
    assert m.unmounted == [paths["mem"]] and not (root / "pods" / "u1").exists()

    foreign = root / "pods" / "u2" / "volumes" / "kubernetes.io~empty-dir" / "other"
    foreign.mkdir(parents=True)
    (foreign / "keep").write_text("k")
    m2 = FakeMounter(others=[MountPoint(str(foreign), "ext4")])  # not a tmpfs of ours: left mounted
    assert teardown_pod_dir(str(root), "u2", m2) is False
    assert m2.unmounted == [] and (foreign / "keep").read_text() == "k"


def test_orphan_sweep_unmounts_ours_and_keeps_known_pods_mounted(tmp_path: Path) -> None:
    root = tmp_path / "root"
    m = FakeMounter()
    keep = setup_volumes(memory_pod("keep"), str(root), m)["mem"]
    gone = setup_volumes(memory_pod("gone"), str(root), m)["mem"]
    assert cleanup_orphaned_pod_dirs(str(root), ["keep"], m) == []
    assert m.unmounted == [gone] and [p for p, _ in m.mounted] == [keep]
    assert sorted(p.name for p in (root / "pods").iterdir()) == ["keep"]


def test_a_tmpfs_that_will_not_unmount_keeps_the_pod_dir(tmp_path: Path) -> None:
    class Busy(FakeMounter):
        def unmount(self, path: str) -> None:
            raise OSError(16, "busy")

    m = Busy()
    paths = setup_volumes(memory_pod(), str(tmp_path), m)
    (Path(paths["mem"]) / "data").write_text("x")
    assert unmount_pod_volumes(str(tmp_path), "u1", m) is False
    assert teardown_pod_dir(str(tmp_path), "u1", m) is False
    assert (Path(paths["mem"]) / "data").read_text() == "x"
