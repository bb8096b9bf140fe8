"""client-go's rest_client_* families (component-base/metrics/prometheus/restclient), measured in RestClient.

As in client-go, the families are process-wide: every RestClient reports into the recorder `register` installed
(the agent's registry); before that, nothing is recorded."""

from __future__ import annotations

from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
SIZE_BUCKETS = (64.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0)
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
