"""The probe worker's timing and threshold rules, driven by a fake clock and a scripted probe."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import ProbeSpec
from probes.result import ProbeKind, ProbeOutcome, Result
from probes.results import ResultsCache
from probes.worker import ProbeWorker

S, F, U = Result.SUCCESS, Result.FAILURE, Result.UNKNOWN


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def advance(clock: FakeClock, seconds: float, step: float = 0.5) -> None:
    steps = round(seconds / step)
    for _ in range(steps):
        clock.advance(step)
        await settle()


class ScriptedProbe:
    """Returns results in order, then repeats the last; records the fake monotonic time of calls."""

    def __init__(self, clock: FakeClock, results: Iterable[Result], duration: float = 0.0) -> None:
        self.clock = clock
        self.results = list(results)
        self.duration = duration
        self.calls: list[float] = []
        self.ids: list[str] = []

    async def __call__(self, container_id: str) -> ProbeOutcome:
        self.calls.append(self.clock.monotonic())
        self.ids.append(container_id)
        result = self.results[min(len(self.calls), len(self.results)) - 1]
        if self.duration:
            await self.clock.sleep(self.duration)
        return ProbeOutcome(result, f"call {len(self.calls)}")


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.changes: list[tuple[str, str, ProbeKind]] = []
        self.results = ResultsCache(lambda *key: self.changes.append(key))
        self.workers: list[ProbeWorker] = []

    def worker(
        self,
        kind: ProbeKind,
        probe: ScriptedProbe,
        spec: dict[str, Any] | None = None,
        started: Callable[[], bool] = lambda: True,
        jitter: float = 0.0,
    ) -> ProbeWorker:
        full = {"periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3,
                "initialDelaySeconds": 0, **(spec or {})}
        w = ProbeWorker(kind=kind, pod_uid="uid", container_name="app", spec=ProbeSpec.of(full), clock=self.clock,
                        results=self.results, probe=probe, container_id="c1", started_at=self.clock.now(),
                        is_started=started, jitter=jitter)
        self.workers.append(w)
        w.start()
        return w

    def result(self, kind: ProbeKind) -> Result | None:
        entry = self.results.get("uid", "app", kind)
        return None if entry is None else entry.result


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    for w in harness.workers:
        await w.stop()


async def test_periods_follow_a_fixed_schedule_without_drift(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S], duration=3.0)
    h.worker(ProbeKind.READINESS, probe)
    await settle()
    await advance(h.clock, 1000)
    assert probe.calls == [10.0 * n for n in range(101)]


async def test_probe_slower_than_period_runs_once_more_then_realigns(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S], duration=25.0)
    h.worker(ProbeKind.READINESS, probe)
    await settle()
    await advance(h.clock, 100)
    # 0 -> done at 25 (ticks 10, 20 passed: one run now) -> done at 50 -> same again
    assert probe.calls == [0.0, 25.0, 50.0, 75.0, 100.0]


async def test_initial_values_per_kind(h: Harness) -> None:
    held = ScriptedProbe(h.clock, [S])
    spec = {"initialDelaySeconds": 100}
    h.worker(ProbeKind.READINESS, held, spec)
    assert h.result(ProbeKind.READINESS) is F
    h2 = Harness()
    h2.worker(ProbeKind.LIVENESS, ScriptedProbe(h2.clock, [S]), spec)
    h2.worker(ProbeKind.STARTUP, ScriptedProbe(h2.clock, [S]), spec)
    assert h2.result(ProbeKind.LIVENESS) is S
    assert h2.result(ProbeKind.STARTUP) is U
    for w in h2.workers:
        await w.stop()


async def test_initial_delay_is_checked_on_ticks(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S])
    h.worker(ProbeKind.READINESS, probe, {"initialDelaySeconds": 15})
    await settle()
    await advance(h.clock, 19.5)
    assert probe.calls == []
    assert h.result(ProbeKind.READINESS) is F  # Failure until the delay has passed
    await advance(h.clock, 0.5)
    assert probe.calls == [20.0]
    assert h.result(ProbeKind.READINESS) is S


async def test_liveness_failure_crosses_threshold_and_holds(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [F, F, F, S])
    w = h.worker(ProbeKind.LIVENESS, probe)
    await settle()
    await advance(h.clock, 10)
    assert len(probe.calls) == 2
    assert h.result(ProbeKind.LIVENESS) is S
    await advance(h.clock, 10)
    assert len(probe.calls) == 3
    entry = h.results.get("uid", "app", ProbeKind.LIVENESS)
    assert entry is not None and entry.result is F and entry.container_id == "c1"
    assert entry.output == "call 3"
    assert w.on_hold
    await advance(h.clock, 50)
    assert len(probe.calls) == 3  # held: no probing of a container that is being killed
    w.set_container("c2", h.clock.now())
    assert h.result(ProbeKind.LIVENESS) is S  # the new container starts from the initial value
    await advance(h.clock, 10)
    assert len(probe.calls) == 4
    assert probe.ids[-1] == "c2"


async def test_startup_failure_also_holds(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [F])
    w = h.worker(ProbeKind.STARTUP, probe, {"failureThreshold": 2}, started=lambda: False)
    await settle()
    await advance(h.clock, 30)
    assert len(probe.calls) == 2
    assert h.result(ProbeKind.STARTUP) is F
    assert w.on_hold


async def test_readiness_failure_never_holds(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [F, F, F, F, F, S])
    w = h.worker(ProbeKind.READINESS, probe, {"failureThreshold": 1})
    await settle()
    await advance(h.clock, 50)
    assert len(probe.calls) == 6
    assert not w.on_hold
    assert h.result(ProbeKind.READINESS) is S


async def test_success_threshold(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S, F, S, S])
    h.worker(ProbeKind.READINESS, probe, {"successThreshold": 2, "failureThreshold": 1})
    await settle()
    assert h.result(ProbeKind.READINESS) is F  # one success is not enough
    await advance(h.clock, 10)
    assert h.result(ProbeKind.READINESS) is F
    await advance(h.clock, 10)
    assert h.result(ProbeKind.READINESS) is F  # the run was broken by a failure
    await advance(h.clock, 10)
    assert h.result(ProbeKind.READINESS) is S


async def test_unknown_is_retried_and_takes_no_action(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [U])
    h.worker(ProbeKind.LIVENESS, probe, {"failureThreshold": 1})
    await settle()
    await advance(h.clock, 100)
    assert len(probe.calls) == 3 * 11  # three attempts per period
    assert h.result(ProbeKind.LIVENESS) is S


async def test_non_startup_kinds_wait_for_started(h: Harness) -> None:
    started = False
    probe = ScriptedProbe(h.clock, [S])
    h.worker(ProbeKind.READINESS, probe, started=lambda: started)
    await settle()
    await advance(h.clock, 30)
    assert probe.calls == []
    started = True
    await advance(h.clock, 10)
    assert probe.calls == [40.0]


async def test_startup_stops_probing_once_started(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S])
    h.worker(ProbeKind.STARTUP, probe, started=lambda: h.result(ProbeKind.STARTUP) is S)
    await settle()
    await advance(h.clock, 50)
    assert probe.calls == [0.0]


async def test_jitter_delays_the_first_run_and_anchors_the_schedule(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S])
    h.worker(ProbeKind.READINESS, probe, jitter=4.5)
    await settle()
    await advance(h.clock, 30)
    assert probe.calls == [4.5, 14.5, 24.5]


async def test_trigger_runs_now_without_moving_the_schedule(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S])
    w = h.worker(ProbeKind.READINESS, probe)
    await settle()
    await advance(h.clock, 3)
    w.trigger()
    await settle()
    await advance(h.clock, 17)
    assert probe.calls == [0.0, 3.0, 10.0, 20.0]


async def test_stop_cancels_and_removes_the_result(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S])
    w = h.worker(ProbeKind.READINESS, probe)
    await settle()
    assert h.result(ProbeKind.READINESS) is S
    await w.stop()
    assert h.result(ProbeKind.READINESS) is None
    await advance(h.clock, 30)
    assert probe.calls == [0.0]
    assert not w.running


async def test_result_changes_are_reported_once(h: Harness) -> None:
    probe = ScriptedProbe(h.clock, [S, S, S, F])
    h.worker(ProbeKind.READINESS, probe, {"failureThreshold": 1})
    await settle()
    await advance(h.clock, 30)
    key = ("uid", "app", ProbeKind.READINESS)
    # initial Failure, Success at 0, (unchanged at 10 and 20), Failure at 30
    assert h.changes == [key, key, key]
