"""A stand-in for systemd's Manager on a private D-Bus bus, for the systemd cgroup driver's tests on a host
without systemd.

It runs a real `dbus-daemon` (a system-bus-like configuration in a temporary directory) and owns
`org.freedesktop.systemd1` there with what the driver calls, answering as systemd does:

- `StartTransientUnit(name, mode, properties a(sv), aux) -> o job`: a `.slice` whose parent slice (its name up to
  the last `-`, or `-.slice`) is active becomes active: its cgroup directory appears under `cgroup_root`
  (`a-b.slice` at `/a.slice/a-b.slice`, systemd's slice path); then `JobRemoved(id, job, unit, "done")`.
  A unit that exists already is the error `org.freedesktop.systemd1.UnitExists`; a parent that does not exist,
  or a name in `fail`, ends the job with "failed" (and no directory); a property of the wrong D-Bus type is
  `org.freedesktop.DBus.Error.InvalidArgs`, as systemd's bus_unit_set_properties answers.
- `StopUnit(name, mode) -> o job`: the directory goes (with its child slices, as systemd stops them), then
  JobRemoved "done"; an unknown unit is `org.freedesktop.systemd1.NoSuchUnit`.
- `SetUnitProperties(name, runtime, properties)`: recorded; NoSuchUnit for an unknown unit.
- `Subscribe()`.

Every call is recorded in `calls` with the properties as {name: (signature, value)}. The real systemd is
tested in the VM lab (docs/install.md).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Annotated, Any

from dbus_fast import DBusError, Variant
from dbus_fast.aio import MessageBus
from dbus_fast.annotations import DBusSignature
from dbus_fast.service import ServiceInterface, method, signal

from cgroups.naming import expand_slice
from tests.private_bus import PrivateBus

# the types systemd's transient unit properties have (src/core/dbus-cgroup.c, dbus-unit.c)
PROPERTY_TYPES = {"Description": "s", "Wants": "as", "DefaultDependencies": "b", "MemoryAccounting": "b",
                  "CPUAccounting": "b", "TasksAccounting": "b", "CPUWeight": "t", "CPUShares": "t",
                  "CPUQuotaPerSecUSec": "t", "CPUQuotaPeriodUSec": "t", "MemoryMax": "t", "MemoryLimit": "t",
                  "MemoryMin": "t", "MemoryHigh": "t", "TasksMax": "t", "Delegate": "b"}
Props = dict[str, tuple[str, Any]]


def _parent(unit: str) -> str:
    stem = unit.removesuffix(".slice")
    return stem.rsplit("-", 1)[0] + ".slice" if "-" in stem else "-.slice"


def _check(properties: list[list[Any]]) -> Props:
    out: Props = {}
    for name, value in properties:
        assert isinstance(value, Variant)
        want = PROPERTY_TYPES.get(name)
        if want is None or value.signature != want:
            raise DBusError("org.freedesktop.DBus.Error.InvalidArgs",
                            f"Cannot set property {name}, or unknown property.")
        out[name] = (value.signature, value.value)
    return out


class _Manager(ServiceInterface):
    def __init__(self, double: SystemdDouble) -> None:
        super().__init__("org.freedesktop.systemd1.Manager")
        self.double = double
        self.jobs = 0

    def _finish(self, unit: str, result: str) -> str:
        self.jobs += 1
        job_id, job = self.jobs, f"/org/freedesktop/systemd1/job/{self.jobs}"
        # the job ends after the reply has gone out, as systemd's
        asyncio.get_running_loop().call_later(0.005, self.JobRemoved, job_id, job, unit, result)
        return job

    @method()
    def Subscribe(self) -> Annotated[None, DBusSignature("")]:
        self.double.calls.append(("Subscribe", "", {}))

    @method()
    def StartTransientUnit(self, name: Annotated[str, DBusSignature("s")], mode: Annotated[str, DBusSignature("s")],
                           properties: Annotated[list[list[Any]], DBusSignature("a(sv)")],
                           aux: Annotated[list[list[Any]], DBusSignature("a(sa(sv))")]
                           ) -> Annotated[str, DBusSignature("o")]:
        props = _check(properties)
        self.double.calls.append(("StartTransientUnit", name, props))
        path = self.double.path(name)
        if name in self.double.units:
            raise DBusError("org.freedesktop.systemd1.UnitExists", f"Unit {name} was already loaded or has a fragment file.")
        parent = _parent(name)
        if name in self.double.fail or (parent != "-.slice" and parent not in self.double.units):
            return self._finish(name, "failed")
        path.mkdir()
        self.double.units[name] = props
        return self._finish(name, "done")

    @method()
    def StopUnit(self, name: Annotated[str, DBusSignature("s")], mode: Annotated[str, DBusSignature("s")]
                 ) -> Annotated[str, DBusSignature("o")]:
        self.double.calls.append(("StopUnit", name, {}))
        if name not in self.double.units:
            raise DBusError("org.freedesktop.systemd1.NoSuchUnit", f"Unit {name} not loaded.")
        for unit in [u for u in self.double.units if u == name or u.startswith(name.removesuffix(".slice") + "-")]:
            del self.double.units[unit]
        shutil.rmtree(self.double.path(name))
        return self._finish(name, "done")

    @method()
    def SetUnitProperties(self, name: Annotated[str, DBusSignature("s")],
                          runtime: Annotated[bool, DBusSignature("b")],
                          properties: Annotated[list[list[Any]], DBusSignature("a(sv)")]
                          ) -> Annotated[None, DBusSignature("")]:
        props = _check(properties)
        self.double.calls.append(("SetUnitProperties", name, props))
        if name not in self.double.units:
            raise DBusError("org.freedesktop.systemd1.NoSuchUnit", f"Unit {name} not loaded.")
        self.double.units[name].update(props)

    @signal()
    def JobRemoved(self, job_id: int, job: str, unit: str, result: str
                   ) -> Annotated[list[Any], DBusSignature("uoss")]:
        return [job_id, job, unit, result]


class SystemdDouble:
    def __init__(self, workdir: Path, cgroup_root: Path) -> None:
        self.workdir = workdir
        self.cgroup_root = cgroup_root
        self.private_bus = PrivateBus(workdir)
        self.socket = self.private_bus.socket
        self.address = self.private_bus.address
        self.calls: list[tuple[str, str, Props]] = []
        self.units: dict[str, Props] = {}
        self.fail: set[str] = set()
        self._bus: MessageBus | None = None

    def path(self, unit: str) -> Path:
        return self.cgroup_root / expand_slice(unit).lstrip("/")

    async def start(self) -> None:
        await self.private_bus.start()
        self._bus = await MessageBus(bus_address=self.address).connect()
        self._bus.export("/org/freedesktop/systemd1", _Manager(self))
        await self._bus.request_name("org.freedesktop.systemd1")

    async def stop(self) -> None:
        if self._bus is not None:
            self._bus.disconnect()
        await self.private_bus.stop()
