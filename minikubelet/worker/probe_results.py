"""Connects the probes package to the pod worker: workers follow running containers, results by container id."""

from __future__ import annotations

from cri.types import ContainerStatus
from minikubelet.base.podview import PodView
from probes.manager import ProbeManager
from probes.result import ProbeKind, ProbeResults, Result

__all__ = ["ManagerProbeSource", "ProbeResults"]


class ManagerProbeSource:
    """Implements the pod worker's ProbeSource over a ProbeManager."""

    def __init__(self, manager: ProbeManager) -> None:
        self.manager = manager

    def update_pod(self, pod: PodView, pod_ip: str, running: dict[str, ContainerStatus]) -> None:
        self.manager.update_pod(
            pod, pod_ip, {name: c.id for name, c in running.items()},
            {name: c.started_at for name, c in running.items() if c.started_at},
        )

    def stop_liveness_and_startup(self, uid: str) -> None:
        self.manager.stop_liveness_and_startup(uid)

    def remove_pod(self, uid: str) -> None:
        self.manager.remove_pod(uid)

    def results(self, uid: str) -> ProbeResults:
        by_kind: dict[ProbeKind, dict[str, Result]] = {k: {} for k in ProbeKind}
        cache = self.manager.results
        for pod_uid, name, kind in cache.keys():
            if pod_uid != uid:
                continue
            entry = cache.get(pod_uid, name, kind)
            if entry is not None:
                by_kind[kind][entry.container_id] = entry.result
        return ProbeResults(
            startup=by_kind[ProbeKind.STARTUP],
            liveness=by_kind[ProbeKind.LIVENESS],
            readiness=by_kind[ProbeKind.READINESS],
        )
