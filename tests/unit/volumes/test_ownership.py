"""fsGroup ownership of volumes (SetVolumeOwnership) and where the agent applies it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from minikubelet.volumes.manager import setup_volumes
from minikubelet.volumes.ownership import requires_permission_change, set_volume_ownership

GID = os.getgid()  # a group this process may give files to, root or not


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_tree_gets_group_rw_and_setgid_directories(tmp_path: Path) -> None:
    root = tmp_path / "vol"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_text("x")
    os.chmod(root / "sub" / "f", 0o600)
    os.chmod(root / "sub", 0o700)
    (root / "link").symlink_to("sub/f")
    set_volume_ownership(str(root), GID)
    assert mode(root / "sub") == 0o700 | 0o660 | 0o110 | stat.S_ISGID
    assert mode(root / "sub" / "f") == 0o660
    assert os.lstat(root / "sub" / "f").st_gid == GID
    set_volume_ownership(str(root), GID, readonly=True)
    assert mode(root / "sub" / "f") == 0o660  # read-only adds group read only; nothing is taken away


def test_no_fs_group_changes_nothing(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    set_volume_ownership(str(tmp_path), None)
    assert mode(tmp_path) == 0o700


def test_on_root_mismatch_skips_a_matching_root(tmp_path: Path) -> None:
    root = tmp_path / "vol"
    root.mkdir()
    (root / "f").write_text("x")
    os.chmod(root / "f", 0o600)
    os.chmod(root, 0o770 | stat.S_ISGID)
    assert not requires_permission_change(str(root), GID)
    set_volume_ownership(str(root), GID, "OnRootMismatch")
    assert mode(root / "f") == 0o600
    os.chmod(root, 0o750 | stat.S_ISGID)
    assert requires_permission_change(str(root), GID)
    set_volume_ownership(str(root), GID, "OnRootMismatch")
    assert mode(root / "f") == 0o660
    assert requires_permission_change(str(root), GID + 1)


def test_empty_dir_gets_fs_group_once_when_created(tmp_path: Path) -> None:
    pod = {"metadata": {"uid": "u1"},
           "spec": {"securityContext": {"fsGroup": GID}, "volumes": [{"name": "d", "emptyDir": {}}], "containers": []}}
    path = Path(setup_volumes(pod, str(tmp_path))["d"])
    assert mode(path) == 0o777 | stat.S_ISGID and path.stat().st_gid == GID
    (path / "late").write_text("x")
    os.chmod(path / "late", 0o600)
    setup_volumes(pod, str(tmp_path))
    assert mode(path / "late") == 0o600 and mode(path) == 0o777 | stat.S_ISGID
