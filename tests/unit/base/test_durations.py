"""Go's time.Duration.String, as the kubelet's messages print durations."""

from __future__ import annotations

import pytest

from minikubelet.base.durations import go_duration, go_duration_ms


@pytest.mark.parametrize(("seconds", "want"), [
    (0, "0s"), (10, "10s"), (80, "1m20s"), (300, "5m0s"), (3600, "1h0m0s"), (3661.5, "1h1m1.5s"),
    (0.717, "717ms"), (60.809, "1m0.809s"), (1.5, "1.5s"), (0.0005, "500µs"), (2e-9, "2ns"), (-1.25, "-1.25s"),
])
def test_go_duration(seconds: float, want: str) -> None:
    assert go_duration(seconds) == want


def test_pull_times_are_truncated_to_milliseconds() -> None:
    assert go_duration_ms(0.7179) == "717ms"
    assert go_duration_ms(60.8099) == "1m0.809s"
    assert go_duration_ms(2.0004) == "2s"
