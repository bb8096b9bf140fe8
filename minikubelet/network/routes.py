"""Which routes the host-gw pattern wants on this node, from the Node objects (pure).

Every other Node's `spec.podCIDRs` is routed via that Node's InternalIP of the same IP family; a Node
without an InternalIP of that family, without podCIDRs, or with a CIDR that is not a network, gives no
route for it (and the rest still do), so one broken Node never stops the others' routes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class Route:
    dst: str  # a Node's pod CIDR, normalised ("10.244.1.0/24")
    via: str  # that Node's InternalIP
    node: str


def _family(text: str) -> int:
    return 6 if ":" in text else 4


def pod_cidrs(node: Mapping[str, Any]) -> tuple[str, ...]:
    """`spec.podCIDRs` (or the older single `podCIDR`), the valid ones, normalised."""
    spec = node.get("spec")
    if not isinstance(spec, Mapping):
        return ()
    raw = spec.get("podCIDRs")
    if not isinstance(raw, list) or not raw:
        raw = [spec.get("podCIDR")] if spec.get("podCIDR") else []
    out: list[str] = []
    for cidr in raw:
        try:
            out.append(str(ipaddress.ip_network(str(cidr))))
        except ValueError:
            continue
    return tuple(out)


def internal_ips(node: Mapping[str, Any]) -> tuple[str, ...]:
    status = node.get("status")
    addresses = status.get("addresses") if isinstance(status, Mapping) else None
    out: list[str] = []
    for a in addresses if isinstance(addresses, list) else []:
        if isinstance(a, Mapping) and a.get("type") == "InternalIP":
            try:
                out.append(str(ipaddress.ip_address(str(a.get("address")))))
            except ValueError:
                continue
    return tuple(out)


def node_name(node: Mapping[str, Any]) -> str:
    md = node.get("metadata")
    name = md.get("name") if isinstance(md, Mapping) else None
    return name if isinstance(name, str) else ""


def wanted_routes(nodes: Iterable[Mapping[str, Any]], own: str) -> list[Route]:
    """The routes to every other Node's pod CIDRs; none that overlaps this node's own CIDRs."""
    nodes = list(nodes)
    own_nets = [ipaddress.ip_network(c) for n in nodes if node_name(n) == own for c in pod_cidrs(n)]
    out: set[Route] = set()
    for node in nodes:
        name = node_name(node)
        if not name or name == own:
            continue
        ips = internal_ips(node)
        for cidr in pod_cidrs(node):
            net = ipaddress.ip_network(cidr)
            if any(net.version == o.version and net.overlaps(o) for o in own_nets):
                continue
            via = next((ip for ip in ips if _family(ip) == net.version), None)
            if via is not None:
                out.add(Route(cidr, via, name))
    return sorted(out)
