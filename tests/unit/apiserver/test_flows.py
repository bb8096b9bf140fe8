"""The real kubelet's recorded request sequences (kubelet-flows/), replayed as a fake kubelet would make them."""

from __future__ import annotations

import asyncio
import base64
import copy
from typing import Any

from cryptography import x509

from tests.apiserver import ApiServer
from tests.unit.apiserver.flows import Replay, node_clients
from tests.unit.apiserver.replay import load, shape
from tests.unit.apiserver.world import stored_as_request

Json = dict[str, Any]
NODE = "k8slab-kubelet"
NODE_UID = "42590775-6aa3-4865-a581-1c1d8b9eaa72"


def _first(flow: str, verb: str, needle: str) -> Json:
    entries: list[Json] = load(f"kubelet-flows/{flow}")
    return next(e for e in entries if e["verb"] == verb and needle in e["requestURI"] and e.get("responseObject"))


async def _registered(api: ApiServer) -> Replay:
    replay = Replay(api, node_clients(api, NODE))
    await replay.run("node-registration.json")
    assert replay.mismatches() == []
    replay.mapping[NODE_UID] = (await api.admin().get("nodes", NODE))["metadata"]["uid"]
    replay.results.clear()
    return replay


async def _pod_from_flow(api: ApiServer, flow: str, name: str) -> Json:
    pod = _first(flow, "get", f"/pods/{name}")["responseObject"]
    return await api.admin().create(stored_as_request(pod))


async def test_node_registration(api: ApiServer) -> None:
    replay = await _registered(api)
    node = await api.admin().get("nodes", NODE)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
    created = _first("node-registration.json", "create", "/api/v1/nodes")["responseObject"]
    assert shape(node["metadata"]["labels"]) == shape(created["metadata"]["labels"])
    assert replay.mapping[NODE_UID] == node["metadata"]["uid"]


async def test_node_reregistration_after_restart(api: ApiServer) -> None:
    await _registered(api)
    replay = Replay(api, node_clients(api, NODE))
    await replay.run("node-reregistration-after-restart.json")
    assert replay.mismatches() == []
    assert [r[3] for r in replay.results if r[0] == "create"] == [409]


async def test_lease_create_and_renew(api: ApiServer) -> None:
    replay = await _registered(api)
    answers = await replay.run("lease-create-renew.json")
    assert replay.mismatches() == []
    renewals = [a for a in answers if a.get("kind") == "Lease"]
    assert len({a["metadata"]["resourceVersion"] for a in renewals}) == len(renewals)
    owner = renewals[-1]["metadata"]["ownerReferences"][0]
    assert (owner["name"], owner["uid"]) == (NODE, replay.mapping[NODE_UID])


async def test_static_pod_mirror_create_and_delete(api: ApiServer) -> None:
    replay = await _registered(api)
    answers = await replay.run("static-pod-mirror-create.json")
    assert replay.mismatches() == []
    mirror = answers[0]
    recorded = _first("static-pod-mirror-create.json", "create", "/pods")
    assert mirror["metadata"]["uid"] != recorded["requestObject"]["metadata"]["uid"]  # the server assigns uids
    assert shape(mirror["spec"]) == shape(recorded["responseObject"]["spec"])
    assert "serviceAccountName" not in mirror["spec"]  # ServiceAccount admission skips mirror pods
    replay.results.clear()
    await replay.run("static-pod-mirror-delete.json")
    # The two recordings overlap by one request: the `Killing` event ends the first and starts the second.
    assert replay.mismatches() == [("create", "/api/v1/namespaces/fixtures/events", 201, 409)]
    assert (await api.admin().request("GET", f"/api/v1/namespaces/fixtures/pods/static-web-{NODE}")).status == 404


async def test_mirror_pod_rules(api: ApiServer) -> None:
    replay = await _registered(api)
    body = copy.deepcopy(_first("static-pod-mirror-create.json", "create", "/pods")["requestObject"])
    body["metadata"]["ownerReferences"][0]["uid"] = replay.mapping[NODE_UID]
    node = replay.clients[f"system:node:{NODE}"]
    cases = {
        "not-mirror": ("annotations", None, f'pod does not have "kubernetes.io/config.mirror" annotation, node "{NODE}" can only create mirror pods'),
        "no-owner": ("ownerReferences", None, f'node "{NODE}" can only create pods with an owner reference set to itself'),
    }
    for name, (key, value, message) in cases.items():
        bad = copy.deepcopy(body)
        bad["metadata"]["name"] = name
        if value is None:
            bad["metadata"].pop(key)
        reply = await node.request("POST", "/api/v1/namespaces/fixtures/pods", bad)
        assert (reply.status, reply.body["message"]) == (403, f'pods "{name}" is forbidden: {message}')
    other = copy.deepcopy(body)
    other["spec"]["nodeName"] = "someone-else"
    reply = await node.request("POST", "/api/v1/namespaces/fixtures/pods", other)
    assert reply.status == 403 and reply.body["message"].endswith("can only create pods with spec.nodeName set to itself")


