"""The files behind cAdvisor's extra series, laid out as the kernel writes them: cgroup v1 and v2 limits, memory
counters, OOM kills and per-device I/O; a cgroup's processes, descriptors, sockets and open-files limit; the CPU
topology and the ids that label the machine series; /proc/diskstats."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import cgroups.driver
import minikubelet.stats.cgroup_reader
from minikubelet.stats.cgroup_reader import (
    V1_UNLIMITED,
    CgroupSpec,
    DeviceIo,
    cpu_weight_to_shares,
    parse_blkio,
    parse_io_stat,
    read_v1,
    read_v2,
    v1_extras,
    v2_extras,
)
from minikubelet.stats.diskstats import DiskStats, block_devices, parse_diskstats
from minikubelet.stats.machine import os_pretty_name, read_machine_info, topology
from minikubelet.stats.processes import parse_max_open_files, process_stats


def _write(d: Path, files: dict[str, str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)
    return d


V2_IO_STAT = "259:0 rbytes=4096 wbytes=81920 rios=1 wios=20 dbytes=0 dios=0\n8:0 rbytes=0 wbytes=512 rios=0 wios=1 dbytes=0 dios=0\n"
V1_SERVICED = "8:0 Read 7\n8:0 Write 3\n8:0 Sync 10\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 10\nTotal 10\n"
V1_SERVICE_BYTES = "8:0 Read 28672\n8:0 Write 12288\n8:0 Sync 40960\n8:0 Total 40960\nTotal 40960\n"


def test_v2_limits_counters_and_io(tmp_path: Path) -> None:
    d = _write(tmp_path / "kubepods" / "burstable" / "pod1" / "abc", {
        "cpu.stat": "usage_usec 10\nnr_periods 40\nnr_throttled 30\nthrottled_usec 1500\n", "memory.current": "8192\n",
        "memory.stat": "anon 4096\nkernel 1536\nactive_file 512\ninactive_file 256\npgfault 9\npgmajfault 1\n",
        "memory.max": "67108864\n", "memory.peak": "9000\n", "memory.min": "0\n", "memory.swap.max": "max\n",
        "memory.events": "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n",
        "cpu.max": "50000 100000\n", "cpu.weight": "79\n", "pids.current": "3\n", "pids.max": "4096\n",
        "io.stat": V2_IO_STAT,
    })
    s = read_v2(d)
    assert s is not None
    assert (s.memory_max_usage, s.memory_kernel, s.active_file, s.inactive_file) == (9000, 1536, 512, 256)
    assert (s.oom_kills, s.memory_failcnt) == (2, 0)  # v2 has no failcnt file: cAdvisor reports 0
    assert (s.local_page_faults, s.page_faults, s.local_major_page_faults) == (9, 9, 1)
    assert (s.pids, s.threads_max) == (3, 4096)
    assert (s.cfs_periods, s.cfs_throttled_periods, s.cfs_throttled_ns) == (40, 30, 1_500_000)
    # weight 79 is what the runtimes write for 2048 shares (two CPUs requested); integer division loses 2
    assert s.spec == CgroupSpec(cpu_period=100000, cpu_quota=50000, cpu_shares=2046, memory_reservation=0,
                                memory_swap_limit=0)
    assert s.io == (DeviceIo(259, 0, 1, 20, 4096, 81920), DeviceIo(8, 0, 0, 1, 0, 512))


def test_v2_no_limits_and_the_root(tmp_path: Path) -> None:
    d = _write(tmp_path / "p", {"cpu.stat": "usage_usec 10\n", "memory.current": "1\n", "cpu.max": "max 100000\n",
                                "cpu.weight": "1\n", "pids.max": "max\n", "memory.swap.max": "max\n"})
    s = read_v2(d)
    assert s is not None and s.spec is not None
    assert (s.spec.cpu_quota, s.spec.cpu_shares, s.spec.memory_swap_limit, s.threads_max) == (0, 2, 0, 0)
    assert s.io == () and s.oom_kills == 0
    root = read_v2(_write(tmp_path / "root", {"cpu.stat": "usage_usec 10\n"}), root=True, meminfo={})
    assert root is not None and root.spec == CgroupSpec(cpu_period=100000, cpu_shares=1024)


def test_cpu_weight_to_shares_inverts_the_runtimes_mapping() -> None:
    assert [cpu_weight_to_shares(w) for w in (1, 39, 10000)] == [2, 998, 262144]


def test_v1_limits_counters_and_blkio(tmp_path: Path) -> None:
    c = "kubepods/burstable/pod1/abc"
    dirs = {
        "cpuacct": _write(tmp_path / "cpuacct" / c, {"cpuacct.usage": "5\n", "cpuacct.stat": "user 1\nsystem 1\n"}),
        "cpu": _write(tmp_path / "cpu" / c, {"cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n",
                                             "cpu.shares": "512\n",
                                             "cpu.stat": "nr_periods 9\nnr_throttled 2\nthrottled_time 77\n"}),
        "memory": _write(tmp_path / "memory" / c, {
            "memory.usage_in_bytes": "8192\n", "memory.limit_in_bytes": "16777216\n",
            "memory.stat": "pgfault 4\npgmajfault 0\ntotal_pgfault 40\ntotal_pgmajfault 3\n"
                           "total_active_file 512\ntotal_inactive_file 256\n",
            "memory.failcnt": "17\n", "memory.max_usage_in_bytes": "16777216\n", "memory.kmem.usage_in_bytes": "640\n",
            "memory.soft_limit_in_bytes": f"{V1_UNLIMITED}\n", "memory.memsw.limit_in_bytes": "33554432\n",
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"}),
        "pids": _write(tmp_path / "pids" / c, {"pids.current": "2\n", "pids.max": "max\n"}),
        "blkio": _write(tmp_path / "blkio" / c, {"blkio.throttle.io_serviced": V1_SERVICED,
                                                 "blkio.throttle.io_service_bytes": V1_SERVICE_BYTES}),
    }
    s = read_v1(dirs)
    assert s is not None
    assert (s.memory_failcnt, s.memory_max_usage, s.memory_kernel, s.oom_kills) == (17, 16777216, 640, 1)
    assert (s.local_page_faults, s.page_faults, s.local_major_page_faults, s.major_page_faults) == (4, 40, 0, 3)
    assert (s.active_file, s.inactive_file, s.threads_max) == (512, 256, 0)
    assert (s.cfs_periods, s.cfs_throttled_periods, s.cfs_throttled_ns) == (9, 2, 77)
    assert s.spec == CgroupSpec(cpu_period=100000, cpu_quota=0, cpu_shares=512, memory_reservation=0,
                                memory_swap_limit=33554432)
    assert s.io == (DeviceIo(8, 0, 7, 3, 28672, 12288),)


def _v1_full(tmp_path: Path) -> dict[str, Path]:
    c = "kubepods/burstable/pod1/abc"
    return {
        "cpuacct": _write(tmp_path / "cpuacct" / c, {"cpuacct.usage": "5\n", "cpuacct.stat": "user 1\nsystem 2\n"}),
        "cpu": _write(tmp_path / "cpu" / c, {"cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "50000\n",
                                             "cpu.shares": "512\n",
                                             "cpu.stat": "nr_periods 9\nnr_throttled 2\nthrottled_time 77\n"}),
        "memory": _write(tmp_path / "memory" / c, {
            "memory.usage_in_bytes": "8192\n", "memory.limit_in_bytes": "16777216\n",
            "memory.memsw.usage_in_bytes": "9216\n",
            "memory.stat": "pgfault 4\ntotal_pgfault 40\ntotal_rss 4096\ntotal_inactive_file 256\n",
            "memory.failcnt": "17\n", "memory.max_usage_in_bytes": "16777216\n", "memory.kmem.usage_in_bytes": "640\n",
            "memory.soft_limit_in_bytes": "1048576\n", "memory.memsw.limit_in_bytes": "33554432\n",
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"}),
        "pids": _write(tmp_path / "pids" / c, {"pids.current": "2\n", "pids.max": "10\n"}),
        "blkio": _write(tmp_path / "blkio" / c, {"blkio.throttle.io_serviced": V1_SERVICED,
                                                 "blkio.throttle.io_service_bytes": V1_SERVICE_BYTES}),
    }


def _record_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the cgroup files read, through the real reader."""
    names: list[str] = []
    real = cgroups.driver.read_text

    def recording(path: str | Path) -> str:
        names.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(cgroups.driver, "read_text", recording)
    monkeypatch.setattr(minikubelet.stats.cgroup_reader, "read_text", recording)
    return names


