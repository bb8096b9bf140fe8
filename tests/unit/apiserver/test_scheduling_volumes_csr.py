"""Binding, the PVC -> PV edges of the Node authorizer, serving CSRs, bookmark intervals."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

from cryptography import x509

from tests.apiserver import ApiServer, ApiStatusError
from tests.apiserver.pki import make_csr
from tests.unit.apiserver.world import World

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


async def test_binding_brings_the_pod_into_the_nodes_watch(api: ApiServer) -> None:
    world = World(api)
    node = await world.node("n1")
    await world.admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    rv = api.store.rv

    async def schedule() -> None:
        await asyncio.sleep(0.2)
        await world.admin.bind("p", "n1")

    scheduler = asyncio.create_task(schedule())
    path = f"/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn1&resourceVersion={rv}&timeoutSeconds=1"
    events = [e async for e in node.watch(path)]
    await scheduler
    assert [e["type"] for e in events] == ["ADDED"]
    assert [c["type"] for c in events[0]["object"]["status"]["conditions"]] == ["PodScheduled"]
    try:
        await world.admin.bind("p", "n2")
    except ApiStatusError as exc:
        assert exc.reply.status == 409
        assert exc.reply.body["message"].endswith('pod p is already assigned to node "n1"')
    else:
        raise AssertionError("a second binding must conflict")


async def test_node_reads_claims_and_volumes_of_its_pods_only(api: ApiServer) -> None:
    world = World(api)
    node = await world.node("n1")
    admin = world.admin
    await admin.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
                        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                 "hostPath": {"path": "/tmp/pv1"}}})
    for claim in ("data", "unused"):
        await admin.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": claim, "namespace": "default"},
                            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv1" if claim == "data" else "",
                                     "resources": {"requests": {"storage": "1Gi"}}}})
    await admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}})
    assert (await node.request("GET", "/api/v1/namespaces/default/persistentvolumeclaims/data")).status == 200
    assert (await node.request("GET", "/api/v1/persistentvolumes/pv1")).status == 200
    denied = await node.request("GET", "/api/v1/namespaces/default/persistentvolumeclaims/unused")
    assert denied.status == 403
    assert denied.body["message"].endswith("no relationship found between node 'n1' and this object")


async def test_kubelet_serving_csr_is_approved_and_signed_with_its_sans(api: ApiServer) -> None:
    node = await World(api).node("n1")
    csr = make_csr("system:node:n1", ("system:nodes",), dns=("n1",), ips=("127.0.0.1",))
    created = await node.create({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                                 "metadata": {"generateName": "csr-"}, "spec": {
                                     "request": base64.b64encode(csr.cert_pem).decode(),
                                     "signerName": "kubernetes.io/kubelet-serving",
                                     "usages": ["digital signature", "server auth"]}})
    name = created["metadata"]["name"]
    assert name.startswith("csr-") and len(name) == 9
    path = f"{CSRS}?watch=1&fieldSelector=metadata.name%3D{name}&resourceVersion={created['metadata']['resourceVersion']}&timeoutSeconds=1"
    events = [e async for e in node.watch(path)]
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED"]  # approval, then the certificate
    cert = x509.load_pem_x509_certificate(base64.b64decode(events[-1]["object"]["status"]["certificate"]))
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["n1"]


async def test_serving_csrs_can_be_left_to_a_manual_approval(tmp_path: Path) -> None:
    async with ApiServer(tmp_path, approve_serving_csrs=False) as api:
        node = await World(api).node("n1")
        csr = make_csr("system:node:n1", ("system:nodes",), ips=("127.0.0.1",))
        created = await node.create({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                                     "metadata": {"name": "serving"}, "spec": {
                                         "request": base64.b64encode(csr.cert_pem).decode(),
                                         "signerName": "kubernetes.io/kubelet-serving",
                                         "usages": ["digital signature", "server auth"]}})
        await asyncio.sleep(0.1)
        admin = api.admin()
        pending = await admin.get("certificatesigningrequests", "serving", api_version="certificates.k8s.io/v1")
        assert pending["status"] == {}
        created["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "ByTest", "message": "ok"}]}
        reply = await admin.request("PUT", f"{CSRS}/serving/approval", created)
        assert reply.status == 200, reply.body
        for _ in range(50):
            done = await admin.get("certificatesigningrequests", "serving", api_version="certificates.k8s.io/v1")
            if done["status"].get("certificate"):
                break
            await asyncio.sleep(0.02)
        assert done["status"]["certificate"]
        assert api.violations == []


async def test_bookmarks_at_the_interval(api: ApiServer) -> None:
    api.watches.bookmark_interval = 0.3
    events = [e async for e in api.admin().watch("/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1")]
    assert [e["type"] for e in events] in (["BOOKMARK"] * 3, ["BOOKMARK"] * 2)
    assert {e["object"]["metadata"]["resourceVersion"] for e in events} == {str(api.store.rv)}
