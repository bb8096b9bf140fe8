"""The agent's /metrics registry: the kubelet families (metrics.py, metrics_node.py), and the process-wide ones
upstream registers at start: process_*, kubernetes_build_info, kubernetes_feature_enabled, rest_client_*,
kubelet_node_name and kubelet_container_log_filesystem_used_bytes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.kubeapi import client_metrics
from minikubelet.metrics import Metrics
from minikubelet.metrics_node import ContainerLogCollector, ContainerLogUsage, use_registry
from minikubelet.metrics_process import ComponentCollector, ProcessCollector
from minikubelet.stats.provider import StatsProvider
from minikubelet.stats.snapshot import Snapshot


def log_usage(snapshot: Snapshot | None) -> Iterator[ContainerLogUsage]:
    """Each measured container's log bytes, from the stats pass (upstream reads the same from its summary)."""
    if snapshot is None:
        return
    for pod in snapshot.pods:
        for c in pod.containers:
            if c.logs is not None and c.logs.used is not None:
                yield ContainerLogUsage(pod.uid, pod.namespace, pod.name, c.name, c.logs.used)


def agent_metrics(node_name: str, config: KubeletConfig, stats: Callable[[], StatsProvider | None],
                  now: Callable[[], float]) -> Metrics:
    metrics = Metrics(now=now)
    r = metrics.registry
    metrics.node.node_name.labels(node_name).set(1)
    r.register(ProcessCollector())
    r.register(ComponentCollector(config.feature_gates))
    r.register(ContainerLogCollector(lambda: log_usage(s.snapshot if (s := stats()) is not None else None)))
    client_metrics.register(r)
    use_registry(r)  # the certificate managers register into it when they are built
    return metrics
