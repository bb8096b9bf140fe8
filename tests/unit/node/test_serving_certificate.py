"""serverTLSBootstrap: the kubelet-serving CSR against the test API server's CSR controller, and its renewal."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path

from cryptography import x509

from minikubelet.base.clock import FakeClock, RealClock
from minikubelet.node.certificates import rotation_deadline
from minikubelet.node.serving_certificate import ServingCertificateManager, serving_sans
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for, eventually


def test_sans_are_the_node_addresses_sorted_as_upstream() -> None:
    sans = serving_sans([("Hostname", "node-b"), ("InternalIP", "10.0.0.9"), ("ExternalIP", "10.0.0.10"),
                         ("InternalDNS", "node-a.internal"), ("Hostname", "192.168.1.1"), ("InternalIP", "not-an-ip"),
                         ("ExternalDNS", ""), ("InternalIP", "10.0.0.9")])
    assert sans == [("DNS", "node-a.internal"), ("DNS", "node-b"), ("IP", "10.0.0.10"), ("IP", "10.0.0.9"),
                    ("IP", "192.168.1.1")]


async def test_serving_certificate_by_csr(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    issued: list[str] = []
    manager = ServingCertificateManager(str(tmp_path / "pki"), "n1", lambda: [("InternalIP", "10.1.2.3"),
                                                                             ("Hostname", "n1")],
                                        RealClock(), client, issued.append)
    try:
        assert manager.current() is None
        pair = await manager.request()
    finally:
        await client.close()
    [csr] = (await api_server.admin().list("certificatesigningrequests", api_version="certificates.k8s.io/v1"))["items"]
    assert csr["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
    assert csr["spec"]["usages"] == ["digital signature", "server auth"]
    assert csr["spec"]["username"] == "system:node:n1"
    request = x509.load_pem_x509_csr(base64.b64decode(csr["spec"]["request"]))
    assert request.subject.rfc4514_string() == "CN=system:node:n1,O=system:nodes"
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["n1"]
    assert [str(i) for i in sans.get_values_for_type(x509.IPAddress)] == ["10.1.2.3"]
    assert issued == [str(tmp_path / "pki" / "kubelet-server-current.pem")]
    assert manager.current() == pair  # kept for the next start
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(issued[0])  # the bundle is what the listener loads


async def test_renewed_at_the_rotation_deadline(api_server: ApiServer, tmp_path: Path) -> None:
    clock = FakeClock(start=RealClock().now())
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    issued: list[str] = []
    manager = ServingCertificateManager(str(tmp_path / "pki"), "n1", lambda: [("InternalIP", "10.1.2.3")], clock,
                                        client, issued.append)
    task = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: manager.issued == 1, what="the first certificate")
        first = manager.current()
        assert first is not None
        await asyncio.sleep(0.1)
        assert manager.issued == 1  # nothing more until the deadline
        clock.advance(rotation_deadline(first, jitter=1.0) - clock.now() + 1)
        # (the signer dates certificates by the real clock, behind the advanced fake one, so renewals go on)
        await eventually(lambda: manager.issued >= 2, what="the renewal")
        task.cancel()
        assert manager.current() != first and len(issued) == manager.issued
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_no_address_no_csr(api_server: ApiServer, tmp_path: Path) -> None:
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    manager = ServingCertificateManager(str(tmp_path / "pki"), "n1", lambda: [("InternalIP", "")], RealClock(),
                                        client, lambda _p: None)
    try:
        try:
            await manager.request()
        except Exception as exc:
            assert "no node address" in str(exc)
        else:
            raise AssertionError("a CSR without SANs was sent")
    finally:
        await client.close()
    assert (await api_server.admin().list("certificatesigningrequests",
                                          api_version="certificates.k8s.io/v1"))["items"] == []
