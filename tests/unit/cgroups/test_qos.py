"""QoS class, table modelled on upstream qos_test.go TestComputePodQOS."""

from __future__ import annotations

import pytest

from cgroups.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, compute_qos_class, qos_class
from minikubelet.base.podview import PodView
from tests.unit.cgroups.fixtures import ctr, pod, pod_dict, sidecar

G = {"cpu": "100m", "memory": "100Mi"}

CASES: list[tuple[str, PodView, str]] = [
    ("guaranteed", pod([ctr("a", G, G)]), GUARANTEED),
    ("guaranteed-guaranteed", pod([ctr("a", G, G), ctr("b", G, G)]), GUARANTEED),
    ("limits only: requests default from limits", pod([ctr("a", None, G)]), GUARANTEED),
    ("equal value, different notation", pod([ctr("a", {"cpu": "0.1", "memory": "100Mi"}, G)]), GUARANTEED),
    ("best-effort", pod([ctr("a")]), BEST_EFFORT),
    ("best-effort-best-effort", pod([ctr("a"), ctr("b")]), BEST_EFFORT),
    ("best-effort-burstable", pod([ctr("a"), ctr("b", {"cpu": "100m"})]), BURSTABLE),
    ("best-effort-guaranteed", pod([ctr("a"), ctr("b", G, G)]), BURSTABLE),
    ("burstable-no-limits", pod([ctr("a", G)]), BURSTABLE),
    ("burstable-cpu-only-guaranteed", pod([ctr("a", {"cpu": "1"}, {"cpu": "1"})]), BURSTABLE),
    ("burstable-1", pod([ctr("a", {"cpu": "10m", "memory": "100Mi"}, G)]), BURSTABLE),
    ("burstable-guaranteed", pod([ctr("a", G), ctr("b", G, G)]), BURSTABLE),
    ("best-effort-hugepages", pod([ctr("a", {"hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "2Mi"})]), BEST_EFFORT),
    ("ephemeral-storage does not count", pod([ctr("a", {"ephemeral-storage": "1Gi"})]), BEST_EFFORT),
    ("zero request counts as unset", pod([ctr("a", {"cpu": "0", "memory": "0"})]), BEST_EFFORT),
    ("burstable init container", pod([ctr("a")], init=[ctr("i", {"cpu": "100m"})]), BURSTABLE),
    ("best-effort init container breaks guaranteed", pod([ctr("a", G, G)], init=[ctr("i")]), BURSTABLE),
    ("guaranteed with guaranteed init", pod([ctr("a", G, G)], init=[ctr("i", G, G)]), GUARANTEED),
    ("guaranteed with guaranteed sidecar", pod([ctr("a", G, G)], init=[sidecar("s", G, G)]), GUARANTEED),
    ("burstable sidecar", pod([ctr("a", G, G)], init=[sidecar("s", G)]), BURSTABLE),
    ("pod-level guaranteed", pod([ctr("a")], pod_resources={"requests": G, "limits": G}), GUARANTEED),
    ("pod-level burstable", pod([ctr("a", G, G)], pod_resources={"requests": G}), BURSTABLE),
    ("pod-level limits only", pod([ctr("a")], pod_resources={"limits": G}), GUARANTEED),
]


@pytest.mark.parametrize(("case", "p", "expected"), CASES, ids=[c[0] for c in CASES])
def test_compute_qos_class(case: str, p: PodView, expected: str) -> None:
    assert compute_qos_class(p) == expected


def test_ephemeral_containers_are_ignored() -> None:
    p = pod_dict([ctr("a", G, G)])
    p["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox"}]
    assert compute_qos_class(PodView.of(p)) == GUARANTEED


def test_qos_class_prefers_the_api_servers_status() -> None:
    p = pod_dict([ctr("a", G, G)])
    p["status"] = {"qosClass": BURSTABLE}
    assert qos_class(PodView.of(p)) == BURSTABLE
    p["status"] = {"qosClass": ""}
    assert qos_class(PodView.of(p)) == GUARANTEED
