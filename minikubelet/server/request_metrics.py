"""kubelet_http_requests_total, kubelet_http_requests_duration_seconds and kubelet_http_inflight_requests for the
10250 API ("readwrite") and the read-only port ("readonly"), labelled as upstream's server labels them: the
path's first segment when the server serves it, else "other"."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace

from minikubelet.metrics import HttpRequestFamilies
from minikubelet.server.routes import Answer, Request, Response, Routes

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


async def observed_answer(families: HttpRequestFamilies, request: Request, server_type: str,
                          answer: Callable[[Request], Awaitable[Answer]]) -> Answer:
    """`answer(request)` counted; a streamed or upgraded answer stays in flight until it finished."""
    stack = ExitStack()
    stack.enter_context(observed(families, request.method, request.path, server_type))
    try:
        result = await answer(request)
    except BaseException:
        stack.close()
        raise
    if isinstance(result, Response):
        stack.close()
        return result
    inner = result.finish

    def finish() -> None:
        try:
            if inner is not None:
                inner()
        finally:
            stack.close()

    return replace(result, finish=finish)


class InstrumentedRoutes(Routes):
    """The read-only port's route table, every request counted (404 and 405 answers too, as upstream's)."""

    def __init__(self, routes: Routes, families: HttpRequestFamilies, server_type: str) -> None:
        super().__init__()
        self.routes = routes.routes
        self._families = families
        self._server_type = server_type

    async def dispatch(self, request: Request) -> Answer:
        return await observed_answer(self._families, request, self._server_type, super().dispatch)
