"""What cAdvisor tells the kubelet about the machine: ids, kernel, OS image, huge page pools."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction

_HUGEPAGES = "/sys/kernel/mm/hugepages"


@dataclass(frozen=True)
class MachineInfo:
    machine_id: str = ""
    system_uuid: str = ""
    boot_id: str = ""
    kernel_version: str = ""
    os_image: str = ""


def _first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline(4096).strip()
    except OSError:
        return ""


def os_image(path: str = "/etc/os-release") -> str:
    """PRETTY_NAME of os-release, as cAdvisor's ContainerOsVersion."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f.read(65536).splitlines():
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "Linux"


def machine_info(root: str = "/") -> MachineInfo:
    machine_id = _first_line(os.path.join(root, "etc/machine-id")) or _first_line(
        os.path.join(root, "var/lib/dbus/machine-id"))
    # Without DMI (many VMs), the machine id stands in, as the recorded v1.36 node shows.
    system_uuid = _first_line(os.path.join(root, "sys/class/dmi/id/product_uuid")) or machine_id
    return MachineInfo(
        machine_id=machine_id,
        system_uuid=system_uuid,
        boot_id=_first_line(os.path.join(root, "proc/sys/kernel/random/boot_id")),
        kernel_version=os.uname().release,
        os_image=os_image(os.path.join(root, "etc/os-release")),
    )


def _page_size_name(kib: int) -> str:
    for suffix, size in (("Gi", 1 << 20), ("Mi", 1 << 10)):
        if kib % size == 0:
            return f"hugepages-{kib // size}{suffix}"
    return f"hugepages-{kib}Ki"


def hugepages_capacity(base: str = _HUGEPAGES) -> dict[str, Fraction]:
    """hugepages-<size>: bytes in each pool (pages x size), 0 for a supported but empty size."""
    out: dict[str, Fraction] = {}
    try:
        names = os.listdir(base)
    except OSError:
        return out
    for name in names:
        if not (name.startswith("hugepages-") and name.endswith("kB")):
            continue
        try:
            kib = int(name[len("hugepages-"):-2])
            pages = int(_first_line(os.path.join(base, name, "nr_hugepages")) or "0")
        except ValueError:
            continue
        out[_page_size_name(kib)] = Fraction(pages * kib * 1024)
    return out
