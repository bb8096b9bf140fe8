"""The simulator's event loop: asyncio whose clock is the FakeClock, driven by the simulation instead of a
selector, so every sleep and timer advances virtual time at once and the order of callbacks depends only on the
seed's inputs."""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from typing import Any, cast

from minikubelet.base.clock import FakeClock


class Livelock(Exception):
    """Tasks kept one another runnable at one virtual instant without ever becoming idle."""


class SimLoop(asyncio.SelectorEventLoop):
    """asyncio's own loop (its ready queue and timer heap unchanged), with `time()` on the FakeClock: a
    `call_later` or `asyncio.wait_for` deadline falls due when the simulation moves the clock past it."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def time(self) -> float:
        return self.clock.monotonic()

    @property
    def ready(self) -> deque[Any]:
        return cast("deque[Any]", self._ready)  # type: ignore[attr-defined]

    @property
    def timers(self) -> list[Any]:
        return cast("list[Any]", self._scheduled)  # type: ignore[attr-defined]


class Scheduler:
    """Moves virtual time: runs every task until all wait, then jumps to the next deadline (a clock sleeper or
    a loop timer). The driver runs as a task of the loop, so the loop never blocks in its selector."""

    def __init__(self, loop: SimLoop, max_spins: int = 20_000) -> None:
        self.loop = loop
        self.clock = loop.clock
        self.max_spins = max_spins

    async def settle(self) -> None:
        """Run until every task waits (nothing ready at this instant)."""
        ready = self.loop.ready
        for _ in range(self.max_spins):
            await asyncio.sleep(0)
            if not ready:
                return
        raise Livelock(f"still busy after {self.max_spins} loop iterations at t={self.clock.monotonic():.3f}")

    def next_deadline(self) -> float | None:
        sleepers = self.clock._sleepers
        best = min((d for d, fut in sleepers if not fut.done()), default=None)
        timers = self.loop.timers
        while timers and timers[0]._cancelled:
            heapq.heappop(timers)
        if timers:
            when = float(timers[0].when())
            best = when if best is None else min(best, when)
        return best

    async def run_for(self, seconds: float) -> None:
        """Advance `seconds` of virtual time, waking every sleeper and timer at its own deadline."""
        await self.settle()
        end = self.clock.monotonic() + seconds
        while True:
            nxt = self.next_deadline()
            now = self.clock.monotonic()
            if nxt is None or nxt > end:
                if end > now:
                    self.clock.advance(end - now)
                    await self.settle()
                return
            self.clock.advance(max(0.0, nxt - now))
            await self.settle()
