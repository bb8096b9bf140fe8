"""Services as a node reads them: the `kubernetes` Service of `default`, cluster IPs allocated on create,
headless Services kept `None`, the node's list with `spec.clusterIP!=None`; Secrets' write-only stringData."""

from __future__ import annotations

import base64

from tests.apiserver import ApiServer, ApiStatusError
from tests.unit.apiserver.world import World


async def test_the_kubernetes_service_and_cluster_ip_allocation(api: ApiServer) -> None:
    world = World(api)
    node = await world.node("n1")
    kubernetes = await world.admin.get("services", "kubernetes", "default")
    assert kubernetes["spec"]["clusterIP"] == "10.96.0.1"
    assert kubernetes["spec"]["ports"] == [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}]
    web = await world.admin.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web",
                                                                                       "namespace": "app"},
                                    "spec": {"ports": [{"port": 80}]}})
    other = await world.admin.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "other",
                                                                                         "namespace": "app"},
                                      "spec": {"ports": [{"port": 81}]}})
    assert web["spec"]["clusterIP"] == "10.96.0.10" and other["spec"]["clusterIP"] == "10.96.0.11"
    assert web["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert web["spec"]["type"] == "ClusterIP"
    await world.admin.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "headless",
                                                                                 "namespace": "app"},
                              "spec": {"clusterIP": "None", "ports": [{"port": 80}]}})
    # the kubelet's informer: every namespace, headless left out; nodes may read Services, not write them
    listed = await node.list("services", query="fieldSelector=spec.clusterIP%21%3DNone")
    assert sorted(s["metadata"]["name"] for s in listed["items"]) == ["kubernetes", "other", "web"]
    try:
        await node.delete("services", "web", "app")
    except ApiStatusError as e:
        assert e.reply.status == 403
    else:
        raise AssertionError("a node deleted a Service")


async def test_secret_string_data_is_merged_into_data(api: ApiServer) -> None:
    world = World(api)
    created = await world.admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s",
                                                                                          "namespace": "default"},
                                        "data": {"a": base64.b64encode(b"1").decode()}, "stringData": {"b": "2"}})
    assert "stringData" not in created
    assert {k: base64.b64decode(v) for k, v in created["data"].items()} == {"a": b"1", "b": b"2"}
