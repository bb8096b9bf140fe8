"""The recorded references are consistent, and the comparison catches what it is for."""

from __future__ import annotations

from minikubelet.metrics import Metrics
from minikubelet.metrics_text import render
from tests.metrics_reference import Sample, compare, matches, parse, reference, selectors


def test_every_reference_row_is_served_or_says_why_not() -> None:
    ref = reference()
    assert len(ref) > 190
    for r in ref.values():
        assert r.served or r.status.startswith(("n/a: ", "todo: ")), r
        assert r.type in ("counter", "gauge", "histogram", "summary", "various")
        assert (r.type == "histogram") == bool(r.buckets), r
    assert ref["go_*"].status.startswith("n/a: ")
    assert ref["prober_probe_total"].endpoint == "/metrics/probes"


def test_every_kubelet_selector_names_a_family_of_the_reference() -> None:
    ref = reference()
    names = set(ref)
    for s in selectors():
        if s.reads != "kubelet" or s.status.startswith("n/a"):
            continue
        base = next((s.series[: -len(x)] for x in ("_bucket", "_count", "_sum") if s.series.endswith(x)
                     and s.series[: -len(x)] in names), s.series)
        assert base in names and ref[base].served, s


def test_matching_is_promql_anchored() -> None:
    [rpc2] = [s for s in selectors() if s.series == "rest_client_requests_total" and s.matchers[0][2] == "2.."]
    assert matches(rpc2, Sample("rest_client_requests_total", {"code": "201", "method": "POST"}, 1))
    assert not matches(rpc2, Sample("rest_client_requests_total", {"code": "1201"}, 1))
    assert not matches(rpc2, Sample("rest_client_requests_total", {"code": "<error>"}, 1))


def test_comparison_reports_wrong_labels_and_buckets_and_unknown_families() -> None:
    metrics = Metrics()
    metrics.node.cgroup_operation("create", 0.01)
    metrics.node.node_name.labels("n1").set(1)
    families, _ = parse(render(metrics.registry).decode())
    problems = compare(families, "/metrics", frozenset())
    assert "kubelet_cgroup_manager_duration_seconds" not in " ".join(problems)
    assert not any(p.startswith("kubelet_node_name") for p in problems)
    assert any(p.startswith("missing process_cpu_seconds_total") for p in problems)
    families["made_up_total"] = families["kubelet_node_name"]
    assert "outside the reference: made_up_total" in compare(families, "/metrics", frozenset())
