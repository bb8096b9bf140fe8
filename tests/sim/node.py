"""The agent's pod managers wired as the agent wires them (minikubelet/services/: pod sources and merge, pod manager
and admission (the eviction manager's and the predicates' against allocatable, with preemption), pod workers,
the probe manager, PLEG relist and events, status manager, container GC, the eviction manager on a scripted
Summary (tests/sim/pressure.py), the orphan pod dir sweep, in-place resize (services/pod_resize.py: the allocation
manager in admission, the resize conditions, the actuated record, the runtime's UpdateContainerResources, the
periodic retry of pending resizes)) on a FakeRuntime and the simulation's FakeClock. A crash drops every task and
object of the agent but the runtime and the disk; the next SimNode starts from them as the agent does after a
restart (the allocated and actuated checkpoints included, written synchronously here: the loop never waits on a
thread)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from fractions import Fraction
from pathlib import Path
from typing import Any

from cri.errors import RuntimeError_
from cri.fake import FakeRuntime
from minikubelet.base import podview
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.cm.pod_cgroups import PodCgroups
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.node.labels import initial_node
from minikubelet.pod.manager import PodManager
from minikubelet.pod.predicate import PredicateAdmitHandler
from minikubelet.runtime.pleg import PLEG
from minikubelet.services.pod_resize import PodResizeService
from minikubelet.sources.merge import PodConfig
from minikubelet.status.manager import StatusManager
from minikubelet.volumes.manager import cleanup_orphaned_pod_dirs
from minikubelet.worker.backoff import (
    CONTAINER_BACKOFF_INITIAL,
    CONTAINER_BACKOFF_MAX,
    IMAGE_BACKOFF_INITIAL,
    IMAGE_BACKOFF_MAX,
    Backoff,
)
from minikubelet.worker.containers import Containers
from minikubelet.worker.gc import ContainerGC
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.lifecycle import KillPodOptions
from minikubelet.worker.probe_results import ManagerProbeSource
from minikubelet.worker.sync import PodSyncer
from minikubelet.worker.workers import PodWorker, PodWorkers
from probes.manager import ProbeManager
from tests.sim.pressure import Machine, eviction_manager
from tests.sim.shapes import ALLOCATABLE_CPU, ALLOCATABLE_MEMORY
from tests.sim.shutdown import ShutdownOrder, shutdown_manager
from tests.unit.volumes.fake_mounter import FakeMounter

ORPHAN_SWEEP_PERIOD = 60.0  # services/housekeeping.py
FILE_SOURCE = "file"
SOURCES = (FILE_SOURCE, "api")
# the shapes' scripted API pods (annotated `api`: not static, evictable) enter the merge under a source name of
# their own, so their snapshot never replaces the real API source's (tests/sim/api.py), which is `api`
SCRIPTED_API_SOURCE = "api-scripted"


def _source(pod: Pod) -> str:
    return str((podview.meta(pod).get("annotations") or {}).get("kubernetes.io/config.source", FILE_SOURCE))


class SimNode:
    def __init__(self, root: Path, runtime: FakeRuntime, clock: FakeClock, max_pods: int,
                 on_finished: Callable[[str], None], mounter: FakeMounter, machine: Machine,
                 evicted: Callable[[Pod], None] = lambda _p: None,
                 preempted: Callable[[Pod], None] = lambda _p: None,
                 shutdown_order: ShutdownOrder | None = None) -> None:
        self.root = root
        self.mounter = mounter
        self.runtime = runtime
        self.clock = clock
        self.recorder = EventRecorder(clock, "node-1")
        self.metrics = Metrics(now=clock.now)
        self.statuses = StatusManager(clock.monotonic, self.metrics)
        self.container_backoff = Backoff(clock, CONTAINER_BACKOFF_INITIAL, CONTAINER_BACKOFF_MAX)
        images = ImagePuller(runtime, Backoff(clock, IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX), self.recorder,
                             self.metrics, clock)
        # the container manager without pod cgroups (cgroupsPerQOS false): each container's limits go to the runtime,
        # which is where the simulation reads them back
        cgroups = PodCgroups(None, int(ALLOCATABLE_MEMORY), -1000, lambda: self.manager.active_pods())
        containers = Containers(runtime, clock, self.recorder, self.metrics, self.container_backoff, images, cgroups,
                                str(root), str(root / "logs"), "10.0.0.1", legacy_log_dir=str(root / "containers"), mounter=mounter)
        self.logs = containers.logs
        self.probes = ProbeManager(runtime, clock, CollectorRegistry(), lambda uid: self.workers.wake(uid),
                                   events=self.recorder.pod_event)
        self.syncer = PodSyncer(runtime, clock, self.recorder, self.metrics, containers, images,
                                self.container_backoff, self.statuses, ManagerProbeSource(self.probes), str(root),
                                "10.0.0.1")
        self.syncer.container_id_scheme = runtime.runtime_version.container_id_scheme
        self._on_finished = on_finished
        self.workers = PodWorkers(self._worker, on_finished=self._finished)
        self.admitted: set[str] = set()  # pods the pod manager admitted: their worker started without a kill
        start = self.workers.update_pod

        def update_pod(pod: Pod, kill: KillPodOptions | None = None, adopted: bool = False) -> PodWorker:
            if kill is None and not adopted and podview.uid(pod) not in self.workers:
                self.admitted.add(podview.uid(pod))
            return start(pod, kill, adopted)

        self.workers.update_pod = update_pod  # type: ignore[method-assign]
        self.gc = ContainerGC(runtime, clock, containers.logs, self.workers.uids)
        self._preempted = preempted
        node = initial_node("node-1", {}, (), {"cpu": ALLOCATABLE_CPU, "memory": ALLOCATABLE_MEMORY,
                                               "pods": Fraction(max_pods)})
        self.eviction = eviction_manager(machine, clock, self.recorder, self.workers,
                                         lambda: self.manager.active_pods(), self.gc, evicted)
        self.shutdown, _ = shutdown_manager(clock, self.recorder, self.workers, shutdown_order or ShutdownOrder(clock))
        # as the agent: the eviction manager's admit handler first, then the predicates (resources, max pods), the
        # node shutdown manager's last
        self.manager = PodManager(self.workers, self.statuses, [
            self.eviction, PredicateAdmitHandler(lambda: node, metrics=self.metrics), self.shutdown],
            clock, self.recorder, metrics=self.metrics)
        self._kill_for_preemption, self.manager.preempt = self.manager.preempt, self._preempt
        # sources_ready reads the API half's answer, set by attach() after this
        self.resize = PodResizeService(KubeletConfig(root_dir=str(root)), runtime, clock, self.recorder, self.metrics,
                                       self.manager, self.workers, self.syncer, lambda: self.sources_seen(),
                                       write_behind=False)
        self.config = PodConfig(self.manager.handle)
        self.pleg = PLEG(runtime, clock, self.metrics, self.workers.wake, changed=self.workers.runtime_changed)
        self._tasks: list[asyncio.Task[None]] = []
        self.started = False
        # the API half (tests/sim/api.py): its loops start with the sources; runtime pods are orphans only once
        # every source has answered (the agent's housekeeping.stop_orphans_once_sources_seen)
        self.loops: list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]] = []
        self.sources_seen: Callable[[], bool] = lambda: True
        self.mirror_wake: Callable[[], None] = lambda: None  # the API half's mirror pods, woken as the agent does
        self.orphans_pending = True

    def _worker(self, pod: Pod, adopted: bool) -> PodWorker:
        if podview.is_static(pod):
            self.mirror_wake()  # as the agent's make_worker: the static pod's mirror pod is made as it syncs
        return PodWorker(pod, self.syncer, self.clock, self.metrics, resync_period=10.0, adopted=adopted)

    def _preempt(self, pod: Pod) -> asyncio.Event:
        """The pod manager's kill of a pod a critical pod preempts, noted for the invariants first."""
        self._preempted(pod)
        return self._kill_for_preemption(pod)

    def _finished(self, uid: str, pod: Pod) -> None:
        self.manager.worker_finished(uid, pod)
        if podview.is_static(pod):
            self.mirror_wake()  # as the agent: a static pod's mirror goes once it has stopped
        self._on_finished(uid)

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    async def start(self, pods: Callable[[], list[Pod]]) -> None:
        """As the agent starts: the PLEG's first relist, then the sources (`pods()`: what the source holds then),
        then the orphans no source wants. Until then the source is not read (`started`)."""
        while True:
            try:
                await self.pleg.relist()
                break
            except RuntimeError_:  # the agent fails its start; systemd starts it again (RestartSec=1)
                await self.clock.sleep(1.0)
        self._spawn("pleg-relist", self.pleg.run_relist())
        self._spawn("pleg-events", self.pleg.run_events())
        self.started = True
        self.set_pods(pods())
        for name, loop in self.loops:
            self._spawn(name, loop())
        self.stop_orphans_once_sources_seen()
        self._spawn("container-gc", self.gc.run())
        self._spawn("eviction-manager", self.eviction.run())
        self._spawn("orphan-sweep", self._orphan_sweep())
        self._spawn("housekeeping", self._housekeeping())
        for name, loop in self.resize.loops():
            self._spawn(name, loop())

    def stop_orphans_once_sources_seen(self) -> None:
        if self.started and self.orphans_pending and self.sources_seen():
            self.orphans_pending = False
            self.manager.adopt_orphans(self.pleg.runtime_uids)

    def set_pods(self, pods: list[Pod]) -> None:
        """Each pod to the source its config.source annotation names (a static file, or the API)."""
        if self.started:
            for source in SOURCES:
                self.config.set_source_pods(SCRIPTED_API_SOURCE if source == "api" else source,
                                            [p for p in pods if _source(p) == source])
            self.mirror_wake()  # as the agent after a static source's update

    def sweep_orphans(self) -> None:
        known = set(self.pleg.runtime_uids) | set(self.manager.desired) | set(self.workers.uids())
        # the machine's mounts are the FakeMounter's (the agent's sweep reads the host's mount table)
        cleanup_orphaned_pod_dirs(str(self.root), known, self.mounter)

    async def _orphan_sweep(self) -> None:
        while True:
            await self.clock.sleep(ORPHAN_SWEEP_PERIOD)
            if not self.orphans_pending:
                self.sweep_orphans()

    async def _housekeeping(self) -> None:
        while True:
            await self.clock.sleep(2.0)
            self.container_backoff.gc()
            self.manager.restart_unknown()
            if not self.orphans_pending:
                self.manager.kill_running_orphans(self.pleg.runtime_uids, self.pleg.running_uids, self.pleg.listed_from)

    async def crash(self) -> None:
        """kill -9: every task ends where it is; nothing is cleaned up."""
        tasks = [*self._tasks, *(w.task for w in (self.workers.get(u) for u in self.workers.uids())
                                 if w is not None and w.task is not None)]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
