"""kubelet_http_requests_total, kubelet_http_requests_duration_seconds and kubelet_http_inflight_requests for the
10250 API ("readwrite") and the read-only port ("readonly"), labelled as upstream's server labels them: the
path's first segment when the server serves it, else "other"."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from minikubelet.metrics import HttpRequestFamilies
from minikubelet.server.routes import Request, Response, Routes

_METHODS = frozenset({"OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT"})
# the first path segments each server names in its labels (upstream addMetricsBucketMatcher)
READONLY_PATHS = frozenset({"healthz", "pods", "stats", "metrics"})
READWRITE_PATHS = READONLY_PATHS | {"run", "exec", "attach", "portForward", "containerLogs", "configz",
                                    "runningpods", "checkpoint", "pprof", "logs", "debug"}
# upstream's long-running paths, compared with the label: "portForward" is not among them
_LONG_RUNNING = frozenset({"exec", "attach", "portforward", "debug"})


def request_labels(method: str, path: str, server_type: str) -> tuple[str, str, str, str]:
    root = path.lstrip("/").split("/", 1)[0]
    known = READWRITE_PATHS if server_type == "readwrite" else READONLY_PATHS
    bucket = root if root in known else "other"
    return (method if method in _METHODS else "other", bucket, server_type, str(bucket in _LONG_RUNNING).lower())


@contextmanager
def observed(families: HttpRequestFamilies, method: str, path: str, server_type: str) -> Iterator[None]:
    """Count the request, hold it in flight while it is served, then record how long it took."""
    labels = request_labels(method, path, server_type)
    families.requests.labels(*labels).inc()
    inflight = families.inflight.labels(*labels)
    inflight.inc()
    t0 = time.monotonic()
    try:
        yield
    finally:
        inflight.dec()
        families.duration.labels(*labels).observe(time.monotonic() - t0)


class InstrumentedRoutes(Routes):
    """The read-only port's route table, every request counted (404 and 405 answers too, as upstream's)."""

    def __init__(self, routes: Routes, families: HttpRequestFamilies, server_type: str) -> None:
        super().__init__()
        self.routes = routes.routes
        self._families = families
        self._server_type = server_type

    async def dispatch(self, request: Request) -> Response:
        with observed(self._families, request.method, request.path, self._server_type):
            return await super().dispatch(request)
