"""The kubelet's /metrics/probes series: prober_probe_total and prober_probe_duration_seconds."""

from __future__ import annotations

from dataclasses import dataclass

from minikubelet.base.prometheus import CollectorRegistry, Counter, Histogram
from probes.result import ProbeKind, Result

# client_golang's DefBuckets (upstream sets none); the Histogram default has 0.075, 0.75 and 7.5 too
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_RESULT_LABELS = {Result.SUCCESS: "successful", Result.FAILURE: "failed", Result.UNKNOWN: "unknown"}


@dataclass(frozen=True)
class ProbeIdentity:
    kind: ProbeKind
    container: str
    pod: str
    namespace: str
    pod_uid: str


class ProbeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.total = Counter(
            "prober_probe_total",
            "Cumulative number of a liveness, readiness or startup probe for a container by result.",
            ["probe_type", "result", "container", "pod", "namespace", "pod_uid"],
            registry=registry,
        )
        self.duration = Histogram(
            "prober_probe_duration_seconds",
            "Duration in seconds for a probe response.",
            ["probe_type", "container", "pod", "namespace"],
            buckets=DEF_BUCKETS,
            registry=registry,
        )

    def record(self, probe: ProbeIdentity, result: Result, seconds: float) -> None:
        self.total.labels(
            probe.kind.label, _RESULT_LABELS[result], probe.container, probe.pod, probe.namespace, probe.pod_uid
        ).inc()
        # As upstream: failed probes are counted but their duration is not observed.
        if result is not Result.FAILURE:
            self.duration.labels(probe.kind.label, probe.container, probe.pod, probe.namespace).observe(seconds)

    def forget(self, probe: ProbeIdentity) -> None:
        """Drop a stopped worker's series so /metrics/probes does not grow with every pod ever run."""
        for label in _RESULT_LABELS.values():
            _remove(self.total, probe.kind.label, label, probe.container, probe.pod, probe.namespace, probe.pod_uid)
        _remove(self.duration, probe.kind.label, probe.container, probe.pod, probe.namespace)


def _remove(metric: Counter | Histogram, *labels: str) -> None:
    try:
        metric.remove(*labels)
    except KeyError:
        pass
