"""The text exposition the kubelet serves (client_golang's): a family without a series is left out (a vector
before its first event), no `*_created` series, and a counter's family is named after its series (so a counter
named without `_total` upstream, such as kubelet_evictions, keeps that name)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal

from minikubelet.base.prometheus import Collector, CollectorRegistry, Metric


def go_float(value: float) -> str:
    """strconv.FormatFloat(v, 'g', -1, 64) with Prometheus' spellings of the specials: the shortest digits that
    read back exactly (Python's repr finds the same ones), in exponent form when the exponent is < -4 or >= 6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    negative, digit_tuple, exponent = Decimal(repr(float(value))).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    exp10 = len(digits) + exponent - 1  # the exponent of the first digit
    sign = "-" if negative else ""
    if exp10 < -4 or exp10 >= 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if exp10 >= 0:
        whole = digits[: exp10 + 1].ljust(exp10 + 1, "0")
        frac = digits[exp10 + 1:]
        return sign + whole + ("." + frac if frac else "")
    return sign + "0." + "0" * (-exp10 - 1) + digits


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


# The kubelet's counters named without `_total` that are declared as Counters (which add it).
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
            labels = ",".join(f'{k}="{escape_label(v)}"' for k, v in s.labels.items())
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
