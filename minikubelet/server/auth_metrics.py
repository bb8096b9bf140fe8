"""The authentication/authorization families of the kubelet's delegated authn/authz (k8s.io/apiserver
authenticatorfactory, authorizerfactory, token/cache and request/x509): each TokenReview and SubjectAccessReview by
the API server's answer code, the token cache's hits and fetches, and the remaining lifetime of client
certificates presented."""

from __future__ import annotations

import weakref

from minikubelet.base.prometheus import CollectorRegistry, Counter, Gauge, Histogram

ERROR_CODE = "<error>"
WEBHOOK_BUCKETS = (0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0)
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# 0, 30 min, 1 h, 2 h, 6 h, 12 h, 1 d, 2 d, 4 d, 1 w, 1 mo, 3 mo, 6 mo, 1 y
EXPIRATION_BUCKETS = (0.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0, 172800.0, 345600.0, 604800.0,
                      2592000.0, 7776000.0, 15552000.0, 31104000.0)


class AuthMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.authn_total = Counter("apiserver_delegated_authn_request",
                                   "Number of HTTP requests partitioned by status code.", ["code"], registry=r)
        self.authn_duration = Histogram("apiserver_delegated_authn_request_duration_seconds",
                                        "Request latency in seconds. Broken down by status code.", ["code"],
                                        buckets=WEBHOOK_BUCKETS, registry=r)
        self.authz_total = Counter("apiserver_delegated_authz_request",
                                   "Number of HTTP requests partitioned by status code.", ["code"], registry=r)
        self.authz_duration = Histogram("apiserver_delegated_authz_request_duration_seconds",
                                        "Request latency in seconds. Broken down by status code.", ["code"],
                                        buckets=WEBHOOK_BUCKETS, registry=r)
        # upstream gives the token cache's families no help text
        self.cache_requests = Counter("authentication_token_cache_request", "", ["status"], registry=r)
        self.cache_duration = Histogram("authentication_token_cache_request_duration_seconds", "", ["status"],
                                        buckets=DEF_BUCKETS, registry=r)
        self.cache_fetches = Counter("authentication_token_cache_fetch", "", ["status"], registry=r)
        self.cache_active_fetches = Gauge("authentication_token_cache_active_fetch_count", "", ["status"],
                                          registry=r)
        self.client_cert_expiration = Histogram(
            "apiserver_client_certificate_expiration_seconds",
            "Distribution of the remaining lifetime on the certificate used to authenticate a request.",
            buckets=EXPIRATION_BUCKETS, registry=r)

    def review(self, kind: str, code: str, seconds: float) -> None:
        """One TokenReview ("authn") or SubjectAccessReview ("authz") sent to the API server."""
        total, duration = (self.authn_total, self.authn_duration) if kind == "authn" else (
            self.authz_total, self.authz_duration)
        total.labels(code).inc()
        duration.labels(code).observe(seconds)


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, AuthMetrics] = weakref.WeakKeyDictionary()


def auth_metrics(registry: CollectorRegistry) -> AuthMetrics:
    """The registry's families, registered the first time (the 10250 server may be started again)."""
    found = _by_registry.get(registry)
    if found is None:
        found = _by_registry[registry] = AuthMetrics(registry)
    return found
