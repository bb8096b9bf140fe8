"""The agent's metric types give the samples prometheus_client gives for the same calls (prometheus_client is a
test dependency only), less the `_created` series the kubelet never exports."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import prometheus_client
import prometheus_client.core
import pytest

from minikubelet.base import prometheus as ours
from minikubelet.metrics_text import render

Samples = list[tuple[str, str, str, dict[str, str], float]]


def _samples(metrics: Iterable[Any]) -> Samples:
    return [(m.name, m.type, s.name, dict(s.labels), s.value)
            for m in metrics for s in m.samples if not s.name.endswith("_created")]


def _both(build: Callable[[Any, Any], None]) -> tuple[Samples, Samples]:
    theirs = prometheus_client.CollectorRegistry()
    mine = ours.CollectorRegistry()
    build(prometheus_client.core, theirs)
    build(ours, mine)
    return _samples(mine.collect()), _samples(theirs.collect())


def test_counters_gauges_and_histograms_sample_as_prometheus_client() -> None:
    def build(lib: Any, registry: Any) -> None:
        plain = lib.Counter("kubelet_evictions", "evictions", ["eviction_signal"], registry=registry)
        plain.labels("memory.available").inc()
        plain.labels(eviction_signal="nodefs.available").inc(2.5)
        total = lib.Counter("kubelet_started_pods_total", "started", registry=registry)
        total.inc(3)
        lib.Counter("kubelet_never_used", "no children", ["a"], registry=registry)
        gauge = lib.Gauge("kubelet_running_pods", "running", registry=registry)
        gauge.set(7)
        gauge.inc(2)
        gauge.dec(0.5)
        fn = lib.Gauge("kubelet_certificate_ttl", "ttl", registry=registry)
        fn.set_function(lambda: 42.0)
        labelled = lib.Gauge("kubelet_desired_pods", "desired", ["static"], registry=registry)
        labelled.labels("true").set(1)
        labelled.labels("false").set(4)
        labelled.labels("gone").set(9)
        labelled.remove("gone")
        hist = lib.Histogram("kubelet_pod_start_duration_seconds", "start", ["op"],
                             buckets=(0.005, 0.5, 1, 10, 1e7, 12345678.0), registry=registry)
        for value in (0.001, 0.005, 0.3, 1, 11, 2e7):
            hist.labels("create").observe(value)
        hist.labels("delete").observe(0.7)
        default = lib.Histogram("kubelet_default_buckets", "defaults", registry=registry)
        default.observe(0.08)
        cleared = lib.Gauge("kubelet_cleared", "cleared", ["x"], registry=registry)
        cleared.labels("a").set(1)
        cleared.clear()

    mine, theirs = _both(build)
    assert mine == theirs
    assert ("kubelet_pod_start_duration_seconds", "histogram", "kubelet_pod_start_duration_seconds_bucket",
            {"op": "create", "le": "1e+07"}, 5.0) in mine


def test_custom_collectors_families_sample_as_prometheus_client() -> None:
    def build(lib: Any, registry: Any) -> None:
        class Custom:
            def collect(self) -> Iterable[Any]:
                g = lib.GaugeMetricFamily("node_thing", "a gauge", labels=["a", "b"])
                g.add_metric(["1", "2"], 3.5)
                yield g
                yield lib.GaugeMetricFamily("node_value", "one value", value=2)
                c = lib.CounterMetricFamily("node_ops_total", "a counter", labels=["op"])
                c.add_metric(["x"], 4)
                yield c
                m = lib.Metric("node_raw", "raw", "counter")
                m.add_sample("node_raw_total", {}, 1)
                yield m

        registry.register(Custom())

    mine, theirs = _both(build)
    assert mine == theirs


@pytest.mark.parametrize("call", [
    lambda lib, r: lib.Counter("dup_total", "a", registry=r) and lib.Counter("dup", "b", registry=r),
    lambda lib, r: lib.Gauge("g", "a", ["x"], registry=r).labels("1", "2"),
    lambda lib, r: lib.Gauge("g", "a", ["x"], registry=r).labels(y="1"),
    lambda lib, r: lib.Gauge("g", "a", registry=r).labels("1"),
    lambda lib, r: lib.Counter("c", "a", registry=r).inc(-1),
    lambda lib, r: lib.Histogram("h", "a", buckets=(2, 1), registry=r),
    lambda lib, r: lib.Histogram("h", "a", ["le"], registry=r),
    lambda lib, r: lib.Gauge("g", "a", ["__x"], registry=r),
    lambda lib, r: lib.Gauge("g", "a", ["x"], registry=r).remove("1", "2"),
])
def test_misuse_is_a_value_error_as_in_prometheus_client(call: Callable[[Any, Any], object]) -> None:
    with pytest.raises(ValueError):
        call(prometheus_client.core, prometheus_client.CollectorRegistry())
    with pytest.raises(ValueError):
        call(ours, ours.CollectorRegistry())


def test_get_sample_value_and_unregister() -> None:
    registry = ours.CollectorRegistry()
    c = ours.Counter("kubelet_x_total", "x", ["k"], registry=registry)
    c.labels("v").inc(2)
    assert registry.get_sample_value("kubelet_x_total", {"k": "v"}) == 2
    assert registry.get_sample_value("kubelet_x_total", {"k": "w"}) is None
    registry.unregister(c)
    assert registry.get_sample_value("kubelet_x_total", {"k": "v"}) is None
    ours.Counter("kubelet_x", "x again, once the first is gone", registry=registry)


def test_the_rendered_text_is_the_same_as_from_prometheus_client() -> None:
    def build(lib: Any, registry: Any) -> None:
        h = lib.Histogram("kubelet_http_requests_duration_seconds", "d", ["method"], registry=registry,
                          buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        h.labels("GET").observe(0.02)
        lib.Counter("kubelet_evictions", "e", registry=registry).inc()
        lib.Gauge("kubelet_node_name", "n", ["node"], registry=registry).labels('a"b\\c\n').set(1)

    theirs = prometheus_client.CollectorRegistry()
    mine = ours.CollectorRegistry()
    build(prometheus_client.core, theirs)
    build(ours, mine)
    assert render(mine) == render(theirs)  # type: ignore[arg-type]


def test_concurrent_increments_are_not_lost() -> None:
    counter = ours.Counter("kubelet_c_total", "c", ["t"])
    gauge = ours.Gauge("kubelet_g", "g")
    hist = ours.Histogram("kubelet_h", "h")

    def work() -> None:
        for _ in range(20000):
            counter.labels("a").inc()
            gauge.inc()
            hist.observe(0.5)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    samples = {(name, tuple(labels.items())): value for _, _, name, labels, value in
               _samples([*counter.collect(), *gauge.collect(), *hist.collect()])}
    assert samples[("kubelet_c_total", (("t", "a"),))] == 80000
    assert samples[("kubelet_g", ())] == 80000
    assert samples[("kubelet_h_count", ())] == 80000
    assert samples[("kubelet_h_sum", ())] == 40000
