"""The bounds every HTTP listener of the agent serves with (read-only port, healthz port, the 10250 API)."""

from __future__ import annotations

import resource
from dataclasses import dataclass

# Each listener may hold at most this fraction of the soft RLIMIT_NOFILE, so that two or three listeners
# at their cap still leave descriptors for the runtime client, inotify, cgroup files and manifests.
NOFILE_SHARE = 4


@dataclass(frozen=True)
class ServingLimits:
    # A request head (request line + headers) must be complete this long after the connection opened,
    # or after its first byte on a kept-alive connection (Go's ReadHeaderTimeout; defeats slowloris).
    header_timeout: float = 10.0
    # A kept-alive connection with no request in flight is closed after this (the kubelet's IdleTimeout).
    idle_timeout: float = 90.0
    # A response the client does not read (transport buffer full) is dropped after this.
    write_timeout: float = 30.0
    # Open connections per listener; beyond it a new connection is closed at once. Clamped further to
    # soft RLIMIT_NOFILE / NOFILE_SHARE when the listener starts.
    max_connections: int = 1000
    # Request line, one header field, and the number of headers: 431 beyond (about 1 MiB of head at most,
    # Go's DefaultMaxHeaderBytes).
    max_line_size: int = 8190
    max_field_size: int = 8190
    max_headers: int = 128
    # A declared or read body beyond this gets 413.
    max_body_size: int = 1 << 20
    # After a response, an unread request body is drained for at most this long before closing.
    lingering_time: float = 2.0
    backlog: int = 128
    # On stop, requests in flight get this long before their connections are cut.
    shutdown_timeout: float = 5.0
    # After accept() fails for lack of descriptors, wait this long before accepting again.
    accept_retry_delay: float = 0.5
    # Rejections and timeouts are logged as one line per kind per interval, with a count of the rest.
    log_interval: float = 10.0


def connection_cap(limits: ServingLimits, nofile_soft: int | None = None) -> int:
    if nofile_soft is None:
        nofile_soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if nofile_soft == resource.RLIM_INFINITY or nofile_soft <= 0:
        return limits.max_connections
    return max(1, min(limits.max_connections, nofile_soft // NOFILE_SHARE))
