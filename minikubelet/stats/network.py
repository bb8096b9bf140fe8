"""Interface counters of a network namespace, read as cAdvisor reads them: `/proc/<pid>/net/dev` of a process in
that namespace (the sandbox's pause process; `/proc/self/net/dev` for the agent's own).

No namespace is entered and no netlink socket opened: procfs shows each process's namespace's devices. An earlier
netlink reader (pyroute2) cost 11 MiB of RSS for the same counters (docs/decisions.md).
"""

from __future__ import annotations

import re

from cgroups.driver import read_bytes
from minikubelet.stats.interfaces import InterfaceSample, interfaces_from_net_dev

_NETNS_PATH = re.compile(r"^/proc/(\d+|self)/ns/net$")


class InterfaceReader:
    """Blocking: `reader(None)` reads the agent's own namespace, `reader(path)` the one at `/proc/<pid>/ns/net`."""

    def __init__(self, proc: str = "/proc") -> None:
        self._proc = proc

    def __call__(self, netns: str | None) -> list[InterfaceSample]:
        pid = "self"
        if netns:
            m = _NETNS_PATH.match(netns)
            if m is None:
                raise ValueError(f"not a /proc/<pid>/ns/net path: {netns!r}")
            pid = m.group(1)
        # read_bytes: the buffered text layer of open() cost more than the read itself, once per pod per pass
        return interfaces_from_net_dev(read_bytes(f"{self._proc}/{pid}/net/dev").decode("ascii", "replace"))

    def close(self) -> None:
        pass
