"""Recorded pod exchanges replayed: defaulting, reads, status patches, deletion, eviction, tokens, 403/404/409/422."""

from __future__ import annotations

from typing import Any

from tests.apiserver import ApiServer
from tests.unit.apiserver.replay import load, send, shape, substitute
from tests.unit.apiserver.world import World

Json = dict[str, Any]
RICH_UID = "1f051b04-838a-4421-aa24-367880d2c0c5"


async def test_rich_pod_create_is_defaulted_and_admitted_as_recorded(api: ApiServer) -> None:
    world = World(api)
    created = await world.rich_pod()
    assert shape(created) == shape(load("pod-rich-create.json")["response"]["body"])
    assert created["metadata"]["generation"] == 1


async def test_rich_pod_get_as_its_node(api: ApiServer) -> None:
    world = World(api)
    await world.rich_pod()
    fx = load("pod-rich-get-as-node.json")
    reply = await send(world.nodes["fx-node-1"], fx["request"])
    assert reply.status == 200
    assert shape(reply.body) == shape(fx["response"]["body"])


async def test_node_pod_list_with_its_field_selector(api: ApiServer) -> None:
    world = World(api)
    client = await world.node("fx-node-1")
    fx = load("pods-list-node.json")
    reply = await send(client, fx["request"])
    assert reply.status == 200
    assert shape(reply.body) == shape(fx["response"]["body"])
    assert int(reply.body["metadata"]["resourceVersion"]) == api.store.rv


async def test_status_patch_then_invalid_ip_then_unknown_phase(api: ApiServer) -> None:
    world = World(api)
    await world.rich_pod()
    node = world.nodes["fx-node-1"]
    for name, status in (("pod-status-patch.json", 200), ("status-422-invalid-status-patch.json", 422),
                         ("pod-status-patch-unknown-phase-accepted.json", 200)):
        fx = load(name)
        reply = await send(node, fx["request"], world.uids)
        assert reply.status == status, (name, reply.body)
        if status == 422:
            assert reply.body == fx["response"]["body"]
        else:
            assert shape(reply.body) == shape(fx["response"]["body"]), name


async def test_node_sees_404_as_403_and_other_nodes_pods_as_403(api: ApiServer) -> None:
    world = World(api)
    await world.node("fx-node-1")
    await world.node("fx-node-2")
    await world.simple_pod("other-node-pod", "fx-node-2")
    node = world.nodes["fx-node-1"]
    for name in ("status-404-not-found-as-node.json", "status-403-node-get-other-nodes-pod.json",
                 "status-403-node-patch-other-nodes-pod-status.json", "status-403-node-list-all-pods.json"):
        fx = load(name)
        reply = await send(node, fx["request"])
        assert (reply.status, reply.body) == (fx["response"]["status"], fx["response"]["body"]), name
    fx = load("status-404-not-found.json")
    reply = await send(world.admin, fx["request"])
    assert (reply.status, reply.body) == (404, fx["response"]["body"])


async def test_invalid_pod_is_422_with_causes(api: ApiServer) -> None:
    fx = load("status-422-invalid-pod.json")
    reply = await send(api.admin(), fx["request"])
    assert (reply.status, reply.body) == (422, fx["response"]["body"])


async def test_secret_reads_follow_the_node_graph(api: ApiServer) -> None:
    world = World(api)
    await world.rich_pod()
    fx = load("node-get-referenced-secret.json")
    reply = await send(world.nodes["fx-node-1"], fx["request"])
    assert reply.status == 200
    assert shape(reply.body) == shape(fx["response"]["body"])
    fx = load("status-403-node-read-secret-not-referenced.json")
    reply = await send(world.nodes["fx-node-2"], fx["request"])
    assert (reply.status, reply.body) == (403, fx["response"]["body"])
    root_ca = await world.nodes["fx-node-1"].request("GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt")
    assert root_ca.status == 200 and root_ca.body["data"]["ca.crt"] == api.ca.cert_pem.decode()


async def test_token_requests_bound_to_the_pod(api: ApiServer) -> None:
    world = World(api)
    await world.rich_pod()
    node = world.nodes["fx-node-1"]
    for name in ("node-create-sa-token-default-audience.json", "node-create-sa-token-pod-audience.json"):
        fx = load(name)
        reply = await send(node, fx["request"], world.uids)
        assert reply.status == 201, reply.body
        assert shape(reply.body) == shape(fx["response"]["body"])
        claims = api.tokens.claims(reply.body["status"]["token"])
        assert claims is not None
        assert claims["kubernetes.io"]["pod"] == {"name": "rich-pod", "uid": world.uids[RICH_UID]}
        assert claims["kubernetes.io"]["node"]["name"] == "fx-node-1"
        assert claims["aud"] == fx["response"]["body"]["spec"]["audiences"]
    fx = load("status-403-node-sa-token-foreign-audience.json")
    reply = await send(node, fx["request"], world.uids)
    assert (reply.status, reply.body) == (403, fx["response"]["body"])


