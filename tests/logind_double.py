"""A stand-in for systemd-logind on a private D-Bus bus, for tests on a host without systemd.

It runs a real `dbus-daemon` of its own (a system-bus-like configuration in a temporary directory) and owns
`org.freedesktop.login1` and `org.freedesktop.systemd1` there, implementing exactly what the kubelet uses:

- `org.freedesktop.login1.Manager.Inhibit(what, who, why, mode) -> h`: a real pipe; the caller gets the write end,
  the double watches the read end, and the lock is released when every copy of that end is closed (EOF), as
  logind's FIFO;
- the `InhibitDelayMaxUSec` property (`t`, microseconds), read from `InhibitDelayMaxSec=` of the `*.conf` drop-ins
  in `conf_dir` whenever systemd is asked to send SIGHUP to `systemd-logind.service` (`KillUnit`), as logind
  re-reads logind.conf.d on SIGHUP;
- the `PrepareForShutdown(b)` signal, emitted when the test calls `shutdown()` (which then, like logind, waits for
  every delay inhibitor of `shutdown` to go, or for InhibitDelayMaxUSec, before "powering off") or `cancel()`.

The real logind is tested in the VM lab (docs/node-shutdown.md).
"""

from __future__ import annotations

import asyncio
import configparser
import contextlib
import glob
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from dbus_fast import DBusError, Message, MessageType, PropertyAccess
from dbus_fast.aio import MessageBus
from dbus_fast.annotations import DBusSignature
from dbus_fast.service import ServiceInterface, dbus_property, method, signal

from tests.private_bus import PrivateBus

DEFAULT_INHIBIT_DELAY_MAX = 5.0  # logind's default InhibitDelayMaxSec


@dataclass
class Inhibitor:
    what: str
    who: str
    why: str
    mode: str
    taken: float  # monotonic
    released: float | None = None
    fd: int = field(default=-1, repr=False)


def _conf_delay(conf_dir: str, default: float) -> float:
    """InhibitDelayMaxSec as logind reads it: the last drop-in (in name order) that sets it wins."""
    value = default
    for path in sorted(glob.glob(os.path.join(conf_dir, "*.conf"))):
        parser = configparser.ConfigParser(strict=False)
        with contextlib.suppress(configparser.Error, OSError):
            parser.read(path)
            if parser.has_option("Login", "InhibitDelayMaxSec"):
                value = float(parser.get("Login", "InhibitDelayMaxSec").rstrip("s"))
    return value


class _Login1(ServiceInterface):
    def __init__(self, double: LogindDouble) -> None:
        super().__init__("org.freedesktop.login1.Manager")
        self.double = double

    @dbus_property(access=PropertyAccess.READ)
    def InhibitDelayMaxUSec(self) -> Annotated[int, DBusSignature("t")]:
        return int(self.double.inhibit_delay_max * 1e6)

    @signal()
    def PrepareForShutdown(self, active: bool) -> Annotated[bool, DBusSignature("b")]:
        return active


class _Systemd1(ServiceInterface):
    def __init__(self, double: LogindDouble) -> None:
        super().__init__("org.freedesktop.systemd1.Manager")
        self.double = double

    @method()
    def KillUnit(self, unit: Annotated[str, DBusSignature("s")], who: Annotated[str, DBusSignature("s")],
                 signo: Annotated[int, DBusSignature("i")]) -> Annotated[None, DBusSignature("")]:
        if unit != "systemd-logind.service":
            raise DBusError("org.freedesktop.systemd1.NoSuchUnit", f"Unit {unit} not loaded.")
        self.double.kill_units.append((unit, who, signo))
        if signo == 1 and self.double.rereads_config:
            self.double.reload()


