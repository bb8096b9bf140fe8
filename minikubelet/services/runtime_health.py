"""The runtime's health as the node reports it: upstream's updateRuntimeUp loop, the sync loop's /healthz check and
the systemd watchdog's check."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from cri.runtime import Runtime
from minikubelet.base.clock import Clock
from minikubelet.node.status import runtime_errors
from minikubelet.runtime.pleg import PLEG
from minikubelet.services.service import Loop, Service

log = logging.getLogger("minikubelet.agent")

RUNTIME_UP_PERIOD = 5.0  # upstream updateRuntimeUp's period
SYNC_LOOP_HEALTH_WINDOW = 300.0  # upstream SyncLoopHealthCheck: max(2 × resyncInterval (1 m), 5 m)


class RuntimeHealth(Service):
    name = "runtime-up"

    def __init__(self, runtime: Runtime, clock: Clock, pleg: PLEG,
                 on_recovered: Callable[[], None] = lambda: None) -> None:
        self._runtime = runtime
        self._on_recovered = on_recovered
        self._clock = clock
        self._pleg = pleg
        self.runtime_ok: float | None = None  # monotonic time of the last answer of the runtime
        # monotonic time the sync loop last ran; as upstream's syncLoop it does not while the runtime is down
        self.sync_loop_entry: float | None = None

    def loops(self) -> Sequence[Loop]:
        return [("runtime-up", self.run)]

    def mark_ok(self) -> None:
        self.runtime_ok = self._clock.monotonic()

    def runtime_errors(self) -> tuple[str, ...]:
        return runtime_errors(self._clock.monotonic(), self.runtime_ok, self._pleg.last_relist or None)

    async def run(self) -> None:
        """Upstream updateRuntimeUp + the gate of its syncLoop: the runtime asked every 5 s; the sync loop counts
        as run only while the runtime state has no errors (so /healthz fails after 5 minutes of a dead runtime)."""
        down = False
        while True:
            try:
                await asyncio.wait_for(self._runtime.version(), timeout=RUNTIME_UP_PERIOD)
                self.mark_ok()
                if down:
                    log.info("container runtime answers again")
                    # as upstream's syncLoop resuming: the pods whose syncs failed meanwhile sync now, not at the
                    # end of their back-off
                    self._on_recovered()
                down = False
            except Exception as e:
                if not down:
                    log.warning("container runtime sanity check failed", extra={"kv": {"err": str(e) or type(e).__name__}})
                down = True
            errors = self.runtime_errors()
            if not errors:
                self.sync_loop_entry = self._clock.monotonic()
            elif down:
                log.debug("skipping pod synchronization", extra={"kv": {"err": "; ".join(errors)}})
            await self._clock.sleep(RUNTIME_UP_PERIOD)

    async def health(self) -> list[tuple[str, str | None]]:
        """Upstream's /healthz checkers (ping, syncloop); the runtime is not asked here: a runtime that is down
        shows on the Node's Ready condition, and on /healthz only once the sync loop stalled for 5 minutes."""
        return [("ping", None), ("syncloop", self.sync_loop_error())]

    def sync_loop_error(self) -> str | None:
        entry = self.sync_loop_entry
        if entry is None:
            return "sync loop has not run yet"
        if self._clock.monotonic() - entry > SYNC_LOOP_HEALTH_WINDOW:
            return "sync Loop took longer than expected"
        return None

    async def watchdog_checks(self) -> list[tuple[str, str | None]]:
        # upstream's watchdog runs the sync loop check, not the runtime's (a restart does not bring Docker back)
        return [("syncloop", self.sync_loop_error())]
