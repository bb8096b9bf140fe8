"""Interface counters as cAdvisor reports them (read by network.py from /proc/<pid>/net/dev).

cAdvisor leaves out loopback and the host side of container plumbing (`lo`, `veth*`, `docker*`, `nerdctl*`).
"""

from __future__ import annotations

from dataclasses import dataclass

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


def interfaces_from_net_dev(text: str) -> list[InterfaceSample]:
    """`/proc/<pid>/net/dev` to samples (cAdvisor's scanInterfaceStats), ignored devices left out, in order.

    Each device line is `name: rx bytes packets errs drop fifo frame compressed multicast tx bytes packets errs
    drop fifo colls carrier compressed`; the two header lines and malformed lines are skipped.
    """
    result: list[InterfaceSample] = []
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        name = name.strip()
        fields = rest.split()
        if not sep or not name or len(fields) < 16 or name.startswith(IGNORED_PREFIXES):
            continue
        try:
            n = [int(f) for f in fields[:16]]
        except ValueError:
            continue
        result.append(InterfaceSample(name=name, rx_bytes=n[0], rx_packets=n[1], rx_errors=n[2], rx_dropped=n[3],
                                      tx_bytes=n[8], tx_packets=n[9], tx_errors=n[10], tx_dropped=n[11]))
    return result
