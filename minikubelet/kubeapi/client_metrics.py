"""client-go's rest_client_* families (component-base/metrics/prometheus/restclient), measured in RestClient.

As in client-go, the families are process-wide: every RestClient reports into the recorder `register` installed
(the agent's registry); before that, nothing is recorded."""

from __future__ import annotations

import math
import time
import weakref
from urllib.parse import urlsplit

from minikubelet.base.prometheus import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
SIZE_BUCKETS = (64.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0)
ROTATION_BUCKETS = (600.0, 1800.0, 3600.0, 14400.0, 86400.0, 604800.0, 2592000.0, 7776000.0, 15552000.0, 31104000.0,
                    124416000.0)
# client-go's exec plugin call outcomes
NO_ERROR, EXECUTION_ERROR, NOT_FOUND, INTERNAL_ERROR = (
    "no_error", "plugin_execution_error", "plugin_not_found_error", "client_internal_error")
ERROR_CODE = "<error>"  # client-go's code label when no HTTP answer came back


class RestClientMetrics:
    def request(self, method: str, host: str, code: str, seconds: float, sent: int, received: int | None) -> None:
        """One attempt: its answer's code (or ERROR_CODE), how long it took and the bodies' sizes."""
        self.requests.labels(code, method, host).inc()
        self.latency.labels(method, host).observe(seconds)
        self.request_size.labels(method, host).observe(sent)
        if received is not None:
            self.response_size.labels(method, host).observe(received)

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.latency = Histogram("rest_client_request_duration_seconds",
                                 "Request latency in seconds. Broken down by verb, and host.",
                                 ["verb", "host"], buckets=LATENCY_BUCKETS, registry=r)
        self.request_size = Histogram("rest_client_request_size_bytes",
                                      "Request size in bytes. Broken down by verb and host.",
                                      ["verb", "host"], buckets=SIZE_BUCKETS, registry=r)
        self.response_size = Histogram("rest_client_response_size_bytes",
                                       "Response size in bytes. Broken down by verb and host.",
                                       ["verb", "host"], buckets=SIZE_BUCKETS, registry=r)
        self.rate_limiter = Histogram("rest_client_rate_limiter_duration_seconds",
                                      "Client side rate limiter latency in seconds. Broken down by verb, and host.",
                                      ["verb", "host"], buckets=LATENCY_BUCKETS, registry=r)
        self.requests = Counter("rest_client_requests", "Number of HTTP requests, partitioned by status code, method, "
                                "and host.", ["code", "method", "host"], registry=r)
        self.exec_calls = Counter("rest_client_exec_plugin_call",
                                  "Number of calls to an exec plugin, partitioned by the type of event encountered "
                                  "(no_error, plugin_execution_error, plugin_not_found_error, client_internal_error) and "
                                  "an optional exit code. The exit code will be set to 0 if and only if the plugin call "
                                  "was successful.", ["code", "call_status"], registry=r)
        self.exec_rotation = Histogram("rest_client_exec_plugin_certificate_rotation_age",
                                       "Histogram of the number of seconds the last auth exec plugin client "
                                       "certificate lived before being rotated. If auth exec plugin client "
                                       "certificates are unused, histogram will contain no data.",
                                       buckets=ROTATION_BUCKETS, registry=r)
        # exec plugin -> expiry of the client certificate it gave (none: +Inf)
        self.exec_expiry: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()
        Gauge("rest_client_exec_plugin_ttl_seconds",
              "Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec plugin. "
              "The value is in seconds until certificate expiry (negative if already expired). If auth exec plugins "
              "are unused or manage no TLS certificates, the value will be +INF.",
              registry=r).set_function(lambda: min(self.exec_expiry.values(), default=math.inf) - time.time())
        self.retries = Counter("rest_client_request_retries",
                               "Number of request retries, partitioned by status code, verb, and host.",
                               ["code", "verb", "host"], registry=r)


_recorder: RestClientMetrics | None = None


def register(registry: CollectorRegistry) -> RestClientMetrics:
    """Install the process-wide recorder (client-go's metrics.Register)."""
    global _recorder
    _recorder = RestClientMetrics(registry)
    return _recorder


def recorder() -> RestClientMetrics | None:
    return _recorder


def host_of(url: str) -> str:
    """The host label: the URL's host[:port], as client-go's url.Host."""
    return urlsplit(url).netloc
