"""fsGroup ownership of a volume (upstream pkg/volume/volume_linux.go SetVolumeOwnership)."""

from __future__ import annotations

import logging
import os
import stat

log = logging.getLogger("minikubelet.volumes.ownership")

RW_MASK = 0o660
RO_MASK = 0o440
EXEC_MASK = 0o110


def requires_permission_change(root: str, fs_group: int, readonly: bool = False) -> bool:
    """OnRootMismatch: the root's group, its group/owner bits and its setgid bit decide for the whole tree."""
    try:
        st = os.stat(root)
    except OSError:
        return True
    if st.st_gid != fs_group or not stat.S_ISDIR(st.st_mode):
        return True
    wanted = (RO_MASK if readonly else RW_MASK) | EXEC_MASK
    return (st.st_mode & wanted) != wanted or not st.st_mode & stat.S_ISGID


def _change(path: str, fs_group: int, readonly: bool) -> None:
    try:
        os.lchown(path, -1, fs_group)
    except OSError as e:
        log.error("lchown failed", extra={"kv": {"path": path, "err": str(e)}})
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return  # chmod would follow the link and change its target's mode
    mask = RO_MASK if readonly else RW_MASK
    if stat.S_ISDIR(st.st_mode):
        mask |= stat.S_ISGID | EXEC_MASK
    try:
        os.chmod(path, stat.S_IMODE(st.st_mode) | mask)
    except OSError as e:
        log.error("chmod failed", extra={"kv": {"path": path, "err": str(e)}})


def set_volume_ownership(root: str, fs_group: int | None, change_policy: str | None = None,
                         readonly: bool = False) -> None:
    """Give the tree to fs_group (group rw, setgid directories); fsGroupChangePolicy OnRootMismatch may skip it."""
    if fs_group is None:
        return
    if change_policy == "OnRootMismatch" and not requires_permission_change(root, fs_group, readonly):
        return
    _change(root, fs_group, readonly)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            _change(os.path.join(dirpath, name), fs_group, readonly)
