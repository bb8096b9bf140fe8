"""Keeping the Node's status current (upstream kubelet_node_status.go syncNodeStatus / updateNodeStatus).

Every `nodeStatusUpdateFrequency` (jittered by 4 %) the status is computed on a copy of the Node as the
API server has it: on the first try the Node in the node informer's cache (`cached`, upstream reads
`nodeLister`), so an idle node sends no GET; a retry, or a first try before the cache has the Node, GETs
it (upstream: retries are served from the API server); it is sent as a strategic merge PATCH to `nodes/<name>/status` only when something
other than the heartbeat times changed, or when `nodeStatusReportFrequency` passed since the last report
(the first report after a change or a start is shifted by a random ±50 % of that period, as upstream
spreads nodes' reports). Five attempts per round. The Node is registered once per process (upstream's
registrationCompleted): one deleted with `kubectl delete node` stays gone, each round failing with not found,
until the agent restarts.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.patch import node_status_patch
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError
from minikubelet.node.labels import LABEL_ARCH, LABEL_OS, NODE_OS, go_arch
from minikubelet.node.registration import NodeRegistration
from minikubelet.node.status import NodeStatusInputs, node_status_has_changed, set_node_status

log = logging.getLogger("minikubelet.node.status")
Json = dict[str, Any]

NODE_STATUS_UPDATE_RETRY = 5
JITTER = 0.04
_QUERY = {"timeout": "10s"}


class NodeStatusUpdater:
    def __init__(self, client: RestClient, clock: Clock, registration: NodeRegistration,
                 inputs: Callable[[], Awaitable[NodeStatusInputs]], *, update_frequency: float = 10.0,
                 report_frequency: float = 300.0, record: Callable[[str, str], None] | None = None) -> None:
        self.client = client
        self.clock = clock
        self.registration = registration
        self.inputs = inputs
        self.record = record  # (type, reason) of a condition's transition, as upstream recordNodeStatusEvent
        self.update_frequency = update_frequency
        self.report_frequency = report_frequency
        self.registered = False
        self.node: Json | None = None  # the Node as the API server last returned it
        self.last_report: float | None = None  # monotonic
        self.delay_after_change = 0.0
        self.patches = 0
        self.cached: Callable[[], Json | None] = lambda: None  # the node informer's Node, when there is one
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Sync now, not at the end of the period: the node just turned ready (upstream fastStatusUpdateOnce
        reports that at once)."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            await self.sync()
            sleep = asyncio.ensure_future(self.clock.sleep(self.update_frequency * (1 + random.random() * JITTER)))
            woken = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({sleep, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in (sleep, woken):
                    t.cancel()
                await asyncio.gather(sleep, woken, return_exceptions=True)

    async def sync(self) -> None:
        if not self.registered:
            self.node = await self.registration.register()
            self.registered = True
        for attempt in range(NODE_STATUS_UPDATE_RETRY):
            try:
                await self.try_update(attempt)
                return
            except (ApiError, TransportError) as e:
                log.warning("error updating node status, will retry", extra={"kv": {"err": str(e)}})
        log.error("update node status exceeds retry count")

    def _period_expired(self) -> bool:
        if self.last_report is None:
            return True
        return self.clock.monotonic() - self.last_report >= self.report_frequency + self.delay_after_change

    async def try_update(self, attempt: int) -> None:
        cached = self.cached() if attempt == 0 else None
        original = cached if cached is not None else await self.client.get(self.registration.path)
        node = copy.deepcopy(original)
        labels = node.setdefault("metadata", {}).setdefault("labels", {})
        labels_missing = labels.get(LABEL_OS) != NODE_OS or labels.get(LABEL_ARCH) != go_arch()
        labels[LABEL_OS], labels[LABEL_ARCH] = NODE_OS, go_arch()
        for kind, reason in set_node_status(node, await self.inputs(), self.clock.now()):
            if self.record is not None:
                self.record(kind, reason)
        changed = labels_missing or node_status_has_changed(original.get("status") or {}, node["status"])
        if not (changed or self._period_expired()):
            self.node = original
            return
        if changed or self.last_report is None:
            self.delay_after_change = self.report_frequency * (-0.5 + random.random())
        else:
            self.delay_after_change = 0.0
        self.node = await self.client.request("PATCH", f"{self.registration.path}/status", query=_QUERY,
                                              body=node_status_patch(original, node),
                                              content_type="application/strategic-merge-patch+json")
        self.patches += 1
        self.last_report = self.clock.monotonic()
        if self.registration.startup is not None and _ready(self.node):
            self.registration.startup.node_ready()


def _ready(node: Json) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])
