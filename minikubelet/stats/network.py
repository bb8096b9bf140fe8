"""Interface counters of a network namespace, read over netlink (pyroute2).

A pod's namespace is entered with setns(2) from one dedicated thread: setns moves only the calling thread, and a
netlink socket stays bound to the namespace it was created in. pyroute2's own `IPRoute(netns=...)` is not used
because it forks a helper, and a forked child of the agent shares asyncio's signal wake-up socket: its SIGTERM
reached the agent's handler and stopped the agent.
"""

from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from minikubelet.stats.interfaces import InterfaceSample, interfaces_from_links

CLONE_NEWNET = 0x40000000
NETNS_TIMEOUT = 10.0


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _links() -> list[Any]:
    from pyroute2 import IPRoute  # on first use: the netlink library is a few MB the agent needs only here

    with IPRoute() as ipr:
        return list(ipr.get_links())


class NamespaceRestoreError(OSError):
    """The reading thread could not return to the agent's namespace (it is retired)."""


def _in_netns(path: str) -> list[InterfaceSample]:
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target)
            try:
                return interfaces_from_links(_links())
            finally:
                try:
                    _setns(own)
                except OSError as e:
                    raise NamespaceRestoreError(e.errno, str(e)) from e
        finally:
            os.close(target)
    finally:
        os.close(own)


class InterfaceReader:
    """Blocking: `reader(None)` reads the agent's own namespace, `reader(path)` the one at path
    (e.g. /proc/<pid>/ns/net of a sandbox)."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="netns-stats")

    def __call__(self, netns: str | None) -> list[InterfaceSample]:
        if not netns:
            return interfaces_from_links(_links())
        try:
            return self._executor.submit(_in_netns, netns).result(timeout=NETNS_TIMEOUT)
        except NamespaceRestoreError:
            self._executor.shutdown(wait=False)
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="netns-stats")
            raise

    def close(self) -> None:
        self._executor.shutdown(wait=False)
