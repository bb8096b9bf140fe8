"""The node managers' families with the kubelet's names: node name, cgroup manager, PLEG relist interval, storage
operations and the volume manager's counts (pkg/kubelet/metrics, pkg/volume/util/metrics.go,
pkg/kubelet/volumemanager/metrics), and the certificate managers' (pkg/kubelet/certificate)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from minikubelet.base.prometheus import Collector, CollectorRegistry, Gauge, GaugeMetricFamily, Histogram, Metric
from minikubelet.metrics_text import PlainCounter

DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)  # client_golang's DefBuckets
STORAGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0)
ROTATION_BUCKETS = (60.0, 3600.0, 14400.0, 86400.0, 604800.0, 2592000.0, 7776000.0, 15552000.0, 31104000.0,
                    124416000.0)
ACTUAL, DESIRED = "actual_state_of_world", "desired_state_of_world"


class NodeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = self.registry = registry
        self.node_name = Gauge("kubelet_node_name", "The node's name. The count is always 1.", ["node"], registry=r)
        self.cgroup_version = Gauge("kubelet_cgroup_version", "cgroup version on the hosts.", registry=r)
        self.cgroup_manager_duration = Histogram(
            "kubelet_cgroup_manager_duration_seconds",
            "Duration in seconds for cgroup manager operations. Broken down by method.",
            ["operation_type"], buckets=DEF_BUCKETS, registry=r)
        self.pleg_relist_interval = Histogram(
            "kubelet_pleg_relist_interval_seconds", "Interval in seconds between relisting in PLEG.",
            buckets=DEF_BUCKETS, registry=r)
        self.storage_operation_duration = Histogram(
            "storage_operation_duration_seconds", "Storage operation duration",
            ["volume_plugin", "operation_name", "status", "migrated"], buckets=STORAGE_BUCKETS, registry=r)
        self.volume_operation_total = Histogram(
            "volume_operation_total_seconds",
            "Storage operation end to end duration in seconds", ["plugin_name", "operation_name"],
            buckets=STORAGE_BUCKETS, registry=r)

    def cgroup_operation(self, operation: str, seconds: float) -> None:
        self.cgroup_manager_duration.labels(operation).observe(seconds)

    def storage_operation(self, plugin: str, operation: str, ok: bool, seconds: float) -> None:
        self.storage_operation_duration.labels(plugin, operation, "success" if ok else "fail-unknown",
                                               "false").observe(seconds)


class VolumeCountCollector(Collector):
    """volume_manager_total_volumes: volumes per plugin in the desired and in the actual state of the world."""

    def __init__(self, desired: Callable[[], Iterable[str]], actual: Callable[[], Iterable[str]]) -> None:
        self._desired = desired  # one plugin name per volume the node's pods want
        self._actual = actual  # one plugin name per volume set up on the host

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("volume_manager_total_volumes", "Number of volumes in Volume Manager",
                                   labels=["plugin_name", "state"])
        for state, plugins in ((ACTUAL, self._actual()), (DESIRED, self._desired())):
            counts: dict[str, int] = {}
            for plugin in plugins:
                counts[plugin] = counts.get(plugin, 0) + 1
            for plugin, n in sorted(counts.items()):
                family.add_metric([plugin, state], n)
        yield family


@dataclass(frozen=True)
class ContainerLogUsage:
    uid: str
    namespace: str
    pod: str
    container: str
    used_bytes: int


class ContainerLogCollector(Collector):
    """kubelet_container_log_filesystem_used_bytes from the stats pass's last measurement of each container's logs."""

    def __init__(self, usage: Callable[[], Iterable[ContainerLogUsage]]) -> None:
        self._usage = usage

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("kubelet_container_log_filesystem_used_bytes",
                                   "Bytes used by the container's logs on the filesystem.",
                                   labels=["uid", "namespace", "pod", "container"])
        for u in self._usage():
            family.add_metric([u.uid, u.namespace, u.pod, u.container], u.used_bytes)
        yield family


def ttl_seconds(not_after: float | None, now: float) -> float:
    """Seconds until expiry, truncated toward zero (negative once expired); +Inf without a certificate."""
    return math.inf if not_after is None else float(math.trunc(not_after - now))


class CertificateMetrics:
    """One certificate manager's families: the client's (rotateCertificates) or the server's (serverTLSBootstrap)."""

    def __init__(self, registry: CollectorRegistry, kind: str, not_after: Callable[[], float | None],
                 now: Callable[[], float] = time.time) -> None:
        self._not_after = not_after
        self._now = now
        if kind == "client":
            self.renew_errors = PlainCounter("kubelet_certificate_manager_client_expiration_renew_errors",
                                             "Counter of certificate renewal errors.", registry)
            ttl = Gauge("kubelet_certificate_manager_client_ttl_seconds",
                        "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds "
                        "until certificate expiry (negative if already expired). If client certificate is invalid or "
                        "unused, the value will be +INF.", registry=registry)
            self.rotation: Histogram | None = None
        else:
            self.renew_errors = PlainCounter("kubelet_server_expiration_renew_errors",
                                             "Counter of certificate renewal errors.", registry)
            ttl = Gauge("kubelet_certificate_manager_server_ttl_seconds",
                        "Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in "
                        "seconds until certificate expiry (negative if already expired). If serving certificate is "
                        "invalid or unused, the value will be +INF.", registry=registry)
            self.rotation = Histogram("kubelet_certificate_manager_server_rotation_seconds",
                                      "Histogram of the number of seconds the previous certificate lived before being "
                                      "rotated.", buckets=ROTATION_BUCKETS, registry=registry)
        ttl.set_function(lambda: ttl_seconds(self._not_after(), self._now()))

    def rotated(self, previous_not_before: float | None) -> None:
        """A new certificate replaced one issued at `previous_not_before` (None: there was none)."""
        if self.rotation is not None and previous_not_before is not None:
            self.rotation.observe(self._now() - previous_not_before)

    def bind(self, not_after: Callable[[], float | None], now: Callable[[], float]) -> None:
        self._not_after, self._now = not_after, now


# The registry the process-wide families go to (upstream's legacyregistry): the certificate managers register
# into it when they are built, as upstream's do.
_legacy: CollectorRegistry | None = None
_certificates: dict[str, CertificateMetrics] = {}


def use_registry(registry: CollectorRegistry | None) -> None:
    global _legacy
    _legacy = registry
    _certificates.clear()


def certificate_metrics(kind: str, not_after: Callable[[], float | None],
                        now: Callable[[], float] = time.time) -> CertificateMetrics | None:
    """The families of the client ("client") or serving ("server") certificate manager, registered once."""
    if _legacy is None:
        return None
    metrics = _certificates.get(kind)
    if metrics is None:
        metrics = _certificates[kind] = CertificateMetrics(_legacy, kind, not_after, now)
    else:
        metrics.bind(not_after, now)
    return metrics
