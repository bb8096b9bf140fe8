"""Pod-level status.allocatedResources / status.resources (1.36, InPlacePodLevelResourcesVerticalScaling on by
default) against what a real 1.36 kubelet wrote (pod-real-kubelet-*.json), and Quantity's canonical strings."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from minikubelet.base.podview import PodView
from minikubelet.base.quantity import format_quantity, parse_quantity
from minikubelet.runtime.state import PodRuntimeState
from minikubelet.status.generate import StatusInputs, compute_status
from minikubelet.status.pod_resources import pod_resources_status
from probes.result import ProbeResults
from tests import fixtures
from tests.unit.factories import T0, c, pod, sandbox, sidecar


@pytest.mark.parametrize(("text", "binary", "shown"), [
    ("100m", False, "100m"), ("64Mi", True, "64Mi"), ("1.5", False, "1500m"), ("1000", False, "1k"),
    ("2", False, "2"), ("1536Mi", True, "1536Mi"), ("1Gi", True, "1Gi"), ("1000", True, "1k"),
    ("1500", True, "1500"), ("128974848", False, "128974848"), ("129e6", False, "129M"), ("0", False, "0"),
])
def test_format_quantity_is_canonical(text: str, binary: bool, shown: str) -> None:
    assert format_quantity(parse_quantity(text), binary) == shown


def test_tiny_quantities_round_up_to_a_nano() -> None:
    assert format_quantity(Fraction(1, 10**12)) == "1n"


def test_pending_pod_matches_the_real_kubelet() -> None:
    """Pending (an init container cannot pull): the values straight from the spec, as recorded."""
    body = fixtures.load("pod-real-kubelet-init-errimagepull.json")["response"]["body"]
    got = pod_resources_status(PodView.of(body))
    assert got == {"allocatedResources": body["status"]["allocatedResources"], "resources": body["status"]["resources"]}


def test_best_effort_pod_reports_empty_resources_as_recorded() -> None:
    """kubelet-07: a BestEffort pod's first status patch carries `resources: {}` and no allocatedResources."""
    patch = fixtures.load("kubelet-07-pod-status-patch-first.json")["request"]["body"]["status"]
    assert patch["resources"] == {} and "allocatedResources" not in patch
    assert pod_resources_status(PodView.of(pod([c("app")]))) == {"resources": {}}


def test_sidecars_add_init_containers_peak_and_pod_level_resources_win() -> None:
    def res(**kw: Any) -> dict[str, Any]:
        return {"resources": kw}

    p = pod([c("app", **res(requests={"cpu": "100m", "memory": "64Mi"}, limits={"cpu": "200m"}))],
            inits=[c("init", **res(requests={"cpu": "1", "memory": "16Mi"})),
                   sidecar("proxy", **res(requests={"cpu": "50m", "memory": "32Mi"}, limits={"cpu": "50m"}))])
    got = pod_resources_status(PodView.of(p))
    # app + sidecar = 150m/96Mi; the init container alone (before the sidecar starts) peaks at 1 cpu
    assert got["allocatedResources"] == {"cpu": "1", "memory": "96Mi"}
    assert got["resources"] == {"limits": {"cpu": "250m"}, "requests": {"cpu": "1", "memory": "96Mi"}}
    p["spec"]["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "3", "memory": "1Gi"}}
    got = pod_resources_status(PodView.of(p))
    # a pod-level limit alone also sets the pod-level request (defaulting, as for containers)
    assert got["allocatedResources"] == {"cpu": "2", "memory": "1Gi"}
    assert got["resources"]["limits"] == {"cpu": "3", "memory": "1Gi"}


def test_compute_status_carries_them() -> None:
    p = pod([c("app", resources={"requests": {"cpu": "10m", "memory": "8Mi"}})])
    status = compute_status(StatusInputs(pod=PodView.of(p), state=PodRuntimeState("uid-1", [sandbox()], []),
                                         now=T0 + 100, host_ip="192.0.2.2", probes=ProbeResults()))
    assert status["allocatedResources"] == {"cpu": "10m", "memory": "8Mi"}
    assert status["resources"] == {"requests": {"cpu": "10m", "memory": "8Mi"}}
