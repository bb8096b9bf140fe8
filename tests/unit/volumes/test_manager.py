import os
import stat
from pathlib import Path
from typing import Any

import pytest

from minikubelet.base.safepath import UnsafePathError
from minikubelet.volumes.manager import (
    VolumeError,
    cleanup_orphaned_pod_dirs,
    container_mounts,
    create_termination_log,
    pod_dir,
    setup_volumes,
    teardown_pod_dir,
    termination_log_path,
)


def pod(volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"uid": "u1"}, "spec": {"volumes": volumes, "containers": []}}


def test_empty_dir_and_host_path(tmp_path: Path) -> None:
    host = tmp_path / "data"
    paths = setup_volumes(pod([{"name": "scratch", "emptyDir": {}},
                               {"name": "h", "hostPath": {"path": str(host), "type": "DirectoryOrCreate"}}]),
                          str(tmp_path / "root"))
    assert os.path.isdir(paths["scratch"]) and paths["scratch"].endswith("u1/volumes/kubernetes.io~empty-dir/scratch")
    assert host.is_dir() and paths["h"] == str(host)
    mounts = container_mounts({}, {"volumeMounts": [{"name": "scratch", "mountPath": "/s", "readOnly": True},
                                                {"name": "h", "mountPath": "/h", "subPath": "a/b",
                                                 "mountPropagation": "HostToContainer"}]}, paths)
    assert (mounts[0].container_path, mounts[0].readonly) == ("/s", True)
    assert mounts[1].host_path == str(host / "a" / "b") and mounts[1].propagation == "rslave"
    teardown_pod_dir(str(tmp_path / "root"), "u1")
    assert not (tmp_path / "root" / "pods" / "u1").exists() and host.is_dir()  # hostPath is never removed


@pytest.mark.parametrize("sub", ["../../etc", "/etc", "a/../../x"])
def test_sub_path_cannot_leave_its_volume(tmp_path: Path, sub: str) -> None:
    with pytest.raises(VolumeError):
        container_mounts({}, {"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": sub}]}, {"v": str(tmp_path)})


