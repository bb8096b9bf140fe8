"""Image garbage collection (upstream pkg/kubelet/images/image_gc_manager.go).

Every 5 minutes: images unused for longer than imageMaximumGCAge go; then, when the image filesystem is at
or above imageGCHighThresholdPercent, unused images are removed, least recently used first (ties: first
detected first), until usage is down to imageGCLowThresholdPercent. An image in use by any container (running
or not), the pod sandbox (pause) image, an image used at this very pass, and an image first seen less than
imageMinimumGCAge ago are never removed. The eviction manager calls `delete_unused_images` under disk pressure.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cri.runtime import Runtime
from cri.types import ContainerStatus, Image
from minikubelet.base.clock import Clock

log = logging.getLogger("minikubelet.worker.image_gc")

IMAGE_GC_PERIOD = 300.0  # upstream ImageGCPeriod
FREE_DISK_SPACE_FAILED = "FreeDiskSpaceFailed"
IMAGE_GC_FAILED = "ImageGCFailed"
INVALID_DISK_CAPACITY = "InvalidDiskCapacity"
_PULLABLE = "docker-pullable://"
_IMAGE_ID = "docker://"


@dataclass(frozen=True)
class ImageGCPolicy:
    high_threshold_percent: int = 85
    low_threshold_percent: int = 80
    min_age: float = 120.0
    max_age: float = 0.0  # 0: none


@dataclass
class _Record:
    first_detected: float
    last_used: float = 0.0
    size: int = 0
    pinned: bool = False


class ImageGCError(Exception):
    pass


def format_size(n: int) -> str:
    """upstream formatSize: `123 B`, `1.5 KiB`, … `2.0 TiB`."""
    for unit, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit:
            return f"{n / unit:.1f} {name}"
    return f"{n} B"


def _in_use(image: Image, containers: list[ContainerStatus]) -> bool:
    for c in containers:
        ref = c.image_ref
        if ref.startswith(_IMAGE_ID) and ref[len(_IMAGE_ID):] == image.id:
            return True
        if ref.startswith(_PULLABLE) and ref[len(_PULLABLE):] in image.repo_digests:
            return True
        if ref == image.id or c.image in image.repo_tags or c.image == image.id:
            return True
    return False


class ImageGC:
    def __init__(self, runtime: Runtime, clock: Clock, policy: ImageGCPolicy, sandbox_image: str,
                 image_fs: Callable[[], Awaitable[tuple[int, int]]],
                 node_event: Callable[[str, str, str], None], period: float = IMAGE_GC_PERIOD,
                 collected: Callable[[str], None] = lambda _reason: None) -> None:
        """`collected(reason)`: an image was removed, for "age" or for "space"."""
        self._runtime = runtime
        self._collected = collected
        self._clock = clock
        self.policy = policy
        self._sandbox_image = sandbox_image
        self._image_fs = image_fs  # (capacity, available) bytes of the image filesystem
        self._node_event = node_event
        self.period = period
        self.records: dict[str, _Record] = {}
        self._began = clock.now()
        self.removed: list[str] = []  # image IDs, in removal order (for logs and tests)

    async def run(self) -> None:
        if self.policy.high_threshold_percent == 100 and not self.policy.max_age:
            log.info("imageGCHighThresholdPercent is 100 and imageMaximumGCAge is 0: image GC is off")
            return
        failed_before = False
        while True:
            await self._clock.sleep(self.period)
            try:
                await self.garbage_collect()
            except Exception as e:
                message = str(e) or type(e).__name__
                if failed_before:
                    log.error("image garbage collection failed multiple times in a row", extra={"kv": {"err": message}})
                    self._node_event("Warning", IMAGE_GC_FAILED, message)
                else:
                    log.error("image garbage collection failed once", extra={"kv": {"err": message}})
                failed_before = True
            else:
                failed_before = False

    async def _detect(self, now: float) -> set[str]:
        """Record every image (first detection, last use, size, pinned); the IDs in use now."""
        images = await self._runtime.list_images()
        containers = await self._runtime.list_containers()
        in_use: set[str] = set()
        current = set()
        for image in images:
            current.add(image.id)
            rec = self.records.get(image.id)
            if rec is None:
                rec = self.records[image.id] = _Record(first_detected=now)
            rec.size = image.size
            rec.pinned = self._sandbox_image in image.repo_tags or self._sandbox_image == image.id
            if _in_use(image, containers):
                rec.last_used = now
                in_use.add(image.id)
        for gone in set(self.records) - current:
            del self.records[gone]
        return in_use

    async def _eviction_order(self, now: float) -> list[tuple[str, _Record]]:
        in_use = await self._detect(now)
        candidates = [(i, r) for i, r in self.records.items() if i not in in_use and not r.pinned]
        return sorted(candidates, key=lambda ir: (ir[1].last_used, ir[1].first_detected))

    async def _free_image(self, image_id: str, rec: _Record, why: str) -> None:
        log.info("removing image to free bytes", extra={"kv": {"imageID": image_id, "size": rec.size, "reason": why}})
        await self._runtime.remove_image(image_id)
        self.records.pop(image_id, None)
        self.removed.append(image_id)
        self._collected(why)

    async def _free_space(self, to_free: int, now: float, images: list[tuple[str, _Record]]) -> int:
        freed = 0
        errors: list[str] = []
        for image_id, rec in images:
            if rec.last_used >= now or now - rec.first_detected < self.policy.min_age:
                continue
            try:
                await self._free_image(image_id, rec, "space")
            except Exception as e:
                errors.append(str(e) or type(e).__name__)
                continue
            freed += rec.size
            if freed >= to_free:
                break
        if errors:
            raise ImageGCError(f"wanted to free {to_free} bytes, but freed {freed} bytes space with errors in image "
                               f"deletion: {'; '.join(errors)}")
        return freed

    async def _free_old(self, images: list[tuple[str, _Record]], now: float) -> list[tuple[str, _Record]]:
        if not self.policy.max_age or now - self._began <= self.policy.max_age:
            return images
        left = []
        errors = []
        for image_id, rec in images:
            if now - rec.last_used > self.policy.max_age:
                try:
                    await self._free_image(image_id, rec, "age")
                    continue
                except Exception as e:
                    errors.append(str(e) or type(e).__name__)
            left.append((image_id, rec))
        if errors:
            raise ImageGCError(f"wanted to free images older than {self.policy.max_age:g}s, encountered errors in "
                               f"image deletion: {'; '.join(errors)}")
        return left

    async def garbage_collect(self) -> None:
        now = self._clock.now()
        images = await self._free_old(await self._eviction_order(now), now)
        capacity, available = await self._image_fs()
        available = min(available, capacity)
        if capacity == 0:
            message = "invalid capacity 0 on image filesystem"
            self._node_event("Warning", INVALID_DISK_CAPACITY, message)
            raise ImageGCError(message)
        usage = 100 - available * 100 // capacity
        if usage < self.policy.high_threshold_percent:
            return
        to_free = capacity * (100 - self.policy.low_threshold_percent) // 100 - available
        log.info("disk usage on image filesystem is over the high threshold, trying to free bytes down to the low "
                 "threshold", extra={"kv": {"usage": usage, "highThreshold": self.policy.high_threshold_percent,
                                            "amountToFree": to_free,
                                            "lowThreshold": self.policy.low_threshold_percent}})
        freed = await self._free_space(to_free, now, images)
        if freed < to_free:
            message = (f"Insufficient free disk space on the node's image filesystem ({usage}% of "
                       f"{format_size(capacity)} used). Failed to free sufficient space by deleting unused images "
                       f"(freed {freed} bytes). Investigate disk usage, as it could be used by active images, logs, "
                       "volumes, or other data.")
            self._node_event("Warning", FREE_DISK_SPACE_FAILED, message)
            raise ImageGCError(message)

    async def delete_unused_images(self) -> None:
        """Under disk pressure (eviction manager): every unused image old enough, whatever the thresholds."""
        log.info("attempting to delete unused images")
        now = self._clock.now()
        await self._free_space(2**63 - 1, now, await self._eviction_order(now))
