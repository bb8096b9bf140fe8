"""The Prometheus metric types the agent exports: counters, gauges, histograms, their label children, custom
collectors' families and the registry that collects them.

The same names, samples and errors as prometheus_client's (the agent used it until issue 31), without its package
import, which loads an HTTP server, a WSGI server and urllib's client (~2.7 MiB) the agent never uses; the
families are rendered by `minikubelet.metrics_text`. See docs/decisions.md.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, NamedTuple, Protocol, TypeVar

CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"
INF = math.inf

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "info", "stateset", "unknown"})


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float
    timestamp: float | None = None


class Metric:
    """One metric family and its samples."""

    def __init__(self, name: str, documentation: str, typ: str) -> None:
        if not _NAME.match(name):
            raise ValueError(f"Invalid metric name: {name}")
        typ = "unknown" if typ == "untyped" else typ
        if typ not in _TYPES:
            raise ValueError(f"Invalid metric type: {typ}")
        self.name = name
        self.documentation = documentation
        self.type = typ
        self.samples: list[Sample] = []

    def add_sample(self, name: str, labels: dict[str, str], value: float, timestamp: float | None = None) -> None:
        self.samples.append(Sample(name, labels, value, timestamp))

    def __repr__(self) -> str:
        return f"Metric({self.name!r}, {self.documentation!r}, {self.type!r}, samples={self.samples!r})"


class _CollectedFamily(Metric):
    """A family a custom collector builds at collect time: one value, or label names and `add_metric` calls."""

    _type = ""
    _suffix = ""

    def __init__(self, name: str, documentation: str, value: float | None = None,
                 labels: Sequence[str] | None = None) -> None:
        super().__init__(name.removesuffix(self._suffix) if self._suffix else name, documentation, self._type)
        if labels is not None and value is not None:
            raise ValueError("Can only specify at most one of value and labels.")
        self._labelnames = tuple(labels or ())
        if value is not None:
            self.add_metric([], value)

    def add_metric(self, labels: Sequence[str], value: float, timestamp: float | None = None) -> None:
        self.samples.append(Sample(self.name + self._suffix, dict(zip(self._labelnames, labels, strict=False)),
                                   value, timestamp))


class GaugeMetricFamily(_CollectedFamily):
    _type = "gauge"


class CounterMetricFamily(_CollectedFamily):
    """The family drops `_total`, the sample keeps it."""

    _type = "counter"
    _suffix = "_total"


class Collector(Protocol):
    def collect(self) -> Iterable[Metric]: ...


class DuplicateTimeseries(ValueError):
    def __init__(self, duplicates: set[str]) -> None:
        super().__init__(f"Duplicated timeseries in CollectorRegistry: {duplicates}")
        self.duplicates = duplicates


class CollectorRegistry:
    """Collectors in registration order; the names of the series each one exports (when it can describe them)
    may not clash."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._collectors: dict[Collector, tuple[str, ...]] = {}
        self._names: dict[str, Collector] = {}

    def register(self, collector: Collector) -> None:
        describe: Callable[[], Iterable[Metric]] | None = getattr(collector, "describe", None)
        names = tuple(_series_names(describe())) if describe is not None else ()
        with self._lock:
            duplicates = set(self._names).intersection(names)
            if duplicates or collector in self._collectors:
                raise DuplicateTimeseries(duplicates or set(names))
            for name in names:
                self._names[name] = collector
            self._collectors[collector] = names

    def unregister(self, collector: Collector) -> None:
        with self._lock:
            for name in self._collectors.pop(collector):
                del self._names[name]

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            collectors = list(self._collectors)
        for collector in collectors:
            yield from collector.collect()

    def get_sample_value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The value of one series, or None (for tests: it collects everything)."""
        want = labels or {}
        for metric in self.collect():
            for s in metric.samples:
                if s.name == name and s.labels == want:
                    return s.value
        return None


_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"),
             "summary": ("_sum", "_count", "_created")}


def _series_names(metrics: Iterable[Metric]) -> Iterable[str]:
    for m in metrics:
        yield m.name
        for suffix in _SUFFIXES.get(m.type, ()):
            yield m.name + suffix


C = TypeVar("C", bound="_Child")


class _Family(Generic[C]):
    """A metric with label names: its children by label values, in the order they were first used. Without label
    names the family is its own single child."""

    _type = ""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (),
                 registry: CollectorRegistry | None = None) -> None:
        if not _NAME.match(name):
            raise ValueError(f"Invalid metric name: {name}")
        self._labelnames = tuple(labelnames)
        for label in self._labelnames:
            if not _LABEL.match(label) or label.startswith("__"):
                raise ValueError(f"Invalid label metric name: {label}")
        self._name = name
        self._documentation = documentation
        self._lock = threading.Lock()
        self._children: dict[tuple[str, ...], C] = {}
        self._single: C | None = None if self._labelnames else self._child()
        if registry is not None:
            registry.register(self)

    def _child(self) -> C:
        raise NotImplementedError

    def labels(self, *values: object, **kwvalues: object) -> C:
        if not self._labelnames:
            raise ValueError(f"No label names were set when constructing {self}")
        if values and kwvalues:
            raise ValueError("Can't pass both *args and **kwargs")
        if kwvalues:
            if sorted(kwvalues) != sorted(self._labelnames):
                raise ValueError("Incorrect label names")
            key = tuple(str(kwvalues[n]) for n in self._labelnames)
        else:
            if len(values) != len(self._labelnames):
                raise ValueError("Incorrect label count")
            key = tuple(str(v) for v in values)
        child = self._children.get(key)
        if child is None:
            with self._lock:
                child = self._children.setdefault(key, self._child())
        return child

    def remove(self, *values: object) -> None:
        if not self._labelnames:
            raise ValueError(f"No label names were set when constructing {self}")
        if len(values) != len(self._labelnames):
            raise ValueError(f"Incorrect label count (expected {len(self._labelnames)}, got {values})")
        with self._lock:
            self._children.pop(tuple(str(v) for v in values), None)

    def clear(self) -> None:
        with self._lock:
            self._children.clear()

    def _only(self) -> C:
        if self._single is None:
            raise ValueError(f"{self} has label names: use .labels()")
        return self._single

    def describe(self) -> Iterable[Metric]:
        return [Metric(self._name, self._documentation, self._type)]

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self._name, self._documentation, self._type)
        if self._single is not None:
            for suffix, extra, value in self._single.samples():
                metric.add_sample(self._name + suffix, extra, value)
            return [metric]
        with self._lock:
            children = list(self._children.items())
        for key, child in children:
            labels = dict(zip(self._labelnames, key, strict=True))
            for suffix, extra, value in child.samples():
                metric.add_sample(self._name + suffix, {**labels, **extra} if extra else dict(labels), value)
        return [metric]

    def __str__(self) -> str:
        return f"{self._type}:{self._name}"


class _Child:
    __slots__ = ("_lock", "_value")

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._value = 0.0

    def samples(self) -> Iterable[tuple[str, dict[str, str], float]]:
        raise NotImplementedError


class _CounterChild(_Child):
    __slots__ = ()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        with self._lock:
            self._value += amount

    def samples(self) -> Iterable[tuple[str, dict[str, str], float]]:
        return (("_total", {}, self._value),)


class Counter(_Family[_CounterChild]):
    """A counter; its family is named without `_total`, its series with it."""

    _type = "counter"

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (),
                 registry: CollectorRegistry | None = None) -> None:
        super().__init__(name.removesuffix("_total"), documentation, labelnames, registry)

    def _child(self) -> _CounterChild:
        return _CounterChild(self._lock)

    def inc(self, amount: float = 1) -> None:
        self._only().inc(amount)

    def describe(self) -> Iterable[Metric]:
        return [Metric(self._name, self._documentation, "counter")]


class _GaugeChild(_Child):
    __slots__ = ("_function",)

    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock)
        self._function: Callable[[], float] | None = None

    def inc(self, amount: float = 1) -> None:
        with self._lock:
            self._value += amount

    def dec(self, amount: float = 1) -> None:
        with self._lock:
            self._value -= amount

    def set(self, value: float) -> None:
        self._value = float(value)

    def set_function(self, f: Callable[[], float]) -> None:
        """The gauge's value is what `f` returns at each collection."""
        self._function = f

    def samples(self) -> Iterable[tuple[str, dict[str, str], float]]:
        value = float(self._function()) if self._function is not None else self._value
        return (("", {}, value),)


