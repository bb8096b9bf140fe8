"""The text exposition: client_golang's rendering of what the metric types hold."""

from __future__ import annotations

from minikubelet.base.prometheus import CollectorRegistry, Counter, Gauge, Histogram
from minikubelet.metrics import Metrics
from minikubelet.metrics_text import PlainCounter, go_float, render


def test_a_vector_without_series_is_left_out_and_appears_with_its_first() -> None:
    r = CollectorRegistry()
    h = Histogram("kubelet_cgroup_manager_duration_seconds", "h", ["operation_type"], registry=r,
                  buckets=(0.1, 1.0))
    Gauge("kubelet_running_pods", "g", registry=r)
    text = render(r).decode()
    assert "kubelet_cgroup_manager_duration_seconds" not in text
    assert "# TYPE kubelet_running_pods gauge\nkubelet_running_pods 0\n" in text
    h.labels("create").observe(0.05)
    text = render(r).decode()
    assert "# TYPE kubelet_cgroup_manager_duration_seconds histogram\n" in text
    assert 'kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="0.1"} 1\n' in text
    assert 'kubelet_cgroup_manager_duration_seconds_bucket{operation_type="create",le="+Inf"} 1\n' in text
    assert 'kubelet_cgroup_manager_duration_seconds_count{operation_type="create"} 1\n' in text


def test_counters_are_named_after_their_series_and_no_created_series() -> None:
    metrics = Metrics()  # importing minikubelet.metrics turns the *_created series off
    r = metrics.registry
    metrics.runtime_operations.labels("version").inc()
    Counter("kubelet_test_events", "c", registry=r).inc()
    plain = PlainCounter("kubelet_server_expiration_renew_errors", "Counter of certificate renewal errors.", r)
    plain.inc()
    plain.inc()
    text = render(r).decode()
    assert "_created" not in text and "kubelet_test_events_total 1\n" in text
    assert '# TYPE kubelet_runtime_operations_total counter\nkubelet_runtime_operations_total{operation_type="version"} 1\n' in text
    assert ("# HELP kubelet_server_expiration_renew_errors Counter of certificate renewal errors.\n"
            "# TYPE kubelet_server_expiration_renew_errors counter\nkubelet_server_expiration_renew_errors 2\n") in text


def test_values_and_escaping_as_client_golang() -> None:
    assert [go_float(v) for v in (1.0, 2.5, float("inf"), float("-inf"), 1e-08)] == ["1", "2.5", "+Inf", "-Inf", "1e-08"]
    assert go_float(float("nan")) == "NaN"
    r = CollectorRegistry()
    Gauge("x", 'a "help"\\ line\nnext', ["l"], registry=r).labels('v"\\\n').set(1)
    assert render(r).decode() == ('# HELP x a "help"\\\\ line\\nnext\n# TYPE x gauge\n'
                                  'x{l="v\\"\\\\\\n"} 1\n')
