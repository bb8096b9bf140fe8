from pathlib import Path

from minikubelet.base.clock import FakeClock
from minikubelet.base.durations import go_duration
from minikubelet.worker.backoff import Backoff, BackoffCheckpoint


def crash_loop_gaps(crashes: int) -> list[float]:
    """Simulate a container that dies instantly: the gap the agent waits before each restart."""
    clock = FakeClock()
    b = Backoff(clock, 10, 300)
    gaps = []
    for _ in range(crashes):
        finished = clock.now()
        waited = 0.0
        while b.in_backoff_since("k", finished):
            clock.advance(1)
            waited += 1
        b.next("k", finished)
        gaps.append(waited)
    return gaps


def test_restart_gaps_follow_upstream_schedule() -> None:
    assert crash_loop_gaps(9) == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_backoff_resets_after_ten_minutes_of_running() -> None:
    clock = FakeClock()
    b = Backoff(clock, 10, 300)
    for _ in range(4):
        b.next("k", clock.now())
    assert b.get("k") == 80
    clock.advance(601)  # ran for more than 2 × the cap since the last backoff update
    assert not b.in_backoff_since("k", clock.now())
    b.next("k", clock.now())
    assert b.get("k") == 10


def test_just_under_reset_keeps_growing() -> None:
    clock = FakeClock()
    b = Backoff(clock, 10, 300)
    b.next("k", clock.now())
    clock.advance(599)
    b.next("k", clock.now())
    assert b.get("k") == 20


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    clock = FakeClock()
    b = Backoff(clock, 10, 300)
    b.next("a", clock.now())
    b.next("a", clock.now())
    BackoffCheckpoint(str(tmp_path / "b.json"), {"c": b}).save()
    b2 = Backoff(clock, 10, 300)
    BackoffCheckpoint(str(tmp_path / "b.json"), {"c": b2}).restore()
    assert b2.get("a") == 20
    assert b2.in_backoff_since("a", clock.now())


def test_checkpoint_ignores_garbage(tmp_path: Path) -> None:
    p = tmp_path / "b.json"
    p.write_text('{"c": {"x": ["nope", 1], "y": 5}}')
    b = Backoff(FakeClock(), 10, 300)
    BackoffCheckpoint(str(p), {"c": b}).restore()
    assert b.get("x") == 0 and b.get("y") == 0


def test_go_duration_strings() -> None:
    assert [go_duration(s) for s in (10, 20, 40, 80, 160, 300, 3600)] == [
        "10s", "20s", "40s", "1m20s", "2m40s", "5m0s", "1h0m0s"]