class LogindDouble:
    def __init__(self, workdir: Path, inhibit_delay_max: float = DEFAULT_INHIBIT_DELAY_MAX,
                 rereads_config: bool = True) -> None:
        self.workdir = workdir
        self.rereads_config = rereads_config  # False: a logind that ignores SIGHUP (its drop-ins never apply)
        self.private_bus = PrivateBus(workdir)
        self.socket = self.private_bus.socket
        self.address = self.private_bus.address
        self.conf_dir = str(workdir / "logind.conf.d")
        self.default_delay = inhibit_delay_max
        self.inhibit_delay_max = inhibit_delay_max
        self.inhibitors: list[Inhibitor] = []
        self.kill_units: list[tuple[str, str, int]] = []
        self.released = asyncio.Event()  # set whenever an inhibitor goes
        self._bus: MessageBus | None = None
        self._login1 = _Login1(self)

    async def start(self) -> LogindDouble:
        await self.private_bus.start()
        self._bus = bus = await MessageBus(bus_address=self.address, negotiate_unix_fd=True).connect()
        bus.export("/org/freedesktop/login1", self._login1)
        bus.add_message_handler(self._on_inhibit)
        bus.export("/org/freedesktop/systemd1", _Systemd1(self))
        await bus.request_name("org.freedesktop.login1")
        await bus.request_name("org.freedesktop.systemd1")
        self.reload()
        return self

    # --- logind's side ------------------------------------------------------------------------
    def reload(self) -> None:
        self.inhibit_delay_max = _conf_delay(self.conf_dir, self.default_delay)

    def _on_inhibit(self, msg: Message) -> bool:
        # Inhibit is answered here rather than by the exported interface: the double's copy of the write end
        # may only be closed once the reply carrying it has been sent.
        if not (msg.message_type == MessageType.METHOD_CALL and msg.path == "/org/freedesktop/login1"
                and msg.interface == "org.freedesktop.login1.Manager" and msg.member == "Inhibit"):
            return False
        if msg.signature != "ssss" or msg.body[3] not in ("block", "delay"):
            raise DBusError("org.freedesktop.DBus.Error.InvalidArgs", "Invalid mode specification")
        what, who, why, mode = msg.body
        r, w = os.pipe()
        inhibitor = Inhibitor(what, who, why, mode, time.monotonic(), fd=r)
        self.inhibitors.append(inhibitor)
        asyncio.get_running_loop().add_reader(r, self._maybe_released, inhibitor)
        assert self._bus is not None
        sent = self._bus.send(Message.new_method_return(msg, "h", [0], unix_fds=[w]))
        sent.add_done_callback(lambda _f: os.close(w))
        return True

    def _maybe_released(self, inhibitor: Inhibitor) -> None:
        try:
            data = os.read(inhibitor.fd, 64)
        except BlockingIOError:
            return
        if data:
            return
        asyncio.get_running_loop().remove_reader(inhibitor.fd)
        os.close(inhibitor.fd)
        inhibitor.fd = -1
        inhibitor.released = time.monotonic()
        self.released.set()

    def held(self, what: str = "shutdown", mode: str = "delay") -> list[Inhibitor]:
        return [i for i in self.inhibitors if i.released is None and i.mode == mode and what in i.what.split(":")]

    async def wait_held(self, count: int = 1, timeout: float = 20.0) -> list[Inhibitor]:
        deadline = time.monotonic() + timeout
        while len(self.held()) < count:
            assert time.monotonic() < deadline, f"no {count} delay inhibitor(s) of shutdown: {self.inhibitors}"
            await asyncio.sleep(0.05)
        return self.held()

    async def shutdown(self) -> float:
        """PrepareForShutdown(true), then wait as logind does: until no delay inhibitor of shutdown is left or
        InhibitDelayMaxUSec has passed. Returns the seconds waited."""
        t0 = time.monotonic()
        self._login1.PrepareForShutdown(True)
        deadline = t0 + self.inhibit_delay_max
        while self.held() and time.monotonic() < deadline:
            self.released.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.released.wait(), deadline - time.monotonic())
        return time.monotonic() - t0

    def cancel(self) -> None:
        self._login1.PrepareForShutdown(False)

    async def bus_call(self, msg: Message) -> Message:
        assert self._bus is not None
        reply = await self._bus.call(msg)
        assert reply.message_type != MessageType.ERROR, reply.body
        return reply

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        for i in self.inhibitors:
            if i.fd >= 0:
                loop.remove_reader(i.fd)
                os.close(i.fd)
                i.fd = -1
        if self._bus is not None:
            self._bus.disconnect()
            self._bus = None
        await self.private_bus.stop()
