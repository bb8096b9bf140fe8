"""Keep-alive connections to the Docker Engine: the agent's shared HTTP/1.1 pool (minikubelet.base.http1)
with the Engine's bounds.

At most `max_requests` plain requests are in flight at once, and at most `max_idle` finished connections
are kept for reuse: a burst from a hundred pod workers runs in parallel, and afterwards only a few sockets
stay open. Streams and hijacked connections are owned by their caller and count against neither bound.
"""

from __future__ import annotations

from cri.docker.connection import Endpoint
from minikubelet.base import http1
from minikubelet.base.http1 import ConnectFailed

__all__ = ["IDLE_TIMEOUT", "MAX_IDLE", "MAX_REQUESTS", "ConnectFailed", "ConnectionPool"]

MAX_REQUESTS = 64
MAX_IDLE = 8
# Past this an idle socket is closed rather than reused (aiohttp's keepalive_timeout default).
IDLE_TIMEOUT = 15.0


class ConnectionPool(http1.ConnectionPool):
    def __init__(
        self,
        endpoint: Endpoint,
        connect_timeout: float,
        max_requests: int = MAX_REQUESTS,
        max_idle: int = MAX_IDLE,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        super().__init__(endpoint.open, f"Docker Engine via {endpoint.url}", connect_timeout, max_requests,
                         max_idle, idle_timeout)
        self.endpoint = endpoint
