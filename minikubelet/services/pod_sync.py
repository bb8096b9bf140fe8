"""The pod sync machinery's two ends as node services: the PLEG (its first relist is the first thing the agent
learns, before any source is read) and the pod workers (stopped before the API client goes, since their syncs
read ConfigMaps, Secrets and tokens through it)."""

from __future__ import annotations

from collections.abc import Sequence

from minikubelet.runtime.pleg import PLEG
from minikubelet.services.service import Loop, Service
from minikubelet.worker.sync import PodSyncer
from minikubelet.worker.workers import PodWorkers


class PlegService(Service):
    name = "pleg"

    def __init__(self, pleg: PLEG, syncer: PodSyncer | None = None) -> None:
        self.pleg = pleg
        if syncer is not None:  # the pod workers' resyncs read what this PLEG's relists confirm
            syncer.relist_confirms = pleg.confirms

    async def start(self) -> None:
        # First learn what already runs, then what is wanted, then stop what is no longer wanted.
        await self.pleg.relist()

    def loops(self) -> Sequence[Loop]:
        return [("pleg-relist", self.pleg.run_relist), ("pleg-events", self.pleg.run_events)]


class PodWorkersService(Service):
    name = "pod-workers"

    def __init__(self, workers: PodWorkers) -> None:
        self.workers = workers

    async def stop(self) -> None:
        await self.workers.shutdown()  # the workers stop; their pods keep running
