"""The node metrics endpoints end to end: a node joined by TLS bootstrap (client and serving certificates from
CSRs) runs a pod with volumes and an exec readiness probe on the real runtime; /metrics and /metrics/probes,
scraped through the API server's node proxy (10250) and on the read-only port, are compared with the recorded
v1.36 kubelet families, and every kubernetes-mixin kubelet selector is evaluated against the scrape."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from tests.apiserver import ApiServer
from tests.apiserver.proxy import KubeletProxy
from tests.images import BUSYBOX_IMAGE
from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, free_port, registered_node, stop_and_clean
from tests.metrics_reference import Family, Sample, compare, matches, parse, selectors

docker = agent_env.docker
api = agent_env.api
pytestmark = pytest.mark.integration

# Served families whose first series needs an event this scenario does not cause (upstream's render nothing
# before it either): a failed or retried call, an eviction, a preemption, a rejected admission, a resize...
EVENT_ONLY = frozenset({
    "rest_client_request_retries_total", "kubelet_runtime_operations_errors_total",
    "kubelet_started_containers_errors_total", "kubelet_evictions", "kubelet_eviction_stats_age_seconds",
    "kubelet_preemptions", "kubelet_admission_rejections_total", "kubelet_image_pull_duration_seconds", "kubelet_image_garbage_collected_total",
    "kubelet_run_podsandbox_errors_total", "kubelet_terminated_containers_total", "kubelet_restarted_pods_total",
    "kubelet_websocket_streaming_requests_total", "kubelet_container_requested_resizes_total",
    "kubelet_pod_resize_duration_milliseconds", "kubelet_pod_pending_resizes", "kubelet_pod_infeasible_resizes_total",
    "kubelet_pod_deferred_accepted_resizes_total",
    "rest_client_exec_plugin_call_total",  # a kubeconfig with an exec credential plugin
    # bearer tokens: the API server's proxy authenticates with its client certificate
    "apiserver_delegated_authn_request_total", "apiserver_delegated_authn_request_duration_seconds",
    "authentication_token_cache_request_total", "authentication_token_cache_request_duration_seconds",
    "authentication_token_cache_fetch_total", "authentication_token_cache_active_fetch_count",
})


class BootstrappedAgent(AgentProcess):
    """TLS bootstrap, rotateCertificates and serverTLSBootstrap on; 10250 behind webhook authn/authz."""

    def __init__(self, base: Path, docker_host: str, api: ApiServer) -> None:
        super().__init__(base, docker_host)
        self.api_port = free_port()
        bootstrap = api.write_kubeconfig(base / "bootstrap.conf", api.add_bootstrap_token())
        self.args = ["--bootstrap-kubeconfig", str(bootstrap), "--kubeconfig", str(base / "kubelet.conf"),
                     "--node-ip", "127.0.0.1"]
        self.extra = {
            "port": self.api_port, "rotateCertificates": True, "serverTLSBootstrap": True,
            "authentication": {"x509": {"clientCAFile": str(api.ca_file)},
                               "webhook": {"enabled": True, "cacheTTL": "2m"}, "anonymous": {"enabled": False}},
            "authorization": {"mode": "Webhook"},
        }


def _pod(node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probed", "namespace": "default",
                                                             "labels": {"app": "probed"}},
            "spec": {"nodeName": node, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "volumes": [{"name": "scratch", "emptyDir": {}},
                                 {"name": "info", "downwardAPI": {"defaultMode": 420, "items": [
                                     {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}],
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sh", "-c", "echo hello; while true; do sleep 1; done"],
                                     "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"},
                                                      {"name": "info", "mountPath": "/info"}],
                                     "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}}]}}


def _series(samples: list[Sample], name: str) -> list[Sample]:
    return [s for s in samples if s.name == name]


async def test_scrapes_match_the_kubelet_and_every_mixin_selector_finds_its_series(
        tmp_path: Path, api: ApiServer, docker: aiodocker.Docker) -> None:
    api.kubelet_proxy = KubeletProxy(api, kubelet_ca=api.ca.cert_pem)
    agent = BootstrappedAgent(tmp_path / "agent", agent_env.docker_host(), api)
    admin = api.admin()
    agent.start()
    try:
        await agent.wait_for("the Node registered", functools.partial(registered_node, admin, agent.node), timeout=60)
        await admin.create(_pod(agent.node))

        async def ready() -> bool:
            pod = await admin.get("pods", "probed", "default")
            return any(c["type"] == "Ready" and c["status"] == "True"
                       for c in (pod.get("status") or {}).get("conditions", []))

        await agent.wait_for("the probed pod Ready", ready, timeout=90)

        async def proxied(path: str) -> str | None:
            reply = await admin.request("GET", f"/api/v1/nodes/{agent.node}/proxy{path}")
            return reply.body if reply.status == 200 and isinstance(reply.body, str) else None

        async def scrape_served_certificate() -> str | None:
            text = await proxied("/metrics")
            # the serving certificate issued and served (its TTL finite) and the stats pass's log bytes in
            return text if text and "kubelet_certificate_manager_server_ttl_seconds +Inf" not in text and \
                "kubelet_container_log_filesystem_used_bytes{" in text else None

        text = await agent.wait_for("a scrape with the serving certificate", scrape_served_certificate, timeout=60)
        probes = await proxied("/metrics/probes")
        assert probes is not None
        status, plain = await agent.get_text("/metrics")
        assert status == 200
        status, plain_probes = await agent.get_text("/metrics/probes")
        assert status == 200
        stats_bodies: dict[str, str] = {}
        for path in ("/metrics/cadvisor", "/metrics/resource"):
            body = await proxied(path)
            assert body is not None and "_created" not in body, path
            stats_bodies[path] = body
    finally:
        await stop_and_clean(agent, docker)

    families, samples = parse(text)
    # the issue's comparison table, printed for docs/metrics.md (pytest -s): families per endpoint in this scrape
    for path, body in (("/metrics", text), ("/metrics/probes", probes), *stats_bodies.items()):
        print(f"families {path}: {len(parse(body)[0])}")
    problems = compare(families, "/metrics", EVENT_ONLY)
    probe_families, probe_samples = parse(probes)
    problems += compare(probe_families, "/metrics/probes", frozenset())
    plain_families, _ = parse(plain)
    assert set(plain_families) ^ set(families) <= {"kubelet_http_requests_total", "kubelet_http_requests_duration_seconds",
                                                   "kubelet_http_inflight_requests"}
    assert set(parse(plain_probes)[0]) == set(probe_families)
    assert "_created" not in text + probes + plain + plain_probes

    # computed values, read back
    [node_name] = _series(samples, "kubelet_node_name")
    assert node_name.labels == {"node": agent.node} and node_name.value == 1
    [client_ttl] = _series(samples, "kubelet_certificate_manager_client_ttl_seconds")
    [server_ttl] = _series(samples, "kubelet_certificate_manager_server_ttl_seconds")
    assert 0 < client_ttl.value < math.inf and 0 < server_ttl.value < math.inf
    volumes = {(s.labels["plugin_name"], s.labels["state"]): s.value
               for s in _series(samples, "volume_manager_total_volumes")}
    for plugin in ("kubernetes.io/empty-dir", "kubernetes.io/downward-api"):
        assert volumes[(plugin, "actual_state_of_world")] == 1 and volumes[(plugin, "desired_state_of_world")] == 1
    mounts = {s.labels["volume_plugin"] for s in _series(samples, "storage_operation_duration_seconds_count")
              if s.labels["operation_name"] == "volume_mount" and s.labels["status"] == "success"}
    assert {"kubernetes.io/empty-dir", "kubernetes.io/downward-api"} <= mounts
    assert any(s.labels["operation_type"] == "create" and s.value >= 1
               for s in _series(samples, "kubelet_cgroup_manager_duration_seconds_count"))
    codes = {s.labels["code"] for s in _series(samples, "rest_client_requests_total")}
    assert {"200", "201"} <= codes
    assert {s.labels["code"] for s in _series(samples, "apiserver_delegated_authz_request_total")} == {"201"}
    [expiry] = _series(samples, "apiserver_client_certificate_expiration_seconds_count")
    assert expiry.value >= 1  # the API server's kubelet client certificate, on each proxied request
    [rss] = _series(samples, "process_resident_memory_bytes")
    assert rss.value > 10 << 20
    [probe] = [s for s in probe_samples if s.name == "prober_probe_total"]
    assert probe.labels["probe_type"] == "Readiness" and probe.labels["result"] == "successful" and probe.value >= 1

    unmatched = []
    for sel in selectors():
        if sel.reads != "kubelet" or sel.status.startswith("n/a"):
            continue
        found = any(matches(sel, s) for s in samples)
        if sel.needs == "series" and not found:
            unmatched.append(f"{sel.where}: {sel.text()}")
        elif not found and _family_of(sel.series, families) is None and sel.series not in EVENT_ONLY:
            unmatched.append(f"{sel.where}: {sel.text()} (its family is not exposed)")
    problems += [f"no series for {u}" for u in unmatched]
    # each line ends with the reference's owner column: the part of the work that serves the family
    assert not problems, "\n".join(problems)


def _family_of(series: str, families: dict[str, Family]) -> Family | None:
    for suffix in ("", "_bucket", "_count", "_sum"):
        if suffix and series.endswith(suffix) and series[: -len(suffix)] in families:
            return families[series[: -len(suffix)]]
    return families.get(series)
