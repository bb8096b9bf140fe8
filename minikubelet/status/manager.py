"""The one owner of pod status: the latest status of every pod the node knows, with versions.

Upstream's status manager (pkg/kubelet/status/status_manager.go) caches each pod's status with a version
that grows on every change; the API sync reads from it. Here it also serves `/pods`. Pod workers,
admission (rejected pods) and the pod manager (pods waiting for an older version) write to it; nothing
else keeps a copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minikubelet.base import podview
from minikubelet.base.podview import Pod
from minikubelet.metrics import Metrics
from minikubelet.status.terminate import terminated_pod_status

StatusListener = Callable[[Pod, dict[str, Any] | None], None]
"""Called after a pod's status changed (None: the pod is gone). The API sync plugs in here."""


@dataclass(frozen=True)
class VersionedStatus:
    pod: Pod
    status: dict[str, Any]
    version: int
    # set by terminate_pod at the end of the pod's termination (upstream podIsFinished): only then may a
    # pod the API server is deleting be deleted for good
    finished: bool = False
    at: float = 0.0  # `StatusManager.now` when this version was made (upstream versionedPodStatus.at)


class StatusManager:
    def __init__(self, now: Callable[[], float] = time.monotonic, metrics: Metrics | None = None) -> None:
        self.now = now
        self._metrics = metrics or Metrics()
        self._statuses: dict[str, VersionedStatus] = {}
        self._version = 0
        self._listeners: list[StatusListener] = []
        self._items: dict[str, tuple[VersionedStatus, dict[str, Any]]] = {}  # uid -> (entry, its /pods item)

    @property
    def version(self) -> int:
        """Grows whenever any pod's status (or the set of pods) changes."""
        return self._version

    def add_listener(self, listener: StatusListener) -> None:
        self._listeners.append(listener)

    def set_pod_status(self, pod: Pod, status: dict[str, Any]) -> None:
        self._update(pod, status, finished=False)

    def terminate_pod(self, pod: Pod) -> None:
        """upstream TerminatePod: the pod's final status (containers the runtime cannot show are failed, the
        phase terminal), marked finished and always written again, even when equal."""
        entry = self._statuses.get(podview.uid(pod))
        base = entry.status if entry is not None else pod.get("status")
        self._update(pod, terminated_pod_status(pod, base if isinstance(base, dict) else {}), finished=True)

    def _update(self, pod: Pod, status: dict[str, Any], finished: bool) -> None:
        status = normalize_status(pod, status)
        uid = podview.uid(pod)
        old = self._statuses.get(uid)
        # upstream updateStatusInternal: the start time never changes once set, the API's included (an agent
        # restart must not restart the pod's activeDeadlineSeconds)
        prev = old.status if old is not None else pod.get("status")
        start = prev.get("startTime") if isinstance(prev, dict) else None
        if isinstance(start, str) and start:
            status["startTime"] = start
        was_finished = old is not None and old.finished
        if old is not None and old.status == status and (was_finished or not finished):
            if old.pod is not pod:
                # A newer object of the pod (our own status write coming back through the watch, a label):
                # kept for `/pods`, but the status did not change, so its version stays and nothing is synced
                # (upstream updateStatusInternal skips an equal status). A drift in the API's copy is the
                # API sync's reconcile.
                self._version += 1
                self._statuses[uid] = VersionedStatus(pod, status, old.version, was_finished, old.at)
            return
        self._count_terminations(prev if isinstance(prev, dict) else {}, status)
        self._version += 1
        self._statuses[uid] = VersionedStatus(pod, status, self._version, finished or was_finished, self.now())
        for listener in self._listeners:
            listener(pod, status)

    def _count_terminations(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """kubelet_terminated_containers_total: each container whose status becomes terminated, once."""
        for key, container_type in (("initContainerStatuses", "init_container"), ("containerStatuses", "container"),
                                    ("ephemeralContainerStatuses", "ephemeral_container")):
            before = {s.get("name"): s for s in old.get(key) or []}
            for cs in new.get(key) or []:
                terminated = (cs.get("state") or {}).get("terminated")
                if terminated is None:
                    continue
                was = before.get(cs.get("name"))
                if was is None or "terminated" not in (was.get("state") or {}):
                    self._metrics.terminated_containers.labels(
                        container_type, str(terminated.get("exitCode", 0)), str(terminated.get("reason", ""))).inc()

    def get_pod_status(self, uid: str) -> dict[str, Any] | None:
        entry = self._statuses.get(uid)
        return entry.status if entry is not None else None

    def get(self, uid: str) -> VersionedStatus | None:
        return self._statuses.get(uid)

    def remove_pod(self, uid: str) -> None:
        entry = self._statuses.pop(uid, None)
        if entry is None:
            return
        self._version += 1
        for listener in self._listeners:
            listener(entry.pod, None)

    def statuses(self) -> list[VersionedStatus]:
        return list(self._statuses.values())

    def pod_list(self) -> list[dict[str, Any]]:
        """Every known pod as a v1 Pod with its status, sorted by namespace and name. Each pod's item is built
        once per status entry and handed out again while the entry stands (readers must not change it), so
        `/pods` can keep each item's JSON."""
        items: dict[str, tuple[VersionedStatus, dict[str, Any]]] = {}
        for uid, entry in self._statuses.items():
            known = self._items.get(uid)
            if known is not None and known[0] is entry:
                items[uid] = known
                continue
            item = {k: v for k, v in entry.pod.items() if k != "status"}
            item.setdefault("apiVersion", "v1")
            item.setdefault("kind", "Pod")
            item["status"] = entry.status
            items[uid] = (entry, item)
        self._items = items
        return sorted((item for _, item in items.values()),
                      key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"].get("name", "")))


MAX_POD_TERMINATION_MESSAGE = 12 * 1024  # upstream MaxPodTerminationMessageLogLength


def normalize_status(pod: Pod, status: dict[str, Any]) -> dict[str, Any]:
    """Upstream normalizeStatus: the pod's termination messages share 12 KiB evenly between its containers
    (ephemeral ones included); regular and ephemeral container statuses are sorted by name, init container
    statuses in spec order."""
    inits = podview.init_containers(pod)
    count = len(inits) + len(podview.app_containers(pod)) + len(podview.ephemeral_containers(pod))
    per_container = MAX_POD_TERMINATION_MESSAGE // count if count else MAX_POD_TERMINATION_MESSAGE
    out = dict(status)
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        statuses = out.get(key)
        if not isinstance(statuses, list):
            continue
        fixed = [_cap_messages(cs, per_container) for cs in statuses]
        if key != "initContainerStatuses":
            fixed.sort(key=lambda cs: str(cs.get("name", "")))
        else:
            order = {str(c.get("name")): i for i, c in enumerate(inits)}
            fixed.sort(key=lambda cs: order.get(str(cs.get("name", "")), len(order)))
        out[key] = fixed
    return out


def _cap_messages(cs: Any, limit: int) -> Any:
    if not isinstance(cs, dict):
        return cs
    out = cs
    for state_key in ("state", "lastState"):
        state = cs.get(state_key)
        term = state.get("terminated") if isinstance(state, dict) else None
        msg = term.get("message") if isinstance(term, dict) else None
        if isinstance(msg, str) and len(msg.encode()) > limit:
            cut = msg.encode()[:limit].decode(errors="ignore")
            out = {**out, state_key: {**state, "terminated": {**term, "message": cut}}}  # type: ignore[dict-item]
    return out
