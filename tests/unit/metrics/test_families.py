"""The kubelet_* families as a scrape shows them: the kubelet's names, types, label names and buckets, present
from the start where the kubelet's are, and the counters the kubelet names without _total kept so."""

from __future__ import annotations

import pytest

from minikubelet.metrics import (
    DEF_BUCKETS,
    IMAGE_PULL_BUCKETS,
    POD_START_BUCKETS,
    Metrics,
    admission_rejection_reason,
    boot_time,
    image_size_bucket,
)
from tests.unit.metrics.scrape import scrape, value

# family -> type, as upstream v1.36 registers them (pkg/kubelet/metrics, pkg/kubelet/server/metrics)
UPSTREAM_TYPES = {
    "kubelet_pod_start_duration_seconds": "histogram",
    "kubelet_pod_worker_duration_seconds": "histogram",
    "kubelet_pod_worker_start_duration_seconds": "histogram",
    "kubelet_pod_status_sync_duration_seconds": "histogram",
    "kubelet_containers_per_pod_count": "histogram",
    "kubelet_first_network_pod_start_sli_duration_seconds": "gauge",
    "kubelet_started_pods_total": "counter",
    "kubelet_started_pods_errors_total": "counter",
    "kubelet_started_user_namespaced_pods_total": "counter",
    "kubelet_started_user_namespaced_pods_errors_total": "counter",
    "kubelet_started_containers_total": "counter",
    "kubelet_started_containers_errors_total": "counter",
    "kubelet_terminated_containers_total": "counter",
    "kubelet_run_podsandbox_duration_seconds": "histogram",
    "kubelet_run_podsandbox_errors_total": "counter",
    "kubelet_running_pods": "gauge",
    "kubelet_running_containers": "gauge",
    "kubelet_desired_pods": "gauge",
    "kubelet_active_pods": "gauge",
    "kubelet_mirror_pods": "gauge",
    "kubelet_managed_ephemeral_containers": "gauge",
    "kubelet_working_pods": "gauge",
    "kubelet_orphaned_runtime_pods_total": "counter",
    "kubelet_restarted_pods_total": "counter",
    "kubelet_pleg_relist_duration_seconds": "histogram",
    "kubelet_pleg_discard_events": "counter",
    "kubelet_pleg_last_seen_seconds": "gauge",
    "kubelet_runtime_operations_total": "counter",
    "kubelet_runtime_operations_duration_seconds": "histogram",
    "kubelet_runtime_operations_errors_total": "counter",
    "kubelet_image_pull_duration_seconds": "histogram",
    "kubelet_image_garbage_collected_total": "counter",
    "kubelet_admission_rejections_total": "counter",
    "kubelet_evictions": "counter",
    "kubelet_eviction_stats_age_seconds": "histogram",
    "kubelet_preemptions": "counter",
    "kubelet_lifecycle_handler_http_fallbacks_total": "counter",
    "kubelet_sleep_action_terminated_early_total": "counter",
    "kubelet_graceful_shutdown_start_time_seconds": "gauge",
    "kubelet_graceful_shutdown_end_time_seconds": "gauge",
    "kubelet_node_startup_pre_kubelet_duration_seconds": "gauge",
    "kubelet_node_startup_pre_registration_duration_seconds": "gauge",
    "kubelet_node_startup_registration_duration_seconds": "gauge",
    "kubelet_node_startup_post_registration_duration_seconds": "gauge",
    "kubelet_node_startup_duration_seconds": "gauge",
    "kubelet_orphan_pod_cleaned_volumes": "gauge",
    "kubelet_orphan_pod_cleaned_volumes_errors": "gauge",
    "kubelet_cgroup_version": "gauge",
    "kubelet_cpu_manager_pinning_requests_total": "counter",
    "kubelet_cpu_manager_pinning_errors_total": "counter",
    "kubelet_cpu_manager_shared_pool_size_millicores": "gauge",
    "kubelet_cpu_manager_exclusive_cpu_allocation_count": "gauge",
    "kubelet_memory_manager_pinning_requests_total": "counter",
    "kubelet_memory_manager_pinning_errors_total": "counter",
    "kubelet_topology_manager_admission_requests_total": "counter",
    "kubelet_topology_manager_admission_errors_total": "counter",
    "kubelet_topology_manager_admission_duration_ms": "histogram",
    "kubelet_pod_watch_events_dropped_total": "counter",
    "kubelet_http_requests_total": "counter",
    "kubelet_http_requests_duration_seconds": "histogram",
    "kubelet_http_inflight_requests": "gauge",
    "kubelet_pleg_pod_relist_duration_seconds": "histogram",
    "kubelet_evented_pleg_connection_error_count": "counter",
    "kubelet_evented_pleg_connection_success_count": "counter",
    "kubelet_evented_pleg_connection_latency_seconds": "histogram",
    "kubelet_image_volume_requested_total": "counter",
    "kubelet_image_volume_mounted_succeed_total": "counter",
    "kubelet_image_volume_mounted_errors_total": "counter",
    "kubelet_metrics_provider": "gauge",
    "kubelet_volume_metric_collection_duration_seconds": "histogram",
    "kubelet_websocket_streaming_requests_total": "counter",
}
# vectors (labelled) and the unlabelled histogram vectors: absent until their first child, as upstream's
UPSTREAM_LABELS = {
    "kubelet_pod_worker_duration_seconds": {"operation_type", "le"},
    "kubelet_started_containers_total": {"container_type"},
    "kubelet_started_containers_errors_total": {"container_type", "code"},
    "kubelet_terminated_containers_total": {"container_type", "exit_code", "reason"},
    "kubelet_run_podsandbox_duration_seconds": {"runtime_handler", "le"},
    "kubelet_run_podsandbox_errors_total": {"runtime_handler"},
    "kubelet_running_containers": {"container_state"},
    "kubelet_desired_pods": {"static"},
    "kubelet_active_pods": {"static"},
    "kubelet_working_pods": {"lifecycle", "config", "static"},
    "kubelet_restarted_pods_total": {"static"},
    "kubelet_runtime_operations_total": {"operation_type"},
    "kubelet_runtime_operations_duration_seconds": {"operation_type", "le"},
    "kubelet_runtime_operations_errors_total": {"operation_type"},
    "kubelet_image_pull_duration_seconds": {"image_size_in_bytes", "le"},
    "kubelet_image_garbage_collected_total": {"reason"},
    "kubelet_admission_rejections_total": {"reason"},
    "kubelet_evictions": {"eviction_signal"},
    "kubelet_eviction_stats_age_seconds": {"eviction_signal", "le"},
    "kubelet_preemptions": {"preemption_signal"},
    "kubelet_http_requests_total": {"method", "path", "server_type", "long_running"},
    "kubelet_http_requests_duration_seconds": {"method", "path", "server_type", "long_running", "le"},
    "kubelet_http_inflight_requests": {"method", "path", "server_type", "long_running"},
    "kubelet_volume_metric_collection_duration_seconds": {"metric_source", "le"},
    "kubelet_websocket_streaming_requests_total": {"subresource"},
}
LAZY = {"kubelet_pod_start_sli_duration_seconds", "kubelet_pod_start_total_duration_seconds"}


