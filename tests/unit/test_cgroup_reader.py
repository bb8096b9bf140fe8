"""The integration tests' cgroup reader, on trees laid out like v1 and v2 (the v2 kernel run is in the VM)."""

from pathlib import Path

from cgroups.cpu import shares_to_weight
from tests.integration.cgroup_reader import CgroupReader


def write(d: Path, files: dict[str, str]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for k, v in files.items():
        (d / k).write_text(v + "\n")


def test_v2_layout(tmp_path: Path) -> None:
    r = CgroupReader("/root-x", version=2, mount=tmp_path)
    pod = r.pod("burstable", "u1")
    assert pod == tmp_path / "root-x" / "kubepods" / "burstable" / "podu1"
    write(pod, {"memory.max": str(128 * 2**20), "memory.peak": "1000", "cpu.weight": str(shares_to_weight(256)),
                "cpu.max": "max 100000", "cpu.stat": "usage_usec 2500000\nuser_usec 1\nsystem_usec 1",
                "cgroup.procs": "1\n2"})
    write(pod / "c1", {"cgroup.procs": "3", "memory.max": "max"})
    assert r.memory_limit(pod) == 128 * 2**20 and r.memory_limit(pod / "c1") is None
    assert r.memory_peak(pod) == 1000
    assert r.cpu_shares_are(pod, 256) and not r.cpu_shares_are(pod, 2)
    assert r.cpu_quota(pod) == (-1, 100000)
    assert r.cpu_usage_seconds(pod) == 2.5
    assert r.process_count(pod) == 3


def test_v1_layout(tmp_path: Path) -> None:
    r = CgroupReader("/root-x", version=1, mount=tmp_path)
    pod = r.pod("", "u2")
    assert pod == tmp_path / "memory" / "root-x" / "kubepods" / "podu2"
    write(pod, {"memory.limit_in_bytes": "9223372036854771712", "memory.max_usage_in_bytes": "5"})
    write(tmp_path / "cpu" / "root-x" / "kubepods" / "podu2",
          {"cpu.shares": "102", "cpu.cfs_quota_us": "10000", "cpu.cfs_period_us": "100000"})
    assert r.memory_limit(pod) is None and r.memory_peak(pod) == 5
    assert r.cpu_shares_are(pod, 102) and r.cpu_quota(pod) == (10000, 100000)
