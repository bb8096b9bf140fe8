"""Issue 14 items 5 and 2 end to end: pods that use the cluster's DNS and API, on the real agent joined to the
test API server, on the real Docker Engine.

- Cluster DNS: a DNS server runs as a pod (kube-system, zone from a ConfigMap the test writes from the Services'
  ClusterIPs, as CoreDNS would answer them); the agent's `clusterDNS` is the kube-dns Service's ClusterIP, as a
  kubeadm cluster sets it, and the test maps that ClusterIP to the DNS pod in place of kube-proxy
  (tests/integration/service_proxy.py). A second pod resolves a Service by its full name and, through the search
  paths of the resolv.conf the agent wrote, by `web` and `web.default`.
- The API from a pod: a pod with the default kube-api-access-* volume calls
  POST selfsubjectreviews (`kubectl auth whoami`) with curl, its projected token and ca.crt, at
  https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, and is told it is system:serviceaccount:default:default.
  The test API server listens on the engine bridge's gateway address, so pods reach it; the `kubernetes` Service's
  ClusterIP is mapped to it in place of kube-proxy. A pod with a podCertificate projection is refused with a
  clear reason and a FailedMount Event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.apiserver.services import KUBERNETES_SERVICE_IP
from tests.images import BUSYBOX_IMAGE, CLUSTER_DNS_IMAGE, CURL_IMAGE
from tests.integration import agent_env
from tests.integration import runtime_view as views
from tests.integration.agent_env import JoinedAgent, running_api, stop_and_clean
from tests.integration.runtime_view import RuntimeView
from tests.integration.service_proxy import ServiceProxy

docker = agent_env.docker
api = agent_env.api
runtime_view = views.runtime_view

pytestmark = pytest.mark.integration

SLEEP = ["sh", "-c", "exec sleep 100000"]
KUBE_DNS_IP = "10.96.0.10"  # kubeadm's clusterDNS: the 10th address of the service CIDR
DOMAIN = "cluster.local"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def pod(name: str, ns: str, node: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     **container}], **spec}}


async def get_pod(admin: Any, name: str, ns: str) -> dict[str, Any] | None:
    try:
        result: dict[str, Any] = await admin.get("pods", name, ns)
    except ApiStatusError:
        return None
    return result


def main_status(p: dict[str, Any]) -> dict[str, Any]:
    return dict(((p.get("status") or {}).get("containerStatuses") or [{}])[0])


async def wait_pod(agent: JoinedAgent, admin: Any, name: str, ns: str, what: str, pred: Any,
                   timeout: float = 60) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        p = await get_pod(admin, name, ns)
        return p if p is not None and pred(p) else None

    return dict(await agent.wait_for(f"{ns}/{name}: {what}", check, timeout=timeout))


def running(p: dict[str, Any]) -> bool:
    return "running" in main_status(p).get("state", {}) and bool(p["status"].get("podIP"))


def ready(p: dict[str, Any]) -> bool:
    return bool(main_status(p).get("ready")) and bool(p["status"].get("podIP"))


def cid_of(p: dict[str, Any]) -> str:
    return str(main_status(p)["containerID"])


async def exec_out(view: RuntimeView, cid: str, cmd: list[str]) -> str:
    result = await view.exec(cid, *cmd)
    return (result.stdout + result.stderr).decode()


async def container_log(view: RuntimeView, cid: str) -> str:
    return (await view.logs(cid)).decode()


async def node_exists(admin: Any, name: str) -> bool:
    try:
        await admin.get("nodes", name)
    except ApiStatusError:
        return False
    return True


def service(name: str, ns: str, port: int, protocol: str = "TCP", cluster_ip: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"port": port, "protocol": protocol}], "selector": {"app": name}}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


async def zone_of_services(admin: Any) -> str:
    """What CoreDNS's kubernetes plugin would answer for the Services as the API has them: one A record each."""
    services = (await admin.list("services"))["items"]
    return "".join(f"{s['spec']['clusterIP']} {s['metadata']['name']}.{s['metadata']['namespace']}.svc.{DOMAIN}\n"
                   for s in services if s["spec"].get("clusterIP") not in (None, "None"))


