"""NodeRestriction's other refusals, with upstream's messages (plugin/pkg/admission/noderestriction)."""

from __future__ import annotations

import base64
from typing import Any

from tests.apiserver import ApiServer
from tests.apiserver.pki import make_csr
from tests.unit.apiserver.world import World


async def test_node_may_not_change_taints_or_kubernetes_labels(api: ApiServer) -> None:
    node = await World(api).node("n1")
    taints = await node.request("PATCH", "/api/v1/nodes/n1", {"spec": {"taints": []}},
                                content_type="application/merge-patch+json")
    assert (taints.status, taints.body["message"]) == (403, 'nodes "n1" is forbidden: node "n1" is not allowed to modify taints')
    labels = await node.request("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"node-role.kubernetes.io/x": ""}}},
                                content_type="application/strategic-merge-patch+json")
    assert (labels.status, labels.body["message"]) == (
        403, 'nodes "n1" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/x')
    fine = await node.request("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"example.com/rack": "r1"}}},
                              content_type="application/strategic-merge-patch+json")
    assert fine.status == 200


async def test_node_csr_must_name_the_node(api: ApiServer) -> None:
    node = await World(api).node("n1")
    csr = make_csr("system:node:n2", ("system:nodes",))
    reply = await node.request("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", {
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "x"},
        "spec": {"request": base64.b64encode(csr.cert_pem).decode(), "usages": ["client auth"],
                 "signerName": "kubernetes.io/kube-apiserver-client-kubelet"}})
    assert (reply.status, reply.body["message"]) == (
        403, 'certificatesigningrequests.certificates.k8s.io "x" is forbidden: can only create a node CSR with CN=system:node:n1')


async def test_token_request_needs_a_pod_binding_with_uid(api: ApiServer) -> None:
    world = World(api)
    node = await world.node("n1")
    await world.simple_pod("p", "n1")
    path = "/api/v1/namespaces/default/serviceaccounts/default/token"
    for ref, message in ((None, "node requested token not bound to a pod"),
                         ({"apiVersion": "v1", "kind": "Pod", "name": "p"},
                          "node requested token with a pod binding without a uid")):
        spec = {"boundObjectRef": ref} if ref else {}
        reply = await node.request("POST", path, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                                  "spec": spec})
        assert (reply.status, reply.body["message"]) == (403, f'serviceaccounts "default" is forbidden: {message}')


async def test_leases_only_in_kube_node_lease(api: ApiServer) -> None:
    node = await World(api).node("n1")
    reply = await node.request("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1"}, "spec": {}})
    assert (reply.status, reply.body["message"]) == (
        403, 'leases.coordination.k8s.io "n1" is forbidden: can only access leases in the "kube-node-lease" system namespace')


async def test_mirror_pods_may_not_reference_secrets(api: ApiServer) -> None:
    world = World(api)
    node = await world.node("n1")
    uid = (await world.admin.get("nodes", "n1"))["metadata"]["uid"]
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "m", "namespace": "default", "annotations": {"kubernetes.io/config.mirror": "h"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": uid, "controller": True}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
                 "volumes": [{"name": "s", "secret": {"secretName": "s"}}]}}
    reply = await node.request("POST", "/api/v1/namespaces/default/pods", pod)
    assert (reply.status, reply.body["message"]) == (
        403, 'pods "m" is forbidden: node "n1" can not create pods that reference secrets')
    pod["spec"].pop("volumes")
    pod["metadata"]["ownerReferences"][0]["uid"] = "wrong"
    reply = await node.request("POST", "/api/v1/namespaces/default/pods", pod)
    assert reply.body["message"] == f'pods "m" is forbidden: node n1 UID mismatch: expected wrong got {uid}'
    pod["metadata"]["ownerReferences"][0]["uid"] = uid
    assert (await node.request("POST", "/api/v1/namespaces/default/pods", pod)).status == 201