class Gauge(_Family[_GaugeChild]):
    _type = "gauge"

    def _child(self) -> _GaugeChild:
        return _GaugeChild(self._lock)

    def inc(self, amount: float = 1) -> None:
        self._only().inc(amount)

    def dec(self, amount: float = 1) -> None:
        self._only().dec(amount)

    def set(self, value: float) -> None:
        self._only().set(value)

    def set_function(self, f: Callable[[], float]) -> None:
        self._only().set_function(f)


@functools.lru_cache(maxsize=1024)
def go_bound(bound: float) -> str:
    """A bucket's `le` as prometheus_client writes it (Python's repr, Go's exponent from 1e7 up). Cached: every
    histogram child names its few bounds again."""
    if bound == INF:
        return "+Inf"
    text = repr(float(bound))
    dot = text.find(".")
    if bound > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


class _HistogramChild(_Child):
    __slots__ = ("_bounds", "_counts", "_les")

    def __init__(self, lock: threading.Lock, bounds: tuple[float, ...], les: tuple[str, ...]) -> None:
        super().__init__(lock)
        self._bounds = bounds
        self._counts = [0] * len(bounds)
        self._les = les

    def observe(self, amount: float) -> None:
        with self._lock:
            self._value += amount
            for i, bound in enumerate(self._bounds):
                if amount <= bound:
                    self._counts[i] += 1
                    break

    def samples(self) -> Iterable[tuple[str, dict[str, str], float]]:
        out: list[tuple[str, dict[str, str], float]] = []
        acc = 0
        for le, count in zip(self._les, self._counts, strict=True):
            acc += count
            out.append(("_bucket", {"le": le}, float(acc)))
        out.append(("_count", {}, float(acc)))
        out.append(("_sum", {}, self._value))
        return out


class Histogram(_Family[_HistogramChild]):
    _type = "histogram"
    DEFAULT_BUCKETS = (.005, .01, .025, .05, .075, .1, .25, .5, .75, 1.0, 2.5, 5.0, 7.5, 10.0, INF)

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (),
                 registry: CollectorRegistry | None = None, buckets: Sequence[float] = DEFAULT_BUCKETS) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError("Buckets not in sorted order")
        if bounds and bounds[-1] != INF:
            bounds.append(INF)
        if len(bounds) < 2:
            raise ValueError("Must have at least two buckets")
        if "le" in labelnames:
            raise ValueError("Invalid label name: le")
        self._bounds = tuple(bounds)
        self._les = tuple(go_bound(b) for b in bounds)
        super().__init__(name, documentation, labelnames, registry)

    def _child(self) -> _HistogramChild:
        return _HistogramChild(self._lock, self._bounds, self._les)

    def observe(self, amount: float) -> None:
        self._only().observe(amount)


__all__ = ["CONTENT_TYPE_LATEST", "Collector", "CollectorRegistry", "Counter", "CounterMetricFamily", "Gauge",
           "GaugeMetricFamily", "Histogram", "Metric", "Sample"]

