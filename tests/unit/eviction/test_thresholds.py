"""Threshold parsing and evaluation, against upstream's eviction/helpers.go rules."""

from __future__ import annotations

import pytest

from minikubelet.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    Observation,
    ThresholdError,
    by_eviction_priority,
    node_conditions,
    parse_thresholds,
    thresholds_met,
)

DEFAULTS = {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
            "imagefs.available": "15%"}


def test_defaults_and_the_allocatable_copy_of_the_hard_memory_threshold() -> None:
    ts = parse_thresholds(DEFAULTS, enforce_node_allocatable=("pods",))
    signals = [t.signal for t in ts]
    assert signals.count(ALLOCATABLE_MEMORY_AVAILABLE) == 1
    alloc = next(t for t in ts if t.signal == ALLOCATABLE_MEMORY_AVAILABLE)
    assert alloc.value.amount(0) == 100 * 2**20 and alloc.hard
    assert ALLOCATABLE_MEMORY_AVAILABLE not in [t.signal for t in parse_thresholds(DEFAULTS)]


def test_percentages_are_float32_of_capacity_truncated() -> None:
    t = parse_thresholds({"nodefs.available": "10%"})[0]
    # float32(0.1) = 0.100000001490116..., so 10% of 1000000000 is 100000001, not 100000000
    assert t.value.amount(1_000_000_000) == 100_000_001
    assert t.value.format(1_000_000_000) == "100000001"
    assert parse_thresholds({"memory.available": "100Mi"})[0].value.format(0) == "100Mi"
    assert parse_thresholds({"memory.available": "500M"})[0].value.format(0) == "500M"


def test_zero_and_hundred_percent_are_ignored_and_bad_values_refused() -> None:
    assert parse_thresholds({"nodefs.available": "0%", "imagefs.available": "100%"}) == []
    with pytest.raises(ThresholdError, match="must be positive"):
        parse_thresholds({"memory.available": "0"})
    with pytest.raises(ThresholdError, match="unsupported eviction signal"):
        parse_thresholds({"cpu.available": "1"})
    with pytest.raises(ThresholdError, match=r"grace period must be specified for the soft eviction threshold memory\.available"):
        parse_thresholds({}, soft={"memory.available": "1Gi"})


def test_soft_thresholds_carry_their_grace_and_minimum_reclaim_applies_to_both() -> None:
    ts = parse_thresholds({"memory.available": "100Mi"}, soft={"memory.available": "1Gi"},
                          soft_grace={"memory.available": "1m30s"}, min_reclaim={"memory.available": "50Mi"})
    hard, soft = ts
    assert hard.hard and hard.min_reclaim is not None and hard.min_reclaim.amount(0) == 50 * 2**20
    assert not soft.hard and soft.grace_period == 90.0 and soft.min_reclaim is not None


def test_met_compares_available_with_the_value_and_min_reclaim_raises_the_bar() -> None:
    (t,) = parse_thresholds({"memory.available": "100Mi"}, min_reclaim={"memory.available": "50Mi"})
    obs = {MEMORY_AVAILABLE: Observation(120 * 2**20, 8 * 2**30, 0.0)}
    assert thresholds_met([t], obs, enforce_min_reclaim=False) == []
    assert thresholds_met([t], obs, enforce_min_reclaim=True) == [t]
    obs = {MEMORY_AVAILABLE: Observation(100 * 2**20, 8 * 2**30, 0.0)}
    assert thresholds_met([t], obs, False) == []  # equal is not less than
    obs = {MEMORY_AVAILABLE: Observation(100 * 2**20 - 1, 8 * 2**30, 0.0)}
    assert thresholds_met([t], obs, False) == [t]
    assert thresholds_met([t], {}, False) == []  # no observation, nothing met


def test_conditions_and_priority_put_memory_first() -> None:
    ts = parse_thresholds({"nodefs.available": "10%", "pid.available": "100", "memory.available": "1Mi"})
    assert next(t.signal for t in by_eviction_priority(ts)) == MEMORY_AVAILABLE
    assert node_conditions(ts) == ["MemoryPressure", "DiskPressure", "PIDPressure"]
    assert node_conditions([t for t in ts if t.signal == NODEFS_AVAILABLE]) == ["DiskPressure"]
