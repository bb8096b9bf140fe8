"""SystemdManager over D-Bus (`org.freedesktop.systemd1` on the system bus) with dbus-fast.

The cgroup manager's calls are synchronous, so the bus lives on an event loop in a thread of its own and each
call blocks its caller until systemd's job has finished (the `JobRemoved` signal, as runc waits for it, bounded
by `timeout`). That is a few milliseconds per pod cgroup, on the same footing as the cgroupfs writes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from dbus_fast import BusType, Message, MessageType, Variant
from dbus_fast.aio import MessageBus

from cgroups.systemd_driver import SystemdError
from cgroups.systemd_units import Property

SYSTEMD = "org.freedesktop.systemd1"
PATH = "/org/freedesktop/systemd1"
MANAGER = "org.freedesktop.systemd1.Manager"
_JOB_REMOVED = f"type='signal',sender='{SYSTEMD}',interface='{MANAGER}',member='JobRemoved'"
T = TypeVar("T")


def _props(properties: list[Property]) -> list[list[Any]]:
    return [[name, Variant(sig, value)] for name, (sig, value) in properties]


class DbusSystemd:
    def __init__(self, address: str | None = None, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="systemd-dbus", daemon=True)
        self._thread.start()
        self._waiting: dict[str, asyncio.Future[str]] = {}  # job path -> its result
        self._early: dict[str, str] = {}  # results that came before we knew the job (ours only)
        self._units: set[str] = set()  # units with a call in flight
        try:
            self._bus = self._run(self._connect(address))
        except BaseException:
            self.close()
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout + 5)
        except TimeoutError:
            raise SystemdError("systemd did not answer within the timeout") from None

    async def _connect(self, address: str | None) -> MessageBus:
        try:
            bus = await MessageBus(bus_address=address, bus_type=BusType.SYSTEM).connect()
        except Exception as e:
            raise SystemdError(f"cannot connect to systemd over D-Bus: {e or type(e).__name__}") from None
        bus.add_message_handler(self._on_message)
        await self._call(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch",
                         "s", [_JOB_REMOVED])
        await self._call(bus, SYSTEMD, PATH, MANAGER, "Subscribe", "", [])
        return bus

    def _on_message(self, msg: Message) -> None:
        if msg.message_type != MessageType.SIGNAL or msg.interface != MANAGER or msg.member != "JobRemoved":
            return
        _id, job, unit, result = msg.body
        waiter = self._waiting.pop(job, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(result)
        elif unit in self._units:
            self._early[job] = result

    @staticmethod
    async def _call(bus: MessageBus, dest: str, path: str, iface: str, member: str, sig: str,
                    body: list[Any]) -> Message:
        reply = await bus.call(Message(destination=dest, path=path, interface=iface, member=member, signature=sig,
                                       body=body))
        assert reply is not None
        return reply

    async def _job(self, unit: str, member: str, sig: str, body: list[Any], tolerated: str) -> None:
        self._units.add(unit)
        try:
            reply = await self._call(self._bus, SYSTEMD, PATH, MANAGER, member, sig, body)
            if reply.message_type == MessageType.ERROR:
                if reply.error_name == tolerated:
                    return
                detail = reply.body[0] if reply.body else ""
                raise SystemdError(f"systemd {member} {unit}: {reply.error_name}: {detail}")
            job = str(reply.body[0])
            result = self._early.pop(job, None)
            if result is None:
                waiter = self._waiting[job] = asyncio.get_running_loop().create_future()
                try:
                    result = await asyncio.wait_for(waiter, self.timeout)
                except TimeoutError:
                    raise SystemdError(f"systemd {member} {unit}: job {job} did not finish") from None
                finally:
                    self._waiting.pop(job, None)
            if result != "done":
                raise SystemdError(f"systemd {member} {unit}: job {result}")
        finally:
            self._units.discard(unit)

    def start_transient_unit(self, unit: str, properties: list[Property]) -> None:
        # a slice that is already there (the agent restarted) is fine: its limits are set by the update after
        self._run(self._job(unit, "StartTransientUnit", "ssa(sv)a(sa(sv))", [unit, "replace", _props(properties), []],
                            "org.freedesktop.systemd1.UnitExists"))

    def stop_unit(self, unit: str) -> None:
        self._run(self._job(unit, "StopUnit", "ss", [unit, "replace"], "org.freedesktop.systemd1.NoSuchUnit"))

    def set_unit_properties(self, unit: str, properties: list[Property]) -> None:
        async def call() -> None:
            reply = await self._call(self._bus, SYSTEMD, PATH, MANAGER, "SetUnitProperties", "sba(sv)",
                                     [unit, True, _props(properties)])
            if reply.message_type == MessageType.ERROR:
                raise SystemdError(f"systemd SetUnitProperties {unit}: {reply.error_name}: "
                                   f"{reply.body[0] if reply.body else ''}")
        self._run(call())

    def close(self) -> None:
        async def disconnect() -> None:
            bus = getattr(self, "_bus", None)
            if bus is not None:
                bus.disconnect()

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(disconnect(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
