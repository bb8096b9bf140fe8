"""Patch bodies compared with what the real v1.36 kubelet sent (kubelet-04, node-registration flows)."""

from __future__ import annotations

import copy
from typing import Any

from minikubelet.kubeapi.patch import node_status_patch, pod_status_patch, two_way_merge_patch
from tests.unit.apiserver.replay import load

Json = dict[str, Any]


def _registered() -> Json:
    """The Node as the real kubelet created it (kubelet-02)."""
    return copy.deepcopy(load("kubelet-02-node-register.json")["request"]["body"])


def test_heartbeat_patch_is_kubelet_04() -> None:
    original = _registered()
    original["status"]["conditions"][3].update(status="True", reason="KubeletReady",
                                                message="kubelet is posting ready status")
    modified = copy.deepcopy(original)
    for c in modified["status"]["conditions"]:
        c["lastHeartbeatTime"] = "2026-11-22T06:26:19Z"
    assert node_status_patch(original, modified) == load("kubelet-04-node-status-patch-heartbeat.json")["request"]["body"]


def test_nothing_changed_is_an_empty_patch_as_kubelet_03() -> None:
    node = _registered()
    assert node_status_patch(node, copy.deepcopy(node)) == load("kubelet-03-node-status-patch-first.json")["request"]["body"]


def test_ready_transition_patch_is_the_registration_flows() -> None:
    flow = load("kubelet-flows/node-registration.json")
    created = next(e for e in flow if e["verb"] == "create")["requestObject"]
    recorded = [e for e in flow if e["verb"] == "patch"][1]["requestObject"]
    modified = copy.deepcopy(created)
    ready = modified["status"]["conditions"][3]
    ready.update(status="True", reason="KubeletReady", message="kubelet is posting ready status")
    assert node_status_patch(created, modified) == recorded


def test_changed_addresses_are_replaced_whole() -> None:
    original = _registered()
    modified = copy.deepcopy(original)
    modified["status"]["addresses"] = [{"type": "InternalIP", "address": "192.0.2.9"},
                                       {"type": "Hostname", "address": "vm"}]
    patch = node_status_patch(original, modified)
    assert patch == {"status": {"addresses": [*modified["status"]["addresses"], {"$patch": "replace"}]}}


def test_spec_is_never_patched_and_removed_keys_become_null() -> None:
    original = {"spec": {"podCIDR": "10.0.0.0/24"}, "status": {"capacity": {"cpu": "2", "hugepages-1Gi": "0"}}}
    modified = {"spec": {}, "status": {"capacity": {"cpu": "4"}}}
    assert node_status_patch(original, modified) == {"status": {"capacity": {"cpu": "4", "hugepages-1Gi": None}}}


def test_removed_condition_is_a_delete_directive() -> None:
    keys = {"status.conditions": "type"}
    old = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}}
    new = {"status": {"conditions": [{"type": "B", "status": "False"}]}}
    assert two_way_merge_patch(old, new, keys) == {"status": {
        "$setElementOrder/conditions": [{"type": "B"}],
        "conditions": [{"type": "B", "status": "False"}, {"type": "A", "$patch": "delete"}]}}


def test_pod_status_patch_carries_the_uid_precondition() -> None:
    old = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}
    new = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert pod_status_patch("u1", old, new) == {"metadata": {"uid": "u1"}, "status": {
        "$setElementOrder/conditions": [{"type": "Ready"}], "conditions": [{"type": "Ready", "status": "True"}],
        "phase": "Running"}}