def test_sub_path_symlink_escape_is_refused(tmp_path: Path) -> None:
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "link").symlink_to("/etc")
    with pytest.raises(VolumeError, match='failed to prepare subPath for volumeMount "v" of container "c"'):
        container_mounts({}, {"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "link"}]},
                         {"v": str(vol)})


def test_host_path_type_checks(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(VolumeError, match="not a Directory"):
        setup_volumes(pod([{"name": "h", "hostPath": {"path": str(f), "type": "Directory"}}]), str(tmp_path))
    with pytest.raises(VolumeError, match="absolute"):
        setup_volumes(pod([{"name": "h", "hostPath": {"path": "relative/x"}}]), str(tmp_path))
    assert setup_volumes(pod([{"name": "h", "hostPath": {"path": str(f), "type": "File"}}]), str(tmp_path))


def test_unknown_volume_types_and_mounts_are_errors(tmp_path: Path) -> None:
    with pytest.raises(VolumeError, match="configMap"):
        setup_volumes(pod([{"name": "c", "configMap": {"name": "x"}}]), str(tmp_path))
    with pytest.raises(VolumeError, match='cannot find volume "missing"'):
        container_mounts({}, {"volumeMounts": [{"name": "missing", "mountPath": "/m"}]}, {})


# --- identifiers never escape <rootDir>/pods/<uid> (issue 11, item 5) ---


def _victims(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "deep" / "root"
    (root / "pods").mkdir(parents=True)
    file_under_root = root / "backoff.json"
    file_under_root.write_text("{}")
    victim = tmp_path / "victim-dir"
    victim.mkdir()
    (victim / "data").write_text("d")
    return root, file_under_root, victim


@pytest.mark.parametrize("uid", ["..", "../..", "../../victim-dir", "../../../victim-dir", ".", "", "a/../..", "x\0"])
def test_teardown_with_a_hostile_uid_removes_nothing(tmp_path: Path, uid: str) -> None:
    root, file_under_root, victim = _victims(tmp_path)
    (tmp_path / "deep" / "victim-dir").mkdir()
    assert teardown_pod_dir(str(root), uid) is True  # nothing can exist for such a uid
    assert file_under_root.read_text() == "{}" and (victim / "data").exists()
    assert (tmp_path / "deep" / "victim-dir").is_dir() and (root / "pods").is_dir()
    with pytest.raises(UnsafePathError):
        pod_dir(str(root), uid)


@pytest.mark.parametrize("uid", ["..", "../../victim-dir"])
def test_setup_with_a_hostile_uid_creates_nothing_outside(tmp_path: Path, uid: str) -> None:
    root, _, victim = _victims(tmp_path)
    with pytest.raises(VolumeError):
        setup_volumes({"metadata": {"uid": uid}, "spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}, str(root))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "victim-dir"]
    assert sorted(p.name for p in root.iterdir()) == ["backoff.json", "pods"] and list((root / "pods").iterdir()) == []
    assert [p.name for p in victim.iterdir()] == ["data"]


@pytest.mark.parametrize("name", ["..", "../../../victim-dir", "a/b", "."])
def test_hostile_volume_and_container_names_are_refused(tmp_path: Path, name: str) -> None:
    root, _, _ = _victims(tmp_path)
    with pytest.raises(VolumeError):
        setup_volumes({"metadata": {"uid": "u1"}, "spec": {"volumes": [{"name": name, "emptyDir": {}}]}}, str(root))
    with pytest.raises(UnsafePathError):
        termination_log_path(str(root), "u1", name, 0)
    with pytest.raises(UnsafePathError):
        create_termination_log(str(root), "u1", name, 0)
    assert not (root / "pods" / "u1" / "volumes" / "kubernetes.io~empty-dir").exists() or not any(
        (root / "pods" / "u1" / "volumes" / "kubernetes.io~empty-dir").iterdir())


@pytest.mark.parametrize("count", [-1, True, "0", 1.5])
def test_restart_count_must_be_a_non_negative_int(tmp_path: Path, count: object) -> None:
    with pytest.raises(UnsafePathError):
        termination_log_path(str(tmp_path), "u1", "c", count)  # type: ignore[arg-type]


def test_termination_log_is_created_and_never_through_a_planted_symlink(tmp_path: Path) -> None:
    root, file_under_root, victim = _victims(tmp_path)
    path = create_termination_log(str(root), "u1", "c", 3)
    assert path == termination_log_path(str(root), "u1", "c", 3) == str(root / "pods/u1/containers/c/3-termination-log")
    assert Path(path).read_bytes() == b""
    Path(path).unlink()
    Path(path).symlink_to(file_under_root)
    with pytest.raises(UnsafePathError):
        create_termination_log(str(root), "u1", "c", 3)
    (root / "pods" / "u1" / "containers" / "d").symlink_to(victim)
    with pytest.raises(UnsafePathError):
        create_termination_log(str(root), "u1", "d", 0)
    assert file_under_root.read_text() == "{}" and [p.name for p in victim.iterdir()] == ["data"]


def test_teardown_never_deletes_through_symlinks_in_the_pod_dir(tmp_path: Path) -> None:
    root, file_under_root, victim = _victims(tmp_path)
    host = tmp_path / "host-path"
    host.mkdir()
    (host / "keep").write_text("k")
    paths = setup_volumes({"metadata": {"uid": "u1"}, "spec": {"volumes": [
        {"name": "scratch", "emptyDir": {}}, {"name": "h", "hostPath": {"path": str(host)}}]}}, str(root))
    scratch = Path(paths["scratch"])
    (scratch / "to-victim").symlink_to(victim)          # what a container could plant in its emptyDir
    (scratch / "to-host").symlink_to(host / "keep")
    (root / "pods" / "u1" / "volumes" / "h").symlink_to(host)
    create_termination_log(str(root), "u1", "c", 0)
    assert teardown_pod_dir(str(root), "u1") is True
    assert not (root / "pods" / "u1").exists() and (root / "pods").is_dir()
    assert (host / "keep").read_text() == "k" and (victim / "data").exists() and file_under_root.exists()


def test_teardown_refuses_a_symlinked_pods_dir(tmp_path: Path) -> None:
    root, _, victim = _victims(tmp_path)
    (victim / "u1").mkdir()
    (root / "pods").rmdir()
    (root / "pods").symlink_to(victim)
    assert teardown_pod_dir(str(root), "u1") is False
    assert (victim / "u1").is_dir() and (victim / "data").exists()


def test_orphaned_pod_dirs_are_removed_known_ones_kept(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for uid in ("keep", "gone1", "gone2"):
        setup_volumes({"metadata": {"uid": uid}, "spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}, str(root))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data").write_text("d")
    (root / "pods" / "planted").symlink_to(outside)
    assert cleanup_orphaned_pod_dirs(str(root), ["keep"]) == []
    assert sorted(p.name for p in (root / "pods").iterdir()) == ["keep"]
    assert (outside / "data").exists()
    assert cleanup_orphaned_pod_dirs(str(tmp_path / "nothing"), []) == []


def test_termination_log_is_world_writable_as_upstream_makeMounts(tmp_path: Path) -> None:
    """upstream makeMounts chmods the termination log 0666: a container running as a non-root user writes it."""
    old = os.umask(0o022)
    try:
        path = create_termination_log(str(tmp_path), "u1", "c", 0)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666
