"""The resize conditions against upstream's status_manager_test.go: TestPodResizeConditions,
TestClearPodResizeInProgressCondition, TestBackfillPodResizeConditions."""

from __future__ import annotations

from minikubelet.base.clock import FakeClock
from minikubelet.base.kubetime import rfc3339
from minikubelet.status.resize_conditions import ResizeConditions


def test_pending_reasons_generations_and_transition_times() -> None:
    clock = FakeClock()
    rc = ResizeConditions(clock)
    t0 = rfc3339(clock.now())
    assert rc.set_pending("u", "OutOfcpu", "Node didn't have enough resource: cpu", 2)  # any other reason: Deferred
    assert rc.pending("u") == {"type": "PodResizePending", "observedGeneration": 2, "status": "True",
                               "lastProbeTime": t0, "lastTransitionTime": t0, "reason": "Deferred",
                               "message": "Node didn't have enough resource: cpu"}
    clock.advance(5)
    assert not rc.set_pending("u", "OutOfcpu", "again", 2)  # same reason and generation: no new event
    c = rc.pending("u")
    assert c is not None and c["lastTransitionTime"] == t0 and c["lastProbeTime"] == rfc3339(clock.now())
    assert rc.set_pending("u", "OutOfcpu", "later", 3)  # a new generation
    assert rc.set_pending("u", "Infeasible", "never", 3)  # a new reason, a new transition
    c = rc.pending("u")
    assert c is not None and c["lastTransitionTime"] == rfc3339(clock.now()) and rc.is_infeasible("u")
    rc.clear_pending("u")
    assert rc.conditions("u") == [] and not rc.is_deferred("u")


def test_in_progress_keeps_its_generation_and_error_until_cleared() -> None:
    rc = ResizeConditions(FakeClock())
    assert rc.set_in_progress("u", "", "", 2) == (2, True)
    assert rc.set_in_progress("u", "", "", 5) == (2, False)  # the generation stays: clear it to start anew
    assert rc.set_in_progress("u", "Error", "refused", 5) == (2, True)
    assert rc.set_in_progress("u", "", "", 5) == (2, False)  # the error is not cleared by a plain set
    c = rc.in_progress("u")
    assert c is not None and (c["reason"], c["message"], c["observedGeneration"]) == ("Error", "refused", 2)
    assert rc.clear_in_progress("u") == (2, True)
    assert rc.clear_in_progress("u") == (0, False)
    rc.set_pending("u", "Deferred", "m", 3)
    rc.set_in_progress("u", "", "", 3)
    assert [c["type"] for c in rc.conditions("u")] == ["PodResizePending", "PodResizeInProgress"]
    assert rc.counts() == ({"deferred": 1}, 1)


def test_backfill_from_the_api_status() -> None:
    changes: list[int] = []
    rc = ResizeConditions(FakeClock(), on_change=lambda r: changes.append(len(r.counts()[0])))
    rc.backfill([{"metadata": {"uid": "u"}, "status": {"conditions": [
        {"type": "Ready", "status": "True"},
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible", "message": "m", "observedGeneration": 4},
        {"type": "PodResizeInProgress", "status": "True", "observedGeneration": 3}]}}])
    assert rc.is_infeasible("u")
    c = rc.in_progress("u")
    assert c is not None and c["observedGeneration"] == 3 and "reason" not in c
    assert changes
    rc.remove("u")
    assert rc.conditions("u") == [] and rc.counts() == ({}, 0)
