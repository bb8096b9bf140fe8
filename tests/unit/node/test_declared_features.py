"""status.declaredFeatures: ExtendWebSocketsToKubelet behind one switch, overridden by the feature gate."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from minikubelet.node import status
from minikubelet.node.machine import MachineInfo
from minikubelet.node.status import NodeStatusInputs, declared_features, set_declared_features


def test_declared_as_the_1_36_kubelet_and_the_gate_overrides() -> None:
    assert status.DECLARE_EXTEND_WEBSOCKETS_TO_KUBELET is True
    assert declared_features({}) == ("ExtendWebSocketsToKubelet",)
    assert declared_features({"ExtendWebSocketsToKubelet": True}) == ("ExtendWebSocketsToKubelet",)
    assert declared_features({"ExtendWebSocketsToKubelet": False, "Other": True}) == ()


def test_setter_writes_and_withdraws_the_declaration() -> None:
    inputs = NodeStatusInputs("n", "10.0.0.1", MachineInfo(), {"cpu": Fraction(1)}, {},
                              declared_features=("ExtendWebSocketsToKubelet",))
    node: dict[str, object] = {}
    set_declared_features(node, inputs)
    assert node == {"status": {"declaredFeatures": ["ExtendWebSocketsToKubelet"]}}
    set_declared_features(node, replace(inputs, declared_features=()))
    assert node == {"status": {}}
