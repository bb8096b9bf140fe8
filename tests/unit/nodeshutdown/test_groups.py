"""Priority groups and grace shares of a node shutdown (upstream nodeshutdown_manager_test.go cases)."""

from __future__ import annotations

from typing import Any

import pytest

from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.config.kubelet_config import ShutdownGracePeriodByPodPriority as P
from minikubelet.nodeshutdown.groups import (
    SYSTEM_CRITICAL_PRIORITY,
    group_by_priority,
    migrate_config,
    period_requested,
    pod_grace,
    shutdown_periods,
    shutdown_status_fn,
)


def _pod(name: str, priority: int | None = None, grace: int | None = None, generation: int | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": []}
    if priority is not None:
        spec["priority"] = priority
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    meta: dict[str, Any] = {"name": name, "uid": name}
    if generation is not None:
        meta["generation"] = generation
    return {"metadata": meta, "spec": spec}


@pytest.mark.parametrize(("grace", "critical", "want"), [
    (0, 0, []),
    (0, 10, []),  # no shutdownGracePeriod: off, whatever the critical share
    (30, 10, [P(0, 20), P(SYSTEM_CRITICAL_PRIORITY, 10)]),
    (30, 0, [P(0, 30), P(SYSTEM_CRITICAL_PRIORITY, 0)]),
    (30, 30, [P(0, 0), P(SYSTEM_CRITICAL_PRIORITY, 30)]),
    (10, 20, []),  # invalid (validation refuses it): no groups rather than negative shares
    (30.9, 10, [P(0, 20), P(SYSTEM_CRITICAL_PRIORITY, 10)]),  # whole seconds, as upstream's int64 division
])
def test_migrate_config(grace: float, critical: float, want: list[P]) -> None:
    assert migrate_config(grace, critical) == want


def test_by_priority_wins_and_is_sorted_and_sums_to_the_requested_period() -> None:
    config = KubeletConfig(shutdown_grace_period_by_pod_priority=(P(100000, 120), P(0, 60), P(SYSTEM_CRITICAL_PRIORITY, 20),
                                                                   P(10000, 90)))
    periods = shutdown_periods(config)
    assert [p.priority for p in periods] == [0, 10000, 100000, SYSTEM_CRITICAL_PRIORITY]
    assert period_requested(periods) == 290
    # the gate off: only the two plain settings count (here 0: off)
    assert shutdown_periods(config, by_priority_gate=False) == []
    assert shutdown_periods(KubeletConfig()) == []


def test_group_by_priority() -> None:
    periods = [P(1, 10), P(2, 20), P(3, 30), P(4, 40)]
    pods = [_pod("none"), _pod("below", 0), _pod("p1", 1), _pod("between", 2), _pod("p3", 3),
            _pod("above", 5), _pod("neg", -5), _pod("p4", 4)]
    groups = group_by_priority(periods, pods)
    assert [(g.priority, g.grace_seconds, [p["metadata"]["name"] for p in g.pods]) for g in groups] == [
        (1, 10, ["none", "below", "p1", "neg"]),  # lower than every group: the lowest
        (2, 20, ["between"]),
        (3, 30, ["p3"]),
        (4, 40, ["above", "p4"]),  # higher than every group: the highest
    ]


def test_group_boundaries_pick_the_lower_group() -> None:
    groups = group_by_priority([P(0, 20), P(SYSTEM_CRITICAL_PRIORITY, 10)],
                               [_pod("regular", 1000), _pod("critical", SYSTEM_CRITICAL_PRIORITY),
                                _pod("node-critical", SYSTEM_CRITICAL_PRIORITY + 1000), _pod("just-below", SYSTEM_CRITICAL_PRIORITY - 1)])
    assert [[p["metadata"]["name"] for p in g.pods] for g in groups] == [
        ["regular", "just-below"], ["critical", "node-critical"]]
    assert group_by_priority([], [_pod("x")]) == []


@pytest.mark.parametrize(("own", "group", "want"), [(None, 20, 20), (30, 20, 20), (5, 20, 5), (20, 20, 20), (0, 20, 0)])
def test_pod_grace_is_the_shorter(own: int | None, group: int, want: int) -> None:
    assert pod_grace(_pod("p", grace=own), group) == want


def test_status_fn() -> None:
    now = "2026-11-24T07:00:00Z"
    status: dict[str, Any] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "DisruptionTarget", "status": "False"}]}
    shutdown_status_fn(_pod("p", generation=3), now)(status)
    assert status == {"phase": "Failed", "reason": "Terminated",
                      "message": "Pod was terminated in response to imminent node shutdown.",
                      "conditions": [
                          {"type": "Ready", "status": "True"},
                          {"type": "DisruptionTarget", "observedGeneration": 3, "status": "True",
                           "lastProbeTime": None, "lastTransitionTime": now, "reason": "TerminationByKubelet",
                           "message": "Pod was terminated in response to imminent node shutdown."}]}
    succeeded: dict[str, Any] = {"phase": "Succeeded"}
    shutdown_status_fn(_pod("p"), now)(succeeded)
    assert succeeded["phase"] == "Succeeded" and succeeded["reason"] == "Terminated"
    assert "observedGeneration" not in succeeded["conditions"][0]
    # an existing True DisruptionTarget keeps its transition time
    again: dict[str, Any] = {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                             "lastTransitionTime": "2026-11-24T06:00:00Z"}]}
    shutdown_status_fn(_pod("p"), now)(again)
    assert again["conditions"][0]["lastTransitionTime"] == "2026-11-24T06:00:00Z"
