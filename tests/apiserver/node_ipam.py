"""The kube-controller-manager's node IPAM controller, in the harness (`--allocate-node-cidrs
--cluster-cidr=… --node-cidr-mask-size=24`, the range allocator).

A Node without `spec.podCIDRs` gets the next free block of each cluster CIDR (one per IP family, so a
dual-stack cluster gives two), written as one update with `podCIDR` = the first, as in
node-get-after-create.json; a deleted Node's blocks are free again. Blocks already on Nodes (a restart
of the harness with its storage) are taken first, as the real allocator does on start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from typing import Any

from tests.apiserver.store import Store

Json = dict[str, Any]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class NodeIpam:
    def __init__(self, store: Store, cluster_cidrs: tuple[str, ...], node_mask_sizes: tuple[int, ...]) -> None:
        self.store = store
        self.cluster_cidrs = [ipaddress.ip_network(c) for c in cluster_cidrs]
        self.mask_sizes = node_mask_sizes
        self._used: dict[str, tuple[str, ...]] = {}  # node name -> its blocks
        self._task: asyncio.Task[None] | None = None

    def _free_block(self, family: int) -> str:
        cluster = self.cluster_cidrs[family]
        taken = {b for blocks in self._used.values() for b in blocks}
        for block in cluster.subnets(new_prefix=self.mask_sizes[family]):
            if str(block) not in taken:
                return str(block)
        raise RuntimeError(f"CIDR allocation failed; there are no remaining CIDRs left to allocate in {cluster}")

    def start(self) -> None:
        watch = self.store.open_watch("nodes", None, lambda _o: True, since=None)
        for node in self.store.list_objects("nodes"):
            blocks = (node.get("spec") or {}).get("podCIDRs") or []
            if blocks:
                self._used[node["metadata"]["name"]] = tuple(blocks)
        for node in self.store.list_objects("nodes"):
            watch.queue.put_nowait(("ADDED", node))
        self._watch = watch
        self._task = asyncio.get_running_loop().create_task(self._run(watch.queue))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self.store.close_watch(self._watch)
            self._task = None

    async def _run(self, queue: asyncio.Queue[tuple[str, Json] | None]) -> None:
        while (item := await queue.get()) is not None:
            kind, node = item
            name = node["metadata"]["name"]
            if kind == "DELETED":
                self._used.pop(name, None)
                continue
            self.allocate(name)

    def allocate(self, name: str) -> None:
        node = self.store.get("nodes", "", name)
        if node is None:
            return
        spec = node.setdefault("spec", {})
        if spec.get("podCIDRs"):
            self._used[name] = tuple(spec["podCIDRs"])
            return
        blocks = tuple(self._free_block(family) for family in range(len(self.cluster_cidrs)))
        self._used[name] = blocks
        spec["podCIDR"] = blocks[0]
        spec["podCIDRs"] = list(blocks)
        self.store.update("nodes", node)
