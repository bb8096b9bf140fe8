"""Housekeeping and garbage collection as one node service: the backoff checkpoint, the gauges, container and image
GC, the container log manager (CRI runtimes), the stats pass, and the sweep of what pods nobody knows any more left
behind (upstream cleanupOrphanedPodCgroups / cleanupOrphanedPodDirs)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from cri.runtime import Runtime
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod, is_static
from minikubelet.base.quantity import to_bytes
from minikubelet.cm.pod_cgroups import PodCgroups
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.pod.manager import PodManager
from minikubelet.runtime.pleg import PLEG
from minikubelet.services.eviction import image_fs
from minikubelet.services.service import Loop, Service
from minikubelet.sources.file import release_memory
from minikubelet.stats.log_metrics import LogMetricsCollector
from minikubelet.stats.provider import StatsProvider
from minikubelet.stats.snapshot import Snapshot
from minikubelet.status.manager import StatusManager
from minikubelet.volumes.manager import cleanup_orphaned_pod_dirs, orphaned_pod_dirs
from minikubelet.worker.backoff import Backoff, BackoffCheckpoint
from minikubelet.worker.container_log_manager import ContainerLogManager, LogReopener, LogRotatePolicy
from minikubelet.worker.dependencies import CgroupSource
from minikubelet.worker.gc import ContainerGC
from minikubelet.worker.image_gc import ImageGC, ImageGCPolicy
from minikubelet.worker.lifecycle import PodLifecycle
from minikubelet.worker.log_files import LogFiles
from minikubelet.worker.workers import PodWorkers

log = logging.getLogger("minikubelet.agent")

CHECKPOINT_PERIOD = 2.0
ORPHAN_SWEEP_PERIOD = 60.0  # also upstream's periodicQOSCgroupUpdateInterval


_LIFECYCLE = {PodLifecycle.SYNCING: "sync", PodLifecycle.TERMINATING: "terminating",
              PodLifecycle.TERMINATED: "terminated"}
# upstream's valid (config, static) pairs of kubelet_working_pods, each with every lifecycle
_WORKING = (("desired", "true"), ("desired", ""), ("orphan", "true"), ("orphan", ""), ("runtime_only", "unknown"))


def set_pod_gauges(metrics: Metrics, desired: Mapping[str, Pod], active: Sequence[Pod], workers: PodWorkers,
                   runtime_only: AbstractSet[str], mirrors: int) -> None:
    static = {uid for uid, pod in desired.items() if is_static(pod)}
    metrics.desired_pods.labels("").set(len(desired) - len(static))
    metrics.desired_pods.labels("true").set(len(static))
    active_static = sum(1 for pod in active if is_static(pod))
    metrics.active_pods.labels("").set(len(active) - active_static)
    metrics.active_pods.labels("true").set(active_static)
    metrics.mirror_pods.set(mirrors)
    # upstream's pod manager counts the ephemeral containers of the pods it holds, started or not
    metrics.managed_ephemeral_containers.set(
        sum(len((pod.get("spec") or {}).get("ephemeralContainers") or []) for pod in desired.values()))
    counts: dict[tuple[str, str, str], int] = {}
    for uid in workers.uids():
        w = workers.get(uid)
        if w is None:
            continue
        if uid in runtime_only:
            config, static_label = "runtime_only", "unknown"
        else:
            config = "desired" if uid in desired else "orphan"
            static_label = "true" if (uid in static if config == "desired" else is_static(w.pod)) else ""
        key = (_LIFECYCLE[w.lifecycle], config, static_label)
        counts[key] = counts.get(key, 0) + 1
    for config, static_label in _WORKING:
        for lifecycle in _LIFECYCLE.values():
            metrics.working_pods.labels(lifecycle, config, static_label).set(counts.get((lifecycle, config,
                                                                                       static_label), 0))


class Housekeeping(Service):
    name = "housekeeping"

    def __init__(self, config: KubeletConfig, runtime: Runtime, clock: Clock, recorder: EventRecorder,
                 metrics: Metrics, statuses: StatusManager, checkpoint: BackoffCheckpoint, backoffs: Iterable[Backoff],
                 logs: LogFiles, reopener: LogReopener | None, stats: Callable[[], StatsProvider],
                 workers: PodWorkers, pleg: PLEG) -> None:
        self._clock = clock
        self._root_dir = config.root_dir
        self._metrics = metrics
        self._statuses = statuses
        self.checkpoint = checkpoint
        self._backoffs = tuple(backoffs)
        self.container_gc = ContainerGC(runtime, clock, logs, workers.uids)
        self.image_gc = ImageGC(runtime, clock, ImageGCPolicy(
            config.image_gc_high_threshold_percent, config.image_gc_low_threshold_percent,
            config.image_minimum_gc_age, config.image_maximum_gc_age), config.pod_infra_container_image,
            image_fs(stats), recorder.node_event,
            collected=lambda reason: metrics.image_garbage_collected.labels(reason).inc())
        # A CRI runtime's log files are the kubelet's to rotate (Docker rotates its own json-file logs).
        self._log_rotation = None if reopener is None else ContainerLogManager(
            runtime, reopener.reopen_container_log, clock,
            LogRotatePolicy(to_bytes(config.container_log_max_size), config.container_log_max_files),
            config.container_log_max_workers, config.container_log_monitor_interval)
        self._stats = stats
        metrics.registry.register(LogMetricsCollector(self._last_stats))
        self._workers = workers
        self._pleg = pleg
        # set by the agent once the pod manager and the sources exist
        self.manager: PodManager | None = None
        self.cgroups: Callable[[], CgroupSource | None] = lambda: None
        self.sources_seen: Callable[[], bool] = lambda: True
        self.orphans_pending = True
        self._trim: asyncio.TimerHandle | None = None

    def _last_stats(self) -> Snapshot | None:
        try:
            return self._stats().snapshot
        except AssertionError:  # before the runtime said where its filesystems are
            return None

    def loops(self) -> Sequence[Loop]:
        return [("housekeeping", self._housekeeping), ("container-gc", self.container_gc.run),
                *([("container-log-manager", self._log_rotation.run)] if self._log_rotation is not None else []),
                ("orphan-sweep", self._orphan_sweep), ("stats-housekeeping", self._stats().run),
                ("image-gc", self.image_gc.run)]

    def stop_orphans_once_sources_seen(self) -> None:
        # As upstream's sourcesReady: until every source answered once, the pods it will give are not orphans.
        if not self.orphans_pending or not self.sources_seen() or self.manager is None:
            return
        self.orphans_pending = False
        self._metrics.orphaned_runtime_pods.inc(self.manager.adopt_orphans(self._pleg.runtime_uids))
        self.sweep_orphans()

    def sweep_orphans(self) -> None:
        """Pod cgroups (every hierarchy) and pod directories of pods nothing knows any more (upstream
        cleanupOrphanedPodCgroups / cleanupOrphanedPodDirs): what a crash or a busy cgroup left behind."""
        desired = self.manager.desired if self.manager is not None else {}
        known = set(self._pleg.runtime_uids) | set(desired) | set(self._workers.uids())
        cgroups = self.cgroups()
        if isinstance(cgroups, PodCgroups):
            cgroups.cleanup_orphans(known)
        orphans = orphaned_pod_dirs(self._root_dir, known)
        failed = cleanup_orphaned_pod_dirs(self._root_dir, known, orphans=orphans)
        self._metrics.orphan_pod_cleaned_volumes.set(len(orphans))
        self._metrics.orphan_pod_cleaned_volumes_errors.set(len(failed))

    async def _orphan_sweep(self) -> None:
        while True:
            await self._clock.sleep(ORPHAN_SWEEP_PERIOD)
            if not self.orphans_pending:
                self.sweep_orphans()
            cgroups = self.cgroups()
            if isinstance(cgroups, PodCgroups):
                cgroups.update_qos()

    def trim_soon(self) -> None:
        """Once the last reference to a finished pod is gone: glibc keeps a removed pod's freed heap otherwise
        (52 MiB after a 3 MB manifest); one trim for the pods that finish within the second."""
        if self._trim is None:
            self._trim = asyncio.get_running_loop().call_later(1.0, self._release_memory)

    def _release_memory(self) -> None:
        self._trim = None
        release_memory()

    async def stop(self) -> None:
        if self._trim is not None:
            self._trim.cancel()
        try:
            self.checkpoint.save()
        except OSError:
            pass

    def update_gauges(self) -> None:
        """upstream HandlePodCleanups' restarts of wanted pods no worker knows, then its gauges: the pods the
        sources want, the active ones, the mirror pods and the pod workers by lifecycle and config (the running
        pods and containers come from the PLEG's relist). Every housekeeping period (2 s), as upstream: not on
        each source update, where its cost, which grows with the pods, made a burst of N new pods cost N²."""
        if self.manager is not None:
            active = self.manager.active_pods()
            self.manager.restart_unknown(active)
            set_pod_gauges(self._metrics, self.manager.desired, active, self._workers,
                           self.manager.runtime_only, self.manager.mirror_count())

    async def _housekeeping(self) -> None:
        while True:
            await self._clock.sleep(CHECKPOINT_PERIOD)
            try:
                self.checkpoint.save()
            except OSError as e:
                log.warning("backoff checkpoint failed", extra={"kv": {"err": str(e)}})
            for backoff in self._backoffs:
                backoff.gc()
            self.update_gauges()
            if not self.orphans_pending and self.manager is not None:
                self._metrics.orphaned_runtime_pods.inc(
                    self.manager.kill_running_orphans(self._pleg.runtime_uids, self._pleg.running_uids,
                                                      self._pleg.listed_from))
            self._metrics.sync_loop_last.set(self._clock.now())