def test_v1_a_pass_reads_six_files_and_the_extras_complete_the_sample(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = _v1_full(tmp_path)
    full = read_v1(dirs)
    names = _record_reads(monkeypatch)
    core = read_v1(dirs, extras=False)
    assert core is not None and full is not None
    assert sorted(names) == ["cpuacct.usage", "memory.limit_in_bytes", "memory.memsw.usage_in_bytes", "memory.stat",
                             "memory.usage_in_bytes", "pids.current"]
    # what the Summary, /metrics/resource and eviction read is all there
    assert (core.cpu_usage_ns, core.memory_usage, core.memory_working_set, core.memory_rss) == (5, 8192, 7936, 4096)
    assert (core.memory_limit, core.swap_usage, core.pids, core.page_faults) == (16777216, 1024, 2, 40)
    # the cAdvisor-only fields are not, until the extras are read
    assert (core.spec, core.io, core.memory_failcnt, core.threads_max, core.cpu_user_ns) == (None, (), 0, 0, 0)
    names.clear()
    assert v1_extras(dirs, core) == full
    assert "memory.stat" not in names and "cpuacct.usage" not in names  # the pass's values are kept, not re-read
    assert full.spec == CgroupSpec(cpu_period=100000, cpu_quota=50000, cpu_shares=512, memory_reservation=1048576,
                                   memory_swap_limit=33554432)
    assert (full.memory_failcnt, full.oom_kills, full.threads_max, full.cpu_system_ns) == (17, 1, 10, 20_000_000)


def test_v2_a_pass_leaves_the_limits_and_io_for_the_extras(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _write(tmp_path / "p", {
        "cpu.stat": "usage_usec 10\nnr_periods 4\n", "memory.current": "8192\n", "memory.stat": "anon 4096\n",
        "memory.max": "67108864\n", "memory.peak": "9000\n", "memory.min": "0\n", "memory.swap.max": "max\n",
        "memory.events": "oom_kill 2\n", "cpu.max": "50000 100000\n", "cpu.weight": "79\n",
        "pids.current": "3\n", "pids.max": "4096\n", "io.stat": V2_IO_STAT,
    })
    full = read_v2(d)
    names = _record_reads(monkeypatch)
    core = read_v2(d, extras=False)
    assert core is not None and full is not None
    assert not {"memory.events", "cpu.max", "cpu.weight", "memory.min", "memory.swap.max", "memory.peak", "pids.max",
                "io.stat"} & set(names)
    assert (core.cpu_usage_ns, core.memory_usage, core.memory_limit, core.pids, core.cfs_periods) == (
        10_000, 8192, 67108864, 3, 4)
    assert (core.spec, core.io, core.oom_kills) == (None, (), 0)
    assert v2_extras(d, core) == full


def test_blkio_and_io_stat_skip_garbage() -> None:
    assert parse_blkio("Total 0\n", "") == ()
    assert parse_io_stat("") == ()
    assert parse_io_stat("x:y rios=1\n8:16 rios=2 wios=3\n") == (DeviceIo(8, 16, 2, 3),)


def test_processes_descriptors_and_sockets_of_this_process(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    procs.write_text(f"{os.getpid()}\n999999999\n")  # the second one is gone: listed, so counted; no descriptors
    before = process_stats(str(procs), "/proc", os.getpid())
    with socket.socket() as _, socket.socket() as _, open(procs) as _:
        during = process_stats(str(procs), "/proc", os.getpid())
    assert before is not None and during is not None
    assert during.processes == before.processes == 2
    assert (during.fds - before.fds, during.sockets - before.sockets) == (3, 2)
    with open("/proc/self/limits") as fh:
        assert during.max_open_files == parse_max_open_files(fh.read()) is not None
    assert process_stats(str(tmp_path / "gone" / "cgroup.procs")) is None


def test_max_open_files() -> None:
    table = ("Limit                     Soft Limit           Hard Limit           Units     \n"
             "Max open files            1048576              1048576              files     \n")
    assert parse_max_open_files(table) == 1048576
    assert parse_max_open_files(table.replace("1048576              1048576", "unlimited unlimited")) == -1
    assert parse_max_open_files("") is None


def test_topology_counts_cores_and_sockets(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    for n, (package, core) in enumerate([("0", "0"), ("0", "0"), ("0", "1"), ("1", "0")]):
        _write(cpu / f"cpu{n}" / "topology", {"physical_package_id": package + "\n", "core_id": core + "\n"})
    _write(cpu / "cpufreq", {})
    assert topology(cpu) == (4, 3, 2, 0, 0)
    assert os_pretty_name('NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n') == \
        "Debian GNU/Linux 12 (bookworm)"


def test_machine_ids_and_the_missing_dmi_uuid(tmp_path: Path) -> None:
    proc = _write(tmp_path / "proc" / "sys" / "kernel" / "random", {"boot_id": "f7594652-4fa4\n"}).parents[2]
    etc = _write(tmp_path / "etc", {"machine-id": "3d1219c7\n", "os-release": 'PRETTY_NAME="Lab OS"\n'})
    sys = tmp_path / "sys"
    _write(sys / "devices" / "system" / "cpu" / "cpu0" / "topology", {"physical_package_id": "0\n", "core_id": "0\n"})
    m = read_machine_info(proc, sys, etc)
    assert m.labels() == [("boot_id", "f7594652-4fa4"), ("machine_id", "3d1219c7"), ("system_uuid", "3d1219c7")]
    assert (m.cpu_cores, m.physical_cores, m.sockets, m.os_version) == (1, 1, 1, "Lab OS")
    _write(sys / "class" / "dmi" / "id", {"product_uuid": "ec2a-uuid\n"})
    assert read_machine_info(proc, sys, etc).system_uuid == "ec2a-uuid"


def test_diskstats_and_block_devices(tmp_path: Path) -> None:
    text = (" 254       0 vda 321998 29679 14697882 897193 805249 463753 37205920 643661 0 184064 1638840 0 0 0 0\n"
            "   7       0 loop0 0 0 0 0\n")
    assert parse_diskstats(text) == {"vda": DiskStats(321998, 29679, 14697882, 897193, 805249, 463753, 37205920,
                                                      643661, 0, 184064, 1638840)}
    (tmp_path / "254:0").symlink_to("../../devices/pci0000:00/virtio1/block/vda")
    assert block_devices(str(tmp_path)) == {(254, 0): "/dev/vda"}
