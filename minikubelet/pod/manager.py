"""Desired pods from every source, one worker per pod, and the statuses they publish."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from cri.types import ANNOTATION_GRACE_PERIOD, LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID
from minikubelet.base import podview
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod
from minikubelet.worker.workers import PodWorker, WorkerContext

log = logging.getLogger("minikubelet.pod.manager")


class PodManager:
    def __init__(self, make_ctx: Callable[[Callable[[Pod, dict[str, Any] | None], None]], WorkerContext],
                 max_pods: int = 110) -> None:
        self.ctx = make_ctx(self._publish)
        self.max_pods = max_pods
        self.workers: dict[str, PodWorker] = {}
        self.desired: dict[str, Pod] = {}  # uid -> pod, over all sources
        self._by_source: dict[str, dict[str, Pod]] = {}
        self._waiting: dict[str, Pod] = {}  # uid -> pod blocked behind an older pod of the same full name
        self.statuses: dict[str, tuple[Pod, dict[str, Any]]] = {}
        self._rejected: dict[str, tuple[Pod, dict[str, Any]]] = {}
        self.sources_ready: set[str] = set()
        self._closing = False

    # --- sources --------------------------------------------------------------------------
    def set_source_pods(self, source: str, pods: list[Pod]) -> None:
        """A full snapshot of one source's pods (the kubelet's SET operation)."""
        self._by_source[source] = {podview.uid(p): p for p in pods}
        self.sources_ready.add(source)
        desired: dict[str, Pod] = {}
        for src in sorted(self._by_source):
            for uid, p in self._by_source[src].items():
                desired.setdefault(uid, p)
        removed = [uid for uid in self.desired if uid not in desired]
        self.desired = desired
        for uid in removed:
            self._waiting.pop(uid, None)
            self._rejected.pop(uid, None)
            w = self.workers.get(uid)
            if w is not None and not w.terminating:
                log.info("pod removed from source", extra={"kv": {"pod": podview.format_pod(w.pod)}})
                w.terminate()
        for uid, p in desired.items():
            w = self.workers.get(uid)
            if w is not None:
                if w.pod != p and not w.terminating:
                    w.update(p)
            else:
                self._admit(p)

    def _active_count(self) -> int:
        return sum(1 for w in self.workers.values() if not w.terminating)

    def _admit(self, pod: Pod) -> None:
        uid = podview.uid(pod)
        if uid in self._rejected:
            return
        blocker = next(
            (w for w in self.workers.values() if podview.full_name(w.pod) == podview.full_name(pod)), None
        )
        if blocker is not None:
            # Like the kubelet, a new version of a static pod waits until the old one has stopped.
            self._waiting[uid] = pod
            if not blocker.terminating:
                blocker.terminate()
            return
        if self._active_count() >= self.max_pods:
            self._reject(pod, "OutOfpods",
                         f"Node didn't have enough resource: pods, requested: 1, used: {self._active_count()}, "
                         f"capacity: {self.max_pods}")
            return
        self._start_worker(pod)

    def _reject(self, pod: Pod, reason: str, message: str) -> None:
        status = {"phase": "Failed", "reason": reason, "message": message,
                  "startTime": rfc3339(self.ctx.clock.now())}
        self._rejected[podview.uid(pod)] = (pod, status)
        self.ctx.recorder.pod_event(pod, "Warning", reason, message)
        log.warning("pod rejected", extra={"kv": {"pod": podview.format_pod(pod), "reason": reason}})

    def _start_worker(self, pod: Pod, adopted: bool = False) -> PodWorker:
        w = PodWorker(self.ctx, pod, adopted=adopted)
        uid = podview.uid(pod)
        self.workers[uid] = w

        def done(_t: asyncio.Task[None]) -> None:
            self._worker_done(uid)

        w.start().add_done_callback(done)
        return w

    def _worker_done(self, uid: str) -> None:
        w = self.workers.pop(uid, None)
        if w is None:
            return
        full = podview.full_name(w.pod)
        for wuid, p in list(self._waiting.items()):
            if podview.full_name(p) == full and wuid in self.desired:
                del self._waiting[wuid]
                self._admit(p)
                break
        if not self._closing and uid in self.desired and uid not in self.workers:
            # The worker ended without being asked to (a crash): run the pod again.
            self._start_worker(self.desired[uid], adopted=True)

    # --- runtime adoption -----------------------------------------------------------------
    def adopt_orphans(self, runtime_uids: dict[str, dict[str, str]]) -> None:
        """Stop pods the runtime runs that no source wants (removed while the agent was down)."""
        for uid, labels in runtime_uids.items():
            if uid in self.desired or uid in self.workers:
                continue
            try:
                grace = int(labels.get("annotation." + ANNOTATION_GRACE_PERIOD, labels.get(ANNOTATION_GRACE_PERIOD, "30")))
            except ValueError:
                grace = 30
            pod: Pod = {
                "metadata": {"name": labels.get(LABEL_POD_NAME, uid), "namespace": labels.get(LABEL_POD_NAMESPACE, "default"),
                             "uid": labels.get(LABEL_POD_UID, uid)},
                "spec": {"containers": [], "terminationGracePeriodSeconds": grace},
            }
            log.info("stopping orphaned pod", extra={"kv": {"pod": podview.format_pod(pod)}})
            w = self._start_worker(pod, adopted=True)
            w.terminate()

    def wake(self, uid: str) -> None:
        w = self.workers.get(uid)
        if w is not None:
            w.wake()

    def wake_all(self) -> None:
        for w in self.workers.values():
            w.wake()

    # --- status ---------------------------------------------------------------------------
    def _publish(self, pod: Pod, status: dict[str, Any] | None) -> None:
        uid = podview.uid(pod)
        if status is None:
            self.statuses.pop(uid, None)
        else:
            self.statuses[uid] = (pod, status)

    def pod_list(self) -> list[dict[str, Any]]:
        out = []
        for pod, status in list(self.statuses.values()) + list(self._rejected.values()):
            item = {k: v for k, v in pod.items() if k != "status"}
            item.setdefault("apiVersion", "v1")
            item.setdefault("kind", "Pod")
            item["status"] = status
            out.append(item)
        for uid, pod in self._waiting.items():
            if uid not in self.statuses:
                item = {k: v for k, v in pod.items() if k != "status"}
                item["status"] = {"phase": "Pending"}
                out.append(item)
        return sorted(out, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"].get("name", "")))

    async def shutdown(self) -> None:
        """Stop the workers without stopping any pod: the pods outlive the agent."""
        self._closing = True
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
