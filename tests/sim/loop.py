"""The simulator's event loop: asyncio whose clock is the FakeClock, driven by the simulation instead of a
selector, so every sleep and timer advances virtual time at once and the order of callbacks depends only on the
seed's inputs."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import selectors
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from minikubelet.base.clock import FakeClock

# asyncio.base_events' thresholds for pruning cancelled timers, which _run_ready keeps
_MIN_SCHEDULED_TIMER_HANDLES: int = getattr(asyncio.base_events, "_MIN_SCHEDULED_TIMER_HANDLES", 100)
_MIN_CANCELLED_TIMER_HANDLES_FRACTION: float = getattr(asyncio.base_events, "_MIN_CANCELLED_TIMER_HANDLES_FRACTION", 0.5)


class Livelock(Exception):
    """Tasks kept one another runnable at one virtual instant without ever becoming idle."""


class Blocked(Exception):
    """The loop would wait in its selector: the driver itself waits on agent code (a harness bug)."""


class _NeverWait(selectors.DefaultSelector):
    """No file descriptor is ever ready in a run (nothing does I/O but the disk, synchronously): a poll with no
    timeout returns nothing without asking the kernel, one that would wait is a harness bug."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None or timeout > 0:
            raise Blocked("nothing is runnable and the simulation driver waits: the loop would block")
        return []


class SimLoop(asyncio.SelectorEventLoop):
    """asyncio's own loop (its timer heap unchanged), with `time()` on the FakeClock: a `call_later` or
    `asyncio.wait_for` deadline falls due when the simulation moves the clock past it.

    `order`: None keeps asyncio's FIFO ready queue; a Random permutes the callbacks ready at each iteration (the
    tasks woken at one instant run in an order drawn from the seed, as the order in which a real runtime's replies
    arrive varies), still the same for the same seed."""

    def __init__(self, clock: FakeClock, order: random.Random | None = None) -> None:
        super().__init__(_NeverWait())
        self.clock = clock
        self._order = order
        self.permuted = 0  # iterations whose ready callbacks were reordered
        self._births = itertools.count()
        self._born: dict[asyncio.Task[Any], int] = {}  # pruned of finished tasks as it grows
        self._prune_at = 1024

    def time(self) -> float:
        return self.clock.monotonic()

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = super().create_task(coro, **kwargs)
        born = self._born
        if len(born) >= self._prune_at:
            for t in [t for t in born if t.done()]:
                del born[t]
            self._prune_at = 2 * len(born) + 1024
        born[task] = next(self._births)
        return task

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The loop's unfinished tasks in the order they were created: `asyncio.all_tasks()` is a set ordered by
        memory address, which differs from run to run (cancelling in its order would make a seed's run vary)."""
        return sorted(asyncio.all_tasks(self), key=lambda t: self._born.get(t, -1))

    def _run_once(self) -> None:
        ready = self._ready  # type: ignore[attr-defined]
        n = len(ready)
        if self._order is not None and n > 1:
            if n == 2:  # the common case, one draw
                if self._order.getrandbits(1):
                    ready.rotate(1)
            else:
                handles = list(ready)
                self._order.shuffle(handles)
                ready.clear()
                ready.extend(handles)
            self.permuted += 1
        if self._debug:  # type: ignore[attr-defined]
            super()._run_once()  # type: ignore[misc]
            return
        self._run_ready(ready)

    def _run_ready(self, ready: deque[Any]) -> None:
        """asyncio's BaseEventLoop._run_once (3.11) without the selector round trip, which never has an event here:
        drop cancelled timers, refuse to block (as `_NeverWait`), move the due timers to the ready queue, run what
        was ready. The same steps in the same order, so the same runs; a quarter of the loop's own cost."""
        loop: Any = self  # asyncio's private state, as BaseEventLoop keeps it
        scheduled: list[Any] = loop._scheduled
        n = len(scheduled)
        if n > _MIN_SCHEDULED_TIMER_HANDLES and loop._timer_cancelled_count / n > _MIN_CANCELLED_TIMER_HANDLES_FRACTION:
            kept = []
            for handle in scheduled:
                if handle._cancelled:
                    handle._scheduled = False
                else:
                    kept.append(handle)
            heapq.heapify(kept)
            loop._scheduled = scheduled = kept
            loop._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0]._cancelled:
                loop._timer_cancelled_count -= 1
                heapq.heappop(scheduled)._scheduled = False
        if not ready and not loop._stopping:
            if not scheduled or scheduled[0]._when > self.clock.monotonic():
                raise Blocked("nothing is runnable and the simulation driver waits: the loop would block")
        end_time = self.clock.monotonic() + loop._clock_resolution
        while scheduled:
            if scheduled[0]._when >= end_time:
                break
            handle = heapq.heappop(scheduled)
            handle._scheduled = False
            ready.append(handle)
        popleft = ready.popleft
        for _ in range(len(ready)):
            handle = popleft()
            if not handle._cancelled:
                handle._run()

    @property
    def ready(self) -> deque[Any]:
        return cast("deque[Any]", self._ready)  # type: ignore[attr-defined]

    @property
    def timers(self) -> list[Any]:
        return cast("list[Any]", self._scheduled)  # type: ignore[attr-defined]


class Scheduler:
    """Moves virtual time: runs every task until all wait, then jumps to the next deadline (a clock sleeper or
    a loop timer). The driver runs as a task of the loop, so the loop never blocks in its selector."""

    def __init__(self, loop: SimLoop, max_spins: int = 5_000, max_instant: int = 2_000,
                 interrupt: Callable[[], None] = lambda: None) -> None:
        """`interrupt()` runs whenever the tasks wait; it raises to end the run (a violation seen mid-step)."""
        self.loop = loop
        self.clock = loop.clock
        self.max_spins = max_spins
        self.max_instant = max_instant
        self.interrupt = interrupt
        self._instant = -1.0
        self._spins = 0  # loop iterations at this virtual instant, over every settle

    async def settle(self) -> None:
        """Run until every task waits (nothing ready at this instant)."""
        ready = self.loop.ready
        while True:
            await asyncio.sleep(0)
            self.interrupt()
            now = self.clock.monotonic()
            if now != self._instant:
                self._instant, self._spins = now, 0
            self._spins += 1
            if self._spins > self.max_spins:
                raise Livelock(f"still busy after {self.max_spins} loop iterations at t={now:.3f}")
            if not ready:
                return

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
        last, same = -1.0, 0
        while True:
            nxt = self.next_deadline()
            now = self.clock.monotonic()
            same = same + 1 if now == last else 0
            last = now
            if same > self.max_instant:
                raise Livelock(f"timers kept falling due at t={now:.3f} without time passing")
            if nxt is None or nxt > end:
                if end > now:
                    self.clock.advance(end - now)
                    await self.settle()
                return
            self.clock.advance(max(0.0, nxt - now))
            await self.settle()
