"""Pod volumes the agent can provide itself: emptyDir and hostPath (others come with the API source)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from typing import Any

from cri.types import Mount
from minikubelet.base import podview
from minikubelet.base.podview import Container, Pod
from minikubelet.base.safepath import (
    UnsafePathError,
    create_file,
    make_dirs,
    remove_tree,
    safe_component,
    safe_join,
)
from minikubelet.volumes.ownership import set_volume_ownership

log = logging.getLogger("minikubelet.volumes")

SUPPORTED = ("emptyDir", "hostPath")
PODS = "pods"
EMPTY_DIR = "kubernetes.io~empty-dir"


class VolumeError(Exception):
    """A volume cannot be set up (reported as FailedMount / CreateContainerConfigError)."""


def pod_dir(root_dir: str, uid: str) -> str:
    """<rootDir>/pods/<uid>; raises UnsafePathError when uid is not a single path component."""
    return safe_join(root_dir, PODS, uid)


def empty_dir_path(root_dir: str, uid: str, name: str) -> str:
    return safe_join(root_dir, PODS, uid, "volumes", EMPTY_DIR, name)


def _termination_log_parts(uid: str, container_name: str, restart_count: int) -> tuple[str, ...]:
    if not isinstance(restart_count, int) or isinstance(restart_count, bool) or restart_count < 0:
        raise UnsafePathError(f"restart count {restart_count!r} cannot be used in a host path")
    return PODS, uid, "containers", container_name, f"{restart_count}-termination-log"


def _volumes(pod: Pod) -> list[dict[str, Any]]:
    vs = podview.spec(pod).get("volumes")
    return [v for v in vs if isinstance(v, dict)] if isinstance(vs, list) else []


def _check_host_path(path: str, htype: str) -> None:
    exists = os.path.lexists(path)
    if htype == "DirectoryOrCreate":
        if not exists:
            os.makedirs(path, mode=0o755, exist_ok=True)
        elif not os.path.isdir(path):
            raise VolumeError(f"hostPath type check failed: {path} is not a directory")
    elif htype == "FileOrCreate":
        if not exists:
            os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
            with open(path, "a"):
                pass
        elif not os.path.isfile(path):
            raise VolumeError(f"hostPath type check failed: {path} is not a file")
    elif htype:
        modes = {"Directory": stat.S_ISDIR, "File": stat.S_ISREG, "Socket": stat.S_ISSOCK,
                 "CharDevice": stat.S_ISCHR, "BlockDevice": stat.S_ISBLK}
        check = modes.get(htype)
        if check is None:
            raise VolumeError(f"hostPath type {htype!r} is not supported")
        if not exists or not check(os.stat(path).st_mode):
            raise VolumeError(f"hostPath type check failed: {path} is not a {htype}")


def _fs_group(pod: Pod) -> int | None:
    sc = podview.spec(pod).get("securityContext")
    group = sc.get("fsGroup") if isinstance(sc, dict) else None
    return group if isinstance(group, int) and not isinstance(group, bool) else None


def setup_volumes(pod: Pod, root_dir: str) -> dict[str, str]:
    """Create the pod's volumes on the host; returns volume name -> host path."""
    uid = podview.uid(pod)
    os.makedirs(root_dir, exist_ok=True)
    paths: dict[str, str] = {}
    for v in _volumes(pod):
        vname = str(v.get("name"))
        if isinstance(v.get("emptyDir"), dict):
            medium = v["emptyDir"].get("medium", "")
            if medium not in ("", None):
                raise VolumeError(f"volume {vname!r}: emptyDir medium {medium!r} is not supported yet")
            try:
                p = empty_dir_path(root_dir, uid, vname)
                created = not os.path.isdir(p)
                paths[vname] = make_dirs(root_dir, PODS, uid, "volumes", EMPTY_DIR, vname,
                                         leaf_mode=0o777 if created else None)
            except UnsafePathError as e:
                raise VolumeError(f"volume {vname!r}: {e}") from e
            if created:
                # as upstream's emptyDir: once, when it is created, and whatever fsGroupChangePolicy says
                set_volume_ownership(paths[vname], _fs_group(pod))
        elif isinstance(v.get("hostPath"), dict):
            hp = v["hostPath"]
            path = hp.get("path")
            if not isinstance(path, str) or not os.path.isabs(path):
                raise VolumeError(f"volume {vname!r}: hostPath.path must be an absolute path")
            _check_host_path(os.path.normpath(path), str(hp.get("type") or ""))
            paths[vname] = os.path.normpath(path)
        else:
            kinds = [k for k in v if k != "name"]
            raise VolumeError(f"volume {vname!r}: volume type {', '.join(kinds) or '(none)'} is not supported")
    return paths


