"""The local event store: aggregated as the kubelet's recorder does, bounded, rendered as v1 Events."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from minikubelet.base.clock import FakeClock
from minikubelet.events import (
    CGROUP_V1,
    CGROUP_V1_MESSAGE,
    NODE_ALLOCATABLE_ENFORCED,
    STARTING_KUBELET,
    EventRecorder,
)
from tests.fixtures import load


def pod(uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": uid},
            "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]}}


def test_repeats_are_aggregated_and_rendered_as_v1_events() -> None:
    clock = FakeClock()
    rec = EventRecorder(clock, "node-1")
    rec.pod_event(pod(), "Normal", "Pulled", "present", "app")
    clock.advance(5)
    rec.pod_event(pod(), "Normal", "Pulled", "present", "app")
    rec.pod_event(pod(), "Warning", "BackOff", "back-off", "init")
    (first, second) = rec.list("u1")
    assert (first["count"], first["firstTimestamp"] != first["lastTimestamp"]) == (2, True)
    assert first["involvedObject"] == {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1", "apiVersion": "v1",
                                       "fieldPath": "spec.containers{app}"}
    assert second["involvedObject"]["fieldPath"] == "spec.initContainers{init}"
    assert first["source"] == {"component": "kubelet", "host": "node-1"} and first["type"] == "Normal"
    assert rec.list("other") == []


def test_the_store_keeps_the_newest_capacity_events() -> None:
    rec = EventRecorder(FakeClock(), "n", capacity=3)
    for i in range(5):
        rec.pod_event(pod(f"u{i}"), "Normal", "Started", "Container started")
    assert [e["involvedObject"]["uid"] for e in rec.list()] == ["u2", "u3", "u4"]


def test_node_events_render_as_the_recorded_kubelet_sends_them() -> None:
    # kubelet-flows/kubelet-startup-sequence.json: the birth cry and a condition's transition, on the nodeRef
    recorded = [e["requestObject"] for e in load("kubelet-flows/kubelet-startup-sequence.json")
                if e["verb"] == "create" and e["requestURI"].endswith("/events")]
    by_reason = {e["reason"]: e for e in recorded}
    rec = EventRecorder(FakeClock(), "k8slab-kubelet")
    rec.node_event("Normal", STARTING_KUBELET, "Starting kubelet.")
    rec.node_event("Warning", CGROUP_V1, CGROUP_V1_MESSAGE)
    rec.node_status_event("Normal", "NodeHasSufficientMemory")
    rec.node_event("Normal", NODE_ALLOCATABLE_ENFORCED, "Updated Node Allocatable limit across pods")
    rec.node_status_event("Normal", "NodeReady")
    ours = rec.list()
    assert [e["reason"] for e in ours] == ["Starting", "CgroupV1", "NodeHasSufficientMemory",
                                           "NodeAllocatableEnforced", "NodeReady"]
    for event in ours:
        want = by_reason[event["reason"]]
        for key in ("involvedObject", "reason", "message", "source", "type", "reportingComponent",
                    "reportingInstance"):
            assert event[key] == want[key], key
        assert event["metadata"]["namespace"] == want["metadata"]["namespace"] == "default"
        assert event["metadata"]["name"].startswith("k8slab-kubelet.")


def test_a_repeat_bumps_the_count_and_is_not_logged_again_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """As client-go's EventCorrelator: the same reason, message and object is one event with a growing count."""
    rec = EventRecorder(FakeClock(), "node-1")
    with caplog.at_level(logging.INFO, logger="minikubelet.events"):
        for _ in range(50):
            rec.pod_event(pod(), "Warning", "FailedCreatePodSandBox", "Failed to create pod sandbox: refused")
    [event] = rec.list("u1")
    assert event["count"] == 50
    assert len([r for r in caplog.records if r.levelno >= logging.INFO]) == 1
