"""DNS, hostname and /etc/hosts as the kubelet manages them, read back from inside real containers.

No DNS server is ever queried: the nameservers are documentation addresses, `resolvConf` is a file the
test writes, and nothing inside the containers resolves a name that /etc/hosts does not answer.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cri.runtime import Runtime
from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, container_id, cstatus, simple_pod
from tests.integration.runtime_view import open_view

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker  # the agent fixture's dependency

HOST_RESOLV = "nameserver 192.0.2.1\nsearch lab.example\noptions timeout:2\n"
SLEEP = ["sh", "-c", "exec sleep 3600"]
LOCALHOST_BLOCK = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    """The agent's runtime (Docker, or the CRI containerd with MKL_TEST_RUNTIME=containerd)."""
    view = await open_view()
    try:
        yield view.runtime
    finally:
        await view.runtime.close()


def running(p: dict[str, Any], *names: str) -> bool:
    return all("running" in cstatus(p, n)["state"] for n in names)


async def read(runtime: Runtime, p: dict[str, Any], container: str, *cmd: str) -> str:
    result = await runtime.exec_sync(container_id(p, container), list(cmd), timeout=10)
    assert result.exit_code == 0, result.stderr
    return result.stdout.decode()


def resolver(text: str) -> list[str]:
    """A resolv.conf's lines in any order: the runtime writes the file (Docker puts the nameservers first,
    containerd the search line); the order of the nameservers among themselves is kept."""
    return sorted(text.splitlines(), key=lambda line: line.split(" ", 1)[0])


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return simple_pod(name, [{"name": "app", "command": SLEEP}], **spec)


def events(all_events: list[dict[str, Any]], p: dict[str, Any]) -> list[tuple[str, str]]:
    uid = p["metadata"]["uid"]
    return [(e["reason"], e["message"]) for e in all_events if e["involvedObject"].get("uid") == uid]


