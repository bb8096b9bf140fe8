"""Pod volumes (upstream volumemanager): emptyDir, hostPath, downwardAPI, and for pods from the API server
configMap and secret, and projected volumes of these; the pod directory, termination logs and teardown."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from functools import cache
from typing import Any

from cri.types import Mount
from minikubelet.api.pod_objects import ObjectUnavailable, PodObjects, standalone
from minikubelet.base import podview
from minikubelet.base.podview import Container, Pod, PodView
from minikubelet.base.safepath import (
    UnsafePathError,
    create_file,
    make_dirs,
    remove_tree,
    safe_component,
    safe_join,
)
from minikubelet.volumes import atomic_writer, configmap, downward_api, empty_dir, host_path, projected, secret
from minikubelet.volumes.atomic_writer import AtomicWriteError, FileProjection
from minikubelet.volumes.mounter import HostMounter, Mounter
from minikubelet.volumes.operations import Timed, VolumeOperations
from minikubelet.volumes.ownership import set_volume_ownership
from minikubelet.volumes.subpath import SubPathError, expand_sub_path_expr, resolve

log = logging.getLogger("minikubelet.volumes")

SUPPORTED = ("emptyDir", "hostPath", "downwardAPI", "projected", "configMap", "secret")
# volumes written by the atomic writer, and their plugin directories
WRITTEN = {"downwardAPI": downward_api.PLUGIN_DIR, "projected": projected.PLUGIN_DIR,
           "configMap": configmap.PLUGIN_DIR, "secret": secret.PLUGIN_DIR}
PODS = "pods"
EMPTY_DIR = empty_dir.PLUGIN_DIR
# the plugins whose directories may hold a tmpfs of ours (downwardAPI, projected and secret wrap a memory
# emptyDir; configMap a disk one, as upstream)
TMPFS_PLUGIN_DIRS = (empty_dir.PLUGIN_DIR, downward_api.PLUGIN_DIR, projected.PLUGIN_DIR, secret.PLUGIN_DIR)
_PAYLOAD_ERRORS = (downward_api.DownwardAPIError, projected.ProjectedError, AtomicWriteError,
                   configmap.ConfigMapVolumeError, ObjectUnavailable)


class VolumeError(Exception):
    """A volume cannot be set up (reported as FailedMount / CreateContainerConfigError)."""

    def __init__(self, message: str, volume: str = "") -> None:
        super().__init__(message)
        self.volume = volume


@cache
def host_mounter() -> Mounter:
    return HostMounter()


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


def _fs_group(pod: Pod) -> int | None:
    sc = podview.spec(pod).get("securityContext")
    group = sc.get("fsGroup") if isinstance(sc, dict) else None
    return group if isinstance(group, int) and not isinstance(group, bool) else None


def _kind(v: Mapping[str, Any]) -> str:
    kinds = [k for k, value in v.items() if k != "name" and value is not None]
    return kinds[0] if len(kinds) == 1 else ""


def check_volumes(pod: Pod) -> None:
    """Refuse what the agent cannot serve before anything of the pod is created or mounted."""
    for v in _volumes(pod):
        vname = str(v.get("name"))
        kind = _kind(v)
        if kind not in SUPPORTED or not isinstance(v.get(kind), dict):
            kinds = [k for k in v if k != "name"]
            raise VolumeError(f"volume type {', '.join(kinds) or '(none)'} is not supported", vname)
        if kind == "emptyDir":
            medium = empty_dir.medium_of(v[kind])
            if medium not in (empty_dir.MEDIUM_DEFAULT, empty_dir.MEDIUM_MEMORY):
                raise VolumeError(f"emptyDir medium {medium!r} is not supported (only the node's disk and Memory)",
                                  vname)
        elif kind == "projected":
            try:
                projected.check_sources(v[kind])
            except projected.ProjectedError as e:
                raise VolumeError(str(e), vname) from e


def _payload(v: Mapping[str, Any], pod: Pod, allocatable: Mapping[str, Fraction],
             objects: PodObjects) -> dict[str, FileProjection]:
    if isinstance(v.get("downwardAPI"), dict):
        source = v["downwardAPI"]
        return downward_api.collect_data(downward_api.items_of(source), pod, source.get("defaultMode"), allocatable)
    if isinstance(v.get("configMap"), dict):
        return configmap.collect_data(v["configMap"], objects, v["configMap"].get("defaultMode"))
    if isinstance(v.get("secret"), dict):
        return secret.collect_data(v["secret"], objects, v["secret"].get("defaultMode"))
    return projected.collect_data(v["projected"], pod, allocatable, objects)


def _set_up_written(root_dir: str, view: PodView, v: Mapping[str, Any], kind: str, mounter: Mounter,
                    allocatable: Mapping[str, Fraction], fs_group: int | None, objects: PodObjects) -> str:
    """downwardAPI / projected / secret: collect, then a memory emptyDir (no sizeLimit) filled by the atomic
    writer; configMap the same on the node's disk."""
    name = str(v.get("name"))
    plugin_dir = WRITTEN[kind]
    payload = _payload(v, view.raw, allocatable, objects)
    existed = os.path.isdir(os.path.join(root_dir, PODS, view.uid, "volumes", plugin_dir, name))
    path = make_dirs(root_dir, PODS, view.uid, "volumes", plugin_dir, name, leaf_mode=None if existed else 0o777)
    if kind != "configMap":
        size = empty_dir.memory_size_limit(view, None, allocatable.get("memory"))
        empty_dir.set_up_tmpfs(path, size, mounter)
    _write(path, payload, fs_group)
    return path


