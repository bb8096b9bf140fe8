"""Interface counters of a network namespace, read over netlink (pyroute2)."""

from __future__ import annotations

from typing import Any

from minikubelet.stats.interfaces import InterfaceSample, interfaces_from_links


def read_interfaces(netns: str | None = None) -> list[InterfaceSample]:
    """Blocking: the counters of the namespace at path `netns` (e.g. /proc/<pid>/ns/net), or of our own."""
    from pyroute2 import IPRoute  # on first use: the netlink library is a few MB the agent needs only here

    kwargs: dict[str, Any] = {"netns": netns} if netns else {}
    with IPRoute(**kwargs) as ipr:
        return interfaces_from_links(list(ipr.get_links()))
