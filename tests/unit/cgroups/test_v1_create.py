"""The v1 driver's create on plain directories standing in for the hierarchies: every hierarchy gets the cgroup
and its missing ancestors, existing ones are left alone (the real kernel, cpuset included: tests/integration/test_cgroups_v1.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cgroups.driver import CgroupError, ResourceConfig
from cgroups.v1 import CgroupV1Driver


def driver(tmp_path: Path) -> CgroupV1Driver:
    hierarchies = {name: tmp_path / name for name in ("cpu", "cpuacct", "memory", "pids")}
    for mount in hierarchies.values():
        mount.mkdir()
    return CgroupV1Driver(root=tmp_path, prefix="/kubepods", hierarchies=hierarchies)


def test_create_makes_missing_ancestors_in_every_hierarchy(tmp_path: Path) -> None:
    v1 = driver(tmp_path)
    v1.create("/kubepods/besteffort/podA", ResourceConfig(cpu_shares=2))
    for name in ("cpu", "cpuacct", "memory", "pids"):
        assert (tmp_path / name / "kubepods" / "besteffort" / "podA").is_dir(), name
    assert (tmp_path / "cpu" / "kubepods" / "besteffort" / "podA" / "cpu.shares").read_text() == "2"
    assert v1.exists("/kubepods/besteffort/podA") and not v1.exists("/kubepods/besteffort/podB")


def test_a_sibling_under_existing_ancestors_leaves_them_as_they_are(tmp_path: Path) -> None:
    v1 = driver(tmp_path)
    v1.create("/kubepods/besteffort/podA", ResourceConfig())
    marker = tmp_path / "memory" / "kubepods" / "besteffort" / "keep"
    marker.write_text("x")
    v1.create("/kubepods/besteffort/podB", ResourceConfig(memory_limit=1024))
    assert marker.read_text() == "x"
    assert (tmp_path / "memory" / "kubepods" / "besteffort" / "podB" / "memory.limit_in_bytes").read_text() == "1024"
    v1.create("/kubepods/besteffort/podB", ResourceConfig(memory_limit=2048))  # again: an update
    assert (tmp_path / "memory" / "kubepods" / "besteffort" / "podB" / "memory.limit_in_bytes").read_text() == "2048"


def test_the_prefix_itself_missing_is_an_error(tmp_path: Path) -> None:
    v1 = CgroupV1Driver(root=tmp_path, prefix="/absent/kubepods",
                        hierarchies={name: tmp_path / name for name in ("cpu", "cpuacct", "memory")})
    with pytest.raises(CgroupError):
        v1.create("/absent/kubepods/podA", ResourceConfig())
