"""kubelet_cgroup_manager_duration_seconds from the cgroup manager's real writes, kubelet_pleg_relist_interval_seconds
from relists, the container log bytes from a stats snapshot, and /metrics/probes on the 10250 API."""

from __future__ import annotations

from pathlib import Path

from cri.fake import FakeRuntime
from minikubelet.base.clock import FakeClock
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.metrics import Metrics
from minikubelet.metrics_node import NodeMetrics
from minikubelet.runtime.pleg import PLEG
from minikubelet.server.app import KubeletServer
from minikubelet.server.auth import AlwaysAllow, Authenticator
from minikubelet.server.kubelet_api import KubeletAPI
from minikubelet.services.metrics import log_usage
from minikubelet.stats.snapshot import ContainerEntry, Fs, NodeEntry, PodEntry, Snapshot
from probes.metrics import ProbeIdentity, ProbeMetrics
from probes.result import ProbeKind, Result
from tests.unit.cgroups.test_manager import UID_B, make, pods
from tests.unit.cgroups.test_manager import root as root
from tests.unit.server.api_client import serve_api


def count(r: CollectorRegistry, operation: str) -> float:
    return r.get_sample_value("kubelet_cgroup_manager_duration_seconds_count", {"operation_type": operation}) or 0.0


def test_cgroup_manager_times_each_create_update_and_destroy(root: Path, tmp_path: Path) -> None:
    r = CollectorRegistry()
    node = NodeMetrics(r)
    m = make(root, tmp_path)
    m.observe = node.cgroup_operation
    g, b, e = pods()
    m.ensure_hierarchy([g, b, e])
    assert (count(r, "create"), count(r, "update")) == (3, 0)  # kubepods, burstable, besteffort
    m.ensure_pod(b)
    assert (count(r, "create"), count(r, "update")) == (4, 0)
    m.update_qos([g, b, e])
    m.ensure_pod(b)  # exists: resized
    assert (count(r, "create"), count(r, "update")) == (4, 3)
    m.remove_pod(UID_B)
    m.remove_pod(UID_B)  # gone already: nothing to destroy
    assert count(r, "destroy") == 1
    assert r.get_sample_value("kubelet_cgroup_manager_duration_seconds_bucket",
                              {"operation_type": "create", "le": "10.0"}) == 4


async def test_relist_interval_runs_from_one_relist_start_to_the_next() -> None:
    clock = FakeClock()
    metrics = Metrics()
    pleg = PLEG(FakeRuntime(clock), clock, metrics, lambda _uid: None)
    interval = "kubelet_pleg_relist_interval_seconds_count"
    await pleg.relist()
    assert metrics.registry.get_sample_value(interval) == 0  # the first has no predecessor
    await pleg.relist()
    await pleg.relist()
    assert metrics.registry.get_sample_value(interval) == 2
    assert metrics.registry.get_sample_value("kubelet_pleg_relist_duration_seconds_count") == 3


def test_container_log_bytes_from_the_snapshot() -> None:
    logs = Fs(time=1.0, capacity=None, used=4096)
    pod = PodEntry("web", "ns", "u1", 0.0, "sb", "pause", None, None,
                   (ContainerEntry("main", "c1", "busybox", 0.0, None, logs=logs),
                    ContainerEntry("side", "c2", "busybox", 0.0, None)))
    snap = Snapshot(time=1.0, node=NodeEntry("n1", 0.0, 1 << 30, 2, None, None, 0.0), pods=(pod,))
    assert [(u.uid, u.namespace, u.pod, u.container, u.used_bytes) for u in log_usage(snap)] == [
        ("u1", "ns", "web", "main", 4096)]
    assert list(log_usage(None)) == []


async def test_probe_metrics_on_the_kubelet_api_with_upstream_buckets() -> None:
    probes = CollectorRegistry()
    ProbeMetrics(probes).record(ProbeIdentity(ProbeKind.READINESS, "main", "web", "ns", "u1"), Result.SUCCESS, 0.03)
    base = KubeletServer(lambda: [], _no_checks, CollectorRegistry(), lambda _uid: [], probes)
    api = KubeletAPI(base, "n1", lambda: [], FakeRuntime(FakeClock()), None, Authenticator(anonymous=True),
                     AlwaysAllow())
    client = await serve_api(api)
    try:
        r = await client.get("/metrics/probes")
        text = await r.text()
    finally:
        await client.close()
    assert r.status == 200
    assert ('prober_probe_total{probe_type="Readiness",result="successful",container="main",pod="web",'
            'namespace="ns",pod_uid="u1"} 1\n') in text
    les = [line.split('le="')[1].split('"')[0] for line in text.splitlines()
           if line.startswith("prober_probe_duration_seconds_bucket")]
    assert les == ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"]


async def _no_checks() -> list[tuple[str, str | None]]:
    return []
