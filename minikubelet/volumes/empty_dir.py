"""emptyDir volumes (upstream pkg/volume/emptydir): a directory on the node's disk, or with `medium: Memory`
a tmpfs mounted on it, sized as upstream calculateEmptyDirMemorySize."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

from cgroups.resources import pod_limits
from minikubelet.base.podview import PodView
from minikubelet.base.quantity import QuantityError, parse_quantity
from minikubelet.base.safepath import make_dirs
from minikubelet.volumes.mounter import Mounter
from minikubelet.volumes.ownership import set_volume_ownership

log = logging.getLogger("minikubelet.volumes.empty_dir")

PLUGIN_DIR = "kubernetes.io~empty-dir"
PODS = "pods"
MEDIUM_DEFAULT = ""
MEDIUM_MEMORY = "Memory"
TMPFS_NOSWAP = "noswap"
NOSWAP_KERNEL = (6, 4)  # upstream TmpfsNoswapSupportKernelVersion


class EmptyDirError(Exception):
    pass


def memory_size_limit(pod: PodView, size_limit: object, node_allocatable_memory: Fraction | None) -> int | None:
    """Bytes for a memory-backed emptyDir: node allocatable, lowered to the pod's memory limit, lowered to the
    volume's sizeLimit (each only when above zero and not above the current value); None: no known bound."""
    size: Fraction | None = node_allocatable_memory if node_allocatable_memory and node_allocatable_memory > 0 \
        else None
    pod_limit = pod_limits(pod).get("memory")
    if pod_limit is not None and pod_limit > 0 and (size is None or pod_limit <= size):
        size = pod_limit
    if size_limit is not None:
        try:
            volume_limit = parse_quantity(size_limit)
        except QuantityError as e:
            raise EmptyDirError(f"invalid sizeLimit {size_limit!r}: {e}") from e
        if volume_limit > 0 and (size is None or volume_limit <= size):
            size = volume_limit
    if size is None:
        return None
    return -(-size.numerator // size.denominator)  # Quantity.Value() rounds up


def tmpfs_options(size: int | None, noswap: bool) -> list[str]:
    """Upstream generateTmpfsMountOptions: no size means the kernel's default (half the RAM)."""
    options = [f"size={size}"] if size is not None and size > 0 else []
    if noswap:
        options.append(TMPFS_NOSWAP)
    return options


def _kernel_at_least(release: str, wanted: tuple[int, int]) -> bool:
    m = re.match(r"(\d+)\.(\d+)", release)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= wanted


def _in_user_namespace(uid_map: Path) -> bool:
    try:
        fields = uid_map.read_text().split()
    except OSError:
        return False
    return fields[:3] != ["0", "0", "4294967295"]


@cache
def noswap_supported(release: str = "", uid_map: Path = Path("/proc/self/uid_map")) -> bool:
    """Upstream IsTmpfsNoswapOptionSupported: not in a user namespace, kernel 6.4 or later."""
    return not _in_user_namespace(uid_map) and _kernel_at_least(release or os.uname().release, NOSWAP_KERNEL)


def medium_of(source: Mapping[str, Any]) -> str:
    medium = source.get("medium")
    return medium if isinstance(medium, str) else MEDIUM_DEFAULT


def is_tmpfs_mount(path: str, mounter: Mounter) -> bool:
    real = os.path.realpath(path)
    return any(m.path == real and m.fstype == "tmpfs" for m in mounter.mount_points())


def set_up_tmpfs(path: str, size: int | None, mounter: Mounter) -> None:
    """Mount a tmpfs on the existing directory `path` unless one is there (SetUp is idempotent)."""
    if is_tmpfs_mount(path, mounter):
        return
    options = tmpfs_options(size, noswap_supported())
    log.info("mounting tmpfs", extra={"kv": {"path": path, "options": ",".join(options)}})
    mounter.mount_tmpfs(path, options)


def set_up(root_dir: str, pod: PodView, name: str, source: Mapping[str, Any], mounter: Mounter,
           node_allocatable_memory: Fraction | None, fs_group: int | None) -> str:
    """Create (and for Memory, mount) the volume; returns its host path."""
    medium = medium_of(source)
    if medium not in (MEDIUM_DEFAULT, MEDIUM_MEMORY):
        raise EmptyDirError(f"emptyDir medium {medium!r} is not supported (only the node's disk and Memory)")
    parts = (PODS, pod.uid, "volumes", PLUGIN_DIR, name)
    existed = os.path.isdir(os.path.join(root_dir, *parts))
    path = make_dirs(root_dir, *parts, leaf_mode=None if existed else 0o777)
    if medium == MEDIUM_MEMORY:
        mounted = is_tmpfs_mount(path, mounter)
        set_up_tmpfs(path, memory_size_limit(pod, source.get("sizeLimit"), node_allocatable_memory), mounter)
        if not mounted:
            set_volume_ownership(path, fs_group)  # the tmpfs root itself is 1777, the kernel's default
        return path
    if not existed:
        # as upstream's emptyDir: once, when it is created, and whatever fsGroupChangePolicy says
        set_volume_ownership(path, fs_group)
    return path
