"""One probe worker: probes one container for one probe kind on a fixed period."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from minikubelet.base.clock import Clock
from minikubelet.base.podview import ProbeSpec
from probes.result import ProbeKind, ProbeOutcome, Result
from probes.results import ResultsCache

log = logging.getLogger(__name__)

ProbeFn = Callable[[str], Awaitable[ProbeOutcome]]
"""Runs the diagnostic against the given container ID."""
OutcomeFn = Callable[[ProbeOutcome, float], None]
"""Told every diagnostic's outcome and duration (metrics, Unhealthy events)."""

# Upstream retries a diagnostic that errored (Unknown) up to this many times per period.
MAX_ATTEMPTS = 3

# The value a kind's result holds for a new container until its thresholds say otherwise.
INITIAL_RESULT = {
    ProbeKind.READINESS: Result.FAILURE,
    ProbeKind.LIVENESS: Result.SUCCESS,
    ProbeKind.STARTUP: Result.UNKNOWN,
}


class ProbeWorker:
    def __init__(
        self,
        *,
        kind: ProbeKind,
        pod_uid: str,
        container_name: str,
        spec: ProbeSpec,
        clock: Clock,
        results: ResultsCache,
        probe: ProbeFn,
        container_id: str,
        started_at: float,
        is_started: Callable[[], bool],
        jitter: float = 0.0,
        on_outcome: OutcomeFn | None = None,
    ) -> None:
        self.kind = kind
        self.pod_uid = pod_uid
        self.container_name = container_name
        self.period = float(spec.period_seconds)
        self.initial_delay = spec.initial_delay_seconds
        self.success_threshold = spec.success_threshold
        self.failure_threshold = spec.failure_threshold
        self._clock = clock
        self._results = results
        self._probe = probe
        self._is_started = is_started
        self._jitter = jitter
        self._on_outcome = on_outcome
        self._trigger = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.container_id = ""
        self.started_at = 0.0
        self.on_hold = False
        self._last: Result | None = None
        self._run = 0
        # the last probe run, as `explain` shows it: (wall time, seconds it took, its outcome)
        self.last_run: tuple[float, float, ProbeOutcome] | None = None
        self.set_container(container_id, started_at)

    def set_container(self, container_id: str, started_at: float) -> None:
        """A (possibly new) container to probe; a new ID resets the counters and lifts a hold."""
        self.started_at = started_at
        if container_id == self.container_id:
            return
        self.container_id = container_id
        self.on_hold = False
        self._last = None
        self._run = 0
        self._publish(INITIAL_RESULT[self.kind])

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name=f"probe-{self.kind.value}-{self.pod_uid}-{self.container_name}"
            )

    def trigger(self) -> None:
        """Probe now, without moving the periodic schedule."""
        self._trigger.set()

    async def stop(self) -> None:
        """Stop probing and drop this worker's result."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._results.remove(self.pod_uid, self.container_name, self.kind)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _loop(self) -> None:
        if self._jitter > 0:
            await self._clock.sleep(self._jitter)
        start = self._clock.monotonic()
        next_tick = 1
        while True:
            self._trigger.clear()
            try:
                await self.probe_once()
            except Exception:
                log.exception("probe worker %s/%s/%s crashed", self.pod_uid, self.container_name, self.kind)
            now = self._clock.monotonic()
            due = start + next_tick * self.period
            if due <= now:
                # A tick passed while probing: like Go's ticker, run once now and drop the rest.
                next_tick = int((now - start) // self.period) + 1
                continue
            if await self._wait_until(due):
                next_tick += 1

    async def _wait_until(self, due: float) -> bool:
        """Sleep until `due` or a trigger; True if the tick came."""
        tick = asyncio.ensure_future(self._clock.sleep(due - self._clock.monotonic()))
        triggered = asyncio.ensure_future(self._trigger.wait())
        try:
            await asyncio.wait({tick, triggered}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (tick, triggered):
                if not waiter.done():
                    waiter.cancel()
        return tick.done() and not tick.cancelled()

    async def probe_once(self) -> None:
        """One scheduled run: skipped while held, gated by startup, or before the initial delay."""
        if self.on_hold:
            return
        if int(self._clock.now() - self.started_at) < self.initial_delay:
            return
        started = self._is_started()
        if self.kind is ProbeKind.STARTUP and started:
            return  # Kept alive (idle) in case the container is restarted.
        if self.kind is not ProbeKind.STARTUP and not started:
            return
        container_id = self.container_id
        began = self._clock.monotonic()
        outcome = await self._probe(container_id)
        for _ in range(MAX_ATTEMPTS - 1):
            if outcome.result is not Result.UNKNOWN:
                break
            outcome = await self._probe(container_id)
        if container_id != self.container_id:
            return  # The container changed under the probe; this result is about the old one.
        took = self._clock.monotonic() - began
        self.last_run = (self._clock.now(), took, outcome)
        if self._on_outcome is not None:
            self._on_outcome(outcome, took)
        self._count(outcome)

    @property
    def consecutive(self) -> tuple[Result | None, int]:
        """The result of the current run of equal results and how long the run is (against the thresholds)."""
        return self._last, self._run

    def _count(self, outcome: ProbeOutcome) -> None:
        result = outcome.result
        if result is Result.UNKNOWN:
            return  # The check could not run: take no action.
        if result is self._last:
            self._run += 1
        else:
            self._last = result
            self._run = 1
        threshold = self.failure_threshold if result is Result.FAILURE else self.success_threshold
        if self._run < threshold:
            return
        self._publish(result, outcome.output)
        if result is Result.FAILURE and self.kind is not ProbeKind.READINESS:
            # The pod worker kills this container; probing it while it stops is pointless
            # (and racy for exec), so wait for the next container ID.
            self.on_hold = True
            self._run = 0

    def _publish(self, result: Result, output: str = "") -> None:
        self._results.set(
            self.pod_uid, self.container_name, self.kind, self.container_id, result, self._clock.now(), output
        )
