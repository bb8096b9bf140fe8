from __future__ import annotations

import asyncio
from pathlib import Path

from minikubelet.base.clock import FakeClock
from minikubelet.node.lease import NAMESPACE, NodeLease, micro_time
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for, drive, eventually

LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"


def lease_calls(api: ApiServer) -> list[str]:
    return [m for u, m, p in api.handler.requests if u == "system:node:n1" and p.startswith(LEASES)]


async def test_no_lease_before_the_node_then_created_with_its_owner(api_server: ApiServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path, clock)
    lease = NodeLease(client, clock, "n1")
    try:
        await lease.sync()
        assert lease.latest is None and lease_calls(api_server) == ["GET"]  # as lease-create-renew.json
        node = await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        await lease.sync()
        assert lease_calls(api_server) == ["GET", "GET", "POST"]
        stored = await api_server.admin().get("leases", "n1", NAMESPACE, "coordination.k8s.io/v1")
        assert stored["spec"] == {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                                  "renewTime": micro_time(clock.now())}
        assert stored["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n1",
                                                          "uid": node["metadata"]["uid"]}]
    finally:
        await client.close()


async def test_renewed_every_10s_with_a_put(api_server: ApiServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path, clock)
    await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    lease = NodeLease(client, clock, "n1")
    task = asyncio.create_task(lease.run())
    try:
        await eventually(lambda: lease_calls(api_server) == ["GET", "POST"], what="the lease created")
        clock.advance(9.9)
        await asyncio.sleep(0.2)
        assert lease_calls(api_server) == ["GET", "POST"]
        clock.advance(0.5)  # 10 s + at most 4 % jitter
        await eventually(lambda: lease_calls(api_server) == ["GET", "POST", "PUT"], what="the first renewal")
        renewed = await api_server.admin().get("leases", "n1", NAMESPACE, "coordination.k8s.io/v1")
        assert renewed["spec"]["renewTime"] == micro_time(clock.now())
        clock.advance(10.4)
        await eventually(lambda: lease_calls(api_server)[-1:] == ["PUT"] and len(lease_calls(api_server)) == 4,
                         what="the second renewal")
    finally:
        task.cancel()
        await client.close()


async def test_a_conflict_rereads_the_lease(api_server: ApiServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path, clock)
    await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    lease = NodeLease(client, clock, "n1")
    try:
        await lease.sync()
        # someone else (the node lifecycle controller, a stale copy) wrote it in between
        await api_server.admin().patch("leases", "n1", {"metadata": {"labels": {"x": "y"}}}, NAMESPACE,
                                       strategic=False, api_version="coordination.k8s.io/v1")
        clock.advance(10)
        await drive(clock, lease.sync())
        # PUT 409 -> GET -> PUT
        assert lease_calls(api_server)[2:] == ["PUT", "GET", "PUT"]
        stored = await api_server.admin().get("leases", "n1", NAMESPACE, "coordination.k8s.io/v1")
        assert stored["metadata"]["labels"] == {"x": "y"}
        assert stored["spec"]["renewTime"].startswith("2023-11-14T22:13:30")  # renewed 10 s after the create
    finally:
        await client.close()


async def test_server_errors_back_off_until_the_lease_is_there(api_server: ApiServer, tmp_path: Path) -> None:
    clock = FakeClock()
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path, clock)
    await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    rule = api_server.faults.fail(500, "GET", "leases/n1", times=6)  # two rounds of the client's 3 attempts
    lease = NodeLease(client, clock, "n1")
    try:
        await drive(clock, lease.sync())
        assert rule.hits == 6 and lease.latest is not None
    finally:
        await client.close()


async def test_sync_lease_keeps_renewing_after_kubectl_delete_node(api_server: ApiServer, tmp_path: Path) -> None:
    """Upstream's lease controller renews the lease it has (the owner reference already set) whether or not the
    Node is still there; the garbage collector, not the kubelet, removes a lease whose owner is gone."""
    clock = FakeClock()
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path, clock)
    node = await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    lease = NodeLease(client, clock, "n1")
    try:
        await lease.sync()
        await api_server.admin().delete("nodes", "n1")
        clock.advance(10)
        await lease.sync()
        assert lease_calls(api_server) == ["GET", "POST", "PUT"]
        stored = await api_server.admin().get("leases", "n1", NAMESPACE, "coordination.k8s.io/v1")
        assert stored["spec"]["renewTime"] == micro_time(clock.now())
        assert stored["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    finally:
        await client.close()


async def test_retry_update_lease_renews_an_unowned_lease_without_the_node(api_server: ApiServer,
                                                                          tmp_path: Path) -> None:
    """Upstream retryUpdateLease ignores newLease's owner-reference error: an existing lease is renewed even
    while its Node cannot be read (only a missing lease waits for the Node)."""
    await api_server.admin().create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
        "name": "n1", "namespace": NAMESPACE}, "spec": {"holderIdentity": "n1"}})
    clock = FakeClock()
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path, clock)
    lease = NodeLease(client, clock, "n1")
    try:
        await lease.sync()
        assert lease_calls(api_server) == ["GET", "PUT"]
        stored = await api_server.admin().get("leases", "n1", NAMESPACE, "coordination.k8s.io/v1")
        assert stored["spec"]["renewTime"] == micro_time(clock.now())
        assert not stored["metadata"].get("ownerReferences")
    finally:
        await client.close()
