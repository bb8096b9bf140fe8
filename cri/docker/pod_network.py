"""The pod network as a Docker bridge network of our own on the node's pod CIDRs (kubenet's `cbr0`, with
Docker's IPAM handing out addresses from the CIDR as host-local would).

Docker does not masquerade it (`enable_ip_masquerade` false): the agent's masquerade rule leaves pod
traffic to the cluster CIDR unNATed, so pods on other nodes see the real pod IP.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from cri.docker.client import DockerClient
from cri.errors import NotFoundError, RuntimeError_

POD_NETWORK = "minikubelet-pods"
BRIDGE = "cbr0"
LABEL = "io.minikubelet.pod-network"


def gateway(cidr: str) -> str:
    """The bridge's address: the first address of the CIDR, as kubenet's cbr0 has."""
    return str(next(ipaddress.ip_network(cidr).hosts()))


def network_create_body(cidrs: tuple[str, ...]) -> dict[str, Any]:
    return {
        "Name": POD_NETWORK,
        "Driver": "bridge",
        "CheckDuplicate": True,
        "EnableIPv6": any(ipaddress.ip_network(c).version == 6 for c in cidrs),
        "IPAM": {"Driver": "default", "Config": [{"Subnet": c, "Gateway": gateway(c)} for c in cidrs]},
        "Options": {
            "com.docker.network.bridge.name": BRIDGE,
            "com.docker.network.bridge.enable_ip_masquerade": "false",
        },
        "Labels": {LABEL: ",".join(cidrs)},
    }


def network_cidrs(inspect: dict[str, Any]) -> tuple[str, ...]:
    configs = (inspect.get("IPAM") or {}).get("Config") or []
    return tuple(str(c.get("Subnet")) for c in configs if isinstance(c, dict) and c.get("Subnet"))


async def ensure_pod_network(client: DockerClient, cidrs: tuple[str, ...]) -> None:
    """The network exists with exactly `cidrs`; one on other CIDRs (the Node was given new ones) is
    replaced, which Docker refuses while a sandbox still uses it (RuntimeError_)."""
    try:
        existing = await client.get(f"networks/{POD_NETWORK}")
    except NotFoundError:
        existing = None
    if existing is not None:
        if set(network_cidrs(existing)) == set(cidrs):
            return
        try:
            await client.delete(f"networks/{POD_NETWORK}")
        except RuntimeError_ as e:
            raise RuntimeError_(f"pod network {POD_NETWORK} is on {','.join(network_cidrs(existing))}, "
                                f"the node's pod CIDRs are now {','.join(cidrs)}: {e}") from e
    await client.post("networks/create", network_create_body(cidrs))
