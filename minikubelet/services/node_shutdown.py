"""Graceful node shutdown as a node service: the logind inhibitor's manager, with the pods it kills, the kill it asks
the pod workers for and the node status it pushes out at once. Built only when enabled (off by default, as upstream),
so dbus-fast is loaded only then."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig, feature_enabled
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.services.service import Loop, Service
from minikubelet.worker.lifecycle import KillPodOptions, PodLifecycle, PodStatusFn
from minikubelet.worker.workers import PodWorkers

if TYPE_CHECKING:
    from minikubelet.node.status_updater import NodeStatusUpdater
    from minikubelet.nodeshutdown.manager import NodeShutdownManager


class NodeShutdownService(Service):
    name = "node-shutdown"

    def __init__(self) -> None:
        self.manager: NodeShutdownManager | None = None  # set by node_shutdown()
        self.node_status: Callable[[], NodeStatusUpdater | None] = lambda: None  # joined: set once registered
        self._status_tasks: set[asyncio.Task[None]] = set()

    def loops(self) -> Sequence[Loop]:
        assert self.manager is not None
        return [("node-shutdown", self.manager.run)]

    def errors(self) -> tuple[str, ...]:
        return self.manager.errors() if self.manager is not None else ()

    async def stop(self) -> None:
        for task in list(self._status_tasks):
            task.cancel()
        await asyncio.gather(*self._status_tasks, return_exceptions=True)

    def sync_node_status_now(self) -> None:
        """The Node's Ready condition goes out at once when the shutdown starts, not at the next update period."""
        updater = self.node_status()
        if updater is None:
            return
        task = asyncio.get_running_loop().create_task(updater.sync(), name="node-status-shutdown")
        self._status_tasks.add(task)
        task.add_done_callback(self._status_tasks.discard)


def node_shutdown(config: KubeletConfig, clock: Clock, recorder: EventRecorder, workers: PodWorkers,
                  statuses_written: Callable[[Sequence[Pod]], bool],
                  metrics: Metrics | None = None) -> NodeShutdownService | None:
    """The graceful node shutdown service; None when off (the gate, or no grace configured: the default)."""
    from minikubelet.nodeshutdown.groups import shutdown_periods

    periods = shutdown_periods(config, feature_enabled(config, "GracefulNodeShutdownBasedOnPodPriority"))
    if not feature_enabled(config, "GracefulNodeShutdown") or not periods:
        return None
    from minikubelet.nodeshutdown.logind import LOGIND_CONF_DIR, Logind
    from minikubelet.nodeshutdown.manager import NodeShutdownManager
    from minikubelet.nodeshutdown.state import ShutdownState

    def shutdown_pods() -> list[Pod]:
        """Pods not yet terminated (upstream GetActivePods, as the shutdown manager sees them)."""
        return [w.pod for uid in workers.uids()
                if (w := workers.get(uid)) is not None and w.lifecycle is not PodLifecycle.TERMINATED]

    # MKL_LOGIND_CONF_DIR: where the InhibitDelayMaxSec drop-in goes when logind is a test's double
    conf_dir = os.environ.get("MKL_LOGIND_CONF_DIR") or LOGIND_CONF_DIR
    service = NodeShutdownService()
    service.manager = NodeShutdownManager(
        periods, clock, shutdown_pods, shutdown_kill(workers), recorder.node_event, recorder.pod_event, service.sync_node_status_now,
        lambda: Logind.connect(conf_dir), statuses_written)
    if metrics is not None and feature_enabled(config, "GracefulNodeShutdownBasedOnPodPriority"):
        # upstream keeps the record only with the priority-based shutdown, its gauges' condition
        service.manager.state = ShutdownState(config.root_dir, metrics)
        service.manager.state.restore()
    return service


def shutdown_kill(workers: PodWorkers) -> Callable[[Pod, int, PodStatusFn], asyncio.Event]:
    """The shutdown manager's kill through the pod workers; its event is set once nothing of the pod runs. The
    pods were listed when the shutdown began: one whose worker has finished since (removed from its source while
    a lower group stopped) is done, not handed to a new worker, which would write a status for a pod gone."""

    def kill(pod: Pod, grace: int, status_fn: PodStatusFn) -> asyncio.Event:
        done = asyncio.Event()
        if workers.get(podview.uid(pod)) is None:
            done.set()
            return done
        workers.update_pod(pod, kill=KillPodOptions(grace_override=grace, status_fn=status_fn, completed=done))
        return done

    return kill


def pods_written(written: Callable[[str], bool] | None, pods: Sequence[Pod]) -> bool:
    """Whether the API has every pod's last status (always, standalone)."""
    return written is None or all(written(podview.uid(p)) for p in pods)