async def test_policies_hosts_and_hostnames(agent: AgentProcess, runtime: Runtime, tmp_path: Path) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(HOST_RESOLV)
    agent.extra = {"clusterDNS": ["10.96.0.10"], "clusterDomain": "cluster.local", "resolvConf": str(resolv)}
    node = agent.node
    agent.put("cf.yaml", simple_pod(
        "cf", [{"name": "app", "command": SLEEP}, {"name": "side", "command": SLEEP}],
        hostname="web", subdomain="sub",
        hostAliases=[{"ip": "10.1.2.3", "hostnames": ["foo.remote", "bar.remote"]}],
        dnsConfig={"searches": ["extra.example"], "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]},
    ))
    agent.put("fqdn.yaml", pod("fqdn", subdomain="sub", setHostnameAsFQDN=True))
    agent.put("dflt.yaml", pod("dflt", dnsPolicy="Default"))
    agent.put("none.yaml", pod("none", dnsPolicy="None", dnsConfig={
        "nameservers": ["192.0.2.53"], "searches": ["only.example"], "options": [{"name": "attempts", "value": "1"}]}))
    agent.put("forming.yaml", pod("forming", dnsConfig={"nameservers": ["192.0.2.3", "192.0.2.4", "192.0.2.5"]}))
    agent.put("hostnet.yaml", pod("hostnet", hostNetwork=True,
                                  hostAliases=[{"ip": "10.1.2.3", "hostnames": ["foo.remote"]}]))
    long_name = "h" * 40
    agent.put("toolong.yaml", pod("toolong", hostname=long_name, subdomain="s", setHostnameAsFQDN=True))
    agent.start()

    cf = await agent.wait_pod("cf", lambda p: running(p, "app", "side"), "both containers running")
    cluster_search = "default.svc.cluster.local svc.cluster.local cluster.local"
    expected = f"nameserver 10.96.0.10\nsearch {cluster_search} lab.example extra.example\noptions ndots:2 edns0\n"
    # the sandbox's file: every container of the pod reads the same one
    assert resolver(await read(runtime, cf, "app", "cat", "/etc/resolv.conf")) == resolver(expected)
    assert resolver(await read(runtime, cf, "side", "cat", "/etc/resolv.conf")) == resolver(expected)
    pod_ip = cf["status"]["podIP"]
    fqdn = "web.sub.default.svc.cluster.local"
    assert await read(runtime, cf, "app", "cat", "/etc/hosts") == LOCALHOST_BLOCK + (
        f"{pod_ip}\t{fqdn}\tweb\n"
        "\n# Entries added by HostAliases.\n"
        "10.1.2.3\tfoo.remote\tbar.remote\n"
    )
    assert await read(runtime, cf, "side", "hostname") == "web\n"
    assert await read(runtime, cf, "side", "hostname", "-f") == f"{fqdn}\n"

    fq = await agent.wait_pod("fqdn", lambda p: running(p, "app"), "running")
    fq_name = f"fqdn-{node}.sub.default.svc.cluster.local"
    assert await read(runtime, fq, "app", "hostname") == f"{fq_name}\n"
    assert await read(runtime, fq, "app", "hostname", "-f") == f"{fq_name}\n"
    assert (await read(runtime, fq, "app", "cat", "/etc/hosts")).endswith(
        f"{fq['status']['podIP']}\t{fq_name}\tfqdn-{node}\n")

    dflt = await agent.wait_pod("dflt", lambda p: running(p, "app"), "running")
    assert resolver(await read(runtime, dflt, "app", "cat", "/etc/resolv.conf")) == resolver(HOST_RESOLV)
    assert await read(runtime, dflt, "app", "hostname", "-f") == f"dflt-{node}\n"

    none = await agent.wait_pod("none", lambda p: running(p, "app"), "running")
    assert resolver(await read(runtime, none, "app", "cat", "/etc/resolv.conf")) == resolver(
        "nameserver 192.0.2.53\nsearch only.example\noptions attempts:1\n")

    forming = await agent.wait_pod("forming", lambda p: running(p, "app"), "running")
    assert [line for line in (await read(runtime, forming, "app", "cat", "/etc/resolv.conf")).splitlines()
            if line.startswith("nameserver ")] == [
        "nameserver 10.96.0.10", "nameserver 192.0.2.3", "nameserver 192.0.2.4"]

    hostnet = await agent.wait_pod("hostnet", lambda p: running(p, "app"), "running")
    # ClusterFirst on the host network is Default: the node's resolver config
    assert resolver(await read(runtime, hostnet, "app", "cat", "/etc/resolv.conf")) == resolver(HOST_RESOLV)
    node_hosts = Path("/etc/hosts").read_text()
    assert await read(runtime, hostnet, "app", "cat", "/etc/hosts") == (
        "# Kubernetes-managed hosts file (host network).\n" + node_hosts
        + "\n# Entries added by HostAliases.\n10.1.2.3\tfoo.remote\n")
    assert await read(runtime, hostnet, "app", "hostname") == f"{socket.gethostname()}\n"

    all_events = (await agent.get_json("/debug/events"))["items"]
    assert ("DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
            "nameserver line is: 10.96.0.10 192.0.2.3 192.0.2.4") in events(all_events, forming)
    too_long = await agent.wait_pod("toolong", lambda p: p["status"].get("phase") == "Pending", "Pending")
    fqdn_long = f"{long_name}.s.default.svc.cluster.local"

    async def refused() -> bool:
        evs = events((await agent.get_json("/debug/events"))["items"], too_long)
        return ("FailedCreatePodSandBox", f"Failed to create pod sandbox: failed to construct FQDN from pod hostname "
                f"and cluster domain, FQDN {fqdn_long} is too long (64 characters is the max, 68 characters "
                "requested)") in evs

    await agent.wait_for("FQDN refused", refused, timeout=20)
    assert all(e[0] not in ("MissingClusterDNS", "DNSConfigForming") for e in events(all_events, cf))


async def test_missing_cluster_dns_falls_back_to_default(agent: AgentProcess, runtime: Runtime) -> None:
    # no clusterDNS, and resolvConf "": Default then points at the node itself and searches nothing
    agent.extra = {"clusterDomain": "cluster.local", "resolvConf": ""}
    agent.put("nodns.yaml", pod("nodns"))
    agent.start()
    p = await agent.wait_pod("nodns", lambda p: running(p, "app"), "running")
    assert resolver(await read(runtime, p, "app", "cat", "/etc/resolv.conf")) == resolver("nameserver 127.0.0.1\nsearch .\n")
    evs = events((await agent.get_json("/debug/events"))["items"], p)
    assert ("MissingClusterDNS", f'pod: "nodns-{agent.node}_default({p["metadata"]["uid"]})". kubelet does not have '
            'ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" '
            "policy.") in evs