def test_a_fresh_scrape_has_the_unlabelled_families_at_zero_and_no_labelled_ones() -> None:
    families = scrape(Metrics().registry)
    unlabelled = set(UPSTREAM_TYPES) - set(UPSTREAM_LABELS) - LAZY - {"kubelet_metrics_provider"}
    assert unlabelled <= set(families)
    for name in unlabelled:
        assert families[name].type == UPSTREAM_TYPES[name]
        if families[name].type != "histogram" and name != "kubelet_cgroup_version":
            assert [v for _, _, v in families[name].samples] == [0.0], name
    assert not (set(UPSTREAM_LABELS) | LAZY) & set(families)
    # the one vector the kubelet fills at start: where its container stats come from
    assert families["kubelet_metrics_provider"].samples == [("kubelet_metrics_provider", {"provider": "cadvisor"}, 1.0)]


def _touch_every_vector(m: Metrics) -> None:
    m.pod_worker_duration.labels("sync").observe(0.1)
    m.started_containers.labels("container").inc()
    m.started_containers_errors.labels("container", "ErrImagePull").inc()
    m.terminated_containers.labels("container", "0", "Completed").inc()
    m.run_podsandbox_duration.labels("").observe(0.1)
    m.run_podsandbox_errors.labels("").inc()
    m.running_containers.labels("running").set(1)
    m.desired_pods.labels("").set(1)
    m.active_pods.labels("").set(1)
    m.working_pods.labels("sync", "desired", "").set(1)
    m.restarted_pods.labels("").inc(0)
    m.runtime_operations.labels("version").inc()
    m.runtime_operations_duration.labels("version").observe(0.1)
    m.runtime_operations_errors.labels("version").inc()
    m.image_pull_duration.labels("0-10MB").observe(1)
    m.image_garbage_collected.labels("age").inc()
    m.admission_rejections.labels("OutOfcpu").inc()
    m.evictions.labels("memory.available").inc()
    m.eviction_stats_age.labels("memory.available").observe(1)
    m.preemptions.labels("cpu").inc()
    m.http.requests.labels("GET", "pods", "readonly", "false").inc()
    m.http.duration.labels("GET", "pods", "readonly", "false").observe(0.1)
    m.http.inflight.labels("GET", "pods", "readonly", "false").set(0)
    m.pod_start_sli_duration.observe(1)
    m.pod_start_total_duration.observe(1)
    m.http.volume_stat_duration.labels("du").observe(0.01)
    m.http.websocket_streaming.labels("exec").inc()


