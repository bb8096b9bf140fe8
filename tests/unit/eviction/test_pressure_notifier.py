"""The cgroup v2 memory pressure notifier: a PSI trigger the kernel accepts, POLLPRI through epoll on the event
loop, memory.events limit counters, one notification per interval. The host is cgroup v1, so the trigger is
registered on the system-wide /proc/pressure/memory (same interface as a cgroup's memory.pressure); a real
crossing under a kubepods limit is checked in the VM lab (tests/lab/test_eviction_v2.py)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.eviction.pressure_notifier import TRIGGERS, PressureNotifier, parse_events

PSI = Path("/proc/pressure/memory")


@pytest.mark.skipif(not PSI.exists(), reason="the kernel has no PSI")
async def test_the_kernel_accepts_the_trigger(tmp_path: Path) -> None:
    (tmp_path / "memory.pressure").symlink_to(PSI)
    n = PressureNotifier(tmp_path, lambda _: None, FakeClock())
    n.start()  # no memory.events here: PSI alone is enough
    try:
        assert n.trigger in TRIGGERS
    finally:
        n.close()


async def test_nothing_to_watch_is_an_error(tmp_path: Path) -> None:
    n = PressureNotifier(tmp_path, lambda _: None, FakeClock())
    with pytest.raises(OSError, match=r"memory\.pressure.*memory\.events"):
        n.start()


def _oob_pair() -> tuple[socket.socket, socket.socket]:
    """TCP urgent data is POLLPRI on the receiver, as a PSI trigger or a kernfs notification is."""
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        tx = socket.create_connection(lst.getsockname())
        rx, _ = lst.accept()
    return tx, rx


async def test_pollpri_notifies_once_per_interval(tmp_path: Path) -> None:
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    clock = FakeClock()
    got: list[str] = []
    n = PressureNotifier(tmp_path, got.append, clock, min_interval=1.0)
    tx, rx = _oob_pair()
    try:
        with pytest.raises(OSError):
            n.start()  # a regular file cannot be polled: no source at all
        n = PressureNotifier(tmp_path, got.append, clock, min_interval=1.0)
        (tmp_path / "memory.pressure").symlink_to(PSI)
        if not PSI.exists():
            pytest.skip("the kernel has no PSI")
        n.start()
        n.watch(os.dup(rx.fileno()), "test source")
        tx.send(b"!", socket.MSG_OOB)
        for _ in range(100):
            if got:
                break
            await asyncio.sleep(0.01)
        assert got == [f"test source: {tmp_path}"]
        rx.recv(1, socket.MSG_OOB)
        tx.send(b"!", socket.MSG_OOB)
        await asyncio.sleep(0.1)
        rx.recv(1, socket.MSG_OOB)
        assert len(got) == 1  # within the interval: dropped
        clock.advance(1.0)
        tx.send(b"!", socket.MSG_OOB)
        for _ in range(100):
            if len(got) == 2:
                break
            await asyncio.sleep(0.01)
        assert len(got) == 2 and n.fired == 2
    finally:
        n.close()
        tx.close()
        rx.close()


def test_memory_events_counters(tmp_path: Path) -> None:
    assert parse_events("low 0\nhigh 3\nmax 12\noom 0\noom_kill 0\n") == {
        "low": 0, "high": 3, "max": 12, "oom": 0, "oom_kill": 0}
    f = tmp_path / "memory.events"
    f.write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    n = PressureNotifier(tmp_path, lambda _: None, FakeClock())
    fd = os.open(f, os.O_RDONLY)
    try:
        n._events = parse_events(f.read_text())
        f.write_text("low 5\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
        assert n._limit_events(fd) == []  # `low` is protection, not a limit met
        f.write_text("low 5\nhigh 0\nmax 2\noom 1\noom_kill 0\n")
        assert n._limit_events(fd) == ["memory.events max", "memory.events oom"]
        assert n._limit_events(fd) == []  # nothing new since
    finally:
        os.close(fd)
