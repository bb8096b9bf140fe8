"""Recorded node-side exchanges replayed: registration, status patches, leases, events, 403/404/409 bodies."""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver import ApiServer, Client
from tests.unit.apiserver.replay import load, send, shape

Json = dict[str, Any]


async def _register(api: ApiServer, node: str = "fx-node-1") -> tuple[Client, Json]:
    client = api.node_client(node)
    body = load("node-create.json")["request"]["body"]
    body = {**body, "metadata": {**body["metadata"], "name": node}}
    reply = await client.request("POST", "/api/v1/nodes", body)
    assert reply.status == 201, reply.body
    return client, reply.body


async def test_version(api: ApiServer) -> None:
    fx = load("version.json")
    reply = await send(api.admin(), fx["request"])
    assert (reply.status, reply.body) == (200, fx["response"]["body"])


async def test_node_creates_itself(api: ApiServer) -> None:
    fx = load("node-create.json")
    reply = await send(api.node_client("fx-node-1"), fx["request"])
    assert reply.status == fx["response"]["status"] == 201
    assert shape(reply.body) == shape(fx["response"]["body"])


async def test_second_node_create_is_already_exists(api: ApiServer) -> None:
    client, _ = await _register(api)
    fx = load("status-409-node-already-exists.json")
    reply = await send(client, fx["request"])
    assert (reply.status, reply.body) == (409, fx["response"]["body"])


async def test_node_status_patch_merges_conditions_and_addresses(api: ApiServer) -> None:
    client, _ = await _register(api)
    fx = load("node-status-patch.json")
    reply = await send(client, fx["request"])
    assert reply.status == 200
    want = fx["response"]["body"]
    # The recorded node had been labelled and its podCIDR allocated by kube-controller-manager meanwhile.
    assert shape(reply.body["status"]) == shape(want["status"])
    assert reply.body["spec"]["taints"] == [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]


async def test_node_may_not_patch_another_node(api: ApiServer) -> None:
    await _register(api, "fx-node-2")
    client, _ = await _register(api, "fx-node-1")
    fx = load("status-403-node-update-other-node.json")
    reply = await send(client, fx["request"])
    assert (reply.status, reply.body) == (403, fx["response"]["body"])


async def test_lease_create_get_renew_and_stale_put(api: ApiServer) -> None:
    client, node = await _register(api)
    mapping = {"3969a5dc-d6c5-4aae-9fce-f4ae98a1e795": node["metadata"]["uid"]}
    created = load("lease-create.json")
    reply = await send(client, created["request"], mapping)
    assert reply.status == 201
    assert shape(reply.body) == shape(created["response"]["body"])
    first_rv = reply.body["metadata"]["resourceVersion"]
    mapping[created["response"]["body"]["metadata"]["uid"]] = reply.body["metadata"]["uid"]

    renew = load("lease-renew-put.json")
    body = renew["request"]["body"]
    put = {**renew["request"], "body": {**body, "metadata": {**body["metadata"], "resourceVersion": first_rv}}}
    reply = await send(client, put, mapping)
    assert reply.status == 200
    assert shape(reply.body) == shape(renew["response"]["body"])
    assert int(reply.body["metadata"]["resourceVersion"]) > int(first_rv)

    got = await send(client, load("lease-get.json")["request"])
    assert shape(got.body) == shape(load("lease-get.json")["response"]["body"])

    stale = load("status-409-conflict-stale-lease.json")
    body = stale["request"]["body"]
    req = {**stale["request"], "body": {**body, "metadata": {**body["metadata"], "resourceVersion": first_rv}}}
    reply = await send(client, req, mapping)
    assert (reply.status, reply.body) == (409, stale["response"]["body"])