async def test_graceful_delete(api: ApiServer) -> None:
    replay = await _registered(api)
    await _pod_from_flow(api, "graceful-delete.json", "graceful")

    async def admin_step(entry: Json) -> None:
        assert entry["verb"] == "delete"
        await api.admin().delete("pods", "graceful", "fixtures", grace=5)

    replay.other = admin_step
    answers = await replay.run("graceful-delete.json")
    assert replay.mismatches() == []
    final = answers[-1]
    assert final["metadata"]["deletionGracePeriodSeconds"] == 0 and final["status"]["phase"] == "Succeeded"
    assert (await api.admin().request("GET", "/api/v1/namespaces/fixtures/pods/graceful")).status == 404


async def test_eviction(api: ApiServer) -> None:
    replay = await _registered(api)
    await _pod_from_flow(api, "eviction.json", "evictee")

    async def admin_step(entry: Json) -> None:
        assert entry["verb"] == "create" and entry["requestURI"].endswith("/eviction")
        await api.admin().evict("evictee", "fixtures")

    replay.other = admin_step
    answers = await replay.run("eviction.json")
    assert replay.mismatches() == []
    seen = answers[0]
    assert seen["status"]["conditions"][0]["type"] == "DisruptionTarget"
    recorded = _first("eviction.json", "get", "/pods/evictee")["responseObject"]
    assert seen["metadata"]["deletionGracePeriodSeconds"] == recorded["metadata"]["deletionGracePeriodSeconds"]
    assert seen["metadata"]["generation"] == recorded["metadata"]["generation"] == 2


async def test_events_create_and_aggregate(api: ApiServer) -> None:
    replay = await _registered(api)
    await replay.run("events-create-patch.json")
    assert replay.mismatches() == []
    entries: list[Json] = load("kubelet-flows/events-create-patch.json")
    last = entries[-1]
    name = last["requestURI"].rsplit("/", 1)[-1]
    event = await api.admin().get("events", name, "fixtures")
    assert event["count"] == last["requestObject"]["count"] == last["responseObject"]["count"]


async def test_configmap_secret_and_tokens(api: ApiServer) -> None:
    replay = await _registered(api)
    admin = api.admin()
    await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-config", "namespace": "fixtures"},
                        "data": {"k": "v"}})
    await admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app-secret", "namespace": "fixtures"},
                        "data": {"k": "dg=="}})
    await _pod_from_flow(api, "configmap-secret-token-pod.json", "cm-secret-pod")

    async def admin_step(entry: Json) -> None:
        return None  # objects made above; the scheduler's binding is the pod's spec.nodeName

    replay.other = admin_step
    answers = await replay.run("configmap-secret-token-pod.json")
    assert replay.mismatches() == []
    tokens = [a for a in answers if a.get("kind") == "TokenRequest"]
    assert [t["spec"]["audiences"] for t in tokens] == [["https://kubernetes.default.svc.cluster.local"], ["fixture-audience"]]
    for token in tokens:
        assert api.tokens.claims(token["status"]["token"]) is not None


async def test_tls_bootstrap(api: ApiServer) -> None:
    identity = api.add_bootstrap_token("n11ryp", "0123456789abcdef")
    replay = Replay(api, {"system:bootstrap:n11ryp": api.client(identity)})
    answers = await replay.run("tls-bootstrap.json")
    assert replay.mismatches() == []
    csr = answers[0]
    assert csr["spec"]["username"] == "system:bootstrap:n11ryp"
    assert csr["spec"]["groups"] == ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
                                     "system:authenticated"]
    for _ in range(50):
        csr = await api.admin().get("certificatesigningrequests", csr["metadata"]["name"], api_version="certificates.k8s.io/v1")
        if csr["status"].get("certificate"):
            break
        await asyncio.sleep(0.02)
    assert [c["type"] for c in csr["status"]["conditions"]] == ["Approved"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(csr["status"]["certificate"]))
    assert cert.subject.rfc4514_string() == f"CN=system:node:{NODE},O=system:nodes"
    assert cert.issuer == api.ca.cert.subject


async def test_kubelet_subject_access_reviews(api: ApiServer) -> None:
    replay = await _registered(api)
    answers = await replay.run("kubelet-api-subjectaccessreviews.json")
    assert replay.mismatches() == []
    entries: list[Json] = load("kubelet-flows/kubelet-api-subjectaccessreviews.json")
    assert [a["status"] for a in answers] == [e["responseObject"]["status"] for e in entries]


async def test_kubelet_startup_sequence(api: ApiServer) -> None:
    identity = api.add_bootstrap_token("n11ryp", "0123456789abcdef")
    clients = {"system:bootstrap:n11ryp": api.client(identity), **node_clients(api, NODE)}
    replay = Replay(api, clients)
    await replay.run("kubelet-startup-sequence.json")
    assert replay.mismatches() == []