async def test_a_pod_resolves_a_service_through_a_dns_server_pod(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), api,
                        "--cluster-dns", KUBE_DNS_IP, "--cluster-domain", DOMAIN)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node", lambda: node_exists(admin, agent.node), timeout=60)
        await admin.create(service("kube-dns", "kube-system", 53, "UDP", KUBE_DNS_IP))
        web_ip = (await admin.create(service("web", "default", 80)))["spec"]["clusterIP"]
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cluster-dns", "namespace": "kube-system"},
                            "data": {"hosts": await zone_of_services(admin)}})
        dns_pod = pod("cluster-dns", "kube-system", agent.node, {
            "image": CLUSTER_DNS_IMAGE, "volumeMounts": [{"name": "zone", "mountPath": "/etc/cluster-dns"}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 1}},
            dnsPolicy="Default", automountServiceAccountToken=False,
            volumes=[{"name": "zone", "configMap": {"name": "cluster-dns"}}])
        dns_pod["metadata"]["labels"] = {"k8s-app": "kube-dns"}
        await admin.create(dns_pod)
        await admin.create(pod("client", "default", agent.node, {"command": SLEEP}, automountServiceAccountToken=False))
        server = await wait_pod(agent, admin, "cluster-dns", "kube-system", "Ready", ready)
        client = await wait_pod(agent, admin, "client", "default", "running", running)
        with ServiceProxy() as proxy:
            # no kube-proxy here: the test maps the kube-dns ClusterIP to the DNS pod as kube-proxy would
            proxy.map(KUBE_DNS_IP, 53, "UDP", server["status"]["podIP"], 53, masquerade=True)
            cid = cid_of(client)
            resolv = await exec_out(runtime_view, cid, ["cat", "/etc/resolv.conf"])
            # the runtime writes the file: Docker puts the nameserver first, containerd the search line
            assert sorted(resolv.splitlines()) == sorted([
                f"nameserver {KUBE_DNS_IP}", f"search default.svc.{DOMAIN} svc.{DOMAIN} {DOMAIN}", "options ndots:5"]), resolv
            full = await exec_out(runtime_view, cid, ["nslookup", f"web.default.svc.{DOMAIN}"])
            assert f"Name:\tweb.default.svc.{DOMAIN}\nAddress: {web_ip}\n" in full, full
            assert f"Server:\t\t{KUBE_DNS_IP}\n" in full
            # busybox's nslookup walks the search list for a name without dots
            short = await exec_out(runtime_view, cid, ["nslookup", "web"])
            assert f"Name:\tweb.default.svc.{DOMAIN}\nAddress: {web_ip}\n" in short, short
            # glibc's resolver (ndots:5) for `web.default`; the ClusterIP itself leads nowhere without kube-proxy
            ping = await exec_out(runtime_view, cid, ["ping", "-c", "1", "-W", "1", "web.default"])
            assert ping.startswith(f"PING web.default ({web_ip}):"), ping
            assert "1 packets transmitted, 0 packets received" in ping
            missing = await exec_out(runtime_view, cid, ["nslookup", f"db.default.svc.{DOMAIN}"])
            assert f"can't find db.default.svc.{DOMAIN}: NXDOMAIN" in missing, missing
            # a new Service: its record reaches the running DNS pod through the ConfigMap volume's refresh
            db_ip = (await admin.create(service("db", "default", 5432)))["spec"]["clusterIP"]
            await admin.patch("configmaps", "cluster-dns", {"data": {"hosts": await zone_of_services(admin)}},
                              "kube-system")

            async def db_resolves() -> bool:
                out = await exec_out(runtime_view, cid, ["nslookup", "db"])
                return f"Name:\tdb.default.svc.{DOMAIN}\nAddress: {db_ip}\n" in out

            await agent.wait_for("db resolves", db_resolves, timeout=30, interval=0.5)
        log = await container_log(runtime_view, cid_of(server))
        assert f"query A web.default.svc.{DOMAIN}. -> NOERROR {web_ip}\n" in log, log
        assert f"query A web.default.default.svc.{DOMAIN}. -> NXDOMAIN\n" in log
    finally:
        await stop_and_clean(agent, docker)


