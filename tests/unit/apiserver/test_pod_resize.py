"""`pods/resize` (kube-apiserver 1.36 podResizeStrategy + ValidatePodResize): only container resources change, the
generation follows the spec, and the refusals carry upstream's causes (TestValidatePodResize's cases)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError, Client

Json = dict[str, Any]


def guaranteed_pod(name: str = "rs", **extra: Any) -> Json:
    pod: Json = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                 "spec": {"nodeName": "node-1", "containers": [{
                     "name": "app", "image": "busybox",
                     "resources": {"requests": {"cpu": "100m", "memory": "32Mi"},
                                   "limits": {"cpu": "100m", "memory": "32Mi"}}}]}}
    pod["spec"].update(extra)
    return pod


def resize_patch(requests: Json, limits: Json, name: str = "app") -> Json:
    return {"spec": {"containers": [{"name": name, "resources": {"requests": requests, "limits": limits}}]}}


async def refused(admin: Client, name: str, patch: Json) -> Json:
    with pytest.raises(ApiStatusError) as err:
        await admin.patch("pods", name, patch, "default", sub="resize")
    assert err.value.reply.status == 422, err.value.reply.body
    body: Json = err.value.reply.body
    return body


async def test_resize_changes_only_resources_and_bumps_the_generation(api: ApiServer) -> None:
    admin = api.admin()
    created = await admin.create(guaranteed_pod())
    assert created["metadata"]["generation"] == 1
    # the patch also tries a label and another image: the resize subresource takes only the resources
    patch = resize_patch({"cpu": "200m"}, {"cpu": "200m"})
    patch["metadata"] = {"labels": {"sneaky": "yes"}}
    patch["spec"]["containers"][0]["image"] = "other"
    resized = await admin.patch("pods", "rs", patch, "default", sub="resize")
    assert resized["kind"] == "Pod"
    c = resized["spec"]["containers"][0]
    assert c["resources"] == {"requests": {"cpu": "200m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "32Mi"}}
    assert c["image"] == "busybox" and "labels" not in resized["metadata"]
    assert resized["metadata"]["generation"] == 2
    assert int(resized["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    stored = await admin.get("pods", "rs", "default")
    assert stored["spec"] == resized["spec"]
    # the same resize again changes nothing: no new generation, no new resourceVersion
    again = await admin.patch("pods", "rs", resize_patch({"cpu": "200m"}, {"cpu": "200m"}), "default", sub="resize")
    assert again["metadata"]["generation"] == 2
    assert again["metadata"]["resourceVersion"] == resized["metadata"]["resourceVersion"]


async def test_resize_by_put(api: ApiServer) -> None:
    admin = api.admin()
    await admin.create(guaranteed_pod())
    pod = await admin.get("pods", "rs", "default")
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "64Mi"
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64Mi"
    reply = await admin.request("PUT", "/api/v1/namespaces/default/pods/rs/resize", pod)
    assert reply.status == 200, reply.body
    assert reply.body["spec"]["containers"][0]["resources"]["limits"]["memory"] == "64Mi"
    assert reply.body["metadata"]["generation"] == 2


async def test_qos_change_is_refused(api: ApiServer) -> None:
    admin = api.admin()
    await admin.create(guaranteed_pod())
    body = await refused(admin, "rs", resize_patch({"cpu": "100m"}, {"cpu": "200m"}))
    assert body["reason"] == "Invalid"
    assert body["message"] == ('Pod "rs" is invalid: spec: Invalid value: "Guaranteed": Pod QOS Class may not change '
                               "as a result of resizing")
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec", "message":
                                          'Invalid value: "Guaranteed": Pod QOS Class may not change as a result of '
                                          "resizing"}]


async def test_removing_a_limit_and_changing_other_resources_is_refused(api: ApiServer) -> None:
    admin = api.admin()
    pod = guaranteed_pod()
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "ephemeral-storage": "1Gi"},
                                                 "limits": {"cpu": "200m"}}
    await admin.create(pod)
    body = await refused(admin, "rs", {"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"cpu": "100m", "ephemeral-storage": "2Gi"}, "limits": {"cpu": "200m"}}}]}})
    assert body["details"]["causes"] == [{"reason": "FieldValueForbidden", "field": "spec",
                                          "message": "Forbidden: only cpu and memory resources are mutable"}]
    # a strategic merge patch cannot drop a key; a PUT can
    stored = await admin.get("pods", "rs", "default")
    stored["spec"]["containers"][0]["resources"]["limits"] = {}
    reply = await admin.request("PUT", "/api/v1/namespaces/default/pods/rs/resize", stored)
    assert reply.status == 422
    assert {"reason": "FieldValueForbidden", "field": "spec.containers[0].resources.limits",
            "message": "Forbidden: resource limits cannot be removed"} in reply.body["details"]["causes"]


async def test_static_pods_and_renames_are_refused(api: ApiServer) -> None:
    admin = api.admin()
    mirror = guaranteed_pod("static")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    await admin.create(mirror)
    body = await refused(admin, "static", resize_patch({"cpu": "200m"}, {"cpu": "200m"}))
    assert body["message"] == 'Pod "static" is invalid: : Forbidden: static pods cannot be resized'
    await admin.create(guaranteed_pod())
    pod = await admin.get("pods", "rs", "default")
    pod["spec"]["containers"][0]["name"] = "renamed"
    reply = await admin.request("PUT", "/api/v1/namespaces/default/pods/rs/resize", pod)
    assert reply.status == 422
    assert reply.body["details"]["causes"] == [{"reason": "FieldValueForbidden", "field": "spec.containers[0].name",
                                                "message": "Forbidden: containers may not be renamed or reordered on "
                                                           "resize"}]


async def test_a_node_that_reports_no_resources_cannot_resize(api: ApiServer) -> None:
    admin = api.admin()
    await admin.create(guaranteed_pod())
    api.store.update("pods", {**copy.deepcopy(await admin.get("pods", "rs", "default")), "status": {
        "phase": "Running", "qosClass": "Guaranteed",
        "containerStatuses": [{"name": "app", "state": {"running": {}}}]}})
    body = await refused(admin, "rs", resize_patch({"cpu": "200m"}, {"cpu": "200m"}))
    assert body["details"]["causes"] == [{"reason": "FieldValueForbidden", "field": "spec",
                                          "message": "Forbidden: Pod running on node without support for resize"}]


async def test_requests_above_limits_are_invalid_and_a_node_may_not_resize(api: ApiServer) -> None:
    admin = api.admin()
    pod = guaranteed_pod()
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}
    await admin.create(pod)
    body = await refused(admin, "rs", resize_patch({"cpu": "300m"}, {"cpu": "200m"}))
    assert any(c["field"] == "spec.containers[0].resources.requests" for c in body["details"]["causes"])
    node = api.client(api.node_identity("node-1"))
    with pytest.raises(ApiStatusError) as err:
        await node.patch("pods", "rs", resize_patch({"cpu": "150m"}, {"cpu": "200m"}), "default", sub="resize")
    assert err.value.reply.status == 403
