"""In-place pod resize wired into the node (upstream allocation.NewManager in NewMainKubelet and its Run): the
allocated and actuated checkpoints under the root dir, the resize conditions and their gauges, admission through
the allocation manager, the pod workers running pods as allocated, the pod sync's executor, and the periodic retry
of pending resizes."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from cri.runtime import Runtime
from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.pod.allocation import ALLOCATED_PODS_STATE, TRIGGER_POD_RESIZED, AllocationManager
from minikubelet.pod.manager import PodManager
from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint
from minikubelet.services.service import Loop, Service
from minikubelet.status.resize_conditions import ResizeConditions
from minikubelet.worker.resize import ACTUATED_PODS_STATE, PodResize
from minikubelet.worker.sync import PodSyncer
from minikubelet.worker.workers import PodWorkers


class PodResizeService(Service):
    name = "pod-resize"

    def __init__(self, config: KubeletConfig, runtime: Runtime, clock: Clock, recorder: EventRecorder,
                 metrics: Metrics, manager: PodManager, workers: PodWorkers, syncer: PodSyncer,
                 sources_ready: Callable[[], bool], write_behind: bool = True) -> None:
        """`write_behind`: the checkpoints write on a thread (the agent); False writes each change before the call
        returns (the simulator, whose loop never waits on a thread: one seed, one run)."""
        def gauges(rc: ResizeConditions) -> None:
            pending, in_progress = rc.counts()
            metrics.pod_pending_resizes.clear()
            for reason, count in pending.items():
                metrics.pod_pending_resizes.labels(reason).set(count)
            metrics.pod_in_progress_resizes.set(in_progress)

        def sync_pod(pod: Pod) -> None:
            if podview.uid(pod) in workers:
                workers.update_pod(pod)

        self.conditions = ResizeConditions(clock, on_change=gauges)
        self.allocated = allocated = PodResourceCheckpoint(os.path.join(config.root_dir, ALLOCATED_PODS_STATE),
                                                           write_behind=write_behind)
        self.actuated = PodResourceCheckpoint(os.path.join(config.root_dir, ACTUATED_PODS_STATE),
                                              write_behind=write_behind)
        for checkpoint in (allocated, self.actuated):
            checkpoint.restore()
        self.allocation = AllocationManager(
            allocated, self.conditions, manager.admit_handlers, clock, recorder, metrics,
            active_pods=manager.active_pods, pod_by_uid=manager.desired.get, sync_pod=sync_pod,
            sources_ready=sources_ready, known_uids=lambda: [*manager.desired, *workers.uids()],
            preempt=lambda victim: manager.preempt(victim))
        manager.allocation = self.allocation
        workers.allocated = self.allocation.allocated
        syncer.containers.actuated = syncer.actuated = self.actuated
        syncer.resize_conditions = self.conditions
        syncer.resizer = PodResize(runtime, None, self.actuated, metrics, config.cpu_cfs_quota,
                                   int(config.cpu_cfs_quota_period * 1_000_000))
        syncer.on_resize_completed = lambda: self._retry(TRIGGER_POD_RESIZED)
        syncer.durable = self.durable

    async def durable(self) -> None:
        """Both checkpoints on disk: what admission allocated and what the runtime was given."""
        await self.allocated.durable()
        await self.actuated.durable()

    def _retry(self, trigger: str) -> None:
        if self.allocation.has_pending_resizes():
            self.allocation.retry_pending_resizes(trigger)

    def loops(self) -> Sequence[Loop]:
        return [("pod-resize-retry", self.allocation.run)]

    async def stop(self) -> None:
        await self.durable()
