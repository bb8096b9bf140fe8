"""The node object admission checks against: its name, labels, taints and allocatable resources.

Upstream builds it in kubelet_node_status.go initialNode(): the well-known labels first (hostname, os,
arch and their deprecated beta twins), then `--node-labels` on top (they may override a default), the
taints of `registerWithTaints`. A standalone kubelet admits pods against exactly that node.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_OS_BETA = "beta.kubernetes.io/os"
LABEL_ARCH_BETA = "beta.kubernetes.io/arch"

NODE_OS = "linux"

# uname's machine -> Go's GOARCH, the value upstream writes.
_GOARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "i386": "386",
    "i686": "386",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "armv6l": "arm",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
    "loongarch64": "loong64",
}


def go_arch(machine: str | None = None) -> str:
    m = (machine if machine is not None else os.uname().machine).lower()
    return _GOARCH.get(m, m)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    allocatable: Mapping[str, Fraction] = field(default_factory=dict)


def node_labels(hostname: str, extra: Mapping[str, str], arch: str | None = None) -> dict[str, str]:
    """The well-known labels of a Linux node, then `--node-labels` (which win on a clash, as upstream)."""
    a = arch or go_arch()
    labels = {
        LABEL_HOSTNAME: hostname,
        LABEL_OS: NODE_OS,
        LABEL_ARCH: a,
        LABEL_OS_BETA: NODE_OS,
        LABEL_ARCH_BETA: a,
    }
    labels.update(extra)
    return labels


def initial_node(name: str, extra_labels: Mapping[str, str], taints: tuple[Mapping[str, str], ...],
                 allocatable: Mapping[str, Fraction], arch: str | None = None) -> Node:
    """The node as a standalone kubelet knows it (hostname == node name without a cloud provider)."""
    return Node(
        name=name,
        labels=node_labels(name, extra_labels, arch),
        taints=tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in taints),
        allocatable=dict(allocatable),
    )