def _write(path: str, payload: Mapping[str, FileProjection], fs_group: int | None) -> bool:
    # the whole volume, not only the new directory: the first write also creates the visible links
    return atomic_writer.write(path, payload, set_perms=lambda _ts: set_volume_ownership(path, fs_group,
                                                                                          readonly=True))


def setup_volumes(pod: Pod, root_dir: str, mounter: Mounter | None = None,
                  allocatable: Mapping[str, Fraction] | None = None, objects: PodObjects | None = None,
                  ops: VolumeOperations | None = None) -> dict[str, str]:
    """Create (and mount) the pod's volumes on the host; returns volume name -> host path. Idempotent.
    `objects`: the ConfigMaps and Secrets read for this sync (none for a pod not from the API server);
    `ops` records each volume's set-up (the storage metrics)."""
    check_volumes(pod)
    if ops is not None:
        ops.want(podview.uid(pod), {str(v.get("name")): _kind(v) for v in _volumes(pod)})
    objs = objects if objects is not None else standalone(pod)
    mounter = mounter or host_mounter()
    alloc = allocatable or {}
    view = PodView.of(pod)
    fs_group = _fs_group(pod)
    os.makedirs(root_dir, exist_ok=True)
    paths: dict[str, str] = {}
    for v in _volumes(pod):
        vname = str(v.get("name"))
        try:
            with Timed(ops, view.uid, vname, _kind(v)):
                paths[vname] = _set_up_one(root_dir, view, v, mounter, alloc, fs_group, objs)
        except (UnsafePathError, empty_dir.EmptyDirError, host_path.HostPathError, *_PAYLOAD_ERRORS) as e:
            raise VolumeError(str(e), vname) from e
        except OSError as e:
            raise VolumeError(str(e), vname) from e
    return paths


def _set_up_one(root_dir: str, view: PodView, v: Mapping[str, Any], mounter: Mounter,
                alloc: Mapping[str, Fraction], fs_group: int | None, objs: PodObjects) -> str:
    if isinstance(v.get("emptyDir"), dict):
        return empty_dir.set_up(root_dir, view, str(v.get("name")), v["emptyDir"], mounter, alloc.get("memory"),
                                fs_group)
    if isinstance(v.get("hostPath"), dict):
        return host_path.set_up(v["hostPath"])
    return _set_up_written(root_dir, view, v, _kind(v), mounter, alloc, fs_group, objs)