def container_mounts(c: Container, volume_paths: dict[str, str]) -> list[Mount]:
    """Bind mounts for a container's volumeMounts; subPath must stay inside its volume."""
    mounts = []
    for m in c.get("volumeMounts") or []:
        if not isinstance(m, dict):
            continue
        vname = str(m.get("name"))
        host = volume_paths.get(vname)
        if host is None:
            raise VolumeError(f"volumeMount {vname!r}: no volume of that name")
        sub = m.get("subPath") or ""
        if sub:
            if not isinstance(sub, str) or os.path.isabs(sub) or ".." in sub.split("/"):
                raise VolumeError(f"volumeMount {vname!r}: subPath {sub!r} must be a relative path without '..'")
            target = os.path.join(host, sub)
            real_base = os.path.realpath(host)
            if not os.path.realpath(target).startswith(real_base + os.sep) and os.path.realpath(target) != real_base:
                raise VolumeError(f"volumeMount {vname!r}: subPath {sub!r} escapes the volume")
            if not os.path.lexists(target):
                os.makedirs(target, mode=0o755, exist_ok=True)
            host = target
        propagation = {"HostToContainer": "rslave", "Bidirectional": "rshared"}.get(
            str(m.get("mountPropagation") or ""), "private"
        )
        mounts.append(
            Mount(container_path=str(m.get("mountPath")), host_path=host, readonly=bool(m.get("readOnly")),
                  propagation=propagation)
        )
    return mounts


def termination_log_path(root_dir: str, uid: str, container_name: str, restart_count: int) -> str:
    return safe_join(root_dir, *_termination_log_parts(uid, container_name, restart_count))


def create_termination_log(root_dir: str, uid: str, container_name: str, restart_count: int) -> str:
    """Create the empty host side of a container's terminationMessagePath; returns its path.

    A symlink planted on the way (or as the file) is refused, so no host file is ever truncated.
    """
    return create_file(root_dir, *_termination_log_parts(uid, container_name, restart_count))


def teardown_pod_dir(root_dir: str, uid: str) -> bool:
    """Remove <rootDir>/pods/<uid> (emptyDirs, termination logs); True when nothing of it is left.

    Only that directory is touched: a hostile uid, a symlink inside (removed as a link) or a mount
    inside (left, and False returned so the caller retries) never lets removal reach other files.
    """
    try:
        safe_component(uid, "pod uid")
    except UnsafePathError as e:
        log.warning("no pod dir for an unsafe uid", extra={"kv": {"err": str(e)}})
        return True  # nothing was ever created for it: every creation refuses such a uid
    try:
        return remove_tree(root_dir, PODS, uid)
    except (UnsafePathError, OSError) as e:
        log.warning("pod dir not removed", extra={"kv": {"uid": uid, "err": str(e)}})
        return False


def cleanup_orphaned_pod_dirs(root_dir: str, known_uids: Iterable[str]) -> list[str]:
    """Remove <rootDir>/pods/<uid> for every uid not in known_uids (upstream cleanupOrphanedPodDirs).

    Returns the uids whose dirs are still there (something mounted inside, or not removable yet).
    """
    known = set(known_uids)
    try:
        entries = sorted(os.listdir(safe_join(root_dir, PODS)))
    except FileNotFoundError:
        return []
    return [uid for uid in entries if uid not in known and not teardown_pod_dir(root_dir, uid)]