async def test_a_pod_calls_the_api_with_its_projected_token(
        tmp_path: Path, docker: aiodocker.Docker, runtime_view: RuntimeView) -> None:
    gateway = await runtime_view.pod_gateway()
    async with running_api(tmp_path / "api", host=gateway, history=500, max_watch_seconds=10) as server:
        agent = JoinedAgent(tmp_path / "agent", agent_env.docker_host(), server)
        admin = server.admin()
        agent.start()
        try:
            await agent.wait_for("the Node", lambda: node_exists(admin, agent.node), timeout=60)
            review = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            # what client-go's in-cluster config reads; curl verifies the server against ca.crt
            script = (f'curl -sS --fail-with-body --cacert {SA_DIR}/ca.crt '
                      f'-H "Authorization: Bearer $(cat {SA_DIR}/token)" -H "Content-Type: application/json" '
                      f"-d '{review}' "
                      "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
                      "/apis/authentication.k8s.io/v1/selfsubjectreviews")
            whoami = pod("whoami", "default", agent.node, {"image": CURL_IMAGE, "command": ["sh", "-c", script]},
                         restartPolicy="Never")
            refused = pod("certs", "default", agent.node, {
                "command": SLEEP, "volumeMounts": [{"name": "cert", "mountPath": "/cert"}]},
                automountServiceAccountToken=False,
                volumes=[{"name": "cert", "projected": {"sources": [{"podCertificate": {
                    "signerName": "example.com/signer", "keyType": "ED25519", "credentialBundlePath": "bundle.pem"}}]}}])
            with ServiceProxy() as proxy:
                # the `kubernetes` Service's endpoint is the API server; mapped as kube-proxy would
                proxy.map(KUBERNETES_SERVICE_IP, 443, "TCP", gateway, server.port)
                created = await admin.create(whoami)
                assert any(v["name"].startswith("kube-api-access-") for v in created["spec"]["volumes"])
                await admin.create(refused)
                done = await wait_pod(agent, admin, "whoami", "default", "Succeeded",
                                      lambda p: p["status"].get("phase") in ("Succeeded", "Failed"))
                out = await container_log(runtime_view, cid_of(done))
                assert done["status"]["phase"] == "Succeeded", out
            answer = json.loads(out)
            assert answer["kind"] == "SelfSubjectReview"
            info = answer["status"]["userInfo"]
            assert info["username"] == "system:serviceaccount:default:default"
            assert info["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
            assert info["extra"]["authentication.kubernetes.io/pod-name"] == ["whoami"]
            assert info["extra"]["authentication.kubernetes.io/node-name"] == [agent.node]
            assert any(p == "/apis/authentication.k8s.io/v1/selfsubjectreviews" and u == info["username"]
                       for u, m, p in server.handler.requests)

            waiting = await wait_pod(agent, admin, "certs", "default", "CreateContainerConfigError",
                                     lambda p: main_status(p).get("state", {}).get("waiting", {}).get("reason")
                                     == "CreateContainerConfigError")
            message = waiting["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
            assert message == ('MountVolume.SetUp failed for volume "cert" : sources[0]: projected podCertificate '
                               "sources are not supported yet; only downwardAPI, configMap, secret and "
                               "serviceAccountToken sources can be served")

            async def failed_mount() -> bool:
                events = (await admin.list("events", "default"))["items"]
                return any(e["reason"] == "FailedMount" and e["message"] == message
                           and e["involvedObject"]["name"] == "certs" for e in events)

            await agent.wait_for("the FailedMount event", failed_mount, timeout=20)
        finally:
            await stop_and_clean(agent, docker)