def refresh_volumes(pod: Pod, root_dir: str, allocatable: Mapping[str, Fraction] | None = None,
                    objects: PodObjects | None = None, ops: VolumeOperations | None = None) -> list[str]:
    """Rewrite the written volumes already set up whose content changed (labels, annotations, a ConfigMap or
    Secret: upstream remounts them on every pod sync); returns the names rewritten."""
    alloc = allocatable or {}
    objs = objects if objects is not None else standalone(pod)
    uid = podview.uid(pod)
    fs_group = _fs_group(pod)
    rewritten = []
    for v in _volumes(pod):
        kind = _kind(v)
        if kind not in WRITTEN:
            continue
        vname = str(v.get("name"))
        plugin = WRITTEN[kind]
        try:
            path = safe_join(root_dir, PODS, uid, "volumes", plugin, vname)
            if not os.path.lexists(os.path.join(path, atomic_writer.DATA_DIR)):
                continue  # not set up yet: the next container start sets it up
            with Timed(ops, uid, vname, kind):
                if _write(path, _payload(v, pod, alloc, objs), fs_group):
                    rewritten.append(vname)
        except (UnsafePathError, OSError, *_PAYLOAD_ERRORS) as e:
            raise VolumeError(str(e), vname) from e
    return rewritten


def _read_only_volumes(pod: Pod) -> set[str]:
    """Written volumes are always mounted read-only (their plugins' ReadOnly attribute)."""
    return {str(v.get("name")) for v in _volumes(pod) if _kind(v) in WRITTEN}


def container_mounts(pod: Pod, c: Container, volume_paths: dict[str, str],
                     env: Callable[[], Mapping[str, str]] | None = None) -> list[Mount]:
    """Bind mounts for a container's volumeMounts (upstream makeMounts): subPath / subPathExpr stay inside
    their volume; `env` gives the container's environment for subPathExpr."""
    mounts = []
    read_only = _read_only_volumes(pod)
    cname = str(c.get("name", ""))
    for m in c.get("volumeMounts") or []:
        if not isinstance(m, dict):
            continue
        vname = str(m.get("name"))
        host = volume_paths.get(vname)
        if host is None:
            raise VolumeError(f'cannot find volume "{vname}" to mount into container "{cname}"', vname)
        sub = m.get("subPath") or ""
        expr = m.get("subPathExpr") or ""
        try:
            if expr:
                sub = expand_sub_path_expr(str(expr), env() if env is not None else {})
            if sub:
                host = resolve(host, str(sub), vname, cname)
        except SubPathError as e:
            raise VolumeError(str(e), vname) from e
        propagation = {"HostToContainer": "rslave", "Bidirectional": "rshared"}.get(
            str(m.get("mountPropagation") or ""), "private"
        )
        mounts.append(
            Mount(container_path=str(m.get("mountPath")), host_path=host,
                  readonly=bool(m.get("readOnly")) or vname in read_only, propagation=propagation)
        )
    return mounts


def termination_log_path(root_dir: str, uid: str, container_name: str, restart_count: int) -> str:
    return safe_join(root_dir, *_termination_log_parts(uid, container_name, restart_count))


def create_termination_log(root_dir: str, uid: str, container_name: str, restart_count: int) -> str:
    """Create the empty host side of a container's terminationMessagePath; returns its path.

    A symlink planted on the way (or as the file) is refused, so no host file is ever truncated. Mode 0666, as
    upstream's makeMounts: a container running as any user can write its message.
    """
    return create_file(root_dir, *_termination_log_parts(uid, container_name, restart_count), mode=0o666)


def _our_tmpfs_mounts(root_dir: str, uid: str, mounter: Mounter) -> list[str]:
    """tmpfs mounted exactly on <rootDir>/pods/<uid>/volumes/<one of our plugins>/<name>."""
    volumes = os.path.join(os.path.realpath(root_dir), PODS, uid, "volumes")
    found = []
    for m in mounter.mount_points():
        parent, name = os.path.split(m.path)
        plugin_root, plugin = os.path.split(parent)
        if m.fstype == "tmpfs" and plugin_root == volumes and plugin in TMPFS_PLUGIN_DIRS and name:
            found.append(m.path)
    return found


