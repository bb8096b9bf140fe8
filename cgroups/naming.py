"""Cgroup names and their literal forms for the cgroupfs and systemd drivers (upstream cm/cgroup_manager_linux.go).

A CgroupName is a tuple of components, e.g. ("kubepods", "burstable", "pod<uid>").
cgroupfs:  /kubepods/burstable/pod<uid>
systemd:   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice
"""

from __future__ import annotations

from typing import Final, Literal

from cgroups.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from minikubelet.base.podview import PodView
from minikubelet.base.safepath import safe_component

CgroupName = tuple[str, ...]
Naming = Literal["cgroupfs", "systemd"]

ROOT: Final[CgroupName] = ()
KUBEPODS: Final = "kubepods"
POD_PREFIX: Final = "pod"
SYSTEMD_SUFFIX: Final = ".slice"
_QOS_COMPONENT: Final = {BURSTABLE: "burstable", BEST_EFFORT: "besteffort"}


def parse_cgroupfs(path: str) -> CgroupName:
    return tuple(part for part in path.split("/") if part)


def to_cgroupfs(name: CgroupName) -> str:
    return "/" + "/".join(name)


def _escape_systemd(part: str) -> str:
    return part.replace("-", "_")


def _unescape_systemd(part: str) -> str:
    return part.replace("_", "-")


def expand_slice(slice_name: str) -> str:
    """systemd's slice path: "a-b-c.slice" -> "/a.slice/a-b.slice/a-b-c.slice"."""
    if not slice_name.endswith(SYSTEMD_SUFFIX) or "/" in slice_name:
        raise ValueError(f"invalid slice name {slice_name!r}")
    if slice_name == "-" + SYSTEMD_SUFFIX:
        return "/"
    stem = slice_name[: -len(SYSTEMD_SUFFIX)]
    if stem.startswith("-") or stem.endswith("-") or "--" in stem:
        raise ValueError(f"invalid slice name {slice_name!r}")
    parts = stem.split("-")
    return "".join("/" + "-".join(parts[: i + 1]) + SYSTEMD_SUFFIX for i in range(len(parts)))


def to_systemd(name: CgroupName) -> str:
    if not name or name == ("",):
        return "/"
    return expand_slice("-".join(_escape_systemd(p) for p in name) + SYSTEMD_SUFFIX)


def parse_systemd(path: str) -> CgroupName:
    """Inverse of to_systemd: "/a.slice/a-b.slice" -> ("a", "b")."""
    leaf = path.rstrip("/").rsplit("/", 1)[-1]
    if not leaf:
        return ROOT
    stem = leaf.removesuffix(SYSTEMD_SUFFIX)
    return tuple(_unescape_systemd(p) for p in stem.split("-"))


def to_literal(name: CgroupName, naming: Naming) -> str:
    return to_systemd(name) if naming == "systemd" else to_cgroupfs(name)


def parse_literal(path: str, naming: Naming) -> CgroupName:
    return parse_systemd(path) if naming == "systemd" else parse_cgroupfs(path)


def kubepods_name(cgroup_root: CgroupName = ROOT) -> CgroupName:
    return (*cgroup_root, KUBEPODS)


def qos_cgroup_name(qos: str, cgroup_root: CgroupName = ROOT) -> CgroupName:
    """Guaranteed pods live directly under kubepods; the other classes have their own cgroup."""
    if qos == GUARANTEED:
        return kubepods_name(cgroup_root)
    return (*kubepods_name(cgroup_root), _QOS_COMPONENT[qos])


def pod_cgroup_name(pod: PodView, cgroup_root: CgroupName = ROOT) -> CgroupName:
    """The pod's cgroup; a uid that is not a single path component is refused (UnsafePathError)."""
    if not pod.uid:
        raise ValueError("pod has no metadata.uid")
    uid = safe_component(pod.uid, "pod uid")
    return (*qos_cgroup_name(qos_class(pod), cgroup_root), POD_PREFIX + uid)


def pod_uid_from_component(component: str) -> str | None:
    if component.startswith(POD_PREFIX) and len(component) > len(POD_PREFIX):
        return component[len(POD_PREFIX) :]
    return None


def docker_cgroup_parent(name: CgroupName, naming: Naming) -> str:
    """What Docker's --cgroup-parent wants: the path (cgroupfs) or the leaf slice unit (systemd)."""
    literal = to_literal(name, naming)
    if naming == "systemd":
        return literal.rsplit("/", 1)[-1]
    return literal
