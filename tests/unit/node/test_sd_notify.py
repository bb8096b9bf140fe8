"""sd_notify over a real AF_UNIX datagram socket, and the watchdog fed only while the sync loop is fresh."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.node.sd_notify import Notifier, watchdog_interval
from minikubelet.node.watchdog import Watchdog


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify.sock")
    s.bind(path)
    s.setblocking(False)
    yield s, path
    s.close()


def received(s: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(s.recv(4096).decode())
        except BlockingIOError:
            return out


def test_notify_sends_one_datagram_per_call(receiver: tuple[socket.socket, str]) -> None:
    s, path = receiver
    n = Notifier({"NOTIFY_SOCKET": path})
    assert n.enabled and n.notify("READY=1", "STATUS=running") and n.notify("WATCHDOG=1")
    assert received(s) == ["READY=1\nSTATUS=running", "WATCHDOG=1"]


def test_notify_abstract_namespace() -> None:
    name = f"mkl-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind("\0" + name)
        s.setblocking(False)
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).notify("READY=1")
        assert received(s) == ["READY=1"]


def test_no_socket_or_a_dead_one(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert not Notifier({}).enabled and not Notifier({}).notify("READY=1")
    assert not Notifier({"NOTIFY_SOCKET": "relative/path"}).enabled
    with caplog.at_level(logging.WARNING):
        assert not Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}).notify("READY=1")
    assert "sd_notify failed" in caplog.text


def test_watchdog_interval_as_sd_watchdog_enabled() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "60000000"}) == 60.0
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": str(os.getpid())}) == 60.0
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "1"}, pid=2) == 0.0
    for bad in ({}, {"WATCHDOG_USEC": "0"}, {"WATCHDOG_USEC": "soon"}, {"WATCHDOG_USEC": "5", "WATCHDOG_PID": "x"}):
        assert watchdog_interval(bad) == 0.0


async def test_watchdog_pings_every_half_timeout_only_while_healthy(receiver: tuple[socket.socket, str]) -> None:
    s, path = receiver
    clock = FakeClock()
    stale: list[str | None] = [None]

    async def checks() -> list[tuple[str, str | None]]:
        return [("syncloop", stale[0])]

    dog = Watchdog(Notifier({"NOTIFY_SOCKET": path}), 20.0, clock, checks)
    task = asyncio.create_task(dog.run())
    try:
        await asyncio.sleep(0.01)
        assert received(s) == ["WATCHDOG=1"]
        clock.advance(9.9)
        await asyncio.sleep(0.01)
        assert received(s) == []
        clock.advance(0.1)
        await asyncio.sleep(0.01)
        assert received(s) == ["WATCHDOG=1"]
        stale[0] = "sync loop has not run for 12.0s"
        for _ in range(3):
            clock.advance(10)
            await asyncio.sleep(0.01)
        assert received(s) == []
        stale[0] = None
        clock.advance(10)
        await asyncio.sleep(0.01)
        assert received(s) == ["WATCHDOG=1"] and dog.pings == 3
    finally:
        task.cancel()


async def test_watchdog_off_without_socket_or_with_a_tiny_timeout(caplog: pytest.LogCaptureFixture,
                                                                  receiver: tuple[socket.socket, str]) -> None:
    _, path = receiver

    async def checks() -> list[tuple[str, str | None]]:
        return []

    await asyncio.wait_for(Watchdog(Notifier({}), 20.0, FakeClock(), checks).run(), 1)
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(Watchdog(Notifier({"NOTIFY_SOCKET": path}), 1.0, FakeClock(), checks).run(), 1)
    assert "systemd watchdog timeout too small" in caplog.text
