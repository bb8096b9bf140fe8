"""One sample of a cgroup's usage, read from the cgroup v1 or v2 interface files.

Working set is what upstream (cAdvisor, and the CRI stats of containerd) reports: usage minus inactive file
pages, never below zero. v1 reads the `total_*` keys of memory.stat (the cgroup and its descendants); v2's
memory.stat is hierarchical already.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from cgroups.driver import read_flat_keyed, read_text

# memory.limit_in_bytes reads this (page-rounded LONG_MAX) when no limit is set.
V1_UNLIMITED = 0x7FFFFFFFFFFFF000
USER_HZ = 100


@dataclass(frozen=True)
class PSIData:
    total: int = 0  # microseconds
    avg10: float = 0.0
    avg60: float = 0.0
    avg300: float = 0.0


@dataclass(frozen=True)
class PSI:
    some: PSIData
    full: PSIData


@dataclass(frozen=True)
class CgroupSample:
    cpu_usage_ns: int
    cpu_user_ns: int = 0
    cpu_system_ns: int = 0
    memory_usage: int = 0
    memory_working_set: int = 0
    memory_rss: int = 0
    memory_cache: int = 0
    memory_mapped_file: int = 0
    page_faults: int = 0
    major_page_faults: int = 0
    memory_limit: int | None = None  # None: unlimited
    swap_usage: int = 0
    pids: int = 0
    cpu_psi: PSI | None = None
    memory_psi: PSI | None = None
    io_psi: PSI | None = None
    # cAdvisor's extra container series (/metrics/cadvisor); 0 where the kernel has no such file.
    memory_failcnt: int = 0
    memory_max_usage: int = 0
    memory_kernel: int = 0
    active_file: int = 0
    inactive_file: int = 0
    local_page_faults: int = 0  # the cgroup's own, where v1 tells them apart from the hierarchy's
    local_major_page_faults: int = 0
    oom_kills: int = 0
    threads_max: int = 0  # pids.max; 0 = unlimited
    cfs_periods: int = 0
    cfs_throttled_periods: int = 0
    cfs_throttled_ns: int = 0
    spec: CgroupSpec | None = None
    io: tuple[DeviceIo, ...] = ()


@dataclass(frozen=True)
class CgroupSpec:
    """The limits a cgroup is configured with (cAdvisor's ContainerSpec): 0 for "none", as cAdvisor exports them."""

    cpu_period: int = 0
    cpu_quota: int = 0
    cpu_shares: int = 0
    memory_reservation: int = 0
    memory_swap_limit: int = 0


@dataclass(frozen=True)
class DeviceIo:
    """Completed requests and bytes per block device (`major:minor`), from blkio (v1) or io.stat (v2)."""

    major: int
    minor: int
    reads: int = 0
    writes: int = 0
    read_bytes: int = 0
    write_bytes: int = 0


def _read_int(path: str | Path) -> int | None:
    """The integer in a one-value file; None when absent, empty or "max"."""
    try:
        text = read_text(path).strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if text in ("", "max"):
        return None
    return int(text)


def _read_stat(path: str | Path) -> dict[str, str]:
    """A "key value" per line file (memory.stat) as text, {} when absent: the pass converts only the ~10 values
    it uses of memory.stat's 35-50, which was most of the file's parse."""
    try:
        words = read_text(path).split()
    except (FileNotFoundError, NotADirectoryError):
        return {}
    pairs = iter(words)
    return dict(zip(pairs, pairs, strict=False))


def _stat_int(stat: Mapping[str, str], key: str) -> int:
    try:
        return int(stat.get(key, 0))
    except ValueError:
        return 0


def parse_io_stat(text: str) -> tuple[DeviceIo, ...]:
    """v2 io.stat: `8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0` per device."""
    result: list[DeviceIo] = []
    for line in text.splitlines():
        dev, *fields = line.split()
        major, _, minor = dev.partition(":")
        kv = dict(f.split("=", 1) for f in fields if "=" in f)
        try:
            result.append(DeviceIo(int(major), int(minor), int(kv.get("rios", 0)), int(kv.get("wios", 0)),
                                   int(kv.get("rbytes", 0)), int(kv.get("wbytes", 0))))
        except ValueError:
            continue
    return tuple(result)


def parse_blkio(serviced: str, service_bytes: str) -> tuple[DeviceIo, ...]:
    """v1 blkio.throttle.io_serviced and io_service_bytes: `8:0 Read 12` lines and a `Total` line."""
    table: dict[tuple[int, int], dict[str, int]] = {}
    for prefix, text in (("", serviced), ("bytes_", service_bytes)):
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 3 or ":" not in parts[0]:
                continue
            major, _, minor = parts[0].partition(":")
            try:
                table.setdefault((int(major), int(minor)), {})[prefix + parts[1]] = int(parts[2])
            except ValueError:
                continue
    return tuple(DeviceIo(ma, mi, v.get("Read", 0), v.get("Write", 0), v.get("bytes_Read", 0), v.get("bytes_Write", 0))
                 for (ma, mi), v in sorted(table.items()))


def cpu_weight_to_shares(weight: int) -> int:
    """cpu.weight (1..10000) back to v1 shares (2..262144), the inverse of the runtimes' shares→weight mapping."""
    return 2 + ((weight - 1) * 262142) // 9999


def _unlimited_as_zero(value: int | None) -> int:
    # cAdvisor exports "no limit" (max, or v1's page-rounded LONG_MAX) as 0
    return 0 if value is None or value >= V1_UNLIMITED else value


def _read_optional_text(path: str | Path) -> str:
    try:
        return read_text(path)
    except (FileNotFoundError, NotADirectoryError):
        return ""


def parse_psi(text: str) -> PSI | None:
    """`some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and a `full` line (cpu.pressure lacks `full` on old kernels)."""
    lines: dict[str, PSIData] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        fields = dict(part.split("=", 1) for part in rest.split() if "=" in part)
        try:
            lines[kind] = PSIData(int(fields.get("total", "0")), float(fields.get("avg10", "0")),
                                  float(fields.get("avg60", "0")), float(fields.get("avg300", "0")))
        except ValueError:
            return None
    if "some" not in lines:
        return None
    return PSI(some=lines["some"], full=lines.get("full", PSIData()))


def _read_psi(path: Path) -> PSI | None:
    try:
        return parse_psi(read_text(path))
    except (FileNotFoundError, NotADirectoryError, OSError):
        return None


def read_v1(dirs: Mapping[str, str | Path], *, extras: bool = True, pids: bool = True) -> CgroupSample | None:
    """A cgroup on v1: `dirs` maps a controller (cpuacct, memory, pids) to the cgroup's directory in it.

    None when the cgroup is gone (its cpuacct directory does not exist). `extras=False` reads only the files the
    Summary, /metrics/resource and eviction use (6 of 20; 5 with `pids=False`, for a container, whose task count
    only /metrics/cadvisor shows); `v1_extras` adds the rest.
    """
    cpuacct = dirs["cpuacct"]
    usage = _read_int(f"{cpuacct}/cpuacct.usage")
    if usage is None:
        return None
    memory = dirs["memory"]
    stat = _read_stat(f"{memory}/memory.stat")
    mem_usage = _read_int(f"{memory}/memory.usage_in_bytes") or 0
    limit = _read_int(f"{memory}/memory.limit_in_bytes")
    memsw = _read_int(f"{memory}/memory.memsw.usage_in_bytes")
    inactive = _stat_int(stat, "total_inactive_file")
    sample = CgroupSample(
        cpu_usage_ns=usage,
        memory_usage=mem_usage,
        memory_working_set=max(0, mem_usage - inactive),
        memory_rss=_stat_int(stat, "total_rss"),
        memory_cache=_stat_int(stat, "total_cache"),
        memory_mapped_file=_stat_int(stat, "total_mapped_file"),
        page_faults=_stat_int(stat, "total_pgfault"),
        major_page_faults=_stat_int(stat, "total_pgmajfault"),
        memory_limit=None if limit is None or limit >= V1_UNLIMITED else limit,
        swap_usage=max(0, memsw - mem_usage) if memsw is not None else 0,
        pids=_v1_pids(dirs) if pids else 0,
        active_file=_stat_int(stat, "total_active_file"),
        inactive_file=inactive,
        local_page_faults=_stat_int(stat, "pgfault"),
        local_major_page_faults=_stat_int(stat, "pgmajfault"),
    )
    return v1_extras(dirs, sample, pids=not pids) if extras else sample


def _v1_pids(dirs: Mapping[str, str | Path]) -> int:
    pids_dir = dirs.get("pids")
    return (_read_int(f"{pids_dir}/pids.current") or 0) if pids_dir is not None else 0


def v1_extras(dirs: Mapping[str, str | Path], sample: CgroupSample, *, pids: bool = False) -> CgroupSample:
    """`sample` (read with extras=False) with the files only /metrics/cadvisor shows: CPU user/system ticks, the
    configured limits, failcnt, peak and kernel memory, OOM kills, pids.max, CFS throttling and blkio; with
    `pids` also pids.current (a sample read with pids=False)."""
    if pids:
        sample = replace(sample, pids=_v1_pids(dirs))
    cpuacct, memory = dirs["cpuacct"], dirs["memory"]
    ticks = read_flat_keyed(f"{cpuacct}/cpuacct.stat")
    pids_dir = dirs.get("pids")
    threads_max = _read_int(f"{pids_dir}/pids.max") if pids_dir is not None else None
    oom = read_flat_keyed(f"{memory}/memory.oom_control")
    spec = None
    cpu_dir = dirs.get("cpu")
    cfs = read_flat_keyed(f"{cpu_dir}/cpu.stat") if cpu_dir is not None else {}
    if cpu_dir is not None:
        quota = _read_int(f"{cpu_dir}/cpu.cfs_quota_us")
        spec = CgroupSpec(
            cpu_period=_read_int(f"{cpu_dir}/cpu.cfs_period_us") or 0,
            cpu_quota=quota if quota is not None and quota > 0 else 0,
            cpu_shares=_read_int(f"{cpu_dir}/cpu.shares") or 0,
            memory_reservation=_unlimited_as_zero(_read_int(f"{memory}/memory.soft_limit_in_bytes")),
            memory_swap_limit=_unlimited_as_zero(_read_int(f"{memory}/memory.memsw.limit_in_bytes")),
        )
    blkio = dirs.get("blkio")
    io = parse_blkio(_read_optional_text(f"{blkio}/blkio.throttle.io_serviced"),
                     _read_optional_text(f"{blkio}/blkio.throttle.io_service_bytes")) if blkio is not None else ()
    return replace(
        sample,
        cpu_user_ns=ticks.get("user", 0) * (1_000_000_000 // USER_HZ),
        cpu_system_ns=ticks.get("system", 0) * (1_000_000_000 // USER_HZ),
        memory_failcnt=_read_int(f"{memory}/memory.failcnt") or 0,
        memory_max_usage=_read_int(f"{memory}/memory.max_usage_in_bytes") or 0,
        memory_kernel=_read_int(f"{memory}/memory.kmem.usage_in_bytes") or 0,
        oom_kills=oom.get("oom_kill", 0),
        threads_max=threads_max or 0,
        cfs_periods=cfs.get("nr_periods", 0),
        cfs_throttled_periods=cfs.get("nr_throttled", 0),
        cfs_throttled_ns=cfs.get("throttled_time", 0),
        spec=spec,
        io=io,
    )


def read_v2(path: Path, *, root: bool = False, meminfo: Mapping[str, int] | None = None,
            extras: bool = True, pids: bool = True) -> CgroupSample | None:
    """A cgroup on v2. The root cgroup has no memory.current: its usage comes from /proc/meminfo
    (MemTotal − MemFree, as cAdvisor does), passed in as `meminfo` (kB values already in bytes). `extras=False`
    reads only what the Summary, /metrics/resource and eviction use (`pids=False`: not pids.current, for a
    container); `v2_extras` adds the rest."""
    cpu = read_flat_keyed(path / "cpu.stat")
    if "usage_usec" not in cpu:
        return None
    text_stat = _read_stat(path / "memory.stat")
    stat = {key: _stat_int(text_stat, key) for key in _V2_STAT_KEYS if key in text_stat}
    if root and meminfo is not None:
        mem_usage = meminfo.get("MemTotal", 0) - meminfo.get("MemFree", 0)
    else:
        mem_usage = _read_int(path / "memory.current") or 0
    sample = CgroupSample(
        cpu_usage_ns=cpu["usage_usec"] * 1000,
        cpu_user_ns=cpu.get("user_usec", 0) * 1000,
        cpu_system_ns=cpu.get("system_usec", 0) * 1000,
        memory_usage=mem_usage,
        memory_working_set=max(0, mem_usage - stat.get("inactive_file", 0)),
        memory_rss=stat.get("anon", 0),
        memory_cache=stat.get("file", 0),
        memory_mapped_file=stat.get("file_mapped", 0),
        page_faults=stat.get("pgfault", 0),
        major_page_faults=stat.get("pgmajfault", 0),
        memory_limit=_read_int(path / "memory.max"),
        swap_usage=_read_int(path / "memory.swap.current") or 0,
        pids=(_read_int(path / "pids.current") or 0) if pids else 0,
        cpu_psi=_read_psi(path / "cpu.pressure"),
        memory_psi=_read_psi(path / "memory.pressure"),
        io_psi=_read_psi(path / "io.pressure"),
        memory_kernel=stat.get("kernel", 0),
        active_file=stat.get("active_file", 0),
        inactive_file=stat.get("inactive_file", 0),
        local_page_faults=stat.get("pgfault", 0),
        local_major_page_faults=stat.get("pgmajfault", 0),
        cfs_periods=cpu.get("nr_periods", 0),
        cfs_throttled_periods=cpu.get("nr_throttled", 0),
        cfs_throttled_ns=cpu.get("throttled_usec", 0) * 1000,
    )
    return v2_extras(path, sample, pids=not pids) if extras else sample


_V2_STAT_KEYS = ("inactive_file", "anon", "file", "file_mapped", "pgfault", "pgmajfault", "kernel", "active_file")


def v2_extras(path: Path, sample: CgroupSample, *, pids: bool = False) -> CgroupSample:
    """`sample` (read with extras=False) with the files only /metrics/cadvisor shows: the configured limits, the
    memory peak, OOM kills, pids.max and io.stat; with `pids` also pids.current (a sample read with pids=False)."""
    if pids:
        sample = replace(sample, pids=_read_int(path / "pids.current") or 0)
    events = read_flat_keyed(path / "memory.events")
    period, quota = 100000, 0
    cpu_max = _read_optional_text(path / "cpu.max").split()
    if len(cpu_max) == 2:
        quota = 0 if cpu_max[0] == "max" else int(cpu_max[0])
        period = int(cpu_max[1])
    weight = _read_int(path / "cpu.weight")
    spec = CgroupSpec(
        cpu_period=period, cpu_quota=quota,
        # the root cgroup has no cpu.weight: cAdvisor reports the default shares, 1024
        cpu_shares=cpu_weight_to_shares(weight) if weight is not None else 1024,
        memory_reservation=_unlimited_as_zero(_read_int(path / "memory.min")),
        memory_swap_limit=_unlimited_as_zero(_read_int(path / "memory.swap.max")),
    )
    return replace(
        sample,
        memory_max_usage=_read_int(path / "memory.peak") or 0,
        oom_kills=events.get("oom_kill", 0),
        threads_max=_read_int(path / "pids.max") or 0,
        spec=spec,
        io=parse_io_stat(_read_optional_text(path / "io.stat")),
    )


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo in bytes."""
    result: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            result[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return result


def usage_nano_cores(prev_usage_ns: int, prev_t: float, cur_usage_ns: int, cur_t: float) -> int | None:
    """CPU rate between two samples in nanocores (upstream's getAndUpdateContainerUsageNanoCores);
    None when the interval is empty or the counter went back (a new cgroup under the same name)."""
    elapsed_ns = round((cur_t - prev_t) * 1e9)
    if elapsed_ns <= 0 or cur_usage_ns < prev_usage_ns:
        return None
    return (cur_usage_ns - prev_usage_ns) * 1_000_000_000 // elapsed_ns
