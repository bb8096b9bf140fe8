"""The pod network controller against the test API server (with its node IPAM controller): the own
podCIDR reaches the runtime, the other Nodes' podCIDRs become routes, a Node that goes takes its route.
Netlink, iptables and the sysctl are recorded instead of run (their real runs are in
tests/integration/test_agent_pod_network.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from cri.errors import RuntimeError_
from minikubelet.base.clock import RealClock
from minikubelet.network.pod_network import NO_POD_CIDR, NOT_READY, PodNetwork
from minikubelet.network.routes import Route
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.unit.kubeapi.helpers import client_for, eventually


class Recorder:
    def __init__(self) -> None:
        self.cidrs: list[tuple[str, ...]] = []
        self.rules: list[tuple[tuple[str, ...], str]] = []
        self.routes: list[list[Route]] = []
        self.ready = 0
        self.fail: str = ""

    async def update_pod_cidrs(self, cidrs: tuple[str, ...]) -> None:
        if self.fail:
            raise RuntimeError_(self.fail)
        self.cidrs.append(cidrs)

    async def sync_routes(self, routes: Sequence[Route]) -> list[str]:
        self.routes.append(list(routes))
        return []

    async def ensure_rules(self, cidrs: tuple[str, ...], non_masq: str) -> None:
        self.rules.append((cidrs, non_masq))

    def on_ready(self) -> None:
        self.ready += 1


def node(name: str, ip: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]}}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[ApiServer]:
    async with ApiServer(tmp_path / "api", cluster_cidrs=("10.244.0.0/16",)) as server:
        yield server


def network(api: ApiServer, tmp_path: Path, rec: Recorder) -> PodNetwork:
    client = client_for(api, api.node_identity("n1"), tmp_path)
    return PodNetwork(client, "n1", RealClock(), rec, "10.244.0.0/16", rec.on_ready, sync_routes=rec.sync_routes,
                      ensure_rules=rec.ensure_rules, enable_forwarding=lambda _c: None)


async def test_own_cidr_sets_up_the_runtime_and_other_nodes_become_routes(api: ApiServer, tmp_path: Path) -> None:
    api.authorizer.grant("system:nodes", "nodes", ("get", "list", "watch"))  # the add-on's ClusterRole
    admin = api.admin()
    await admin.create(node("n1", "192.168.1.1"))
    rec = Recorder()
    net = network(api, tmp_path, rec)
    assert net.errors() == (NOT_READY + NO_POD_CIDR,) and not net.ready
    task = asyncio.create_task(net.run())
    try:
        await eventually(lambda: net.ready, what="the network ready")
        assert rec.cidrs == [("10.244.0.0/24",)] and rec.rules[-1] == (("10.244.0.0/24",), "10.244.0.0/16")
        assert net.errors() == () and rec.ready == 1
        await admin.create(node("n2", "192.168.1.2"))
        want = [Route("10.244.1.0/24", "192.168.1.2", "n2")]
        await eventually(lambda: bool(rec.routes) and rec.routes[-1] == want, what="the route to n2")
        await admin.delete("nodes", "n2")
        await eventually(lambda: rec.routes[-1] == [], what="the route to n2 gone")
        assert rec.cidrs == [("10.244.0.0/24",)] and rec.ready == 1  # set up once
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await net.watch.client.close()


async def test_without_the_grant_the_local_network_still_comes_up_from_the_own_node(api: ApiServer,
                                                                                    tmp_path: Path) -> None:
    admin = api.admin()
    await admin.create(node("n1", "192.168.1.1"))
    own = await admin.get("nodes", "n1")
    rec = Recorder()
    rec.fail = "Error response from daemon: Pool overlaps with other one on this address space"
    net = network(api, tmp_path, rec)
    net.own_node(own)  # what the own-Node lister hands over
    await net.reconcile()
    assert net.errors() == (NOT_READY + rec.fail,) and rec.ready == 0
    rec.fail = ""
    await net.reconcile()
    assert net.ready and rec.cidrs == [("10.244.0.0/24",)] and rec.ready == 1
    task = asyncio.create_task(net.run())
    try:
        # list/watch of all Nodes is refused (the Node authorizer; no RBAC grant): retried, never fatal
        with pytest.raises(ApiStatusError) as refused:
            await api.node_client("n1").list("nodes")
        assert refused.value.reply.status == 403
        await eventually(lambda: any(u == "system:node:n1" and p == "/api/v1/nodes"
                                     for u, _m, p in api.handler.requests), what="the list")
        await asyncio.sleep(0.2)
        assert net.ready and not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await net.watch.client.close()

