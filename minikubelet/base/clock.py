"""One injectable clock: wall time for status timestamps, monotonic time for timers."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock seconds since the epoch (status timestamps, backoff bookkeeping)."""

    def monotonic(self) -> float:
        """Seconds on a monotonic scale (deadlines, periods)."""

    async def sleep(self, seconds: float) -> None: ...


async def sleep_until_woken(clock: Clock, seconds: float, wake: asyncio.Event) -> None:
    """Sleep `seconds` on `clock`, or less if `wake` is set first (the caller clears it)."""
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    waker = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        waker.cancel()
        await asyncio.gather(sleeper, waker, return_exceptions=True)


class RealClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when told to; sleepers wake when time passes their deadline."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._mono = 0.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._mono += seconds
        due = [s for s in self._sleepers if s[0] <= self._mono]
        self._sleepers = [s for s in self._sleepers if s[0] > self._mono]
        for _, fut in due:
            if not fut.done():
                fut.set_result(None)

    @property
    def sleepers(self) -> int:
        """Tasks asleep on this clock now: a test advances time only once the task it means to wake sleeps."""
        return sum(1 for _, fut in self._sleepers if not fut.done())

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._mono + seconds, fut))
        await fut
