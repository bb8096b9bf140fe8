"""Shrinking a failing trace: drop chunks of events, then single events, as long as the run still fails on the
same invariant (delta debugging, ddmin's complement steps)."""

from __future__ import annotations

from collections.abc import Callable

from tests.sim.run import Outcome, run_trace
from tests.sim.workload import Event


def shrink(seed: int, events: list[Event], name: str, *, budget: int = 400, seeded_order: bool = True,
           report: Callable[[str], None] = lambda _s: None) -> list[Event]:
    """A shorter trace that still violates invariant `name`; at most `budget` runs."""
    runs = 0

    def fails(trace: list[Event]) -> Outcome | None:
        nonlocal runs
        runs += 1
        out = run_trace(seed, trace, seeded_order=seeded_order)
        return out if out.violation is not None and out.violation.name == name else None

    first = fails(events)
    if first is None:
        raise ValueError(f"the trace does not fail on {name}")
    if first.steps < len(events):  # nothing after the failing step matters
        events = events[: first.steps + 1]
    n = 2
    while len(events) >= 2 and runs < budget:
        chunk = max(1, len(events) // n)
        reduced = False
        for start in range(0, len(events), chunk):
            if runs >= budget:
                break
            candidate = events[:start] + events[start + chunk:]
            out = fails(candidate)
            if out is not None:
                events = candidate[: out.steps + 1] if out.steps < len(candidate) else candidate
                n = max(n - 1, 2)
                reduced = True
                report(f"{len(events)} events ({runs} runs)")
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(n * 2, len(events))
    return events
