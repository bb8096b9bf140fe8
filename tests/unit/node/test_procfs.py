"""The host facts read from the kernel against psutil's (which read them before) on this host, and the parsing
on written tables."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import psutil
import pytest

from minikubelet.node import procfs


def test_the_facts_are_what_psutil_reads_on_this_host() -> None:
    assert procfs.memory_total() == psutil.virtual_memory().total
    assert procfs.boot_time() == psutil.boot_time()
    assert procfs.mounts() == [(p.device, p.mountpoint) for p in psutil.disk_partitions(all=True)]
    theirs = {name: [a.address for a in addrs if a.family == socket.AF_INET]
              for name, addrs in psutil.net_if_addrs().items()}
    assert procfs.ipv4_addresses() == {name: addrs for name, addrs in theirs.items() if addrs}
    assert "127.0.0.1" in procfs.ipv4_addresses().get("lo", [])


def _proc(tmp_path: Path, meminfo: str = "", stat: str = "", mounts: str = "") -> Path:
    (tmp_path / "self").mkdir()
    (tmp_path / "meminfo").write_text(meminfo)
    (tmp_path / "stat").write_text(stat)
    (tmp_path / "self/mounts").write_text(mounts)
    return tmp_path


def test_memory_and_boot_time_from_written_tables(tmp_path: Path) -> None:
    proc = _proc(tmp_path, meminfo="MemFree:  10 kB\nMemTotal:       2048 kB\n",
                 stat="cpu  1 2 3\nintr 5\nbtime 1764000000\nprocesses 9\n")
    assert procfs.memory_total(proc) == 2048 * 1024
    assert procfs.boot_time(proc) == 1764000000.0


def test_a_table_without_the_line_is_a_clear_error(tmp_path: Path) -> None:
    proc = _proc(tmp_path, meminfo="MemFree: 10 kB\n", stat="cpu 1\n")
    with pytest.raises(ValueError, match="MemTotal"):
        procfs.memory_total(proc)
    with pytest.raises(ValueError, match="btime"):
        procfs.boot_time(proc)


def test_mounts_unescape_paths_and_name_no_device_for_none(tmp_path: Path) -> None:
    proc = _proc(tmp_path, mounts=(
        "/dev/sda1 / ext4 rw,relatime 0 0\n"
        "none /sys/fs/bpf bpf rw 0 0\n"
        "/dev/sdb1 /var/lib/my\\040dir ext4 rw 0 0\n"
        "tmpfs /run/a\\011tab\\134back tmpfs rw 0 0\n"
        "garbage\n"))
    assert procfs.mounts(proc) == [("/dev/sda1", "/"), ("", "/sys/fs/bpf"), ("/dev/sdb1", "/var/lib/my dir"),
                                   ("tmpfs", "/run/a\ttab\\back")]


def test_a_root_named_dev_root_is_the_device_holding_slash(tmp_path: Path) -> None:
    dev = Path("/").stat().st_dev
    proc = _proc(tmp_path, mounts="/dev/root / ext4 rw 0 0\nrootfs /x rootfs rw 0 0\n")
    (tmp_path / "partitions").write_text(
        f"major minor  #blocks  name\n\n   7        0     1024 loop0\n {os.major(dev)} {os.minor(dev)} 4096 vdz9\n")
    assert procfs.mounts(proc) == [("/dev/vdz9", "/"), ("/dev/vdz9", "/x")]
