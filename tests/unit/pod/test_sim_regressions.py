"""Failures the deterministic simulator (tests/sim) found, each as its minimal trace (docs/testing.md)."""

from __future__ import annotations

from tests.sim.run import run_trace
from tests.sim.workload import Event


def test_a_pod_rejected_after_an_agent_restart_stops_what_it_ran() -> None:
    # seed 22: five pods on a node of four, one of them finished; after a restart admission takes them in source
    # order, so a pod that ran before is rejected now. Its containers kept running, and after its deletion too
    # (upstream HandlePodCleanups kills every running pod no worker syncs).
    events = [Event("create", 50126, 0, 30.0), Event("create", 60877, 0, 10.0), Event("create", 14752, 0, 1.0),
              Event("create", 20682, 0, 0.1), Event("create", 7443, 0, 5.0), Event("crash", 65519, 0, 30.0)]
    out = run_trace(22, events)
    assert out.violation is None, out.violation
