"""Token discovery against the test API server, which publishes cluster-info and signs it as kubeadm's
control plane does."""

from __future__ import annotations

import pytest
from cryptography import x509

from minikubelet.base.clock import RealClock
from minikubelet.install.bootstrap_token import BootstrapToken
from minikubelet.install.ca_pin import parse_pins, spki_hash
from minikubelet.install.discovery import ClusterInfo, DiscoveryError, discover
from tests.apiserver import ApiServer
from tests.apiserver.client import ApiStatusError
from tests.apiserver.pki import CertificateAuthority

TOKEN = BootstrapToken("abcdef", "0123456789abcdef")


def pin_of(pem: bytes) -> set[str]:
    return parse_pins([spki_hash(x509.load_pem_x509_certificate(pem))])


async def test_valid_token_and_pin_give_the_server_and_ca(api: ApiServer) -> None:
    api.add_bootstrap_token(TOKEN.id, TOKEN.secret)
    for endpoint in (api.url, f"{api.host}:{api.port}", api.url + "/"):
        info = await discover(endpoint, TOKEN, pin_of(api.ca.cert_pem), RealClock(), timeout=0)
        assert info == ClusterInfo(api.url, api.ca.cert_pem)


async def test_wrong_pin_is_refused(api: ApiServer) -> None:
    api.add_bootstrap_token(TOKEN.id, TOKEN.secret)
    with pytest.raises(DiscoveryError, match=r'cluster CA found in cluster-info ConfigMap is invalid: none of the '
                                             r'public keys "sha256:[0-9a-f]{64}" are pinned'):
        await discover(api.url, TOKEN, pin_of(CertificateAuthority().cert_pem), RealClock(), timeout=0)


async def test_wrong_secret_fails_the_signature(api: ApiServer) -> None:
    api.add_bootstrap_token(TOKEN.id, TOKEN.secret)
    with pytest.raises(DiscoveryError, match="failed to verify JWS signature of received cluster info object"):
        await discover(api.url, BootstrapToken(TOKEN.id, "fedcba9876543210"), pin_of(api.ca.cert_pem),
                       RealClock(), timeout=0)


async def test_unknown_token_id_has_no_signature(api: ApiServer) -> None:
    api.add_bootstrap_token(TOKEN.id, TOKEN.secret)
    with pytest.raises(DiscoveryError, match='could not find a JWS signature in the cluster-info ConfigMap for '
                                             'token ID "zzzzzz"'):
        await discover(api.url, BootstrapToken("zzzzzz", TOKEN.secret), pin_of(api.ca.cert_pem), RealClock(),
                       timeout=0)


async def test_deleted_token_loses_its_signature(api: ApiServer) -> None:
    api.add_bootstrap_token(TOKEN.id, TOKEN.secret)
    api.store.delete("secrets", "kube-system", f"bootstrap-token-{TOKEN.id}")
    api.bootstrap_signer.sync()
    with pytest.raises(DiscoveryError, match="could not find a JWS signature"):
        await discover(api.url, TOKEN, pin_of(api.ca.cert_pem), RealClock(), timeout=0)


async def test_tampered_signature_or_kubeconfig_is_refused(api: ApiServer) -> None:
    api.add_bootstrap_token(TOKEN.id, TOKEN.secret)
    api.bootstrap_signer.tamper(TOKEN.id)
    with pytest.raises(DiscoveryError, match="failed to verify JWS signature"):
        await discover(api.url, TOKEN, pin_of(api.ca.cert_pem), RealClock(), timeout=0)
    # a signature that is right for the old kubeconfig, over a kubeconfig that names another server
    api.bootstrap_signer.sync()
    cm = api.store.get("configmaps", "kube-public", "cluster-info")
    assert cm is not None
    cm["data"]["kubeconfig"] = cm["data"]["kubeconfig"].replace(api.url, "https://203.0.113.9:6443")
    api.store.update("configmaps", cm)
    with pytest.raises(DiscoveryError, match="failed to verify JWS signature"):
        await discover(api.url, TOKEN, pin_of(api.ca.cert_pem), RealClock(), timeout=0)


async def test_unsafe_skip_still_checks_the_signature(api: ApiServer) -> None:
    api.add_bootstrap_token(TOKEN.id, TOKEN.secret)
    assert await discover(api.url, TOKEN, set(), RealClock(), timeout=0) == ClusterInfo(api.url, api.ca.cert_pem)
    api.bootstrap_signer.tamper(TOKEN.id)
    with pytest.raises(DiscoveryError, match="failed to verify JWS signature"):
        await discover(api.url, TOKEN, set(), RealClock(), timeout=0)


async def test_unreachable_server_and_plain_http_are_clear_errors(api: ApiServer) -> None:
    await api.stop()
    with pytest.raises(DiscoveryError, match="failed to request the cluster-info ConfigMap"):
        await discover(api.url, TOKEN, pin_of(api.ca.cert_pem), RealClock(), timeout=0)
    with pytest.raises(DiscoveryError, match="discovery needs https"):
        await discover(f"http://{api.host}:{api.port}", TOKEN, set(), RealClock(), timeout=0)


async def test_anonymous_reads_cluster_info_and_nothing_else(api: ApiServer) -> None:
    anonymous = api.client(None)
    cm = await anonymous.get("configmaps", "cluster-info", namespace="kube-public")
    assert set(cm["data"]) == {"kubeconfig"}  # no token yet, so nothing signed
    with pytest.raises(ApiStatusError) as denied:
        await anonymous.get("configmaps", "kube-root-ca.crt", namespace="kube-public")
    assert denied.value.reply.status == 403
