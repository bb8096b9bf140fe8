"""The certificate managers' families: TTL of the certificate in use, renewal errors, the serving rotation ages."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikubelet.base.clock import FakeClock, RealClock
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.kubeapi.kubeconfig import load_kubeconfig
from minikubelet.kubeapi.rest import RestClient, RetryPolicy
from minikubelet.metrics_node import certificate_metrics, ttl_seconds, use_registry
from minikubelet.metrics_text import render
from minikubelet.node.certificates import CertificateRotator, CertificateStore, rotation_deadline
from minikubelet.node.serving_certificate import ServingCertificateManager
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for, eventually
from tests.unit.node.test_certificates import _bootstrap


@pytest.fixture
def registry() -> Iterator[CollectorRegistry]:
    r = CollectorRegistry()
    use_registry(r)
    yield r
    use_registry(None)


def test_ttl_is_truncated_and_infinite_without_a_certificate() -> None:
    assert ttl_seconds(None, 100.0) == math.inf
    assert ttl_seconds(200.9, 100.0) == 100.0
    assert ttl_seconds(50.5, 100.0) == -49.0


def test_registered_once_per_kind(registry: CollectorRegistry) -> None:
    first = certificate_metrics("server", lambda: 10.0, lambda: 0.0)
    again = certificate_metrics("server", lambda: 20.0, lambda: 0.0)  # a manager built again: rebound
    assert first is again
    assert registry.get_sample_value("kubelet_certificate_manager_server_ttl_seconds") == 20.0
    use_registry(None)
    assert certificate_metrics("client", lambda: None) is None


async def test_serving_certificate_ttl_rotation_and_renewal_errors(api_server: ApiServer, tmp_path: Path,
                                                                   registry: CollectorRegistry) -> None:
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    manager = ServingCertificateManager(str(tmp_path / "pki"), "n1", lambda: [("InternalIP", "10.1.2.3")],
                                        RealClock(), client, lambda _path: None)
    try:
        assert registry.get_sample_value("kubelet_certificate_manager_server_ttl_seconds") == math.inf
        first = await manager.request()
        ttl = registry.get_sample_value("kubelet_certificate_manager_server_ttl_seconds")
        assert ttl is not None and abs(ttl - (first.not_after - time.time())) < 2
        assert registry.get_sample_value("kubelet_certificate_manager_server_rotation_seconds_count") == 0
        await manager.request()
        assert registry.get_sample_value("kubelet_certificate_manager_server_rotation_seconds_count") == 1
        age = registry.get_sample_value("kubelet_certificate_manager_server_rotation_seconds_sum")
        assert age is not None and abs(age - (time.time() - first.not_before)) < 2
        assert "kubelet_server_expiration_renew_errors 0\n" in render(registry).decode()
    finally:
        await client.close()

    failing = client_for(api_server, api_server.node_identity("n2"), tmp_path)
    api_server.faults.fail(500, "POST", "certificatesigningrequests")
    clock = FakeClock()
    broken = ServingCertificateManager(str(tmp_path / "pki2"), "n2", lambda: [("InternalIP", "10.1.2.4")],
                                       clock, failing, lambda _path: None)
    task = asyncio.create_task(broken.run())
    try:
        await eventually(lambda: registry.get_sample_value("kubelet_server_expiration_renew_errors") == 1.0,
                         what="one renewal error")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await failing.close()
    # the manager built again reports into the same families, for its own certificate
    assert registry.get_sample_value("kubelet_certificate_manager_server_ttl_seconds") == math.inf


async def test_client_certificate_ttl_and_renewal_errors(api_server: ApiServer, tmp_path: Path,
                                                         registry: CollectorRegistry) -> None:
    kubeconfig = await _bootstrap(api_server, tmp_path)
    store = CertificateStore(str(tmp_path / "pki"))
    pair = store.current()
    assert pair is not None
    clock = FakeClock(start=time.time())
    client = RestClient(load_kubeconfig(str(kubeconfig)), RealClock(), retry=RetryPolicy(attempts=2, base=0.01, cap=0.02))

    async def on_rotated() -> None:
        await client.reload()

    rotator = CertificateRotator(store, "n1", clock, client, on_rotated)
    assert registry.get_sample_value("kubelet_certificate_manager_client_ttl_seconds") == math.trunc(
        pair.not_after - clock.now())
    api_server.faults.fail(500, "POST", "certificatesigningrequests")
    task = asyncio.create_task(rotator.run())
    try:
        await eventually(lambda: clock.sleepers > 0)
        clock.advance(rotation_deadline(pair, jitter=1.0) - clock.now() + 1)
        await eventually(lambda: registry.get_sample_value(
            "kubelet_certificate_manager_client_expiration_renew_errors") == 1.0, what="one renewal error")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()
    clock.advance(pair.not_after - clock.now() + 1)  # expired: no certificate in use
    assert registry.get_sample_value("kubelet_certificate_manager_client_ttl_seconds") == math.inf
