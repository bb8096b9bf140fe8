"""cgroup v1 and v2 samples from file trees laid out as the kernel does; working set and CPU rate arithmetic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from minikubelet.stats.cgroup_reader import (
    V1_UNLIMITED,
    PSIData,
    parse_meminfo,
    parse_psi,
    read_v1,
    read_v2,
    usage_nano_cores,
    v1_extras,
)

V1_MEMORY_STAT = """cache 1000
rss 2000
mapped_file 300
pgfault 10
pgmajfault 1
inactive_file 50
total_cache 81920
total_rss 49152
total_mapped_file 4096
total_pgfault 3142
total_pgmajfault 2
total_inactive_file 12288
total_active_file 8192
"""

V2_MEMORY_STAT = """anon 49152
file 81920
file_mapped 4096
inactive_file 12288
active_file 8192
pgfault 3142
pgmajfault 2
"""

PRESSURE = """some avg10=1.50 avg60=0.25 avg300=0.00 total=123456
full avg10=0.00 avg60=0.00 avg300=0.00 total=789
"""


def _write(d: Path, files: dict[str, str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def _v1(tmp_path: Path, cgroup: str, memory: dict[str, str]) -> dict[str, Path]:
    return {
        "cpuacct": _write(tmp_path / "cpuacct" / cgroup, {"cpuacct.usage": "77571374\n",
                                                          "cpuacct.stat": "user 5\nsystem 2\n"}),
        "memory": _write(tmp_path / "memory" / cgroup, memory),
        "pids": _write(tmp_path / "pids" / cgroup, {"pids.current": "3\n"}),
    }


def test_v1_working_set_is_usage_minus_total_inactive_file(tmp_path: Path) -> None:
    dirs = _v1(tmp_path, "kubepods/pod1/abc", {"memory.usage_in_bytes": "299008\n", "memory.stat": V1_MEMORY_STAT,
                                                "memory.limit_in_bytes": f"{V1_UNLIMITED}\n"})
    s = read_v1(dirs)
    assert s is not None
    assert s.cpu_usage_ns == 77571374
    assert (s.cpu_user_ns, s.cpu_system_ns) == (50_000_000, 20_000_000)  # USER_HZ ticks
    assert s.memory_usage == 299008
    assert s.memory_working_set == 299008 - 12288  # the hierarchical total_, not the local inactive_file
    assert (s.memory_rss, s.memory_cache, s.memory_mapped_file) == (49152, 81920, 4096)
    assert (s.page_faults, s.major_page_faults) == (3142, 2)
    assert s.memory_limit is None  # the kernel's "no limit" value
    assert s.pids == 3
    assert s.cpu_psi is None and s.io_psi is None  # v1 has no pressure files


def test_v1_limit_swap_and_a_working_set_never_below_zero(tmp_path: Path) -> None:
    dirs = _v1(tmp_path, "p", {"memory.usage_in_bytes": "1000\n", "memory.stat": "total_inactive_file 4096\n",
                                "memory.limit_in_bytes": "67108864\n", "memory.memsw.usage_in_bytes": "5096\n"})
    s = read_v1(dirs)
    assert s is not None
    assert s.memory_working_set == 0
    assert s.memory_limit == 64 * 2**20
    assert s.swap_usage == 4096


def test_v1_a_container_leaves_its_task_count_to_the_extras(tmp_path: Path) -> None:
    dirs = _v1(tmp_path, "p/c", {"memory.usage_in_bytes": "1000\n", "memory.stat": V1_MEMORY_STAT})
    s = read_v1(dirs, extras=False, pids=False)
    assert s is not None and s.pids == 0 and s.memory_rss == 49152
    full = v1_extras(dirs, s, pids=True)
    assert full.pids == 3 and full.memory_rss == 49152
    assert v1_extras(dirs, replace(s, pids=7)).pids == 7  # a sample that read it keeps its own


def test_v1_a_memory_stat_value_that_is_no_number_reads_as_zero(tmp_path: Path) -> None:
    dirs = _v1(tmp_path, "p", {"memory.usage_in_bytes": "1000\n",
                               "memory.stat": "total_rss x1\ntotal_inactive_file 100\ntotal_cache 5\n"})
    s = read_v1(dirs)
    assert s is not None and (s.memory_rss, s.memory_cache, s.memory_working_set) == (0, 5, 900)


def test_v1_gone_cgroup_reads_as_none(tmp_path: Path) -> None:
    assert read_v1({"cpuacct": tmp_path / "gone", "memory": tmp_path / "gone"}) is None


def test_v2_sample_with_pressure(tmp_path: Path) -> None:
    d = _write(tmp_path / "kubepods" / "pod1" / "abc", {
        "cpu.stat": "usage_usec 77571\nuser_usec 50000\nsystem_usec 27571\n",
        "memory.current": "299008\n", "memory.stat": V2_MEMORY_STAT, "memory.max": "max\n",
        "memory.swap.current": "0\n", "pids.current": "1\n",
        "cpu.pressure": PRESSURE, "memory.pressure": PRESSURE, "io.pressure": PRESSURE,
    })
    s = read_v2(d)
    assert s is not None
    assert s.cpu_usage_ns == 77_571_000 and s.cpu_user_ns == 50_000_000
    assert s.memory_working_set == 299008 - 12288
    assert (s.memory_rss, s.memory_cache, s.page_faults) == (49152, 81920, 3142)
    assert s.memory_limit is None and s.pids == 1
    assert s.cpu_psi is not None and s.cpu_psi.some == PSIData(123456, 1.5, 0.25, 0.0)
    assert s.io_psi is not None and s.io_psi.full.total == 789


def test_v2_root_memory_from_meminfo(tmp_path: Path) -> None:
    d = _write(tmp_path / "root", {"cpu.stat": "usage_usec 5\n", "memory.stat": "inactive_file 1024\n"})
    meminfo = parse_meminfo("MemTotal:       4096 kB\nMemFree:        1024 kB\nHugePages_Total:       0\n")
    assert meminfo == {"MemTotal": 4096 * 1024, "MemFree": 1024 * 1024, "HugePages_Total": 0}
    s = read_v2(d, root=True, meminfo=meminfo)
    assert s is not None
    assert s.memory_usage == 3072 * 1024
    assert s.memory_working_set == 3072 * 1024 - 1024


def test_v2_missing_cpu_stat_is_none(tmp_path: Path) -> None:
    assert read_v2(tmp_path) is None


def test_psi_without_full_line_and_garbage() -> None:
    psi = parse_psi("some avg10=0.10 avg60=0.20 avg300=0.30 total=42\n")
    assert psi is not None and psi.full == PSIData() and psi.some.total == 42
    assert parse_psi("some avg10=x total=1\n") is None
    assert parse_psi("") is None


@pytest.mark.parametrize(("prev", "cur", "dt", "want"), [
    (0, 2_000_000_000, 10.0, 200_000_000),  # 2 s of CPU in 10 s: 0.2 cores
    (1_000, 1_000, 10.0, 0),
    (5_000_000_000, 1_000, 10.0, None),  # counter went back: a new cgroup under the same path
    (0, 1_000, 0.0, None),
    (0, 30_000_000_000, 10.0, 3_000_000_000),  # three cores busy
])
def test_usage_nano_cores(prev: int, cur: int, dt: float, want: int | None) -> None:
    assert usage_nano_cores(prev, 100.0, cur, 100.0 + dt) == want
