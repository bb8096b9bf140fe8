"""Memory pressure notification on cgroup v2: the kernel tells when `kubepods` stalls on memory or meets its limit.

cgroup v2 has no usage threshold to register (v1's `cgroup.event_control`), and upstream v1.36 returns a disabled
notifier there (`threshold_notifier_linux.go` names memory.events and PSI as the way forward). This goes beyond
upstream (docs/decisions.md): two kernel notifications on the agent's own `kubepods` cgroup, each making the
eviction manager synchronize at once instead of at the next 10 s interval:

- a PSI trigger on `memory.pressure` (`some <stall> <window>`): the fd gets POLLPRI when the cgroup's tasks were
  stalled on memory for that long within the window (reclaim, refaults: the state just short of an OOM kill);
- `memory.events`: kernfs wakes pollers with POLLPRI when a counter changes; a change of `high`, `max`, `oom` or
  `oom_kill` means the cgroup met a limit.

Both fds sit in one epoll set whose own fd the event loop watches. Notifications are limited to one per
`min_interval` (a cgroup at its limit can raise `max` every 10 ms): each one costs a fresh stats pass.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from minikubelet.base.clock import Clock

log = logging.getLogger("minikubelet.eviction.psi")

# 100 ms of stall in a 1 s window; a process without CAP_SYS_RESOURCE may only use windows of whole 2 s
TRIGGERS = (b"some 100000 1000000\0", b"some 500000 2000000\0")
LIMIT_EVENTS = ("high", "max", "oom", "oom_kill")
MIN_INTERVAL = 1.0


def parse_events(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        try:
            out[key] = int(value)
        except ValueError:
            continue
    return out


class PressureNotifier:
    def __init__(self, cgroup_dir: Path, on_pressure: Callable[[str], None], clock: Clock,
                 min_interval: float = MIN_INTERVAL) -> None:
        self.cgroup_dir = cgroup_dir
        self._on_pressure = on_pressure
        self._clock = clock
        self._min_interval = min_interval
        self._epoll: select.epoll | None = None
        self._fds: dict[int, str] = {}  # fd -> what it is ("psi", "events")
        self._events: dict[str, int] = {}
        self._last: float | None = None
        self.trigger = b""  # the PSI trigger the kernel accepted
        self.fired = 0

    def description(self) -> str:
        return f"memory pressure (PSI, memory.events): {self.cgroup_dir}"

    def start(self) -> None:
        """Register the PSI trigger and watch memory.events; OSError when neither could be set up."""
        self._epoll = select.epoll()
        errors: list[str] = []
        try:
            self._psi()
        except OSError as e:
            errors.append(f"memory.pressure: {e}")
        try:
            fd = os.open(self.cgroup_dir / "memory.events", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            try:
                self._events = parse_events(self._read(fd))
                self.watch(fd, "events")
            except OSError:
                os.close(fd)
                raise
        except OSError as e:
            errors.append(f"memory.events: {e}")
        if not self._fds:
            self.close()
            raise OSError("; ".join(errors))
        for err in errors:
            log.info("memory pressure notifier: one source is missing", extra={"kv": {"err": err}})
        asyncio.get_running_loop().add_reader(self._epoll.fileno(), self._ready)
        log.info("memory pressure notifier started", extra={"kv": {
            "cgroup": str(self.cgroup_dir), "sources": sorted(self._fds.values()),
            "trigger": self.trigger.rstrip(b"\0").decode()}})

    def _psi(self) -> None:
        fd = os.open(self.cgroup_dir / "memory.pressure", os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            err: OSError | None = None
            for trigger in TRIGGERS:
                try:
                    os.write(fd, trigger)
                except OSError as e:
                    err = e
                    continue
                self.trigger = trigger
                break
            else:
                assert err is not None
                raise err
            self.watch(fd, "psi")
        except OSError:
            os.close(fd)
            raise

    def watch(self, fd: int, kind: str) -> None:
        """Add an fd whose POLLPRI means pressure (the caller's fd is closed by close())."""
        assert self._epoll is not None
        self._epoll.register(fd, select.EPOLLPRI | select.EPOLLERR)
        self._fds[fd] = kind

    @staticmethod
    def _read(fd: int) -> str:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 4096).decode("ascii", "replace")

    def _ready(self) -> None:
        if self._epoll is None:
            return
        reasons: list[str] = []
        for fd, mask in self._epoll.poll(0):
            kind = self._fds.get(fd)
            if kind == "psi" and mask & (select.EPOLLPRI | select.EPOLLERR):
                reasons.append("memory.pressure trigger")
            elif kind == "events":
                reasons += self._limit_events(fd)
            elif kind is not None:
                reasons.append(kind)
        if not reasons:
            return
        now = self._clock.monotonic()
        if self._last is not None and now - self._last < self._min_interval:
            return
        self._last = now
        self.fired += 1
        self._on_pressure(f"{', '.join(reasons)}: {self.cgroup_dir}")

    def _limit_events(self, fd: int) -> list[str]:
        """Reading the file again re-arms kernfs' poll; only a changed limit counter is pressure."""
        try:
            now = parse_events(self._read(fd))
        except OSError:
            return []
        changed = [f"memory.events {k}" for k in LIMIT_EVENTS if now.get(k, 0) != self._events.get(k, 0)]
        self._events = now
        return changed

    def update(self, pods_memory: Mapping[str, Any]) -> None:
        """Nothing to re-register: the kernel's triggers do not follow the usage (the v1 notifier's do)."""

    def close(self) -> None:
        if self._epoll is not None:
            try:
                asyncio.get_running_loop().remove_reader(self._epoll.fileno())
            except RuntimeError:
                pass
            self._epoll.close()
            self._epoll = None
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
