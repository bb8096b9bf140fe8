from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from minikubelet.base.clock import RealClock
from minikubelet.kubeapi.kubeconfig import ClientConfig, load_kubeconfig
from minikubelet.kubeapi.rest import ApiError, RestClient
from minikubelet.node.certificates import (
    CertificateError,
    CertificateRotator,
    CertificateStore,
    KeyPair,
    bootstrap_client_certificate,
    client_config_valid,
    csr_outcome,
    rotation_deadline,
)
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import eventually


def _make(cfg: ClientConfig) -> RestClient:
    return RestClient(cfg, RealClock())


async def _bootstrap(api: ApiServer, tmp_path: Path) -> Path:
    bootstrap = api.write_kubeconfig(tmp_path / "bootstrap.conf", api.add_bootstrap_token())
    kubeconfig = tmp_path / "kubelet.conf"
    await bootstrap_client_certificate(str(kubeconfig), str(bootstrap), str(tmp_path / "pki"), "n1", RealClock(), _make)
    return kubeconfig


async def test_tls_bootstrap_end_to_end(api_server: ApiServer, tmp_path: Path) -> None:
    kubeconfig = await _bootstrap(api_server, tmp_path)
    assert stat.S_IMODE(os.stat(kubeconfig).st_mode) == 0o600
    current = tmp_path / "pki" / "kubelet-client-current.pem"
    assert current.is_symlink() and stat.S_IMODE(os.stat(current).st_mode) == 0o600
    assert not (tmp_path / "pki" / "kubelet-client.key.tmp").exists()
    cert = x509.load_pem_x509_certificate(current.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n1"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
    csr = (await api_server.admin().list("certificatesigningrequests", api_version="certificates.k8s.io/v1"))["items"][0]
    assert csr["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
    assert csr["spec"]["usages"] == ["digital signature", "client auth"]
    assert csr["spec"]["username"] == "system:bootstrap:abcdef"
    requests = [(m, p) for u, m, p in api_server.handler.requests if u.startswith("system:bootstrap")]
    # create, then list (and watch, if not yet issued) that one CSR, as tls-bootstrap.json
    assert requests[0][0] == "POST"
    assert requests[1] == ("GET", f"/apis/certificates.k8s.io/v1/certificatesigningrequests?fieldSelector="
                                  f"metadata.name%3D{csr['metadata']['name']}")
    # the issued certificate is the node's identity now
    client = _make(load_kubeconfig(str(kubeconfig)))
    try:
        with pytest.raises(ApiError) as e:
            await client.get("/api/v1/nodes/n1")
        assert e.value.not_found  # a node may read its own Node: authenticated as system:node:n1
        with pytest.raises(ApiError) as e:
            await client.get("/api/v1/nodes/n2")
        assert e.value.forbidden
    finally:
        await client.close()
    # a second start finds the kubeconfig valid and sends no CSR
    before = len(api_server.handler.requests)
    await _bootstrap(api_server, tmp_path)
    assert len(api_server.handler.requests) == before


async def test_rotation_replaces_the_pair_and_reconnects(api_server: ApiServer, tmp_path: Path) -> None:
    kubeconfig = await _bootstrap(api_server, tmp_path)
    store = CertificateStore(str(tmp_path / "pki"))
    first = store.current()
    assert first is not None
    client = _make(load_kubeconfig(str(kubeconfig)))
    reloaded: list[bool] = []

    async def on_rotated() -> None:
        reloaded.append(True)
        await client.reload()

    try:
        rotator = CertificateRotator(store, "n1", RealClock(), client, on_rotated)
        second = await rotator.rotate()
        assert second.cert_pem != first.cert_pem and reloaded == [True]
        assert store.current() == second
        with pytest.raises(ApiError) as e:
            await client.get("/api/v1/nodes/n1")
        assert e.value.not_found
        node_csrs = [u for u, m, p in api_server.handler.requests if m == "POST" and "certificatesigning" in p]
        assert node_csrs == ["system:bootstrap:abcdef", "system:node:n1"]
    finally:
        await client.close()


def test_rotation_deadline_is_70_to_90_percent_of_the_lifetime() -> None:
    pair = KeyPair(b"", b"", 1000.0, 2000.0)
    assert rotation_deadline(pair, 0.0) == 1700.0
    assert rotation_deadline(pair, 0.999999) == pytest.approx(1900.0)
    assert all(1700.0 <= rotation_deadline(pair) < 1900.0 for _ in range(100))


def test_denied_or_failed_csr_is_an_error() -> None:
    with pytest.raises(CertificateError, match="denied, reason: Nope, message: no"):
        csr_outcome({"status": {"conditions": [{"type": "Denied", "reason": "Nope", "message": "no"}]}})
    with pytest.raises(CertificateError, match="failed"):
        csr_outcome({"status": {"conditions": [{"type": "Failed"}]}})
    assert csr_outcome({"status": {"conditions": [{"type": "Approved"}]}}) is None
    assert csr_outcome({"status": {"conditions": [{"type": "Approved"}], "certificate": "Y2VydA=="}}) == b"cert"


def test_a_kubeconfig_without_a_valid_certificate_needs_a_bootstrap(api_server: ApiServer, tmp_path: Path) -> None:
    assert not client_config_valid(str(tmp_path / "missing.conf"), 0)
    token = api_server.write_kubeconfig(tmp_path / "t.conf", api_server.add_bootstrap_token())
    assert not client_config_valid(str(token), 0)
    node = api_server.write_kubeconfig(tmp_path / "n.conf", api_server.node_identity("n1"))
    assert client_config_valid(str(node), 0)
    assert not client_config_valid(str(node), 4_000_000_000)  # after notAfter


async def test_bootstrap_waits_on_the_watch_until_the_csr_is_issued(api_server: ApiServer, tmp_path: Path) -> None:
    await api_server.csr_controller.stop()
    task = asyncio.create_task(_bootstrap(api_server, tmp_path))
    await eventually(lambda: any("watch=true" in p for _, _, p in api_server.handler.requests), what="the CSR watch")
    assert not task.done()
    api_server.csr_controller.start()
    kubeconfig = await asyncio.wait_for(task, 10)
    assert client_config_valid(str(kubeconfig), time.time())
