"""The agent's pod stack (pod manager, pod workers, syncer, status manager) on the in-memory FakeRuntime and a
FakeClock, for unit tests that drive whole pod lifecycles without Docker or real time."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cri.fake import FakeRuntime
from minikubelet.api.defaults import apply_defaults
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.pod.admission import MaxPodsAdmitHandler
from minikubelet.pod.manager import PodManager
from minikubelet.runtime.pleg import PLEG
from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint
from minikubelet.sources.merge import PodConfig
from minikubelet.status.manager import StatusManager
from minikubelet.worker.backoff import (
    CONTAINER_BACKOFF_INITIAL,
    CONTAINER_BACKOFF_MAX,
    IMAGE_BACKOFF_INITIAL,
    IMAGE_BACKOFF_MAX,
    Backoff,
)
from minikubelet.worker.containers import Containers
from minikubelet.worker.dependencies import ProbeSource
from minikubelet.worker.dns import DNSSettings
from minikubelet.worker.gc import ContainerGC
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.sync import PodSyncer
from minikubelet.worker.workers import PodWorker, PodWorkers

IMAGE = "busybox:1.36"


def make_pod(name: str = "p", uid: str = "uid-1", containers: list[dict[str, Any]] | None = None,
             inits: list[dict[str, Any]] | None = None, **spec: Any) -> Pod:
    s: dict[str, Any] = {"containers": containers or [{"name": "app", "image": IMAGE}], **spec}
    if inits:
        s["initContainers"] = inits
    pod: Pod = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "uid": uid,
                             "annotations": {"kubernetes.io/config.source": "file"}},
                "spec": s}
    return apply_defaults(copy.deepcopy(pod))


class FakeNode:
    def __init__(self, root: Path, max_pods: int = 110, runtime: FakeRuntime | None = None,
                 dns: DNSSettings | None = None, probes: ProbeSource | None = None) -> None:
        """`runtime`: the engine of an earlier agent, to start a new agent on it; `dns`: the pods' DNS settings
        (None: the runtime's default); `probes`: the prober (None: no probe runs)."""
        self.runtime = runtime or FakeRuntime(FakeClock(), images=[IMAGE])
        assert isinstance(self.runtime.clock, FakeClock)
        self.clock: FakeClock = self.runtime.clock
        self.recorder = EventRecorder(self.clock, "node-1")
        self.metrics = Metrics(now=self.clock.now)
        self.statuses = StatusManager(self.clock.monotonic, self.metrics)
        self.container_backoff = Backoff(self.clock, CONTAINER_BACKOFF_INITIAL, CONTAINER_BACKOFF_MAX)
        image_backoff = Backoff(self.clock, IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX)
        self.images = images = ImagePuller(self.runtime, image_backoff, self.recorder, self.metrics, self.clock)
        containers = Containers(self.runtime, self.clock, self.recorder, self.metrics, self.container_backoff,
                                images, None, str(root), str(root / "logs"), "10.0.0.1",
                                legacy_log_dir=str(root / "containers"), dns=dns)
        self.syncer = PodSyncer(self.runtime, self.clock, self.recorder, self.metrics, containers, images,
                                self.container_backoff, self.statuses, probes, str(root), "10.0.0.1")
        self.syncer.container_id_scheme = self.runtime.runtime_version.container_id_scheme
        self.finished: list[str] = []
        self.workers = PodWorkers(self._worker, on_finished=self._finished)
        self.manager = PodManager(self.workers, self.statuses, [MaxPodsAdmitHandler(max_pods)], self.clock,
                                  self.recorder, metrics=self.metrics)
        self.config = PodConfig(self.manager.handle)
        self.gc = ContainerGC(self.runtime, self.clock, containers.logs, self.workers.uids)
        self.pleg = PLEG(self.runtime, self.clock, self.metrics, self.workers.wake, changed=self.workers.runtime_changed)
        self._pleg_task = asyncio.get_running_loop().create_task(self.pleg.run_events())

    def _worker(self, pod: Pod, adopted: bool) -> PodWorker:
        return PodWorker(pod, self.syncer, self.clock, self.metrics, resync_period=10.0, adopted=adopted)

    def _finished(self, uid: str, pod: Pod) -> None:
        self.finished.append(uid)
        self.manager.worker_finished(uid, pod)

    async def settle(self, rounds: int = 200) -> None:
        """Let every task run until nothing is left to do at this (fake) instant; a resource checkpoint's write (on a
        thread, which a pod sync waits for before it acts) counts as something to do."""
        while True:
            for _ in range(rounds):
                await asyncio.sleep(0)
            writing = [c for c in self._checkpoints() if c.writing]
            if not writing:
                return
            for checkpoint in writing:
                await checkpoint.durable()

    def _checkpoints(self) -> list[PodResourceCheckpoint]:
        """The allocated and actuated records, once a resize service (tests/unit/pod/test_allocation.py) set them."""
        allocation = self.manager.allocation
        return [c for c in (allocation.state if allocation is not None else None, self.syncer.actuated) if c is not None]

    async def advance(self, seconds: float, step: float = 1.0) -> None:
        """Move the fake clock forward in steps, letting the workers act at each step."""
        left = seconds
        while left > 0:
            d = min(step, left)
            self.clock.advance(d)
            left -= d
            await self.settle()

    def phase(self, uid: str = "uid-1") -> str | None:
        s = self.statuses.get_pod_status(uid)
        return None if s is None else s.get("phase")

    def container_state(self, name: str, uid: str = "uid-1") -> dict[str, Any]:
        s = self.statuses.get_pod_status(uid) or {}
        for cs in ((s.get("initContainerStatuses") or []) + (s.get("containerStatuses") or [])
                   + (s.get("ephemeralContainerStatuses") or [])):
            if cs["name"] == name:
                return dict(cs)
        raise KeyError(name)

    def events(self, uid: str = "uid-1") -> list[tuple[str, str]]:
        return [(e["reason"], e["message"]) for e in self.recorder.list(uid)]

    async def close(self) -> None:
        await self.workers.shutdown()
        for checkpoint in self._checkpoints():
            await checkpoint.durable()
        self._pleg_task.cancel()
        await asyncio.gather(self._pleg_task, return_exceptions=True)


@contextlib.asynccontextmanager
async def running_node(root: Path, **options: Any) -> AsyncIterator[FakeNode]:
    """A FakeNode for one test, closed afterwards (`options` as FakeNode takes them)."""
    node = FakeNode(root, **options)
    try:
        yield node
    finally:
        await node.close()
