"""Authentication paths, fault injection, stop/start, strategic merge patch details, schema violations."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from tests.apiserver import ApiServer, Identity
from tests.apiserver.openapi import load as load_schemas
from tests.apiserver.patch import strategic_merge
from tests.unit.apiserver.world import World


async def test_anonymous_may_read_version_but_nothing_else(api: ApiServer) -> None:
    anonymous = api.client(None)
    assert (await anonymous.request("GET", "/version")).status == 200
    reply = await anonymous.request("GET", "/api/v1/namespaces/default/pods")
    assert reply.status == 403
    assert reply.body["message"] == ('pods is forbidden: User "system:anonymous" cannot list resource "pods" '
                                     'in API group "" in the namespace "default"')


async def test_bad_bearer_token_is_401(api: ApiServer) -> None:
    for token in ("abcdef.wrongwrongwrong0", "not-a-token"):
        reply = await api.client(Identity("x", token=token)).request("GET", "/version")
        assert (reply.status, reply.body["reason"]) == (401, "Unauthorized")


async def test_bootstrap_token_may_only_do_csrs(api: ApiServer) -> None:
    client = api.client(api.add_bootstrap_token())
    assert (await client.request("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests")).status == 200
    reply = await client.request("GET", "/api/v1/nodes")
    assert reply.status == 403
    assert 'User "system:bootstrap:abcdef"' in reply.body["message"]


async def test_service_account_token_authenticates_until_its_pod_is_gone(api: ApiServer) -> None:
    world = World(api)
    node = await world.node("n1")
    pod = await world.simple_pod("p", "n1")
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
        "expirationSeconds": 3607, "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p",
                                                      "uid": pod["metadata"]["uid"]}}}
    reply = await node.request("POST", "/api/v1/namespaces/default/serviceaccounts/default/token", request)
    token = reply.body["status"]["token"]
    as_pod = api.client(Identity("sa", token=token))
    denied = await as_pod.request("GET", "/api/v1/namespaces/default/pods")
    assert denied.status == 403 and 'User "system:serviceaccount:default:default"' in denied.body["message"]
    review = await node.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
    assert review.status == 201
    user = review.body["status"]["user"]
    assert user["username"] == "system:serviceaccount:default:default"
    assert user["extra"]["authentication.kubernetes.io/pod-name"] == ["p"]
    await world.admin.delete("pods", "p", "default", grace=0)
    assert (await as_pod.request("GET", "/version")).status == 401


async def test_self_subject_review_answers_who_the_caller_is(api: ApiServer) -> None:
    """`kubectl auth whoami`: any authenticated user may ask (system:basic-user); anonymous may not."""
    world = World(api)
    node = await world.node("n1")
    pod = await world.simple_pod("p", "n1")
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": pod["metadata"]["uid"]}}}
    token = (await node.request("POST", "/api/v1/namespaces/default/serviceaccounts/default/token",
                                request)).body["status"]["token"]
    path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    reply = await api.client(Identity("sa", token=token)).request("POST", path, body)
    assert reply.status == 201
    assert set(reply.body) == {"kind", "apiVersion", "metadata", "status"}
    assert (reply.body["kind"], list(reply.body["metadata"])) == ("SelfSubjectReview", ["creationTimestamp"])
    info = reply.body["status"]["userInfo"]
    sa = await world.admin.get("serviceaccounts", "default", "default")
    assert (info["username"], info["uid"]) == ("system:serviceaccount:default:default", sa["metadata"]["uid"])
    assert info["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    assert info["extra"]["authentication.kubernetes.io/pod-uid"] == [pod["metadata"]["uid"]]
    as_node = (await node.request("POST", path, body)).body["status"]["userInfo"]
    assert as_node == {"username": "system:node:n1", "groups": ["system:nodes", "system:authenticated"]}
    anonymous = await api.client(None).request("POST", path, body)
    assert anonymous.status == 403
    assert anonymous.body["message"] == ('selfsubjectreviews.authentication.k8s.io is forbidden: User '
                                         '"system:anonymous" cannot create resource "selfsubjectreviews" in API '
                                         'group "authentication.k8s.io" at the cluster scope')


async def test_injected_500_and_429(api: ApiServer) -> None:
    admin = api.admin()
    api.faults.fail(500, "GET", r"/api/v1/nodes$", times=1)
    api.faults.fail(429, "POST", r"/leases", retry_after=3)
    first = await admin.request("GET", "/api/v1/nodes")
    assert (first.status, first.body["reason"]) == (500, "InternalError")
    assert (await admin.request("GET", "/api/v1/nodes")).status == 200
    throttled = await admin.request("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {})
    assert (throttled.status, throttled.headers["Retry-After"]) == (429, "3")
    assert throttled.body["details"] == {"retryAfterSeconds": 3}
    api.faults.clear()


async def test_slow_answers(api: ApiServer) -> None:
    api.faults.delay = 0.3
    start = time.monotonic()
    assert (await api.admin().request("GET", "/version")).status == 200
    assert time.monotonic() - start >= 0.3


async def test_dropped_watch_ends_without_the_final_chunk(api: ApiServer) -> None:
    admin = api.admin()

    async def drop() -> None:
        await asyncio.sleep(0.3)
        assert api.watches.drop() == 1

    dropper = asyncio.create_task(drop())
    with pytest.raises(aiohttp.ClientPayloadError):
        async for _ in admin.watch("/api/v1/pods?watch=1&timeoutSeconds=5"):
            pass
    await dropper


async def test_stop_and_start_keep_the_storage(api: ApiServer) -> None:
    admin = api.admin()
    await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}})
    await api.stop()
    with pytest.raises(aiohttp.ClientConnectorError):
        await admin.request("GET", "/version", timeout=2)
    await api.start()
    assert (await admin.get("configmaps", "kept", "default"))["metadata"]["name"] == "kept"


def test_strategic_merge_directives() -> None:
    schemas = load_schemas()
    schema = schemas.for_kind("", "v1", "Pod")
    assert schema is not None
    old = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True", "message": "m"}],
                      "containerStatuses": [{"name": "x", "ready": True}, {"name": "y", "ready": True}],
                      "podIPs": [{"ip": "10.0.0.1"}]}}
    patch = {"status": {"$setElementOrder/conditions": [{"type": "B"}, {"type": "C"}, {"type": "A"}],
                        "conditions": [{"type": "B", "message": None}, {"type": "C", "status": "False"}],
                        "containerStatuses": [{"name": "y", "ready": False}],
                        "podIPs": [{"ip": "fd00::1"}]}}
    new = strategic_merge(old, patch, schema, schemas)
    assert new["status"]["conditions"] == [{"type": "B", "status": "True"}, {"type": "C", "status": "False"},
                                           {"type": "A", "status": "True"}]
    assert new["status"]["containerStatuses"] == [{"name": "y", "ready": False}]  # atomic in 1.36
    assert new["status"]["podIPs"] == [{"ip": "fd00::1"}, {"ip": "10.0.0.1"}]  # patch items first
    deleted = strategic_merge(new, {"status": {"conditions": [{"type": "C", "$patch": "delete"}]}}, schema, schemas)
    assert [c["type"] for c in deleted["status"]["conditions"]] == ["B", "A"]


async def test_schema_violations_are_recorded_and_answered_as_the_decoder_does(tmp_path: Path) -> None:
    async with ApiServer(tmp_path) as api:
        world = World(api)
        node = await world.node("n1")
        await world.simple_pod("p", "n1")
        unknown = await node.patch("pods", "p", {"status": {"phase": "Running", "podIPz": []}}, "default", sub="status")
        assert "podIPz" not in unknown["status"]
        wrong = await node.request("PATCH", "/api/v1/namespaces/default/pods/p/status",
                                   {"status": {"startTime": 5}}, content_type="application/strategic-merge-patch+json")
        assert wrong.status == 400
        assert [(v.unknown_fields, bool(v.type_errors)) for v in api.violations] == [
            (["status.podIPz"], False), ([], True)]
