"""What cAdvisor's machine info holds for the `machine_*` series and `cadvisor_version_info`, read once at start:
the ids that label every machine series (boot id, machine id, DMI system UUID), the CPU topology from
`/sys/devices/system/cpu/cpu*/topology` (logical CPUs, distinct cores, sockets; books and drawers exist on s390
only), and the kernel and OS versions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MachineInfo:
    boot_id: str = ""
    machine_id: str = ""
    system_uuid: str = ""
    cpu_cores: int = 0
    physical_cores: int = 0
    sockets: int = 0
    books: int = 0
    drawers: int = 0
    kernel_version: str = ""
    os_version: str = ""
    error: bool = False  # a topology read failed: machine_scrape_error 1

    def labels(self) -> list[tuple[str, str]]:
        return [("boot_id", self.boot_id), ("machine_id", self.machine_id), ("system_uuid", self.system_uuid)]


def _first_line(path: Path) -> str:
    try:
        return path.read_text().strip().splitlines()[0].strip()
    except (OSError, IndexError):
        return ""


def os_pretty_name(os_release: str) -> str:
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key == "PRETTY_NAME":
            return value.strip().strip('"')
    return "Linux"


def topology(cpu_dir: Path) -> tuple[int, int, int, int, int]:
    """(logical CPUs, cores, sockets, books, drawers) of the online CPUs under /sys/devices/system/cpu."""
    cpus = sorted(p for p in cpu_dir.glob("cpu[0-9]*") if (p / "topology").is_dir())
    cores: set[tuple[str, ...]] = set()
    sockets: set[str] = set()
    books: set[tuple[str, str]] = set()
    drawers: set[tuple[str, str]] = set()
    for cpu in cpus:
        t = cpu / "topology"
        package = _first_line(t / "physical_package_id")
        cores.add((package, _first_line(t / "core_id")))
        sockets.add(package)
        if (t / "book_id").exists():
            books.add((package, _first_line(t / "book_id")))
        if (t / "drawer_id").exists():
            drawers.add((package, _first_line(t / "drawer_id")))
    return len(cpus), len(cores), len(sockets), len(books), len(drawers)


def read_machine_info(proc: Path = Path("/proc"), sys: Path = Path("/sys"), etc: Path = Path("/etc")) -> MachineInfo:
    error = False
    try:
        logical, cores, sockets, books, drawers = topology(sys / "devices/system/cpu")
    except OSError:
        logical, cores, sockets, books, drawers, error = 0, 0, 0, 0, 0, True
    if logical == 0:
        logical = os.cpu_count() or 0
    machine_id = _first_line(etc / "machine-id") or _first_line(Path("/var/lib/dbus/machine-id"))
    try:
        os_version = os_pretty_name((etc / "os-release").read_text())
    except OSError:
        os_version = "Linux"
    return MachineInfo(
        boot_id=_first_line(proc / "sys/kernel/random/boot_id"), machine_id=machine_id,
        # A machine without DMI (a microVM) has no product_uuid: the recorded kubelet then shows the machine id here.
        system_uuid=_first_line(sys / "class/dmi/id/product_uuid") or machine_id,
        cpu_cores=logical, physical_cores=cores, sockets=sockets, books=books, drawers=drawers,
        kernel_version=os.uname().release, os_version=os_version, error=error,
    )
