"""Effective pod requests/limits: the sidecar-aware formula (KEP-753) plus overhead."""

from __future__ import annotations

from fractions import Fraction

import pytest

from cgroups.resources import pod_limits, pod_requests
from minikubelet.base.podview import PodView
from minikubelet.base.quantity import parse_quantity
from tests.unit.cgroups.fixtures import ctr, pod, sidecar


def q(s: str) -> Fraction:
    return parse_quantity(s)


REQUEST_CASES: list[tuple[str, PodView, dict[str, str]]] = [
    (
        "sum of app containers",
        pod([ctr("a", {"cpu": "1"}), ctr("b", {"cpu": "2", "memory": "1Gi"})]),
        {"cpu": "3", "memory": "1Gi"},
    ),
    ("init larger than apps", pod([ctr("a", {"cpu": "1"})], init=[ctr("i", {"cpu": "2"})]), {"cpu": "2"}),
    (
        "init smaller than apps",
        pod([ctr("a", {"cpu": "1"}), ctr("b", {"cpu": "1"})], init=[ctr("i", {"cpu": "1500m"})]),
        {"cpu": "2"},
    ),
    ("highest init wins", pod([ctr("a")], init=[ctr("i1", {"cpu": "1"}), ctr("i2", {"cpu": "3"})]), {"cpu": "3"}),
    # KEP-753 example shape: sidecar 1 starts before init 2, so init 2 runs beside it.
    (
        "sidecar adds to later init",
        pod([ctr("a", {"cpu": "1"})], init=[sidecar("s", {"cpu": "1"}), ctr("i", {"cpu": "2"})]),
        {"cpu": "3"},
    ),
    (
        "sidecar does not add to earlier init",
        pod([ctr("a", {"cpu": "1"})], init=[ctr("i", {"cpu": "2"}), sidecar("s", {"cpu": "1"})]),
        {"cpu": "2"},
    ),
    (
        "sidecars add to apps",
        pod([ctr("a", {"cpu": "2"})], init=[sidecar("s1", {"cpu": "1"}), sidecar("s2", {"cpu": "1"})]),
        {"cpu": "4"},
    ),
    (
        "two sidecars then a big init",
        pod(
            [ctr("a", {"cpu": "1"})],
            init=[sidecar("s1", {"cpu": "1"}), sidecar("s2", {"cpu": "1"}), ctr("i", {"cpu": "3"})],
        ),
        {"cpu": "5"},
    ),
    (
        "overhead is added",
        pod([ctr("a", {"cpu": "1"})], overhead={"cpu": "250m", "memory": "120Mi"}),
        {"cpu": "1250m", "memory": "120Mi"},
    ),
    ("request defaults from limit", pod([ctr("a", None, {"memory": "64Mi"})]), {"memory": "64Mi"}),
    (
        "pod-level request replaces aggregate",
        pod([ctr("a", {"cpu": "1", "memory": "1Gi"})], pod_resources={"requests": {"cpu": "3"}}),
        {"cpu": "3", "memory": "1Gi"},
    ),
]


@pytest.mark.parametrize(("case", "p", "expected"), REQUEST_CASES, ids=[c[0] for c in REQUEST_CASES])
def test_pod_requests(case: str, p: PodView, expected: dict[str, str]) -> None:
    assert pod_requests(p) == {k: q(v) for k, v in expected.items()}


LIMIT_CASES: list[tuple[str, PodView, dict[str, str | None]]] = [
    (
        "all limited",
        pod([ctr("a", None, {"cpu": "1", "memory": "1Gi"}), ctr("b", None, {"cpu": "1", "memory": "1Gi"})]),
        {"cpu": "2", "memory": "2Gi"},
    ),
    (
        "one container unlimited",
        pod([ctr("a", None, {"cpu": "1", "memory": "1Gi"}), ctr("b", None, {"cpu": "1"})]),
        {"cpu": "2", "memory": None},
    ),
    ("nothing limited", pod([ctr("a")]), {"cpu": None, "memory": None}),
    (
        "unlimited init container makes the pod unlimited",
        pod([ctr("a", None, {"cpu": "1"})], init=[ctr("i")]),
        {"cpu": None, "memory": None},
    ),
    (
        "init container higher than apps",
        pod([ctr("a", None, {"cpu": "1"})], init=[ctr("i", None, {"cpu": "2"})]),
        {"cpu": "2", "memory": None},
    ),
    (
        "sidecar-aware limits",
        pod([ctr("a", None, {"cpu": "1"})], init=[sidecar("s", None, {"cpu": "1"}), ctr("i", None, {"cpu": "3"})]),
        {"cpu": "4", "memory": None},
    ),
    (
        "overhead only on bounded limits",
        pod([ctr("a", None, {"cpu": "1"})], overhead={"cpu": "100m", "memory": "10Mi"}),
        {"cpu": "1100m", "memory": None},
    ),
    (
        "pod-level limit bounds the pod",
        pod([ctr("a")], pod_resources={"limits": {"memory": "1Gi"}}),
        {"cpu": None, "memory": "1Gi"},
    ),
    (
        "other resources reported when every container has them",
        pod([ctr("a", None, {"ephemeral-storage": "1Gi"})]),
        {"cpu": None, "memory": None, "ephemeral-storage": "1Gi"},
    ),
]


@pytest.mark.parametrize(("case", "p", "expected"), LIMIT_CASES, ids=[c[0] for c in LIMIT_CASES])
def test_pod_limits(case: str, p: PodView, expected: dict[str, str | None]) -> None:
    assert pod_limits(p) == {k: (None if v is None else q(v)) for k, v in expected.items()}


def test_D10_ResourceConfigForPod_counts_sidecar_limits_beside_an_init_container_without_limits() -> None:
    """Sidecar proxy 200m/64Mi, init `migrate` without limits, app 500m/128Mi: upstream declares both limits
    (migrate runs beside the proxy) and sets 700m and 192Mi."""
    p = PodView.of({"metadata": {"name": "p", "uid": "u"}, "spec": {
        "initContainers": [
            {"name": "proxy", "image": "i", "restartPolicy": "Always",
             "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}}},
            {"name": "migrate", "image": "i"},
        ],
        "containers": [{"name": "app", "image": "i", "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}],
    }})
    limits = pod_limits(p)
    assert limits["cpu"] == Fraction(7, 10)
    assert limits["memory"] == 201326592
