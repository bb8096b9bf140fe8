"""cluster-startup's split of each pod's latency: the agent's own Ready -> the API's Ready."""

from __future__ import annotations

import pytest

from bench.cluster import ReadyTimes
from bench.cluster_startup import api_lag


def test_api_lag_is_per_pod_and_only_for_pods_both_sides_saw_ready() -> None:
    api, local = ReadyTimes(), ReadyTimes()
    api.ready = {"a": 5.0, "b": 7.5, "c": 9.0}
    local.ready = {"a": 4.75, "b": 6.0, "d": 1.0}  # c: the poll missed it; d: not Ready in the API yet
    assert api_lag(api, local) == pytest.approx({"a": 0.25, "b": 1.5})
