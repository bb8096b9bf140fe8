"""The node lease: `coordination.k8s.io/v1` Lease `kube-node-lease/<node>`, the node's heartbeat
(upstream component-helpers/apimachinery/lease controller, as the kubelet's nodelease runs it).

Every renew interval (a quarter of `nodeLeaseDurationSeconds`, jittered by 4 %) the last lease we wrote
is PUT back with a new renewTime. When that fails, the lease is read (and created if missing) with a
backoff of 200 ms doubling to 7 s, then updated; a 409 re-reads it. The owner reference to the Node is
set once the Node exists; until then the lease is not created, as upstream. An existing lease is renewed
whether or not the Node can be read (upstream's update ignores the owner hook's error), so after
`kubectl delete node` it keeps being renewed until the garbage collector removes it with its owner.
"""

from __future__ import annotations

import copy
import logging
import random
from datetime import UTC, datetime
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError

log = logging.getLogger("minikubelet.node.lease")
Json = dict[str, Any]

NAMESPACE = "kube-node-lease"
MAX_UPDATE_RETRIES = 5
MAX_BACKOFF = 7.0
RENEW_FRACTION = 0.25
JITTER = 0.04
_QUERY = {"timeout": "10s"}


def micro_time(ts: float) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeLease:
    def __init__(self, client: RestClient, clock: Clock, node_name: str, duration_seconds: int = 40) -> None:
        self.client = client
        self.clock = clock
        self.node_name = node_name
        self.duration = duration_seconds
        self.renew_interval = duration_seconds * RENEW_FRACTION
        self.latest: Json | None = None
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"

    async def run(self) -> None:
        while True:
            await self.sync()
            await self.clock.sleep(self.renew_interval * (1 + random.random() * JITTER))

    async def sync(self) -> None:
        if self.latest is not None:
            try:
                await self._retry_update(self.latest)
                return
            except (ApiError, TransportError) as e:
                log.info("failed to update lease using latest lease, fallback to ensure lease",
                         extra={"kv": {"err": str(e)}})
        lease, created = await self._backoff_ensure()
        self.latest = lease
        if lease is not None and not created:
            try:
                await self._retry_update(lease)
            except (ApiError, TransportError) as e:
                log.warning("will retry updating lease", extra={"kv": {"err": str(e), "interval": self.renew_interval}})

    async def _backoff_ensure(self) -> tuple[Json | None, bool]:
        sleep = 0.1
        while True:
            try:
                return await self._ensure()
            except (ApiError, TransportError) as e:
                sleep = min(2 * sleep, MAX_BACKOFF)
                log.warning("failed to ensure lease exists, will retry", extra={"kv": {"err": str(e), "in": sleep}})
                await self.clock.sleep(sleep)

    async def _ensure(self) -> tuple[Json | None, bool]:
        try:
            return await self.client.get(f"{self.path}/{self.node_name}", _QUERY), False
        except ApiError as e:
            if not e.not_found:
                raise
        lease = await self._new_lease(None)
        if lease is None:
            return None, False
        return await self.client.request("POST", self.path, query=_QUERY, body=lease), True

    async def _retry_update(self, base: Json) -> None:
        last: Exception | None = None
        for _ in range(MAX_UPDATE_RETRIES):
            lease, _owned = await self._new_lease_owned(base)
            try:
                self.latest = await self.client.request("PUT", f"{self.path}/{self.node_name}", query=_QUERY,
                                                        body=lease)
                return
            except (ApiError, TransportError) as e:
                last = e
                log.info("failed to update lease", extra={"kv": {"err": str(e)}})
                if isinstance(e, ApiError) and e.conflict:
                    fresh, _ = await self._backoff_ensure()
                    if fresh is not None:
                        base = fresh
        raise last if last is not None else TransportError(f"failed {MAX_UPDATE_RETRIES} attempts to update lease")

    async def _new_lease(self, base: Json | None) -> Json | None:
        """Upstream newLease + the kubelet's SetNodeOwnerFunc; None while the Node cannot be read."""
        lease, owned = await self._new_lease_owned(base)
        return lease if owned else None

    async def _new_lease_owned(self, base: Json | None) -> tuple[Json, bool]:
        """The lease, and False when it needs an owner reference the Node could not be read for."""
        if base is None:
            lease: Json = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": self.node_name, "namespace": NAMESPACE},
                           "spec": {"holderIdentity": self.node_name}}
        else:
            lease = copy.deepcopy(base)
            lease.setdefault("apiVersion", "coordination.k8s.io/v1")
            lease.setdefault("kind", "Lease")
        spec = lease.setdefault("spec", {})
        spec["leaseDurationSeconds"] = self.duration
        spec["renewTime"] = micro_time(self.clock.now())
        if not lease["metadata"].get("ownerReferences"):
            try:
                node = await self.client.get(f"/api/v1/nodes/{self.node_name}")
            except (ApiError, TransportError) as e:
                log.info("failed to get node when trying to set owner ref to the node lease",
                         extra={"kv": {"node": self.node_name, "err": str(e)}})
                return lease, False
            lease["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": self.node_name,
                                                     "uid": node["metadata"]["uid"]}]
        return lease, True
