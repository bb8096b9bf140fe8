"""Node-pressure eviction as a node service: the eviction manager with its reclaim functions, the Summary it reads,
the kill it asks the pod workers for, and the kernel's memory notifications (kernelMemcgNotification)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.cm.pod_cgroups import PodCgroups
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.events import EventRecorder
from minikubelet.eviction.filesystems import DiskLayout
from minikubelet.eviction.manager import EvictionManager, Settings
from minikubelet.eviction.thresholds import (
    CONTAINERFS_AVAILABLE,
    CONTAINERFS_INODES_FREE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    parse_thresholds,
)
from minikubelet.metrics import Metrics
from minikubelet.services.service import Loop, Service
from minikubelet.stats.provider import StatsProvider
from minikubelet.stats.summary import summary as render_summary
from minikubelet.worker.dependencies import CgroupSource
from minikubelet.worker.gc import ContainerGC
from minikubelet.worker.image_gc import ImageGC
from minikubelet.worker.lifecycle import KillPodOptions, PodStatusFn
from minikubelet.worker.workers import PodWorkers

log = logging.getLogger("minikubelet.agent")


class EvictionService(Service):
    name = "eviction-manager"

    def __init__(self, config: KubeletConfig, clock: Clock, recorder: EventRecorder, workers: PodWorkers,
                 container_gc: ContainerGC, image_gc: ImageGC, stats: Callable[[], StatsProvider],
                 pod_terminated: Callable[[str], bool], metrics: Metrics | None = None) -> None:
        self._config = config
        self._clock = clock
        self._workers = workers
        self._stats = stats
        self._container_gc = container_gc
        self._image_gc = image_gc
        cfg = config
        thresholds = parse_thresholds(cfg.eviction_hard, cfg.eviction_soft, cfg.eviction_soft_grace_period,
                                      cfg.eviction_minimum_reclaim, cfg.enforce_node_allocatable)
        # upstream buildSignalToNodeReclaimFuncs (one filesystem): dead containers, then unused images
        disk = (container_gc.collect, image_gc.delete_unused_images)
        reclaim = {s: disk for s in (NODEFS_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE,
                                     CONTAINERFS_AVAILABLE, CONTAINERFS_INODES_FREE)}
        self.manager = EvictionManager(
            Settings(thresholds, cfg.eviction_max_pod_grace_period, cfg.eviction_pressure_transition_period,
                     reclaim=reclaim),
            clock, self.summary, workers.active_pods, self.evict,
            lambda pod, etype, reason, msg, ann: recorder.pod_event(pod, etype, reason, msg, annotations=ann),
            recorder.node_event,
            lambda pod: pod_terminated(podview.uid(pod)),
            comparison_operators=cfg.feature_gates.get("TaintTolerationComparisonOperators", False), metrics=metrics)

    def use_node(self, layout: DiskLayout, cgroups: CgroupSource | None) -> None:
        """Once the runtime has told where its filesystems are and the pod cgroups are known."""
        self.manager.use_disk_layout(layout, self._container_gc.collect, self._image_gc.delete_unused_images)
        self._start_memcg_notifiers(cgroups)

    def loops(self) -> Sequence[Loop]:
        return [("eviction-manager", self.manager.run)]

    async def stop(self) -> None:
        self.manager.close()

    async def summary(self, fresh: bool) -> dict[str, Any]:
        """The Summary as `/stats/summary` serves it: the housekeeping pass's, or a pass taken now when the eviction
        manager needs current numbers (a memcg notification, after a node-level reclaim). Extra passes are kept to
        those: each one also shortens the window of the CPU rates the Summary reports."""
        stats = self._stats()
        snap = stats.snapshot
        if fresh or snap is None:
            snap = await stats.update()
        return render_summary(snap)

    def evict(self, pod: Pod, grace: int, status_fn: PodStatusFn) -> None:
        self._workers.update_pod(pod, kill=KillPodOptions(grace_override=grace, status_fn=status_fn))

    def _start_memcg_notifiers(self, cgroups: CgroupSource | None) -> None:
        """kernelMemcgNotification: watch the agent's own kubepods memory cgroup (v1: a usage threshold; v2:
        PSI and memory.events)."""
        from cgroups.naming import kubepods_name
        from cgroups.systemd_driver import SystemdCgroupDriver
        from cgroups.v1 import CgroupV1Driver
        from cgroups.v2 import CgroupV2Driver
        from minikubelet.eviction.memcg_notifier import ThresholdNotifier
        from minikubelet.eviction.thresholds import ALLOCATABLE_MEMORY_AVAILABLE

        manager = cgroups.manager if isinstance(cgroups, PodCgroups) else None
        if not self._config.kernel_memcg_notification or manager is None:
            return
        literal = manager.literal(kubepods_name(manager.root))
        # systemd makes the slices; their files are watched as with cgroupfs
        driver = manager.driver.files if isinstance(manager.driver, SystemdCgroupDriver) else manager.driver
        if isinstance(driver, CgroupV2Driver):
            self._start_pressure_notifier(driver.root.joinpath(*[p for p in literal.split("/") if p]))
            return
        if not isinstance(driver, CgroupV1Driver) or "memory" not in driver.hierarchies:
            log.info("kernelMemcgNotification: needs the cgroup v1 memory controller; the 10 s monitoring stays")
            return
        path = Path(driver.hierarchies["memory"]).joinpath(*[p for p in literal.split("/") if p])
        for t in self.manager.settings.thresholds:
            if t.signal == ALLOCATABLE_MEMORY_AVAILABLE:
                self.manager.notifiers.append(ThresholdNotifier(path, t, self.manager.notify))

    def _start_pressure_notifier(self, kubepods: Path) -> None:
        """cgroup v2 (beyond upstream, which has no notifier there): PSI and memory.events of kubepods."""
        from minikubelet.eviction.pressure_notifier import PressureNotifier
        from minikubelet.eviction.thresholds import ALLOCATABLE_MEMORY_AVAILABLE, MEMORY_AVAILABLE

        if not any(t.signal in (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE)
                   for t in self.manager.settings.thresholds):
            return
        notifier = PressureNotifier(kubepods, self.manager.notify, self._clock)
        try:
            notifier.start()
        except OSError as e:
            log.info("kernelMemcgNotification: no memory pressure notification on cgroup v2; the 10 s monitoring "
                     "stays", extra={"kv": {"cgroup": str(kubepods), "err": str(e)}})
            return
        self.manager.notifiers.append(notifier)


def image_fs(stats: Callable[[], StatsProvider]) -> Callable[[], Awaitable[tuple[int, int]]]:
    """The image filesystem's (capacity, available) for image GC, from the housekeeping pass's stats."""
    async def read() -> tuple[int, int]:
        provider = stats()
        snap = provider.snapshot or await provider.update()
        fs = snap.node.image_fs.capacity if snap.node.image_fs is not None else None
        return (fs.capacity, fs.available) if fs is not None else (0, 0)
    return read
