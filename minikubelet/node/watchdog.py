"""systemd's watchdog fed from the agent's own event loop, as upstream's kubelet watchdog (pkg/kubelet/watchdog):
every timeout/2 the health checks run (the sync loop's freshness, the runtime) and WATCHDOG=1 goes out only
when they pass. Being a task on the loop, not a thread, a loop that hangs (or a stopped process) sends nothing,
and systemd kills and restarts the agent after WatchdogSec."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from minikubelet.base.clock import Clock
from minikubelet.node.sd_notify import Notifier

log = logging.getLogger("minikubelet.node.watchdog")
MINIMUM_TIMEOUT = 1.0  # upstream refuses a watchdog of 1s or less
HealthChecks = Callable[[], Awaitable[list[tuple[str, str | None]]]]


class Watchdog:
    def __init__(self, notifier: Notifier, timeout: float, clock: Clock, checks: HealthChecks) -> None:
        self.notifier = notifier
        self.timeout = timeout
        self.clock = clock
        self.checks = checks
        self.pings = 0

    @property
    def enabled(self) -> bool:
        return self.notifier.enabled and self.timeout > MINIMUM_TIMEOUT

    async def run(self) -> None:
        if not self.enabled:
            if self.timeout:
                log.warning("systemd watchdog timeout too small; not feeding it",
                            extra={"kv": {"timeout": f"{self.timeout}s", "minimum": f"{MINIMUM_TIMEOUT}s"}})
            return
        interval = self.timeout / 2
        log.info("feeding the systemd watchdog", extra={"kv": {"interval": f"{interval:g}s"}})
        while True:
            await self.ping_if_healthy()
            await self.clock.sleep(interval)

    async def ping_if_healthy(self) -> bool:
        failed = [f"{name}: {err}" for name, err in await self.checks() if err is not None]
        if failed:
            log.error("not notifying the systemd watchdog: the agent is not healthy",
                      extra={"kv": {"checks": "; ".join(failed)}})
            return False
        if self.notifier.notify("WATCHDOG=1"):
            self.pings += 1
            return True
        return False