async def test_node_may_not_write_another_nodes_lease(api: ApiServer) -> None:
    client, _ = await _register(api)
    body = load("lease-create.json")["request"]["body"]
    body = {**body, "metadata": {**body["metadata"], "name": "fx-node-2"}}
    reply = await client.request("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", body)
    assert reply.status == 403
    assert reply.body["message"] == ('leases.coordination.k8s.io "fx-node-2" is forbidden: '
                                     "can only access node lease with the same name as the requesting node")


async def test_event_create_then_count_patch(api: ApiServer) -> None:
    client, _ = await _register(api)
    created = load("event-create-by-node.json")
    reply = await send(client, created["request"])
    assert reply.status == 201
    assert shape(reply.body) == shape(created["response"]["body"])
    patched = load("event-patch-count-by-node.json")
    reply = await send(client, patched["request"])
    assert reply.status == 200
    assert shape(reply.body) == shape(patched["response"]["body"])


async def test_node_reads_only_its_own_node(api: ApiServer) -> None:
    client, _ = await _register(api)
    await _register(api, "fx-node-2")
    assert (await client.request("GET", "/api/v1/nodes/fx-node-1")).status == 200
    other = await client.request("GET", "/api/v1/nodes/fx-node-2")
    assert other.status == 403
    assert other.body["message"].endswith(": node 'fx-node-1' cannot read 'fx-node-2', only its own Node object")
    listed = await client.request("GET", "/api/v1/nodes")
    assert listed.status == 403
    mine = await client.request("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dfx-node-1")
    assert mine.status == 200 and [n["metadata"]["name"] for n in mine.body["items"]] == ["fx-node-1"]


async def test_forbidden_labels_on_registration(api: ApiServer) -> None:
    body = load("node-create.json")["request"]["body"]
    labels = {**body["metadata"]["labels"], "node-role.kubernetes.io/master": "", "node-restriction.kubernetes.io/x": "y",
              "node.kubernetes.io/exclude-from-external-load-balancers": "", "example.com/ok": "1"}
    body = {**body, "metadata": {**body["metadata"], "labels": labels}}
    reply = await api.node_client("fx-node-1").request("POST", "/api/v1/nodes", body)
    assert reply.status == 403
    assert reply.body["message"] == (
        'nodes "fx-node-1" is forbidden: node "fx-node-1" is not allowed to set the following labels: '
        "node-restriction.kubernetes.io/x, node-role.kubernetes.io/master")


async def test_kubelet_registration_requests(api: ApiServer) -> None:
    """The real kubelet's own POST and status PATCHes (kubelet-02..04) are taken as recorded."""
    client = api.node_client("vm")
    reg = load("kubelet-02-node-register.json")
    reply = await send(client, reg["request"])
    assert reply.status == 201
    want = reg["response"]["body"]
    assert shape(reply.body["status"]) == shape(want["status"])
    assert reply.body["metadata"]["labels"] == want["metadata"]["labels"]
    for name in ("kubelet-03-node-status-patch-first.json", "kubelet-04-node-status-patch-heartbeat.json"):
        fx = load(name)
        request = {**fx["request"], "headers": {"Content-Type": "application/strategic-merge-patch+json"}}
        reply = await send(client, request)
        assert reply.status == 200, reply.body
    # kubelet-03 is `{}`; kubelet-04 moves every condition's heartbeat and changes nothing else.
    expected = copy.deepcopy(want["status"])
    for condition in expected["conditions"]:
        condition["lastHeartbeatTime"] = "2026-11-22T06:26:19Z"
    assert shape(reply.body["status"]) == shape(expected)


async def test_lease_put_without_resource_version_is_invalid(api: ApiServer) -> None:
    client, _ = await _register(api)
    body = load("lease-create.json")["request"]["body"]
    assert (await client.request("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", body)).status == 201
    reply = await client.request("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/fx-node-1", body)
    assert reply.status == 422
    assert reply.body["message"] == ('Lease.coordination.k8s.io "fx-node-1" is invalid: metadata.resourceVersion: '
                                     "Invalid value: 0x0: must be specified for an update")
