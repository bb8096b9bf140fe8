"""Issue 14 item 4 end to end: two real agents on two "nodes" (two network namespaces, each with its own
Docker Engine) joined by a bridge the test creates; the test API server allocates their podCIDRs; a pod on
one node fetches a page from a pod on the other by pod IP, with its own pod IP as the source (no NAT inside
the cluster CIDR); traffic leaving the cluster CIDR is masqueraded; a hostNetwork DaemonSet runs a pod on
each node with the node's address; a Node that leaves takes its route with it.

The second node's engine is `scripts/testenv up` with MKL_TEST_NETNS=<this netns>-peer (its images build
in a few seconds); the bridge lives in a third netns, <this netns>-lan. Both are removed at teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiodocker
import pytest
from aiohttp import web

from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError, Client
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration.agent_env import JoinedAgent, running_api, stop_and_clean
from tests.integration.runtime_view import docker_only

docker = agent_env.docker

# --pod-network=host-gw makes the node's pod bridge a Docker network; on a CRI runtime the pod network is the CNI
# add-on's (docs/containerd.md), so the agent has no network to build there
pytestmark = [pytest.mark.integration,
              docker_only("--pod-network=host-gw builds the pod network as a Docker network; on a CRI runtime the "
                          "CNI add-on does (a second Docker engine is the peer node)")]

REPO = Path(__file__).resolve().parents[2]
CLUSTER_CIDR = "10.244.0.0/16"
LAN = "192.168.231.0/24"
NODE_A_IP = "192.168.231.1"
NODE_B_IP = "192.168.231.2"
ROUTE_PROTOCOL = "77"  # minikubelet.network.host_gw.ROUTE_PROTOCOL
IPTABLES_COMMENT = "minikubelet pod network"


def sh(*cmd: str, check: bool = True) -> str:
    done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def own_netns() -> str:
    name = os.environ.get("MKL_TEST_NETNS", "")
    if not name or not os.path.exists(f"/run/netns/{name}"):
        pytest.skip("needs the test engine's network namespace (run through scripts/test)")
    return name


def run_testenv(netns: str, *args: str) -> str:
    return sh("env", f"MKL_TEST_NETNS={netns}", str(REPO / "scripts" / "testenv"), *args)


@contextlib.contextmanager
def two_node_lan(netns: str) -> Iterator[str]:
    """The peer node's netns with its own engine, a bridge in a third netns, a veth from each node to it.
    Yields the peer's netns name."""
    agent_env.docker_host()  # skips without the engine
    peer, lan = f"{netns}-peer", f"{netns}-lan"
    run_testenv(peer, "up")
    # what a killed run may have left: the LAN netns (deleting it takes the veth pairs with it)
    sh("ip", "netns", "delete", lan, check=False)
    sh("ip", "link", "delete", "lan0", check=False)
    try:
        sh("ip", "netns", "add", lan)
        sh("ip", "-n", lan, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", lan, "link", "set", "br0", "up")
        # this process runs in `netns` (node A)
        sh("ip", "link", "add", "lan0", "type", "veth", "peer", "name", "a-lan", "netns", lan)
        sh("ip", "-n", peer, "link", "add", "lan0", "type", "veth", "peer", "name", "b-lan", "netns", lan)
        for end in ("a-lan", "b-lan"):
            sh("ip", "-n", lan, "link", "set", end, "master", "br0", "up")
        sh("ip", "addr", "add", f"{NODE_A_IP}/24", "dev", "lan0")
        sh("ip", "link", "set", "lan0", "up")
        sh("ip", "-n", peer, "addr", "add", f"{NODE_B_IP}/24", "dev", "lan0")
        sh("ip", "-n", peer, "link", "set", "lan0", "up")
        yield peer
    finally:
        sh("ip", "netns", "delete", lan, check=False)  # takes the bridge and both veth pairs
        run_testenv(peer, "down")


def forget_pod_network(docker_host: str) -> None:
    """What the agent leaves on this node on purpose (it outlives the agent, as a CNI bridge does): the Docker
    network, our routes and rules. Removed so the next test starts clean (the peer node goes entirely)."""
    sh("ip", "route", "flush", "proto", ROUTE_PROTOCOL, check=False)
    for binary in ("iptables", "ip6tables"):
        for table in ("filter", "nat"):
            for rule in sh(binary, "-w", "5", "-t", table, "-S", check=False).splitlines():
                if IPTABLES_COMMENT in rule and rule.startswith("-A "):
                    sh("sh", "-c", f"{binary} -w 5 -t {table} {rule.replace('-A ', '-D ', 1)}", check=False)
    sh("env", f"DOCKER_HOST={docker_host}", "docker", "network", "rm", "minikubelet-pods", check=False)


def our_rules() -> list[str]:
    return [r for table in ("filter", "nat") for r in sh("iptables", "-w", "5", "-t", table, "-S").splitlines()
            if IPTABLES_COMMENT in r]


def our_routes(netns: str | None) -> list[tuple[str, str]]:
    """(destination, gateway) of our routes."""
    ns = ["-n", netns] if netns else []
    out = []
    for line in sh("ip", *ns, "route", "show", "proto", ROUTE_PROTOCOL).splitlines():
        words = line.split()
        out.append((words[0], words[words.index("via") + 1] if "via" in words else ""))
    return out


def pod(name: str, node: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     **container}], **spec}}


