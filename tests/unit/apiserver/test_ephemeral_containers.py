"""pods/ephemeralcontainers as kube-apiserver 1.36 serves it (registry/core/pod/strategy.go
podEphemeralContainersStrategy, validation.ValidatePodEphemeralContainersUpdate): what kubectl debug writes."""

from __future__ import annotations

from typing import Any

from tests.apiserver import ApiServer
from tests.unit.apiserver.world import World

PATH = "/api/v1/namespaces/default/pods/p/ephemeralcontainers"
SMP = "application/strategic-merge-patch+json"
DEBUG = {"name": "dbg", "image": "local/busybox:latest", "command": ["sh"], "targetContainerName": "c",
         "stdin": True, "tty": True}


def _patch(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"ephemeralContainers": list(containers)}}


async def test_patch_adds_a_defaulted_ephemeral_container_and_nothing_else(api: ApiServer) -> None:
    world = World(api)
    await world.node("n1")
    pod = await world.simple_pod("p", "n1")
    body = {**_patch(DEBUG), "metadata": {"labels": {"sneaky": "x"}}, "status": {"phase": "Failed"}}
    reply = await world.admin.request("PATCH", PATH, body, content_type=SMP)
    assert reply.status == 200, reply.body
    out = reply.body
    assert out["kind"] == "Pod"
    assert out["spec"]["ephemeralContainers"] == [{
        **DEBUG, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "Always", "resources": {}}]  # a :latest image is pulled every time
    # only spec.ephemeralContainers is written: labels and status stay; the spec changed, so the generation moves
    assert "labels" not in out["metadata"]
    assert out["status"] == pod["status"]
    assert (out["metadata"]["generation"], pod["metadata"]["generation"]) == (2, 1)
    assert out["spec"]["containers"] == pod["spec"]["containers"]
    got = await world.admin.request("GET", PATH)
    assert (got.status, got.body["spec"]["ephemeralContainers"][0]["name"]) == (200, "dbg")

    # PUT of the same pod: nothing changes, no new generation
    same = await world.admin.request("PUT", PATH, got.body)
    assert (same.status, same.body["metadata"]["generation"]) == (200, 2)


async def test_existing_ephemeral_containers_may_not_change_or_go(api: ApiServer) -> None:
    world = World(api)
    await world.node("n1")
    await world.simple_pod("p", "n1")
    assert (await world.admin.request("PATCH", PATH, _patch(DEBUG), content_type=SMP)).status == 200
    changed = await world.admin.request("PATCH", PATH, _patch({**DEBUG, "image": "other"}), content_type=SMP)
    assert changed.status == 422
    assert changed.body["details"]["causes"] == [{
        "reason": "FieldValueForbidden", "field": "spec.ephemeralContainers",
        "message": 'Forbidden: existing ephemeral containers "dbg" may not be changed\n'}]
    stored = (await world.admin.request("GET", PATH)).body
    stored["spec"]["ephemeralContainers"] = []
    removed = await world.admin.request("PUT", PATH, stored)
    assert removed.status == 422
    assert removed.body["message"] == ('Pod "p" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral '
                                       'containers "dbg" may not be removed\n')


async def test_validation_names_target_and_fields(api: ApiServer) -> None:
    world = World(api)
    await world.node("n1")
    await world.simple_pod("p", "n1")
    bad = [({**DEBUG, "name": "c"}, "spec.ephemeralContainers[0].name", 'Duplicate value: "c"'),
           ({**DEBUG, "targetContainerName": "nope"}, "spec.ephemeralContainers[0].targetContainerName",
            'Not found: "nope"'),
           ({**DEBUG, "ports": [{"containerPort": 80}]}, "spec.ephemeralContainers[0].ports", None)]
    for container, field, message in bad:
        reply = await world.admin.request("PATCH", PATH, _patch(container), content_type=SMP)
        assert reply.status == 422, reply.body
        causes = {c["field"]: c["message"] for c in reply.body["details"]["causes"]}
        assert field in causes
        if message is not None:
            assert causes[field] == message
    assert "ephemeralContainers" not in (await world.admin.request("GET", PATH)).body["spec"]


async def test_node_may_not_write_ephemeral_containers(api: ApiServer) -> None:
    world = World(api)
    node = await world.node("n1")
    await world.simple_pod("p", "n1")
    reply = await node.request("PATCH", PATH, _patch(DEBUG), content_type=SMP)
    assert reply.status == 403
    assert reply.body["message"].startswith(
        'pods "p" is forbidden: User "system:node:n1" cannot patch resource "pods/ephemeralcontainers" in API group ""')


async def test_static_pods_take_no_ephemeral_container(api: ApiServer) -> None:
    world = World(api)
    node = await world.node("n1")
    node_uid = (await node.request("GET", "/api/v1/nodes/n1")).body["metadata"]["uid"]
    mirror = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": "default", "annotations": {"kubernetes.io/config.mirror": "abc",
                                                            "kubernetes.io/config.source": "file"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": node_uid,
                             "controller": True}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "local/busybox:latest"}]}}
    created = await node.request("POST", "/api/v1/namespaces/default/pods", mirror)
    assert created.status == 201, created.body["message"]
    reply = await world.admin.request("PATCH", PATH, _patch(DEBUG), content_type=SMP)
    assert (reply.status, reply.body["message"]) == (
        422, 'Pod "p" is invalid: : Forbidden: static pods do not support ephemeral containers')


async def test_ephemeral_containers_cannot_be_set_on_create(api: ApiServer) -> None:
    world = World(api)
    await world.node("n1")
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "local/busybox:latest"}],
                     "ephemeralContainers": [DEBUG]}}
    reply = await world.admin.request("POST", "/api/v1/namespaces/default/pods", body)
    assert reply.status == 422
    assert {"reason": "FieldValueForbidden", "field": "spec.ephemeralContainers",
            "message": "Forbidden: cannot be set on create"} in reply.body["details"]["causes"]


async def test_discovery_lists_the_subresource(api: ApiServer) -> None:
    reply = await World(api).admin.request("GET", "/api/v1")
    entry = next(r for r in reply.body["resources"] if r["name"] == "pods/ephemeralcontainers")
    assert (entry["kind"], entry["verbs"]) == ("Pod", ["get", "patch", "update"])
