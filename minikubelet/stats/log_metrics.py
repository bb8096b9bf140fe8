"""kubelet_container_log_filesystem_used_bytes: each container's log bytes from the last stats pass, read at
scrape time as the kubelet's log metrics collector reads its pod stats."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from minikubelet.base.prometheus import Collector, GaugeMetricFamily, Metric
from minikubelet.stats.snapshot import Snapshot


class LogMetricsCollector(Collector):
    def __init__(self, snapshot: Callable[[], Snapshot | None]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("kubelet_container_log_filesystem_used_bytes",
                                   "Bytes the container's logs use on their filesystem",
                                   labels=["uid", "namespace", "pod", "container"])
        snap = self._snapshot()
        for pod in snap.pods if snap is not None else ():
            for c in pod.containers:
                if c.logs is not None and c.logs.used is not None:
                    family.add_metric([pod.uid, pod.namespace, pod.name, c.name], c.logs.used)
        yield family
