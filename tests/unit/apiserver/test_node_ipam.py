"""The harness's node IPAM controller (kube-controller-manager --allocate-node-cidrs, range allocator)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.apiserver import ApiServer
from tests.fixtures import load


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def spec_of(api: ApiServer, name: str) -> dict[str, Any]:
    for _ in range(200):
        spec = dict((await api.admin().get("nodes", name)).get("spec") or {})
        if spec.get("podCIDRs"):
            return {k: spec[k] for k in ("podCIDR", "podCIDRs")}  # (the API server's admission adds a taint)
        await asyncio.sleep(0.01)
    raise AssertionError(f"{name} got no podCIDRs")


async def test_each_node_gets_the_next_free_block_and_a_deleted_nodes_block_is_reused(tmp_path: Path) -> None:
    async with ApiServer(tmp_path, cluster_cidrs=("10.244.0.0/16",)) as api:
        admin = api.admin()
        await admin.create(node("a"))
        await admin.create(node("b"))
        recorded = load("node-get-after-create.json")["response"]["body"]["spec"]
        assert await spec_of(api, "a") == recorded == {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]}
        assert (await spec_of(api, "b"))["podCIDRs"] == ["10.244.1.0/24"]
        await admin.delete("nodes", "a")
        await admin.create(node("c"))
        assert (await spec_of(api, "c"))["podCIDRs"] == ["10.244.0.0/24"]


async def test_dual_stack_gives_a_block_per_family_and_a_restart_keeps_what_nodes_have(tmp_path: Path) -> None:
    async with ApiServer(tmp_path, cluster_cidrs=("10.244.0.0/16", "fd00:10:244::/56")) as api:
        await api.admin().create(node("a"))
        assert await spec_of(api, "a") == {"podCIDR": "10.244.0.0/24",
                                           "podCIDRs": ["10.244.0.0/24", "fd00:10:244::/64"]}
        await api.restart()
        await api.admin().create(node("b"))
        assert (await spec_of(api, "b"))["podCIDRs"] == ["10.244.1.0/24", "fd00:10:244:1::/64"]


async def test_off_by_default(tmp_path: Path) -> None:
    async with ApiServer(tmp_path) as api:
        await api.admin().create(node("a"))
        await asyncio.sleep(0.05)
        assert "podCIDRs" not in ((await api.admin().get("nodes", "a")).get("spec") or {})
