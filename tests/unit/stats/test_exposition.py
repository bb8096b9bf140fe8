"""The text format as Go writes it: every value in the recorded /metrics/cadvisor and /metrics/resource bodies
formats back to the same text."""

from __future__ import annotations

import gzip
import math
import re

import pytest

from minikubelet.metrics_text import go_float
from minikubelet.stats.exposition import Family, render
from tests.fixtures import KUBERNETES

SCENARIOS = KUBERNETES / "kubelet-api"


def recorded_body(scenario: str) -> str:
    """The decoded HTTP body kubelet 1.36.2 sent (chunked or Content-Length, gzip)."""
    raw = (SCENARIOS / scenario / "s2c.bin").read_bytes()
    head, rest = raw.split(b"\r\n\r\n", 1)
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        body = b""
        while True:
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            body += rest[:size]
            rest = rest[size + 2:]
    else:
        match = re.search(rb"content-length: (\d+)", lower)
        assert match is not None
        body = rest[: int(match.group(1))]
    if b"content-encoding: gzip" in lower:
        body = gzip.decompress(body)
    return body.decode()


@pytest.mark.parametrize("scenario", ["proxy-metrics-cadvisor", "proxy-metrics-resource"])
def test_every_recorded_value_formats_back(scenario: str) -> None:
    values = set()
    for line in recorded_body(scenario).splitlines():
        if line.startswith("#") or not line:
            continue
        rest = line.rsplit("}", 1)[-1].split() if "}" in line else line.split()[1:]
        values.add(rest[0])
    assert len(values) > 20
    for text in values:
        assert go_float(float(text)) == text


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0"), (-0.0, "-0"), (1e-05, "1e-05"), (0.0001, "0.0001"), (123456.0, "123456"), (1234567.0, "1.234567e+06"),
    (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN"), (-2.5, "-2.5"),
])
def test_go_float(value: float, text: str) -> None:
    assert go_float(value) == text


def test_render_sorts_families_and_samples_and_escapes() -> None:
    b = Family("b_total", "B.", "counter")
    b.add([("pod", "z")], 2, 1000)
    b.add([("pod", 'a"\\\n')], 1)
    a = Family("a", "A\\x\nb", "gauge")
    a.add([], 0.5)
    empty = Family("c", "never shown", "gauge")
    assert render([b, empty, a]) == (
        "# HELP a A\\\\x\\nb\n# TYPE a gauge\na 0.5\n"
        "# HELP b_total B.\n# TYPE b_total counter\n"
        'b_total{pod="a\\"\\\\\\n"} 1\nb_total{pod="z"} 2 1000\n'
    )
