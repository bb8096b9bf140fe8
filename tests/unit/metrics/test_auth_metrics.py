"""The delegated authn/authz families: TokenReviews and SubjectAccessReviews against the test API server by their
answer's code, the token cache's hits and fetches, the remaining lifetime of the client certificates presented."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import pytest
from cryptography import x509

from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.kubeapi.rest import ApiError
from minikubelet.server.auth import Attributes, Authenticator, User, WebhookAuthorizer
from minikubelet.server.auth_metrics import auth_metrics
from minikubelet.server.kubelet_api_wiring import _poster
from tests.apiserver import ApiServer
from tests.unit.kubeapi.helpers import client_for


def value(r: CollectorRegistry, name: str, **labels: str) -> float:
    return r.get_sample_value(name, labels) or 0.0


async def test_reviews_by_code_and_the_token_cache(api_server: ApiServer, tmp_path: Path) -> None:
    r = CollectorRegistry()
    metrics = auth_metrics(r)
    assert auth_metrics(r) is metrics  # registered once per registry
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    authn = Authenticator(token_review=_poster(client, metrics, "authn"), metrics=metrics)
    authz = WebhookAuthorizer(_poster(client, metrics))
    try:
        token = api_server.add_bootstrap_token().token
        assert token is not None
        user = await authn.authenticate(None, f"Bearer {token}")
        assert user is not None and user.name == "system:bootstrap:abcdef"
        await authn.authenticate(None, f"Bearer {token}")  # cached
        await authn.authenticate(None, "Bearer not-a-token")
        await authz.allowed(Attributes(User("someone", ()), "get", "metrics", "n1"))
    finally:
        await client.close()
    assert value(r, "apiserver_delegated_authn_request_total", code="201") == 2
    assert value(r, "apiserver_delegated_authn_request_duration_seconds_count", code="201") == 2
    assert value(r, "apiserver_delegated_authz_request_total", code="201") == 1
    assert value(r, "authentication_token_cache_request_total", status="miss") == 2
    assert value(r, "authentication_token_cache_request_total", status="hit") == 1
    assert value(r, "authentication_token_cache_fetch_total", status="ok") == 2
    assert value(r, "authentication_token_cache_active_fetch_count", status="in_flight") == 0


async def test_a_review_the_api_server_refuses_is_counted_by_its_code(api_server: ApiServer, tmp_path: Path) -> None:
    r = CollectorRegistry()
    metrics = auth_metrics(r)
    client = client_for(api_server, api_server.node_identity("n1"), tmp_path)
    api_server.faults.fail(500, "POST", "tokenreviews")
    authn = Authenticator(token_review=_poster(client, metrics, "authn"), metrics=metrics)
    try:
        with pytest.raises(ApiError):
            await authn.authenticate(None, "Bearer abc")
    finally:
        await client.close()
    assert value(r, "apiserver_delegated_authn_request_total", code="500") == 1
    assert value(r, "authentication_token_cache_fetch_total", status="error") == 1


async def test_client_certificate_lifetime_observed(api_server: ApiServer) -> None:
    r = CollectorRegistry()
    ident = api_server.node_identity("n1")
    assert ident.cert_file is not None
    der = ssl.PEM_cert_to_DER_cert(Path(ident.cert_file).read_text())
    left = x509.load_der_x509_certificate(der).not_valid_after_utc.timestamp() - time.time()
    user = await Authenticator(metrics=auth_metrics(r)).authenticate(der, "")
    assert user is not None and user.name == "system:node:n1"
    assert value(r, "apiserver_client_certificate_expiration_seconds_count") == 1
    assert abs(value(r, "apiserver_client_certificate_expiration_seconds_sum") - left) < 5
