"""Reads pod and container cgroup values the same way on cgroup v1 and v2, so one test runs on both.

This host runs v1; the v2 run happens in the lab VM, where only `detect_cgroup_version` changes the answer.
"""

from __future__ import annotations

from pathlib import Path

from cgroups.cpu import shares_to_weight
from cgroups.detect import detect_cgroup_version

ROOT = Path("/sys/fs/cgroup")
_V1_UNLIMITED = 2**62  # v1 reports "no limit" as a page-rounded LONG_MAX


def _read(p: Path) -> str:
    return p.read_text().strip()


class CgroupReader:
    def __init__(self, cgroup_root: str, version: int | None = None, mount: Path = ROOT) -> None:
        self.root = cgroup_root.lstrip("/")
        self.mount = mount
        self.version = version or detect_cgroup_version(mount)

    def pod(self, qos_parent: str, uid: str, controller: str = "memory") -> Path:
        """The pod cgroup (Guaranteed pods have no QoS parent); `controller` matters only on v1."""
        base = (self.mount / controller if self.version == 1 else self.mount) / self.root / "kubepods"
        return (base / qos_parent if qos_parent else base) / f"pod{uid}"

    def _v1(self, path: Path, controller: str) -> Path:
        # path was built for the memory hierarchy; the same relative path exists in every v1 hierarchy
        rel = path.relative_to(self.mount / "memory")
        return self.mount / controller / rel

    def memory_limit(self, path: Path) -> int | None:
        if self.version == 1:
            v = int(_read(path / "memory.limit_in_bytes"))
            return None if v >= _V1_UNLIMITED else v
        raw = _read(path / "memory.max")
        return None if raw == "max" else int(raw)

    def memory_peak(self, path: Path) -> int:
        if self.version == 1:
            return int(_read(path / "memory.max_usage_in_bytes"))
        return int(_read(path / "memory.peak"))

    def cpu_shares_are(self, path: Path, shares: int) -> bool:
        """v1 stores the shares; v2 stores the kubelet's weight for them."""
        if self.version == 1:
            return int(_read(self._v1(path, "cpu") / "cpu.shares")) == shares
        return int(_read(path / "cpu.weight")) == shares_to_weight(shares)

    def cpu_quota(self, path: Path) -> tuple[int, int]:
        """(quota µs or -1 when unlimited, period µs)."""
        if self.version == 1:
            cpu = self._v1(path, "cpu")
            return int(_read(cpu / "cpu.cfs_quota_us")), int(_read(cpu / "cpu.cfs_period_us"))
        quota, period = _read(path / "cpu.max").split()
        return (-1 if quota == "max" else int(quota)), int(period)

    def cpu_usage_seconds(self, path: Path) -> float:
        if self.version == 1:
            return int(_read(self._v1(path, "cpuacct") / "cpuacct.usage")) / 1e9
        stat = dict(line.split() for line in _read(path / "cpu.stat").splitlines())
        return int(stat["usage_usec"]) / 1e6

    def process_count(self, path: Path) -> int:
        """Processes in the cgroup and everything below it."""
        top = self._v1(path, "pids") if self.version == 1 else path
        return sum(len(_read(p).split()) for p in top.rglob("cgroup.procs"))

    def exists(self, path: Path) -> bool:
        return path.is_dir()
