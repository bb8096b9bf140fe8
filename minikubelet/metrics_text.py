"""The text exposition the kubelet serves (client_golang's): a family without a series is left out (a vector
before its first event), no `*_created` series, and a counter's family is named after its series (so a counter
named without `_total` upstream, such as kubelet_evictions, keeps that name)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Metric
from prometheus_client.registry import Collector


def go_float(value: float) -> str:
    """A sample value as client_golang writes it: +Inf, -Inf, NaN, and no trailing ".0"."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _escape_value(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


# The kubelet's counters named without `_total` that are declared as prometheus_client Counters (which add it).
PLAIN_COUNTERS = frozenset({"kubelet_pleg_discard_events", "kubelet_evictions", "kubelet_preemptions",
                            "kubelet_evented_pleg_connection_error_count",
                            "kubelet_evented_pleg_connection_success_count"})


def family_name(metric: Metric) -> str | None:
    """The name the family is exposed under, or None when it has no series."""
    samples = [s for s in metric.samples if not s.name.endswith("_created")]
    if not samples:
        return None
    if metric.type == "counter" and metric.name in PLAIN_COUNTERS:
        return metric.name
    return samples[0].name if metric.type == "counter" else metric.name


def render(registry: CollectorRegistry | Collector) -> bytes:
    out: list[str] = []
    for metric in registry.collect():
        name = family_name(metric)
        if name is None:
            continue
        mtype = metric.type if metric.type in ("counter", "gauge", "histogram", "summary") else "untyped"
        out.append(f"# HELP {name} {_escape_help(metric.documentation)}\n# TYPE {name} {mtype}\n")
        plain = mtype == "counter" and name == metric.name
        for s in metric.samples:
            if s.name.endswith("_created"):
                continue
            sname = s.name.removesuffix("_total") if plain else s.name
            labels = ",".join(f'{k}="{_escape_value(v)}"' for k, v in s.labels.items())
            out.append(f"{sname}{{{labels}}} {go_float(s.value)}\n" if labels
                       else f"{sname} {go_float(s.value)}\n")
    return "".join(out).encode()


class PlainCounter(Collector):
    """A counter whose series has no `_total` suffix, as some of upstream's (Counter would add one)."""

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry | None = None) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0
        if registry is not None:
            registry.register(self)

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, "counter")
        metric.add_sample(self.name, {}, self.value)
        yield metric
