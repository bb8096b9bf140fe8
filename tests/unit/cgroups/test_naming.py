"""Cgroup naming for the cgroupfs and systemd drivers (upstream cgroup_manager_linux_test.go values)."""

from __future__ import annotations

import pytest

from cgroups.naming import (
    CgroupName,
    docker_cgroup_parent,
    expand_slice,
    parse_cgroupfs,
    parse_systemd,
    pod_cgroup_name,
    pod_uid_from_component,
    to_cgroupfs,
    to_systemd,
)
from tests.unit.cgroups.fixtures import ctr, pod

UID = "6c1a4e95-6bb6-11e6-bc26-28d2444e470d"

# Upstream TestCgroupNameToSystemdBasename / TestCgroupNameToSystemd cases.
SYSTEMD: list[tuple[CgroupName, str]] = [
    ((), "/"),
    (("system",), "/system.slice"),
    (("system", "Burstable"), "/system.slice/system-Burstable.slice"),
    (("Burstable", "pod-123"), "/Burstable.slice/Burstable-pod_123.slice"),
    (("BestEffort", f"pod-{UID}"), "/BestEffort.slice/BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice"),
    (("kubepods",), "/kubepods.slice"),
    (
        ("kubepods", "burstable", f"pod{UID}"),
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice",
    ),
]


@pytest.mark.parametrize(("name", "expected"), SYSTEMD)
def test_to_systemd(name: CgroupName, expected: str) -> None:
    assert to_systemd(name) == expected


@pytest.mark.parametrize(("name", "expected"), SYSTEMD[1:])
def test_parse_systemd_round_trips(name: CgroupName, expected: str) -> None:
    # "-" in a component is stored as "_" and parses back as "-" (pod UIDs rely on this).
    assert parse_systemd(expected) == name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ((), "/"),
        (("kubepods",), "/kubepods"),
        (("kubepods", "besteffort", f"pod{UID}"), f"/kubepods/besteffort/pod{UID}"),
    ],
)
def test_cgroupfs(name: CgroupName, expected: str) -> None:
    assert to_cgroupfs(name) == expected
    assert parse_cgroupfs(expected) == name


@pytest.mark.parametrize("bad", ["a--b.slice", "-a.slice", "a-.slice", "a/b.slice", "a.scope"])
def test_expand_slice_rejects_invalid(bad: str) -> None:
    with pytest.raises(ValueError):
        expand_slice(bad)


def test_expand_slice_root() -> None:
    assert expand_slice("-.slice") == "/"


G = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        ([ctr("a", G, G)], ("kubepods", f"pod{UID}")),
        ([ctr("a", {"cpu": "1"})], ("kubepods", "burstable", f"pod{UID}")),
        ([ctr("a")], ("kubepods", "besteffort", f"pod{UID}")),
    ],
)
def test_pod_cgroup_name(containers: list[dict[str, object]], expected: CgroupName) -> None:
    assert pod_cgroup_name(pod(containers, uid=UID)) == expected


def test_pod_cgroup_name_under_cgroup_root() -> None:
    assert pod_cgroup_name(pod([ctr("a")], uid=UID), ("mkl",)) == ("mkl", "kubepods", "besteffort", f"pod{UID}")


def test_docker_cgroup_parent() -> None:
    name = ("kubepods", "burstable", f"pod{UID}")
    assert docker_cgroup_parent(name, "cgroupfs") == f"/kubepods/burstable/pod{UID}"
    assert docker_cgroup_parent(name, "systemd") == "kubepods-burstable-pod6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice"


@pytest.mark.parametrize(("component", "uid"), [(f"pod{UID}", UID), ("pod", None), ("burstable", None), ("abc", None)])
def test_pod_uid_from_component(component: str, uid: str | None) -> None:
    assert pod_uid_from_component(component) == uid
