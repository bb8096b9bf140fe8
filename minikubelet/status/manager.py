"""The one owner of pod status: the latest status of every pod the node knows, with versions.

Upstream's status manager (pkg/kubelet/status/status_manager.go) caches each pod's status with a version
that grows on every change; the API sync reads from it. Here it also serves `/pods`. Pod workers,
admission (rejected pods) and the pod manager (pods waiting for an older version) write to it; nothing
else keeps a copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minikubelet.base import podview
from minikubelet.base.podview import Pod

StatusListener = Callable[[Pod, dict[str, Any] | None], None]
"""Called after a pod's status changed (None: the pod is gone). The API sync plugs in here."""


@dataclass(frozen=True)
class VersionedStatus:
    pod: Pod
    status: dict[str, Any]
    version: int


class StatusManager:
    def __init__(self) -> None:
        self._statuses: dict[str, VersionedStatus] = {}
        self._version = 0
        self._listeners: list[StatusListener] = []

    @property
    def version(self) -> int:
        """Grows whenever any pod's status (or the set of pods) changes."""
        return self._version

    def add_listener(self, listener: StatusListener) -> None:
        self._listeners.append(listener)

    def set_pod_status(self, pod: Pod, status: dict[str, Any]) -> None:
        uid = podview.uid(pod)
        old = self._statuses.get(uid)
        if old is not None and old.status == status and old.pod is pod:
            return
        self._version += 1
        self._statuses[uid] = VersionedStatus(pod, status, self._version)
        for listener in self._listeners:
            listener(pod, status)

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
        """Every known pod as a v1 Pod with its status, sorted by namespace and name."""
        out = []
        for entry in self._statuses.values():
            item = {k: v for k, v in entry.pod.items() if k != "status"}
            item.setdefault("apiVersion", "v1")
            item.setdefault("kind", "Pod")
            item["status"] = entry.status
            out.append(item)
        return sorted(out, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"].get("name", "")))
