"""/metrics/resource against the recorded kubelet 1.36.2 body: the same families, HELP, TYPE, labels, and
timestamps where the kubelet puts them; parsed as metrics-server does (a Prometheus text parser)."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from minikubelet.stats import resource_metrics
from tests.unit.stats.factories import T, snapshot
from tests.unit.stats.test_exposition import recorded_body


def headers(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def line_shapes(text: str) -> dict[str, tuple[tuple[str, ...], bool]]:
    """Per family: its label names and whether its samples carry a timestamp."""
    shapes: dict[str, tuple[tuple[str, ...], bool]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-z_0-9]+)(?:\{(.*)\})? (\S+)( \d+)?', line)
        assert m is not None, line
        labels = tuple(re.findall(r'([a-zA-Z_0-9]+)="', m.group(2) or ""))
        shapes.setdefault(m.group(1), (labels, m.group(4) is not None))
    return shapes


def test_same_families_and_headers_as_recorded() -> None:
    want = recorded_body("proxy-metrics-resource")
    got = resource_metrics.text(snapshot())
    assert headers(got) == headers(want)
    assert line_shapes(got) == line_shapes(want)


def test_values_as_metrics_server_reads_them() -> None:
    fams = {f.name: f for f in text_string_to_metric_families(resource_metrics.text(snapshot()))}
    node_cpu = fams["node_cpu_usage_seconds"]
    assert node_cpu.type == "counter"
    assert node_cpu.samples[0].value == 5825.326157231
    assert node_cpu.samples[0].timestamp is not None and float(node_cpu.samples[0].timestamp) == int(T * 1000) / 1000
    assert fams["node_memory_working_set_bytes"].samples[0].value == 4161925120
    c = fams["container_cpu_usage_seconds"].samples[0]
    assert c.labels == {"container": "shell", "namespace": "fixtures", "pod": "shell"}
    assert c.value == 0.077571374
    assert fams["pod_memory_working_set_bytes"].samples[0].value == 528384
    assert fams["container_start_time_seconds"].samples[0].value == T - 700
    assert fams["resource_scrape_error"].samples[0].value == 0


def test_a_failed_read_sets_the_scrape_error() -> None:
    from dataclasses import replace

    text = resource_metrics.text(replace(snapshot(), errors=2))
    assert text.endswith("# TYPE resource_scrape_error gauge\nresource_scrape_error 1\n")
