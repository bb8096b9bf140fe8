"""Facts about this host the agent reports: node name and IP."""

from __future__ import annotations

import socket

from minikubelet.node.procfs import ipv4_addresses


def node_name(override: str) -> str:
    return (override or socket.gethostname()).strip().lower()


def _default_route_interface() -> str:
    try:
        with open("/proc/net/route", encoding="ascii") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[1] == "00000000":
                    return fields[0]
    except OSError:
        pass
    return ""


def host_ip(override: str = "") -> str:
    """The node's primary IPv4: the default route's interface first, as the kubelet prefers."""
    if override:
        return override
    addrs = ipv4_addresses()
    preferred = _default_route_interface()
    order = ([preferred] if preferred in addrs else []) + sorted(n for n in addrs if n != preferred)
    for name in order:
        for address in addrs[name]:
            if not address.startswith("127."):
                return address
    return "127.0.0.1"