def _mounted_below(path: str, mounts: list[str]) -> bool:
    return any(m == path or m.startswith(path + "/") for m in mounts)


def unmount_pod_volumes(root_dir: str, uid: str, mounter: Mounter | None = None) -> bool:
    """Unmount the pod's memory-backed volumes (upstream teardownTmpfsOrHugetlbfs); True when none is left."""
    mounter = mounter or host_mounter()
    try:
        safe_component(uid, "pod uid")
        mounted = _our_tmpfs_mounts(root_dir, uid, mounter)
    except (UnsafePathError, OSError) as e:
        log.warning("pod volumes not unmounted", extra={"kv": {"uid": uid, "err": str(e)}})
        return False
    ok = True
    # a tmpfs can be stacked on another (mounted twice): unmount until none is left, deepest first
    for path in sorted(mounted, reverse=True):
        try:
            mounter.unmount(path)
            log.info("unmounted tmpfs", extra={"kv": {"uid": uid, "path": path}})
        except OSError as e:
            log.warning("tmpfs not unmounted", extra={"kv": {"uid": uid, "path": path, "err": str(e)}})
            ok = False
    # nothing was mounted: no second read of the mount table
    return ok and (not mounted or not _our_tmpfs_mounts(root_dir, uid, mounter))


def teardown_pod_dir(root_dir: str, uid: str, mounter: Mounter | None = None,
                     ops: VolumeOperations | None = None) -> bool:
    """_teardown_pod_dir; `ops` records the tear-down of each volume the pod had set up."""
    t0 = time.monotonic()
    done = _teardown_pod_dir(root_dir, uid, mounter)
    if ops is not None:
        ops.torn_down(uid, done, time.monotonic() - t0)
    return done


def _teardown_pod_dir(root_dir: str, uid: str, mounter: Mounter | None = None) -> bool:
    """Unmount the pod's tmpfs volumes, then remove <rootDir>/pods/<uid>; True when nothing of it is left.

    Only that directory is touched: a hostile uid, a symlink inside (removed as a link) or any other mount
    inside (left, and False returned so the caller retries) never lets removal reach other files.
    """
    try:
        safe_component(uid, "pod uid")
    except UnsafePathError as e:
        log.warning("no pod dir for an unsafe uid", extra={"kv": {"err": str(e)}})
        return True  # nothing was ever created for it: every creation refuses such a uid
    mounter = mounter or host_mounter()
    if not unmount_pod_volumes(root_dir, uid, mounter):
        return False
    try:
        # one read of the mount table for both checks (the host's is long on a busy node)
        mounts = [m.path for m in mounter.mount_points()]
        if _mounted_below(os.path.join(os.path.realpath(root_dir), PODS, uid), mounts):
            return False
        return remove_tree(root_dir, PODS, uid, mounts=mounts)
    except (UnsafePathError, OSError) as e:
        log.warning("pod dir not removed", extra={"kv": {"uid": uid, "err": str(e)}})
        return False


def orphaned_pod_dirs(root_dir: str, known_uids: Iterable[str]) -> list[str]:
    """The uids of the pod directories under <rootDir>/pods that no known pod has."""
    known = set(known_uids)
    try:
        entries = sorted(os.listdir(safe_join(root_dir, PODS)))
    except FileNotFoundError:
        return []
    return [uid for uid in entries if uid not in known]


def cleanup_orphaned_pod_dirs(root_dir: str, known_uids: Iterable[str], mounter: Mounter | None = None,
                              orphans: list[str] | None = None) -> list[str]:
    """Remove <rootDir>/pods/<uid> for every uid not in known_uids (upstream cleanupOrphanedPodDirs), after
    unmounting our tmpfs volumes in it (`orphans`: those uids, listed already). Returns the uids whose dirs are
    still there (something else mounted inside, or not removable yet)."""
    if orphans is None:
        orphans = orphaned_pod_dirs(root_dir, known_uids)
    return [uid for uid in orphans if not teardown_pod_dir(root_dir, uid, mounter)]
