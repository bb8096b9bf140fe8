"""The systemd side of the agent as a node service (`Type=notify`): READY once every other service has started,
the watchdog fed from the event loop, STOPPING when the agent stops."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from minikubelet.base.clock import Clock
from minikubelet.node.sd_notify import Notifier, watchdog_interval
from minikubelet.node.watchdog import Watchdog
from minikubelet.services.service import Loop, Service


class SystemdNotify(Service):
    name = "systemd"

    def __init__(self, clock: Clock, node_name: str,
                 checks: Callable[[], Awaitable[list[tuple[str, str | None]]]]) -> None:
        self._notifier = Notifier()
        self._watchdog = Watchdog(self._notifier, watchdog_interval(), clock, checks)
        self._node_name = node_name

    async def start(self) -> None:
        self._notifier.notify("READY=1", f"STATUS=running, node {self._node_name}")

    def loops(self) -> Sequence[Loop]:
        return [("systemd-watchdog", self._watchdog.run)]

    def stopping(self) -> None:
        self._notifier.notify("STOPPING=1")