async def get(admin: Client, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
    try:
        return dict(await admin.get(plural, name, namespace))
    except ApiStatusError:
        return None


def main_state(p: dict[str, Any]) -> dict[str, Any]:
    statuses = (p.get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0].get("state") or {})


def ready(node: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in node.get("status", {}).get("conditions") or [] if c["type"] == "Ready"), {})


@contextlib.asynccontextmanager
async def remote_addr_server(host: str) -> AsyncIterator[int]:
    """An HTTP server outside the cluster CIDR (the node's LAN address) answering with the caller's address."""
    async def handle(request: web.Request) -> web.Response:
        return web.Response(text=str(request.remote))

    app = web.Application()
    app.router.add_get("/", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = agent_env.free_port()
    await web.TCPSite(runner, host, port).start()
    try:
        yield port
    finally:
        await runner.cleanup()


HTTPD = ("mkdir -p /www/cgi-bin && echo hello-from-$(hostname) > /www/index.html && "
         "printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /www/cgi-bin/ip && "
         "chmod +x /www/cgi-bin/ip && exec httpd -f -p 8080 -h /www")


def fetch(url: str) -> dict[str, Any]:
    # the page becomes the termination message, so the API's pod status carries what was fetched (no -T:
    # the image's busybox wget segfaults with it)
    return {"command": ["sh", "-c", f"wget -q -O /dev/termination-log {url}"]}


async def test_pods_on_two_nodes_reach_each_other_by_pod_ip(tmp_path: Path, docker: aiodocker.Docker) -> None:
    netns = own_netns()
    with two_node_lan(netns) as peer:
        peer_host = f"unix:///run/{peer}/docker.sock"
        async with running_api(tmp_path / "api", host=NODE_A_IP, history=500, max_watch_seconds=10,
                               cluster_cidrs=(CLUSTER_CIDR,), workloads=True) as api, aiodocker.Docker(url=peer_host) as peer_docker:
            await run_two_nodes(tmp_path, api, docker, peer, peer_host, peer_docker)


async def run_two_nodes(tmp_path: Path, api: ApiServer, docker: aiodocker.Docker, peer: str, peer_host: str,
                        peer_docker: aiodocker.Docker) -> None:
    # the network add-on's grant (flannel's ClusterRole: nodes get/list/watch); the Node authorizer alone
    # lets a node read only its own Node
    api.authorizer.grant("system:nodes", "nodes", ("get", "list", "watch"))
    admin = api.admin()
    flags = ("--pod-network", "host-gw", "--non-masquerade-cidr", CLUSTER_CIDR)
    a = JoinedAgent(tmp_path / "a", agent_env.docker_host(), api, "--node-ip", NODE_A_IP, *flags)
    b = JoinedAgent(tmp_path / "b", peer_host, api, "--node-ip", NODE_B_IP, *flags)
    b.prefix = ["nsenter", f"--net=/run/netns/{peer}", "--"]
    b.extra["address"] = NODE_B_IP
    b.host = NODE_B_IP
    try:
        a.start()
        b.start()
        await asyncio.gather(a.wait_up(), b.wait_up())

        # each Node gets its podCIDR from the IPAM controller and turns Ready once its pod network is up
        async def nodes_ready() -> dict[str, dict[str, Any]] | None:
            out = {}
            for agent in (a, b):
                node = await get(admin, "nodes", agent.node)
                if node is None or not node["spec"].get("podCIDRs") or ready(node).get("status") != "True":
                    return None
                out[agent.node] = node
            return out

        nodes = await a.wait_for("both nodes Ready with podCIDRs", nodes_ready, timeout=60)
        cidr_a = nodes[a.node]["spec"]["podCIDR"]
        cidr_b = nodes[b.node]["spec"]["podCIDR"]
        assert cidr_a != cidr_b and {cidr_a, cidr_b} <= {"10.244.0.0/24", "10.244.1.0/24"}
        assert nodes[a.node]["spec"]["podCIDRs"] == [cidr_a]

        # host-gw: each node routes the other's podCIDR via its InternalIP
        async def routes() -> bool:
            return our_routes(None) == [(cidr_b, NODE_B_IP)] and our_routes(peer) == [(cidr_a, NODE_A_IP)]

        await a.wait_for("routes to the other node's podCIDR", routes, timeout=30)

        # a web server on node A, fetched from node B by pod IP
        await admin.create(pod("web", a.node, {"command": ["sh", "-c", HTTPD]}, hostname="web-a"))

        async def web_running() -> dict[str, Any] | None:
            p = await get(admin, "pods", "web", "default")
            return p if p is not None and "running" in main_state(p) and p["status"].get("podIP") else None

        web_pod = await a.wait_for("web running with a pod IP", web_running, timeout=60)
        web_ip = web_pod["status"]["podIP"]
        assert ipaddress.ip_address(web_ip) in ipaddress.ip_network(cidr_a)
        assert web_pod["status"]["podIPs"] == [{"ip": web_ip}]
        assert web_pod["status"]["hostIP"] == NODE_A_IP

        async def terminated(name: str) -> dict[str, Any] | None:
            p = await get(admin, "pods", name, "default")
            return p if p is not None and "terminated" in main_state(p) else None

        await admin.create(pod("page", b.node, fetch(f"http://{web_ip}:8080/")))
        await admin.create(pod("whoami", b.node, fetch(f"http://{web_ip}:8080/cgi-bin/ip")))
        page = await b.wait_for("page fetched", lambda: terminated("page"), timeout=60)
        assert main_state(page)["terminated"]["exitCode"] == 0, page["status"]
        assert main_state(page)["terminated"]["message"] == "hello-from-web-a\n"
        whoami = await b.wait_for("whoami fetched", lambda: terminated("whoami"), timeout=60)
        client_ip = whoami["status"]["podIP"]
        assert ipaddress.ip_address(client_ip) in ipaddress.ip_network(cidr_b)
        # the server saw the client's own pod IP: no NAT between pod CIDRs (busybox prints [::ffff:a.b.c.d])
        seen = main_state(whoami)["terminated"]["message"].strip().strip("[]").removeprefix("::ffff:")
        assert seen == client_ip

        # leaving the cluster CIDR, pod traffic is masqueraded to the node's address
        async with remote_addr_server(NODE_A_IP) as port:
            await admin.create(pod("outside", b.node, fetch(f"http://{NODE_A_IP}:{port}/")))
            outside = await b.wait_for("outside fetched", lambda: terminated("outside"), timeout=60)
        assert main_state(outside)["terminated"]["message"] == NODE_B_IP

        # node A's agent killed and started again: it finds its network, rules and routes as they were
        rules_before = our_rules()
        assert len(rules_before) == 2  # the forward accept and the masquerade rule
        a.kill9()
        a.start()
        await a.wait_up()

        async def set_up_again() -> bool:
            return "pod network ready" in a.log().split("starting minikubelet")[-1]

        await a.wait_for("A's pod network set up again", set_up_again)
        await admin.create(pod("again", b.node, fetch(f"http://{web_ip}:8080/")))
        again = await b.wait_for("page fetched after the restart", lambda: terminated("again"), timeout=60)
        assert main_state(again)["terminated"]["message"] == "hello-from-web-a\n"
        assert our_rules() == rules_before and our_routes(None) == [(cidr_b, NODE_B_IP)]

        # a hostNetwork DaemonSet (how network add-ons and kube-proxy are deployed): a pod on each node, in the
        # node's network namespace, with the node's address as its pod IP
        await admin.create({"apiVersion": "apps/v1", "kind": "DaemonSet",
                            "metadata": {"name": "net-agent", "namespace": "default"},
                            "spec": {"selector": {"matchLabels": {"app": "net-agent"}},
                                     "template": {"metadata": {"labels": {"app": "net-agent"}},
                                                  "spec": {"hostNetwork": True, "terminationGracePeriodSeconds": 1,
                                                           "automountServiceAccountToken": False,
                                                           "containers": [{
                                                               "name": "main", "image": BUSYBOX_IMAGE,
                                                               "imagePullPolicy": "IfNotPresent",
                                                               "command": ["sh", "-c", "ip -4 addr show lan0 > "
                                                                           "/dev/termination-log; exec sleep 100000"]}]}}}})

        async def daemons() -> list[dict[str, Any]] | None:
            pods = (await admin.list("pods", "default", query="labelSelector=app%3Dnet-agent"))["items"]
            up = [p for p in pods if "running" in main_state(p)]
            return up if len(up) == 2 else None

        by_node = {p["spec"]["nodeName"]: p for p in await a.wait_for("a daemon pod on each node", daemons, 60)}
        assert {n: (p["status"]["podIP"], p["status"]["podIPs"]) for n, p in by_node.items()} == {
            a.node: (NODE_A_IP, [{"ip": NODE_A_IP}]), b.node: (NODE_B_IP, [{"ip": NODE_B_IP}])}

        # node B leaves: its agent stops, its Node is deleted; node A drops the route, the CIDR is free again
        await stop_and_clean(b, peer_docker)
        await admin.delete("nodes", b.node)

        async def route_gone() -> bool:
            return our_routes(None) == []

        await a.wait_for("route to the departed node removed", route_gone, timeout=30)
        assert "route to a node's pod CIDR removed" in a.log()
    finally:
        await stop_and_clean(b, peer_docker)
        await stop_and_clean(a, docker)
        forget_pod_network(agent_env.docker_host())


async def test_dual_stack_pod_gets_an_address_of_each_family(tmp_path: Path, docker: aiodocker.Docker) -> None:
    async with running_api(tmp_path / "api", history=500, max_watch_seconds=10,
                           cluster_cidrs=(CLUSTER_CIDR, "fd00:10:244::/56")) as api:
        admin = api.admin()
        a = JoinedAgent(tmp_path / "a", agent_env.docker_host(), api, "--pod-network", "host-gw",
                        "--non-masquerade-cidr", CLUSTER_CIDR)
        try:
            a.start()
            await a.wait_up()

            async def own_node() -> dict[str, Any] | None:
                node = await get(admin, "nodes", a.node)
                return node if node is not None and ready(node).get("status") == "True" else None

            node = await a.wait_for("the node Ready", own_node, timeout=60)
            assert node["spec"]["podCIDRs"] == ["10.244.0.0/24", "fd00:10:244::/64"]
            await admin.create(pod("dual", a.node, {"command": ["sh", "-c", "ip addr show eth0 > /dev/termination-log"]}))

            async def done() -> dict[str, Any] | None:
                p = await get(admin, "pods", "dual", "default")
                return p if p is not None and "terminated" in main_state(p) else None

            dual = await a.wait_for("the dual-stack pod done", done, timeout=60)
            ips = [entry["ip"] for entry in dual["status"]["podIPs"]]
            assert len(ips) == 2 and dual["status"]["podIP"] == ips[0]
            assert ipaddress.ip_address(ips[0]) in ipaddress.ip_network("10.244.0.0/24")
            assert ipaddress.ip_address(ips[1]) in ipaddress.ip_network("fd00:10:244::/64")
            # the addresses the API reports are the ones the pod has
            seen = main_state(dual)["terminated"]["message"]
            assert f"inet {ips[0]}/24 " in seen and f"inet6 {ips[1]}/64 scope global" in seen
        finally:
            await stop_and_clean(a, docker)
            forget_pod_network(agent_env.docker_host())
