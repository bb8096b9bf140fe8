"""logind over the D-Bus system bus, the calls upstream's nodeshutdown/systemd/inhibit_linux.go makes.

A delay inhibitor (`Inhibit("shutdown", "kubelet", ..., "delay")`) is a file descriptor: logind holds the shutdown
back until it is closed or `InhibitDelayMaxUSec` has passed. `PrepareForShutdown(true)` announces a shutdown,
`PrepareForShutdown(false)` its cancellation. The bus is the one `DBUS_SYSTEM_BUS_ADDRESS` names (default
/run/dbus/system_bus_socket), as godbus finds it.
"""

from __future__ import annotations

import asyncio
import logging
import os

from dbus_fast import BusType, Message, MessageType
from dbus_fast.aio import MessageBus

LOGIND_SERVICE = "org.freedesktop.login1"
LOGIND_OBJECT = "/org/freedesktop/login1"
LOGIND_INTERFACE = "org.freedesktop.login1.Manager"
SYSTEMD_SERVICE = "org.freedesktop.systemd1"
SYSTEMD_OBJECT = "/org/freedesktop/systemd1"
SYSTEMD_INTERFACE = "org.freedesktop.systemd1.Manager"

LOGIND_CONF_DIR = "/etc/systemd/logind.conf.d"
KUBELET_LOGIND_CONF = "99-kubelet.conf"

log = logging.getLogger("minikubelet.nodeshutdown")

INHIBIT_WHO = "kubelet"
INHIBIT_WHY = "Kubelet needs time to handle node shutdown"


class LogindError(Exception):
    """A logind or systemd call failed (its D-Bus error name and message)."""


class Logind:
    def __init__(self, bus: MessageBus, conf_dir: str = LOGIND_CONF_DIR) -> None:
        self.bus = bus
        self.conf_dir = conf_dir
        self._shutdown_events: asyncio.Queue[bool] | None = None

    @classmethod
    async def connect(cls, conf_dir: str = LOGIND_CONF_DIR) -> Logind:
        """The system bus, with file descriptor passing (the inhibitor is one)."""
        bus = await MessageBus(bus_type=BusType.SYSTEM, negotiate_unix_fd=True).connect()
        return cls(bus, conf_dir)

    async def _call(self, msg: Message) -> Message:
        reply = await self.bus.call(msg)
        if reply.message_type == MessageType.ERROR:
            for fd in reply.unix_fds:
                os.close(fd)
            text = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
            raise LogindError(f"{reply.error_name}: {text}")
        return reply

    async def current_inhibit_delay(self) -> float:
        """logind's InhibitDelayMaxUSec, in seconds."""
        reply = await self._call(Message(destination=LOGIND_SERVICE, path=LOGIND_OBJECT,
                                         interface="org.freedesktop.DBus.Properties", member="Get", signature="ss",
                                         body=[LOGIND_INTERFACE, "InhibitDelayMaxUSec"]))
        variant = reply.body[0]
        if variant.signature != "t":
            raise LogindError(f"InhibitDelayMaxUSec from logind is not a uint64 as expected: {variant.signature!r}")
        return int(variant.value) / 1e6

    async def inhibit_shutdown(self) -> int:
        """Take a delay inhibitor lock; the returned file descriptor is the lock."""
        reply = await self._call(Message(destination=LOGIND_SERVICE, path=LOGIND_OBJECT, interface=LOGIND_INTERFACE,
                                         member="Inhibit", signature="ssss",
                                         body=["shutdown", INHIBIT_WHO, INHIBIT_WHY, "delay"]))
        if reply.signature != "h" or not reply.unix_fds:
            for fd in reply.unix_fds:
                os.close(fd)
            raise LogindError("failed creating systemd inhibitor: no file descriptor in the reply")
        index = reply.body[0]
        lock: int = reply.unix_fds[index]
        os.set_inheritable(lock, False)  # only this process holds the lock: a child must not keep it
        for i, fd in enumerate(reply.unix_fds):
            if i != index:
                os.close(fd)
        return lock

    @staticmethod
    def release(lock: int) -> None:
        """Close the lock: logind may go on with the shutdown."""
        os.close(lock)

    def override_inhibit_delay(self, seconds: int) -> str:
        """Write logind's drop-in raising InhibitDelayMaxSec; its path."""
        os.makedirs(self.conf_dir, mode=0o755, exist_ok=True)
        path = os.path.join(self.conf_dir, KUBELET_LOGIND_CONF)
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"# Kubelet logind override\n[Login]\nInhibitDelayMaxSec={seconds}\n")
        return path

    async def reload_logind_conf(self) -> None:
        """SIGHUP to systemd-logind through systemd (KillUnit), so it reads its configuration again."""
        await self._call(Message(destination=SYSTEMD_SERVICE, path=SYSTEMD_OBJECT, interface=SYSTEMD_INTERFACE,
                                 member="KillUnit", signature="ssi", body=["systemd-logind.service", "all", 1]))

    async def monitor_shutdown(self) -> asyncio.Queue[bool]:
        """PrepareForShutdown signals from now on, as a queue of their argument."""
        queue: asyncio.Queue[bool] = asyncio.Queue()
        self._shutdown_events = queue
        self.bus.add_message_handler(self._on_message)
        await self._call(Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                                 interface="org.freedesktop.DBus", member="AddMatch", signature="s",
                                 body=[f"type='signal',interface='{LOGIND_INTERFACE}',member='PrepareForShutdown',"
                                       f"path='{LOGIND_OBJECT}'"]))
        return queue

    def _on_message(self, msg: Message) -> bool:
        if (msg.message_type == MessageType.SIGNAL and msg.interface == LOGIND_INTERFACE
                and msg.member == "PrepareForShutdown" and msg.path == LOGIND_OBJECT
                and self._shutdown_events is not None):
            if msg.signature == "b" and isinstance(msg.body[0], bool):
                self._shutdown_events.put_nowait(msg.body[0])
            else:
                log.error("Failed obtaining shutdown event, PrepareForShutdown event was not bool type as expected",
                          extra={"kv": {"signature": msg.signature}})
        return False

    async def wait_for_disconnect(self) -> None:
        await self.bus.wait_for_disconnect()  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.bus.disconnect()
