"""Interface counters as cAdvisor reports them (read by network.py over netlink).

cAdvisor leaves out loopback and the host side of container plumbing (`lo`, `veth*`, `docker*`, `nerdctl*`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

IGNORED_PREFIXES = ("lo", "veth", "docker", "nerdctl")
DEFAULT_INTERFACE = "eth0"


@dataclass(frozen=True)
class InterfaceSample:
    name: str
    rx_bytes: int
    rx_packets: int
    rx_errors: int
    rx_dropped: int
    tx_bytes: int
    tx_packets: int
    tx_errors: int
    tx_dropped: int


def interfaces_from_links(links: list[Any]) -> list[InterfaceSample]:
    """RTM_NEWLINK messages to samples, ignored devices left out, in the kernel's order."""
    result: list[InterfaceSample] = []
    for link in links:
        name = link.get("IFLA_IFNAME") or ""
        stats = link.get("IFLA_STATS64") or link.get("IFLA_STATS")
        if not name or stats is None or name.startswith(IGNORED_PREFIXES):
            continue
        result.append(InterfaceSample(
            name=name, rx_bytes=stats["rx_bytes"], rx_packets=stats["rx_packets"], rx_errors=stats["rx_errors"],
            rx_dropped=stats["rx_dropped"], tx_bytes=stats["tx_bytes"], tx_packets=stats["tx_packets"],
            tx_errors=stats["tx_errors"], tx_dropped=stats["tx_dropped"],
        ))
    return result