def test_every_family_has_the_kubelets_type_and_label_names() -> None:
    m = Metrics()
    _touch_every_vector(m)
    families = scrape(m.registry)
    for name, kind in UPSTREAM_TYPES.items():
        assert families[name].type == kind, name
    for name, labels in UPSTREAM_LABELS.items():
        seen = {k for _, have, _ in families[name].samples for k in have}
        assert seen == labels, name
    for name in LAZY:
        assert families[name].type == "histogram"
        assert {k for _, have, _ in families[name].samples for k in have} == {"le"}


def test_counters_the_kubelet_names_without_total_are_served_so() -> None:
    m = Metrics()
    m.evictions.labels("nodefs.available").inc()
    m.pleg_discard_events.inc(2)
    text = scrape(m.registry)
    assert text["kubelet_evictions"].samples == [("kubelet_evictions", {"eviction_signal": "nodefs.available"}, 1.0)]
    assert text["kubelet_pleg_discard_events"].samples == [("kubelet_pleg_discard_events", {}, 2.0)]
    assert "kubelet_evictions_total" not in text and "kubelet_pleg_discard_events_total" not in text
    assert text["kubelet_evented_pleg_connection_error_count"].samples == [
        ("kubelet_evented_pleg_connection_error_count", {}, 0.0)]
    m.eviction_stats_age.labels("nodefs.available").observe(1)
    # a family whose name merely starts like one of them is left alone
    assert "kubelet_eviction_stats_age_seconds" in scrape(m.registry)


def _buckets(m: Metrics, family: str) -> list[str]:
    return [labels["le"] for name, labels, _ in scrape(m.registry)[family].samples if name.endswith("_bucket")]


@pytest.mark.parametrize(("family", "expected"), [
    ("kubelet_pod_start_duration_seconds", POD_START_BUCKETS),
    ("kubelet_pleg_relist_duration_seconds", DEF_BUCKETS),
    ("kubelet_pod_status_sync_duration_seconds", (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 20, 30, 45, 60)),
    ("kubelet_containers_per_pod_count", (1, 2, 4, 8, 16)),
])
def test_histogram_buckets_are_the_kubelets(family: str, expected: tuple[float, ...]) -> None:
    assert [float(b) for b in _buckets(Metrics(), family)[:-1]] == [float(b) for b in expected]
    assert _buckets(Metrics(), family)[-1] == "+Inf"


