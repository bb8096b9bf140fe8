"""The disk layout the eviction manager works with (upstream v1.36 KubeletSeparateDiskGC, KEP-4191).

Three layouts: one filesystem for everything; a dedicated image filesystem holding images and writable layers
(`imagefs`); or a split one where images live on `imagefs` and writable layers on the node's filesystem
(the runtime reports `container_filesystems` in ImageFsInfo apart from `image_filesystems`). The layout decides
what `containerfs.*` thresholds are (copies of the nodefs or imagefs ones: a configured containerfs threshold is
overridden, as upstream's UpdateContainerFsThresholds), which of a pod's usages rank it for each disk signal
(buildSignalToRankFunc), which node-level reclaim runs first (buildSignalToNodeReclaimFuncs), and whether a
container's writable layer counts against its own ephemeral-storage limit (containerEphemeralStorageLimitEviction:
only without a dedicated image filesystem).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from minikubelet.eviction.thresholds import (
    CONTAINERFS_AVAILABLE,
    CONTAINERFS_INODES_FREE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    Threshold,
)

Reclaim = Callable[[], Awaitable[None]]

# a pod's disk usages (upstream fsStatsType); "images" adds nothing per pod, kept for the mapping's fidelity
FS_ROOT = "root"
FS_LOGS = "logs"
FS_LOCAL_VOLUMES = "localVolumeSource"
FS_IMAGES = "images"
ALL_FS_STATS = frozenset({FS_IMAGES, FS_ROOT, FS_LOGS, FS_LOCAL_VOLUMES})

_CONTAINERFS_SOURCE = {CONTAINERFS_AVAILABLE: (NODEFS_AVAILABLE, IMAGEFS_AVAILABLE),
                       CONTAINERFS_INODES_FREE: (NODEFS_INODES_FREE, IMAGEFS_INODES_FREE)}


@dataclass(frozen=True)
class DiskLayout:
    dedicated_image_fs: bool = False  # the image filesystem is not the node's (upstream HasDedicatedImageFs)
    split_container_fs: bool = False  # writable layers are not on the image filesystem (HasDedicatedContainerFs)

    def describe(self) -> str:
        if self.dedicated_image_fs and self.split_container_fs:
            return "split: images on imagefs, writable layers on nodefs"
        if self.dedicated_image_fs:
            return "dedicated imagefs: images and writable layers"
        return "one filesystem"


def _device(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def detect(root_dir: str, image_fs_path: str, container_fs_path: str = "") -> DiskLayout:
    """The layout from the devices of the agent's root dir, the runtime's image filesystem and (when reported)
    its container filesystem. A path that cannot be read counts as the node's filesystem."""
    root = _device(root_dir)
    image = _device(image_fs_path) if image_fs_path else None
    dedicated = image is not None and root is not None and image != root
    container = _device(container_fs_path) if container_fs_path else None
    split = dedicated and container is not None and container != image
    return DiskLayout(dedicated, split)


def containerfs_thresholds(thresholds: Sequence[Threshold], layout: DiskLayout) -> tuple[list[Threshold], list[str]]:
    """The thresholds with containerfs.* set from nodefs (one filesystem, or the split layout where writable
    layers are on nodefs) or from imagefs (a dedicated imagefs holding them), hard and soft alike; plus a
    warning for each configured containerfs threshold that was overridden."""
    from_nodefs = layout.dedicated_image_fs == layout.split_container_fs
    warnings = [f"found {t.signal} for {'hard' if t.hard else 'soft'} eviction. ignoring"
                for t in thresholds if t.signal in _CONTAINERFS_SOURCE]
    out = [t for t in thresholds if t.signal not in _CONTAINERFS_SOURCE]
    for signal, (nodefs, imagefs) in _CONTAINERFS_SOURCE.items():
        source = nodefs if from_nodefs else imagefs
        for hard in (True, False):
            t = next((t for t in thresholds if t.signal == source and t.hard == hard), None)
            if t is not None:
                out.append(Threshold(signal, t.value, t.grace_period, t.min_reclaim))
    return out, warnings


def rank_fs_stats(layout: DiskLayout) -> dict[str, frozenset[str]]:
    """Which of a pod's usages rank it under each disk signal."""
    if layout.dedicated_image_fs and not layout.split_container_fs:
        node = frozenset({FS_LOGS, FS_LOCAL_VOLUMES})
        image = frozenset({FS_ROOT, FS_IMAGES})
        return {NODEFS_AVAILABLE: node, NODEFS_INODES_FREE: node, IMAGEFS_AVAILABLE: image,
                IMAGEFS_INODES_FREE: image, CONTAINERFS_AVAILABLE: image, CONTAINERFS_INODES_FREE: image}
    if layout.dedicated_image_fs:
        node = frozenset({FS_LOGS, FS_LOCAL_VOLUMES, FS_ROOT})
        image = frozenset({FS_IMAGES})
        return {NODEFS_AVAILABLE: node, NODEFS_INODES_FREE: node, CONTAINERFS_AVAILABLE: node,
                CONTAINERFS_INODES_FREE: node, IMAGEFS_AVAILABLE: image, IMAGEFS_INODES_FREE: image}
    return {s: ALL_FS_STATS for s in (NODEFS_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE,
                                      CONTAINERFS_AVAILABLE, CONTAINERFS_INODES_FREE)}


def reclaim_steps(layout: DiskLayout, dead_containers: Reclaim,
                  unused_images: Reclaim) -> Mapping[str, Sequence[Reclaim]]:
    """The node-level reclaim tried before evicting for each disk signal."""
    both = (dead_containers, unused_images)
    if layout.dedicated_image_fs and not layout.split_container_fs:
        # nodefs holds logs and volumes only: nothing node-level frees it
        return {NODEFS_AVAILABLE: (), NODEFS_INODES_FREE: (), IMAGEFS_AVAILABLE: both, IMAGEFS_INODES_FREE: both,
                CONTAINERFS_AVAILABLE: both, CONTAINERFS_INODES_FREE: both}
    if layout.dedicated_image_fs:
        containers = (dead_containers,)
        return {IMAGEFS_AVAILABLE: (unused_images,), IMAGEFS_INODES_FREE: (unused_images,),
                NODEFS_AVAILABLE: containers, NODEFS_INODES_FREE: containers, CONTAINERFS_AVAILABLE: containers,
                CONTAINERFS_INODES_FREE: containers}
    return {s: both for s in (NODEFS_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE,
                              CONTAINERFS_AVAILABLE, CONTAINERFS_INODES_FREE)}
