from __future__ import annotations

from fractions import Fraction

import pytest

from minikubelet.node.labels import Taint, go_arch, initial_node, node_labels


@pytest.mark.parametrize(("machine", "arch"), [("x86_64", "amd64"), ("aarch64", "arm64"), ("armv7l", "arm"),
                                               ("ppc64le", "ppc64le"), ("s390x", "s390x"), ("mips", "mips")])
def test_go_arch(machine: str, arch: str) -> None:
    assert go_arch(machine) == arch


def test_well_known_labels_then_node_labels() -> None:
    assert node_labels("n1", {"zone": "a"}, arch="arm64") == {
        "kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "arm64", "zone": "a"}
    assert node_labels("n1", {"kubernetes.io/arch": "x"}, arch="amd64")["kubernetes.io/arch"] == "x"


def test_initial_node() -> None:
    node = initial_node("n1", {}, ({"key": "k", "value": "v", "effect": "NoExecute"},), {"cpu": Fraction(2)})
    assert node.name == "n1" and node.taints == (Taint("k", "v", "NoExecute"),)
    assert node.allocatable == {"cpu": Fraction(2)}
    assert str(node.taints[0]) == "k=v:NoExecute"
