"""Prometheus metrics with the kubelet's names (pkg/kubelet/metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# upstream podResizeDurationBuckets (milliseconds)
_RESIZE_BUCKETS = (10, 50, 100, 500, 1000, 2000, 5000, 10000, 20000, 30000, 60000, 120000, 300000, 600000)
_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.running_pods = Gauge("kubelet_running_pods", "Number of pods that have a running pod sandbox", registry=r)
        self.running_containers = Gauge(
            "kubelet_running_containers", "Number of containers currently running", ["container_state"], registry=r
        )
        self.pod_start_duration = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from the agent seeing a pod for the first time to the pod starting to run",
            buckets=_START_BUCKETS,
            registry=r,
        )
        self.pod_worker_duration = Histogram(
            "kubelet_pod_worker_duration_seconds",
            "Duration in seconds to sync a single pod",
            ["operation"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.runtime_operations = Counter(
            "kubelet_runtime_operations", "Cumulative number of runtime operations by operation type",
            ["operation_type"], registry=r,
        )
        self.runtime_operations_duration = Histogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations",
            ["operation_type"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.runtime_operations_errors = Counter(
            "kubelet_runtime_operations_errors", "Cumulative number of runtime operation errors by operation type",
            ["operation_type"], registry=r,
        )
        self.static_pod_manifest_errors = Counter(
            "minikubelet_static_pod_manifest_errors",
            "Static pod manifests rejected (unparsable or invalid), by reason",
            ["reason"], registry=r,
        )
        self.started_containers = Counter(
            "kubelet_started_containers", "Cumulative number of containers started", ["container_type"], registry=r
        )
        self.started_containers_errors = Counter(
            "kubelet_started_containers_errors", "Cumulative number of errors when starting containers",
            ["container_type", "code"], registry=r,
        )
        self.image_pull_duration = Histogram(
            "kubelet_image_pull_duration_seconds", "Duration in seconds to pull an image", buckets=_START_BUCKETS,
            registry=r,
        )
        self.pleg_relist_duration = Histogram(
            "kubelet_pleg_relist_duration_seconds", "Duration in seconds for relisting pods in PLEG",
            buckets=_DURATION_BUCKETS, registry=r,
        )
        self.sync_loop_last = Gauge(
            "minikubelet_sync_loop_last_timestamp_seconds", "When the housekeeping loop last completed", registry=r
        )
        # In-place pod resize (pkg/kubelet/metrics ContainerRequestedResizes ... PodDeferredAcceptedResizes).
        self.container_requested_resizes = Counter(
            "kubelet_container_requested_resizes",
            "Number of requested resizes, counted at the container level. Different resources on the same "
            "container are counted separately. The 'requirement' label refers to 'memory' or 'limits'; the "
            "'operation' label can be one of 'add', 'remove', 'increase' or 'decrease'.",
            ["resource", "requirement", "operation"], registry=r,
        )
        self.pod_resize_duration = Histogram(
            "kubelet_pod_resize_duration_milliseconds", "Duration in milliseconds to actuate a pod resize",
            ["success"], buckets=_RESIZE_BUCKETS, registry=r,
        )
        self.pod_pending_resizes = Gauge(
            "kubelet_pod_pending_resizes", "Number of pending resizes for pods.", ["reason"], registry=r
        )
        self.pod_infeasible_resizes = Counter(
            "kubelet_pod_infeasible_resizes", "Number of infeasible resizes for pods.", ["reason_detail"], registry=r
        )
        self.pod_in_progress_resizes = Gauge(
            "kubelet_pod_in_progress_resizes", "Number of in-progress resizes for pods.", registry=r
        )
        self.pod_deferred_accepted_resizes = Counter(
            "kubelet_pod_deferred_accepted_resizes", "Cumulative number of resizes that were accepted after being "
            "deferred.", ["retry_trigger"], registry=r,
        )