async def test_default_audience_token_lives_a_year_and_warns_after_its_expiry(api: ApiServer) -> None:
    world = World(api)
    await world.rich_pod()
    fx = load("node-create-sa-token-default-audience.json")
    reply = await send(world.nodes["fx-node-1"], fx["request"], world.uids)
    claims = api.tokens.claims(reply.body["status"]["token"])
    assert claims is not None
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600
    assert claims["kubernetes.io"]["warnafter"] - claims["iat"] == 3607


async def _conflict_demo(world: World) -> Json:
    await world.node("fx-node-1")
    return await world.simple_pod("conflict-demo", "fx-node-1", "15eebc89-6655-456a-9140-54794ee8f059")


async def test_stale_status_put_is_409(api: ApiServer) -> None:
    world = World(api)
    pod = await _conflict_demo(world)
    node = world.nodes["fx-node-1"]
    await node.patch("pods", "conflict-demo", {"status": {"phase": "Running"}}, "default", sub="status")
    fx = load("status-409-conflict-stale-pod-status.json")
    body = fx["request"]["body"]
    stale = {**body, "metadata": {**body["metadata"], "resourceVersion": pod["metadata"]["resourceVersion"]}}
    reply = await send(node, {**fx["request"], "body": stale}, world.uids)
    assert (reply.status, reply.body) == (409, fx["response"]["body"])


async def test_stale_labels_in_status_put_are_403_before_409(api: ApiServer) -> None:
    world = World(api)
    pod = await _conflict_demo(world)
    await world.admin.patch("pods", "conflict-demo", {"metadata": {"labels": {"changed": "by-admin"}}}, "default")
    fx = load("status-403-node-put-status-with-stale-labels.json")
    body = fx["request"]["body"]
    stale = {**body, "metadata": {**body["metadata"], "resourceVersion": pod["metadata"]["resourceVersion"]}}
    reply = await send(world.nodes["fx-node-1"], {**fx["request"], "body": stale}, world.uids)
    assert (reply.status, reply.body) == (403, fx["response"]["body"])


async def test_delete_with_wrong_uid_precondition_is_409(api: ApiServer) -> None:
    world = World(api)
    await _conflict_demo(world)
    fx = load("status-409-delete-precondition-uid.json")
    reply = await send(world.nodes["fx-node-1"], fx["request"], world.uids)
    assert (reply.status, reply.body) == (409, substitute(fx["response"]["body"], world.uids))


async def test_graceful_delete_then_final_delete_by_the_node(api: ApiServer) -> None:
    world = World(api)
    await world.node("fx-node-1")
    graceful = load("pod-graceful-delete.json")
    await world.recorded(graceful["response"]["body"])
    reply = await send(world.admin, graceful["request"])
    assert reply.status == 200
    assert shape(reply.body) == shape(graceful["response"]["body"])
    assert reply.body["metadata"]["deletionGracePeriodSeconds"] == 30
    assert reply.body["metadata"]["generation"] == 2

    seen = load("pod-get-terminating-as-node.json")
    got = await send(world.nodes["fx-node-1"], seen["request"])
    assert shape(got.body) == shape(seen["response"]["body"])

    final = load("pod-final-delete-by-node.json")
    reply = await send(world.nodes["fx-node-1"], final["request"], world.uids)
    assert reply.status == 200
    assert shape(reply.body) == shape(final["response"]["body"])
    assert reply.body["metadata"]["deletionGracePeriodSeconds"] == 0
    gone = await world.admin.request("GET", "/api/v1/namespaces/default/pods/delete-demo")
    assert gone.status == 404


async def test_eviction_marks_the_pod_and_starts_graceful_deletion(api: ApiServer) -> None:
    world = World(api)
    await world.node("fx-node-1")
    after = load("pod-get-after-eviction.json")
    await world.recorded(after["response"]["body"])
    fx = load("pod-eviction.json")
    reply = await send(world.admin, fx["request"])
    assert (reply.status, reply.body) == (201, fx["response"]["body"])
    got = await send(world.nodes["fx-node-1"], after["request"])
    assert shape(got.body) == shape(after["response"]["body"])


async def test_node_may_not_delete_or_evict_other_nodes_pods(api: ApiServer) -> None:
    world = World(api)
    await world.node("fx-node-1")
    await world.node("fx-node-2")
    await world.simple_pod("theirs", "fx-node-2")
    node = world.nodes["fx-node-1"]
    reply = await node.request("DELETE", "/api/v1/namespaces/default/pods/theirs", {"gracePeriodSeconds": 0})
    assert reply.status == 403
    assert reply.body["message"] == (
        'pods "theirs" is forbidden: node "fx-node-1" can only delete pods with spec.nodeName set to itself')