def test_vector_buckets_are_the_kubelets() -> None:
    m = Metrics()
    m.image_pull_duration.labels("N/A").observe(3)
    m.runtime_operations_duration.labels("version").observe(0.001)
    families = scrape(m.registry)
    pull = [float(labels["le"]) for n, labels, _ in families["kubelet_image_pull_duration_seconds"].samples
            if n.endswith("_bucket") and labels["le"] != "+Inf"]
    assert pull == list(IMAGE_PULL_BUCKETS)
    runtime = [float(labels["le"]) for n, labels, _ in families["kubelet_runtime_operations_duration_seconds"].samples
               if n.endswith("_bucket") and labels["le"] != "+Inf"]
    assert len(runtime) == 14 and runtime[0] == 0.005 and runtime[1] == pytest.approx(0.0125)
    assert runtime[-1] == pytest.approx(0.005 * 2.5 ** 13)


@pytest.mark.parametrize(("size", "label"), [
    (0, "N/A"), (1, "0-10MB"), (10 << 20, "0-10MB"), ((10 << 20) + 1, "10MB-100MB"), (700 << 20, "500MB-1GB"),
    (25 << 30, "20GB-30GB"), (101 << 30, "GT100GB"),
])
def test_image_size_label(size: int, label: str) -> None:
    assert image_size_bucket(size) == label


@pytest.mark.parametrize(("reason", "label"), [
    ("OutOfcpu", "OutOfcpu"), ("OutOfpods", "OutOfpods"), ("OutOfexample.com/gpu", "OutOfExtendedResources"),
    ("NodeAffinity", "Other"), ("Evicted", "Evicted"), ("NodeShutdown", "NodeShutdown"),
])
def test_admission_rejection_reason_label(reason: str, label: str) -> None:
    assert admission_rejection_reason(reason) == label


def test_the_start_histograms_appear_with_their_first_pod() -> None:
    m = Metrics()
    m.pod_start_total_duration.observe(4.0)
    assert value(m.registry, "kubelet_pod_start_total_duration_seconds_count") == 1.0
    assert "kubelet_pod_start_sli_duration_seconds" not in scrape(m.registry)


def test_boot_time_reads_btime(tmp_path: object) -> None:
    from pathlib import Path

    stat = Path(str(tmp_path)) / "stat"
    stat.write_text("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n")
    assert boot_time(str(stat)) == 1700000000.0
    assert boot_time(str(Path(str(tmp_path)) / "missing")) == 0.0


def test_container_log_bytes_come_from_the_last_stats_pass() -> None:
    from minikubelet.base.prometheus import CollectorRegistry
    from minikubelet.stats.log_metrics import LogMetricsCollector
    from minikubelet.stats.snapshot import ContainerEntry, Fs, NodeEntry, PodEntry, Snapshot

    node = NodeEntry("n", 0.0, 1, 1, None, None, 0.0)
    pod = PodEntry("web", "ns", "u1", 0.0, "sb", "pause", None, None, (
        ContainerEntry("main", "c1", "busybox", 0.0, None, logs=Fs(0.0, None, 4096)),
        ContainerEntry("side", "c2", "busybox", 0.0, None)))
    current: list[Snapshot | None] = [None]
    registry = CollectorRegistry()
    registry.register(LogMetricsCollector(lambda: current[0]))
    assert "kubelet_container_log_filesystem_used_bytes" not in scrape(registry)  # before the first pass
    current[0] = Snapshot(1.0, node, (pod,))
    assert scrape(registry)["kubelet_container_log_filesystem_used_bytes"].samples == [
        ("kubelet_container_log_filesystem_used_bytes",
         {"container": "main", "namespace": "ns", "pod": "web", "uid": "u1"}, 4096.0)]
