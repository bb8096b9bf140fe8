"""The joined node's pods as a node service: the pods bound to the node (the API source), the Node they are
admitted against, the objects their containers read (ConfigMaps, Secrets, Services, tokens), their statuses back
to the API server and the mirror pods of the static pods. Imported only when joined: the API client is heavy for a
standalone agent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.kubeapi.informer import Informer
from minikubelet.kubeapi.object_cache import ObjectCache
from minikubelet.kubeapi.rest import RestClient
from minikubelet.kubeapi.token_manager import TokenManager
from minikubelet.metrics import Metrics
from minikubelet.node.labels import Node
from minikubelet.node.lister import Json, NodeLister
from minikubelet.node.status_updater import NodeStatusUpdater
from minikubelet.pod.manager import PodManager
from minikubelet.pod.mirror import MirrorPods, StaticPod, is_mirror_of, is_static_pod
from minikubelet.services.service import Loop, Service
from minikubelet.sources.apiserver import ApiserverPodSource
from minikubelet.status.api_sync import PodStatusSync
from minikubelet.status.manager import StatusManager
from minikubelet.worker.containers import Containers
from minikubelet.worker.pod_objects import CONFIGMAP, SECRET, PodObjectSource, waker
from minikubelet.worker.workers import PodWorkers

log = logging.getLogger("minikubelet.agent")


class ApiPods(Service):
    name = "api-pods"

    def __init__(self, client: RestClient, node_name: str, clock: Clock, max_pods: int, manager: PodManager,
                 workers: PodWorkers, statuses: StatusManager, containers: Containers,
                 set_source_pods: Callable[[str, list[Pod]], None], pod_terminated: Callable[[str], bool],
                 node_status: NodeStatusUpdater | None, on_node: Callable[[Json], None] | None,
                 metrics: Metrics | None = None) -> None:
        metrics = metrics or Metrics()
        self._manager = manager
        self._workers = workers
        self._refetches: set[asyncio.Task[None]] = set()
        self.node_lister = NodeLister(client, node_name, clock)
        if on_node is not None:
            self.node_lister.on_object = on_node
        if node_status is not None:
            node_status.cached = self.node_lister.current_object  # the status update's first read (as upstream)
        manager.refetch_node = self._refetch_node
        # the kubelet's service informer: every Service with a cluster IP, for the pods' service env
        self.services = Informer(client, "/api/v1/services", clock, field_selector="spec.clusterIP!=None")
        def object_changed(uid: str) -> None:
            # a pod waiting for the object starts now, not at the end of its sync back-off
            workers.wake(uid, urgent=True)

        self.objects = PodObjectSource(
            ObjectCache(client, "configmaps", CONFIGMAP, clock,
                        on_change=waker(lambda: containers.objects, object_changed, CONFIGMAP)),
            ObjectCache(client, "secrets", SECRET, clock,
                        on_change=waker(lambda: containers.objects, object_changed, SECRET)),
            self.services, TokenManager(client, clock))
        containers.objects = self.objects
        self.mirrors = MirrorPods(client, clock, node_name, lambda: static_pods(manager, workers))
        manager.mirror_count = lambda: len(self.mirrors.mirrors)
        self.source = ApiserverPodSource(client, node_name, clock, set_source_pods, max_pods=10 * max(max_pods, 1),
                                         mirrors=self.mirrors.set_mirror_pods,
                                         startup=metrics.pod_startup)
        self.status_sync = PodStatusSync(client, clock, statuses, pod_terminated,
                                         source_pod=lambda pod: source_api_pod(self.source, self.mirrors, pod),
                                         metrics=metrics)

    def loops(self) -> Sequence[Loop]:
        return [("node-lister", self.node_lister.run), ("api-pods", self._run_source),
                ("services", self.services.run), ("pod-status-sync", self.status_sync.run),
                ("mirror-pods", self.mirrors.run)]

    async def stop(self) -> None:
        for task in list(self._refetches):
            task.cancel()
        await asyncio.gather(*self._refetches, return_exceptions=True)
        self.objects.close()

    def admission_node(self) -> Node | None:
        """The Node as the API server has it (labels and taints changed later included, the allocatable it
        reports); None before the first list."""
        return self.node_lister.get()

    async def _run_source(self) -> None:
        # As upstream's apiserver source: the pods are watched once the node's own object has synced, so
        # the first pods are admitted against the Node's real labels and taints.
        await self.node_lister.synced.wait()
        await self.source.run()

    def _refetch_node(self, uid: str) -> None:
        task = asyncio.get_running_loop().create_task(self._refetch_node_then_readmit(uid), name="node-refetch")
        self._refetches.add(task)
        task.add_done_callback(self._refetches.discard)

    async def _refetch_node_then_readmit(self, uid: str) -> None:
        try:
            await self.node_lister.refresh()
        except Exception as e:  # upstream: the failure stands as it was
            log.warning("reading the node for admission failed", extra={"kv": {"err": str(e) or type(e).__name__}})
        self._manager.readmit(uid)


def source_api_pod(source: ApiserverPodSource, mirrors: MirrorPods, pod: Pod) -> Pod | None:
    """The API object of a pod as the API source last received it; a static pod's is its mirror pod."""
    if is_static_pod(pod):
        mirror = mirrors.mirrors.get(podview.full_name(pod))
        return mirror if mirror is not None and is_mirror_of(mirror, pod) else None
    return source.pod(podview.uid(pod))


def static_pods(manager: PodManager, workers: PodWorkers) -> list[StaticPod]:
    """Static pods wanted or still stopping, for their mirror pods; those without a worker (refused, or waiting
    behind an older pod of their name) are not started."""
    out: dict[str, StaticPod] = {}
    for uid, pod in [*manager.desired.items(), *((w, p) for w, p in zip(workers.uids(), workers.pods(), strict=True))]:
        if uid in out or not is_static_pod(pod):
            continue
        w = workers.get(uid)
        out[uid] = StaticPod(pod, terminating=w is not None and w.terminating, started=w is not None)
    return list(out.values())
