"""The routes of the host-gw pattern, programmed with pyroute2 (netlink).

Our routes carry a routing protocol number of their own (`ip route show proto 77`), so a sync replaces
what is wanted and deletes only ours that are no longer wanted (a Node that left), including routes an
earlier run of the agent left behind; routes of anyone else are never touched.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from typing import Any

from minikubelet.network.routes import Route

log = logging.getLogger("minikubelet.network.host_gw")

# rtnetlink protocol of our routes; 77 is not used by the kernel or by the routing daemons in
# /etc/iproute2/rt_protos (bird 12, zebra 11, dhcp 16, babel 42, ...)
ROUTE_PROTOCOL = 77


async def installed_routes() -> set[tuple[str, str]]:
    """(dst, via) of our routes in the main table."""
    from pyroute2 import AsyncIPRoute  # only a node with host-gw pod networking pays for pyroute2

    out: set[tuple[str, str]] = set()
    async with AsyncIPRoute() as ipr:
        for family in (socket.AF_INET, socket.AF_INET6):
            async for msg in await ipr.get_routes(family=family, proto=ROUTE_PROTOCOL):
                r: Any = msg
                if r.get("proto") != ROUTE_PROTOCOL or r.get("dst") is None:
                    continue
                out.add((f"{r.get('dst')}/{r.get('dst_len')}", str(r.get("gateway") or "")))
    return out


async def sync_routes(wanted: Sequence[Route]) -> list[str]:
    """Make our routes exactly `wanted`; the errors of routes that could not be set (e.g. an InternalIP
    this node cannot reach: "Network is unreachable"), the others are set anyway."""
    from pyroute2 import AsyncIPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    errors: list[str] = []
    have = await installed_routes()
    want = {(r.dst, r.via): r for r in wanted}
    async with AsyncIPRoute() as ipr:
        for key, route in sorted(want.items()):
            if key in have:
                continue
            try:
                await ipr.route("replace", dst=route.dst, gateway=route.via, proto=ROUTE_PROTOCOL)
                log.info("route to a node's pod CIDR added", extra={"kv": {
                    "node": route.node, "podCIDR": route.dst, "via": route.via}})
            except NetlinkError as e:
                errors.append(f"route {route.dst} via {route.via} (node {route.node}): {e.args[-1]}")
        wanted_dsts = {dst for dst, _ in want}
        for dst, via in sorted(have - set(want)):
            if dst in wanted_dsts:
                continue  # replaced above with the new gateway
            try:
                await ipr.route("del", dst=dst, proto=ROUTE_PROTOCOL)
                log.info("route to a node's pod CIDR removed", extra={"kv": {"podCIDR": dst, "via": via}})
            except NetlinkError as e:
                errors.append(f"removing route {dst} via {via}: {e.args[-1]}")
    return errors
