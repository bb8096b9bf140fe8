"""Prometheus metrics with the kubelet's names, types, labels and buckets (pkg/kubelet/metrics,
pkg/kubelet/server/metrics); docs/metrics.md lists where each family is observed."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minikubelet.base.kubetime import parse_time
from minikubelet.base.prometheus import CollectorRegistry, Counter, Gauge, Histogram
from minikubelet.metrics_node import NodeMetrics

# Go's prometheus DefBuckets
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
POD_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200,
                     1800, 2700, 3600)
IMAGE_PULL_BUCKETS = (1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600)
POD_STATUS_SYNC_BUCKETS = (0.010, 0.050, 0.100, 0.500, 1, 5, 10, 20, 30, 45, 60)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    return tuple(start * factor ** i for i in range(count))


RUNTIME_OPERATION_BUCKETS = exponential_buckets(0.005, 2.5, 14)
TOPOLOGY_ADMISSION_BUCKETS = exponential_buckets(0.05, 2, 15)
# upstream podResizeDurationBuckets (milliseconds)
RESIZE_BUCKETS = (10, 50, 100, 500, 1000, 2000, 5000, 10000, 20000, 30000, 60000, 120000, 300000, 600000)

# image_pull_duration_seconds' image_size_in_bytes label: (lower bound exclusive, label), the kubelet's ranges
_GB = 1 << 30
_IMAGE_SIZE_LABELS = ((0, "0-10MB"), (10 << 20, "10MB-100MB"), (100 << 20, "100MB-500MB"), (500 << 20, "500MB-1GB"),
                      (_GB, "1GB-5GB"), (5 * _GB, "5GB-10GB"), (10 * _GB, "10GB-20GB"), (20 * _GB, "20GB-30GB"),
                      (30 * _GB, "30GB-40GB"), (40 * _GB, "40GB-60GB"), (60 * _GB, "60GB-100GB"),
                      (100 * _GB, "GT100GB"))


def image_size_bucket(size: int) -> str:
    """The image_size_in_bytes label for an image of `size` bytes; "N/A" when the runtime gave no size."""
    if size == 0:
        return "N/A"
    for bound, label in reversed(_IMAGE_SIZE_LABELS):
        if size > bound:
            return label
    return ""


# the rejection reasons kubelet_admission_rejections_total names as they are; any other is "OutOfExtendedResources"
# (an extended resource that does not fit) or "Other"
_ADMISSION_REASONS = frozenset({
    "AppArmor", "PodOSSelectorNodeLabelDoesNotMatch", "PodOSNotSupported", "InvalidNodeInfo",
    "InitContainerRestartPolicyForbidden", "SupplementalGroupsPolicyNotSupported", "UnexpectedAdmissionError",
    "UnknownReason", "UnexpectedPredicateFailureType", "OutOfcpu", "OutOfmemory", "OutOfephemeral-storage",
    "OutOfpods", "PodLevelResourcesNotSupported", "PodFeatureUnsupported",
    "node(s) had taints that the pod didn't tolerate", "Evicted", "SysctlForbidden", "TopologyAffinityError",
    "NodeShutdown", "VolumeAttachmentLimitExceeded"})


def admission_rejection_reason(reason: str) -> str:
    if reason in _ADMISSION_REASONS:
        return reason
    return "OutOfExtendedResources" if reason.startswith("OutOf") else "Other"


class LazyHistogram:
    """A histogram the kubelet declares as a vector without labels: absent from a scrape until its first
    observation (a vector without children renders nothing)."""

    def __init__(self, registry: CollectorRegistry, name: str, documentation: str, buckets: tuple[float, ...]) -> None:
        self._registry = registry
        self._histogram = Histogram(name, documentation, buckets=buckets, registry=None)
        self._registered = False

    def observe(self, value: float) -> None:
        if not self._registered:
            self._registry.register(self._histogram)
            self._registered = True
        self._histogram.observe(value)


class HttpRequestFamilies:
    """The kubelet server's request families (pkg/kubelet/server/metrics)."""

    def __init__(self, r: CollectorRegistry) -> None:
        labels = ["method", "path", "server_type", "long_running"]
        self.requests = Counter("kubelet_http_requests", "HTTP requests received since the server started", labels,
                                registry=r)
        self.duration = Histogram("kubelet_http_requests_duration_seconds", "Seconds taken to serve HTTP requests",
                                  labels, buckets=DEF_BUCKETS, registry=r)
        self.inflight = Gauge("kubelet_http_inflight_requests", "HTTP requests being served", labels, registry=r)
        self.volume_stat_duration = Histogram(
            "kubelet_volume_metric_collection_duration_seconds", "Seconds taken to measure a volume's usage",
            ["metric_source"], buckets=DEF_BUCKETS, registry=r)
        self.websocket_streaming = Counter(
            "kubelet_websocket_streaming_requests", "WebSocket exec, attach and port-forward requests",
            ["subresource"], registry=r)
        # container stats come from the cgroup files cAdvisor reads, not from the CRI's stats
        self.metrics_provider = Gauge("kubelet_metrics_provider", "Where container stats come from: cadvisor or cri",
                                      ["provider"], registry=r)
        self.metrics_provider.labels("cadvisor").set(1)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, now: Callable[[], float] = time.time) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.http = HttpRequestFamilies(r)
        # pod start
        self.pod_start_duration = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Seconds from the agent first seeing a pod to the pod's phase becoming Running",
            buckets=POD_START_BUCKETS, registry=r)
        self.pod_start_sli_duration = LazyHistogram(
            r, "kubelet_pod_start_sli_duration_seconds",
            "Seconds from pod creation to all its containers observed running on the watch, less image pulls and "
            "init containers' run time (stateless pods)", POD_START_BUCKETS)
        self.pod_start_total_duration = LazyHistogram(
            r, "kubelet_pod_start_total_duration_seconds",
            "Seconds from pod creation to all its containers observed running on the watch", POD_START_BUCKETS)
        self.first_network_pod_start_sli_duration = Gauge(
            "kubelet_first_network_pod_start_sli_duration_seconds",
            "The start SLI of the first pod not on the host network", registry=r)
        self.pod_worker_start_duration = Histogram(
            "kubelet_pod_worker_start_duration_seconds",
            "Seconds from the agent first seeing a pod to its worker's first sync", buckets=DEF_BUCKETS, registry=r)
        self.pod_worker_duration = Histogram(
            "kubelet_pod_worker_duration_seconds", "Seconds one pod worker sync took", ["operation_type"],
            buckets=DEF_BUCKETS, registry=r)
        self.pod_status_sync_duration = Histogram(
            "kubelet_pod_status_sync_duration_seconds",
            "Seconds from a pod status change to its write to the API server", buckets=POD_STATUS_SYNC_BUCKETS,
            registry=r)
        self.containers_per_pod = Histogram(
            "kubelet_containers_per_pod_count", "Containers per pod, counted when its worker starts",
            buckets=exponential_buckets(1, 2, 5), registry=r)
        self.started_pods = Counter("kubelet_started_pods", "Pod sandboxes created", registry=r)
        self.started_pods_errors = Counter("kubelet_started_pods_errors", "Pod sandbox creations that failed",
                                           registry=r)
        self.started_user_namespaced_pods = Counter(
            "kubelet_started_user_namespaced_pods", "Sandboxes created for pods with hostUsers false", registry=r)
        self.started_user_namespaced_pods_errors = Counter(
            "kubelet_started_user_namespaced_pods_errors", "Failed sandbox creations for pods with hostUsers false",
            registry=r)
        self.started_containers = Counter(
            "kubelet_started_containers", "Containers started", ["container_type"], registry=r)
        self.started_containers_errors = Counter(
            "kubelet_started_containers_errors", "Container starts that failed", ["container_type", "code"],
            registry=r)
        self.terminated_containers = Counter(
            "kubelet_terminated_containers", "Containers whose status became terminated",
            ["container_type", "exit_code", "reason"], registry=r)
        self.run_podsandbox_duration = Histogram(
            "kubelet_run_podsandbox_duration_seconds", "Seconds the runtime took to run a pod sandbox",
            ["runtime_handler"], buckets=DEF_BUCKETS, registry=r)
        self.run_podsandbox_errors = Counter(
            "kubelet_run_podsandbox_errors", "Pod sandbox runs the runtime failed", ["runtime_handler"], registry=r)
        # what runs
        self.running_pods = Gauge("kubelet_running_pods", "Pods with a running sandbox", registry=r)
        self.running_containers = Gauge(
            "kubelet_running_containers", "Containers by runtime state", ["container_state"], registry=r)
        self.desired_pods = Gauge("kubelet_desired_pods", "Pods the sources want on this node", ["static"],
                                  registry=r)
        self.active_pods = Gauge("kubelet_active_pods", "Admitted pods not yet terminal", ["static"], registry=r)
        self.managed_ephemeral_containers = Gauge(
            "kubelet_managed_ephemeral_containers", "Ephemeral containers in the pods the pod manager holds",
            registry=r)
        self.mirror_pods = Gauge("kubelet_mirror_pods", "Mirror pods the agent sees", registry=r)
        self.working_pods = Gauge("kubelet_working_pods", "Pods with a worker, by lifecycle and config",
                                  ["lifecycle", "config", "static"], registry=r)
        self.orphaned_runtime_pods = Counter(
            "kubelet_orphaned_runtime_pods", "Runtime pods no source knows, found by housekeeping", registry=r)
        self.restarted_pods = Counter(
            "kubelet_restarted_pods", "Pods restarted under a uid a finished worker had", ["static"], registry=r)
        # pleg
        self.pleg_relist_duration = Histogram(
            "kubelet_pleg_relist_duration_seconds", "Seconds a PLEG relist took", buckets=DEF_BUCKETS, registry=r)
        self.pleg_discard_events = Counter("kubelet_pleg_discard_events", "PLEG events dropped", registry=r)
        self.pleg_last_seen = Gauge("kubelet_pleg_last_seen_seconds", "Unix time of the last PLEG relist",
                                    registry=r)
        # registered by the kubelet whatever its PLEG; observed only by its on-demand single-pod relist and its
        # evented PLEG (a gate that is off), neither of which this agent has
        self.pleg_pod_relist_duration = Histogram(
            "kubelet_pleg_pod_relist_duration_seconds", "Seconds a single-pod relist took (none here)",
            buckets=DEF_BUCKETS, registry=r)
        self.evented_pleg_connection_errors = Counter(
            "kubelet_evented_pleg_connection_error_count", "Evented PLEG stream errors (evented PLEG is off)",
            registry=r)
        self.evented_pleg_connections = Counter(
            "kubelet_evented_pleg_connection_success_count", "Evented PLEG streams opened (evented PLEG is off)",
            registry=r)
        self.evented_pleg_connection_latency = Histogram(
            "kubelet_evented_pleg_connection_latency_seconds", "Evented PLEG event latency (evented PLEG is off)",
            buckets=DEF_BUCKETS, registry=r)
        # runtime
        self.runtime_operations = Counter(
            "kubelet_runtime_operations", "Runtime operations by operation type", ["operation_type"], registry=r)
        self.runtime_operations_duration = Histogram(
            "kubelet_runtime_operations_duration_seconds", "Seconds runtime operations took", ["operation_type"],
            buckets=RUNTIME_OPERATION_BUCKETS, registry=r)
        self.runtime_operations_errors = Counter(
            "kubelet_runtime_operations_errors", "Runtime operations that failed", ["operation_type"], registry=r)
        # images
        # upstream's pull_policy is the policy lowercased; pull_required is unknown when the check itself failed
        self.ensure_image_requests = Counter(
            "kubelet_image_manager_ensure_image_requests", "Ensure-image requests by policy, presence and pull",
            ["pull_policy", "present_locally", "pull_required"], registry=r)
        self.image_pull_duration = Histogram(
            "kubelet_image_pull_duration_seconds", "Seconds an image pull took, by image size",
            ["image_size_in_bytes"], buckets=IMAGE_PULL_BUCKETS, registry=r)
        self.image_garbage_collected = Counter(
            "kubelet_image_garbage_collected", "Images removed by image garbage collection", ["reason"], registry=r)
        # admission, eviction, preemption
        self.admission_rejections = Counter(
            "kubelet_admission_rejections", "Pods the admission handlers rejected", ["reason"], registry=r)
        self.evictions = Counter("kubelet_evictions", "Pods evicted, by eviction signal", ["eviction_signal"],
                                 registry=r)
        self.eviction_stats_age = Histogram(
            "kubelet_eviction_stats_age_seconds", "Age of the stats an eviction acted on", ["eviction_signal"],
            buckets=DEF_BUCKETS, registry=r)
        self.preemptions = Counter("kubelet_preemptions", "Pods preempted for a critical pod",
                                   ["preemption_signal"], registry=r)
        # lifecycle handlers
        self.lifecycle_handler_http_fallbacks = Counter(
            "kubelet_lifecycle_handler_http_fallbacks", "HTTPS lifecycle hooks retried over HTTP", registry=r)
        self.sleep_action_terminated_early = Counter(
            "kubelet_sleep_action_terminated_early", "Sleep hooks cut short by the grace period", registry=r)
        # node
        self.graceful_shutdown_start = Gauge(
            "kubelet_graceful_shutdown_start_time_seconds", "Unix time the last graceful shutdown started",
            registry=r)
        self.graceful_shutdown_end = Gauge(
            "kubelet_graceful_shutdown_end_time_seconds", "Unix time the last graceful shutdown ended", registry=r)
        self.node_startup_pre_kubelet = Gauge(
            "kubelet_node_startup_pre_kubelet_duration_seconds", "Seconds from boot to the agent's start",
            registry=r)
        self.node_startup_pre_registration = Gauge(
            "kubelet_node_startup_pre_registration_duration_seconds",
            "Seconds from the agent's start to its first registration attempt", registry=r)
        self.node_startup_registration = Gauge(
            "kubelet_node_startup_registration_duration_seconds",
            "Seconds from the first registration attempt to the Node's creation", registry=r)
        self.node_startup_post_registration = Gauge(
            "kubelet_node_startup_post_registration_duration_seconds",
            "Seconds from the Node's creation to its first Ready", registry=r)
        self.node_startup = Gauge("kubelet_node_startup_duration_seconds", "Seconds from boot to the node's first "
                                  "Ready", registry=r)
        self.orphan_pod_cleaned_volumes = Gauge(
            "kubelet_orphan_pod_cleaned_volumes", "Orphaned pod directories the last cleanup removed", registry=r)
        self.orphan_pod_cleaned_volumes_errors = Gauge(
            "kubelet_orphan_pod_cleaned_volumes_errors", "Orphaned pod directories the last cleanup failed to remove",
            registry=r)
        # resource managers with the `none` policies: registered as the kubelet does, never moved by a pinning
        self.cpu_manager_pinning_requests = Counter(
            "kubelet_cpu_manager_pinning_requests", "Exclusive CPU pinnings (none policy: never)", registry=r)
        self.cpu_manager_pinning_errors = Counter(
            "kubelet_cpu_manager_pinning_errors", "Failed exclusive CPU pinnings (none policy: never)", registry=r)
        self.cpu_manager_shared_pool = Gauge(
            "kubelet_cpu_manager_shared_pool_size_millicores", "Shared CPU pool (static policy only)", registry=r)
        self.cpu_manager_exclusive = Gauge(
            "kubelet_cpu_manager_exclusive_cpu_allocation_count", "Exclusively allocated CPUs (static policy only)",
            registry=r)
        self.memory_manager_pinning_requests = Counter(
            "kubelet_memory_manager_pinning_requests", "NUMA memory pinnings (none policy: never)", registry=r)
        self.memory_manager_pinning_errors = Counter(
            "kubelet_memory_manager_pinning_errors", "Failed NUMA memory pinnings (none policy: never)", registry=r)
        self.topology_manager_admission_requests = Counter(
            "kubelet_topology_manager_admission_requests", "Pods the topology manager admitted or rejected",
            registry=r)
        self.topology_manager_admission_errors = Counter(
            "kubelet_topology_manager_admission_errors", "Pods the topology manager rejected", registry=r)
        self.topology_manager_admission_duration = Histogram(
            "kubelet_topology_manager_admission_duration_ms", "Milliseconds a topology manager admission took",
            buckets=TOPOLOGY_ADMISSION_BUCKETS, registry=r)
        # image volumes (GA in 1.36, registered always): this agent mounts none, a pod asking for one fails
        self.image_volume_requested = Counter(
            "kubelet_image_volume_requested", "Image volumes containers asked for", registry=r)
        self.image_volume_mounted_succeed = Counter(
            "kubelet_image_volume_mounted_succeed", "Image volumes mounted", registry=r)
        self.image_volume_mounted_errors = Counter(
            "kubelet_image_volume_mounted_errors", "Image volumes that failed to mount", registry=r)
        self.pod_watch_events_dropped = Counter(
            "kubelet_pod_watch_events_dropped", "Pods API watch events dropped (no pods API here: never)",
            registry=r)
        # this agent's own
        self.static_pod_manifest_errors = Counter(
            "minikubelet_static_pod_manifest_errors",
            "Static pod manifests rejected (unparsable or invalid), by reason",
            ["reason"], registry=r,
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
            ["success"], buckets=RESIZE_BUCKETS, registry=r,
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
        self.node = NodeMetrics(r)  # the node managers' families (metrics_node.py)
        self.pod_startup = PodStartupLatency(self, now)
        self.node_startup_latency = NodeStartupLatency(self, now, boot_time())


def boot_time(stat: str = "/proc/stat") -> float:
    """The machine's boot time (Unix seconds, the kernel's btime); 0 when unknown."""
    try:
        with open(stat, encoding="ascii") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


class NodeStartupLatency:
    """kubelet_node_startup_*: boot to the agent's start, to the first registration attempt, to the Node's
    creation (set only when this agent created it), to its first status write with Ready true."""

    def __init__(self, metrics: Metrics, now: Callable[[], float], boot: float) -> None:
        self._metrics = metrics
        self._now = now
        self._boot = boot
        self._started = now()
        self._attempt = 0.0
        self._registered = 0.0
        self._ready = 0.0

    def attempt_register(self) -> None:
        if not self._attempt:
            self._attempt = self._now()

    def registered_new_node(self) -> None:
        if not self._attempt or self._registered:
            return
        self._registered = self._now()
        m = self._metrics
        if self._boot:
            m.node_startup_pre_kubelet.set(self._started - self._boot)
        m.node_startup_pre_registration.set(self._attempt - self._started)
        m.node_startup_registration.set(self._registered - self._attempt)

    def node_ready(self) -> None:
        if not self._registered or self._ready:
            return
        self._ready = self._now()
        self._metrics.node_startup_post_registration.set(self._ready - self._registered)
        if self._boot:
            self._metrics.node_startup.set(self._ready - self._boot)


@dataclass
class _PodStart:
    pull_starts: list[float] = field(default_factory=list)
    pulls: list[tuple[float, float]] = field(default_factory=list)
    init_started: float = 0.0
    init_total: float = 0.0
    observed_running: float = 0.0  # when a status write first showed every container running
    recorded: bool = False


def _containers_started(pod: Mapping[str, Any]) -> bool:
    return all((s.get("state") or {}).get("running", {}).get("startedAt")
               for s in (pod.get("status") or {}).get("containerStatuses") or [])


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _stateful(pod: Mapping[str, Any]) -> bool:
    """A volume other than secret, configMap, downwardAPI, emptyDir and projected."""
    light = ("secret", "configMap", "downwardAPI", "emptyDir", "projected")
    return any(not any(k in v for k in light) for v in (pod.get("spec") or {}).get("volumes") or [])


def _pulling_time(sessions: list[tuple[float, float]]) -> float:
    """The union of the pull sessions' intervals, in the order they ended."""
    total, end = 0.0, 0.0
    for i, (s, e) in enumerate(sessions):
        if i == 0 or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


class PodStartupLatency:
    """The pod start SLIs as the kubelet's startup latency tracker measures them: from the pod's creation to
    the API watch delivering it with every container running (after a status write of this agent showed that),
    less the image pulls and the init containers' run time for the SLI. Static pods are not measured."""

    def __init__(self, metrics: Metrics, now: Callable[[], float]) -> None:
        self._metrics = metrics
        self._now = now
        self._pods: dict[str, _PodStart] = {}
        self._excluded: set[str] = set()
        self._first_network_seen = False

    def observed_on_watch(self, pod: Mapping[str, Any], when: float | None = None) -> None:
        """The API source delivered `pod` (an add or an update, status included)."""
        when = self._now() if when is None else when
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        uid = str(meta.get("uid", ""))
        if status.get("phase") in ("Failed", "Succeeded"):
            self._pods.pop(uid, None)
            return
        state = self._pods.get(uid)
        if state is None:
            if uid in self._excluded or status.get("startTime"):
                return
            if _unschedulable(pod):
                self._excluded.add(uid)
            else:
                self._pods[uid] = _PodStart()
            return
        if _unschedulable(pod):
            del self._pods[uid]
            self._excluded.add(uid)
            return
        if not state.observed_running or state.recorded or not _containers_started(pod):
            return
        created = parse_time(meta.get("creationTimestamp"))
        if created is None:
            return
        total = when - created
        sli = total - _pulling_time(state.pulls) - state.init_total
        self._metrics.pod_start_total_duration.observe(total)
        if not _stateful(pod):
            self._metrics.pod_start_sli_duration.observe(sli)
            if not (pod.get("spec") or {}).get("hostNetwork") and not self._first_network_seen:
                self._metrics.first_network_pod_start_sli_duration.set(sli)
                self._first_network_seen = True
        state.recorded = True

    def image_pull_started(self, uid: str) -> None:
        state = self._pods.get(uid)
        if state is not None:
            state.pull_starts.append(self._now())

    def image_pull_finished(self, uid: str) -> None:
        state = self._pods.get(uid)
        if state is not None and state.pull_starts:
            state.pulls.append((state.pull_starts.pop(0), self._now()))

    def init_container_started(self, uid: str, at: float) -> None:
        state = self._pods.get(uid)
        if state is not None:
            state.init_started = at

    def init_container_finished(self, uid: str, at: float) -> None:
        state = self._pods.get(uid)
        if state is not None and state.init_started:
            state.init_total += max(0.0, at - state.init_started)
            state.init_started = 0.0

    def status_written(self, pod: Mapping[str, Any]) -> None:
        """A status write to the API server succeeded; `pod` is the object it returned."""
        state = self._pods.get(str((pod.get("metadata") or {}).get("uid", "")))
        if state is not None and not state.recorded and not state.observed_running and _containers_started(pod):
            state.observed_running = self._now()

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)
        self._excluded.discard(uid)
