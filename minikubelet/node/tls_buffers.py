"""The read buffer of each TLS connection the agent holds (API client, kubelet API server).

asyncio's SSLProtocol allocates `max_size` bytes (256 KiB) per connection as its socket read buffer and touches
all of it; the joined agent holds ~5 such connections idle (its watches and requests), ~1.2 MiB. A TLS record
is at most 16 KiB of data, so 64 KiB reads take whole records a few at a time: larger bodies take more reads,
the bytes delivered are the same (docs/performance.md, "issue 31: memory")."""

from __future__ import annotations

import asyncio.sslproto

TLS_READ_BUFFER = 64 * 1024


def shrink_tls_read_buffers(size: int = TLS_READ_BUFFER) -> None:
    """For connections made from now on (the class attribute is read at each SSLProtocol's creation)."""
    asyncio.sslproto.SSLProtocol.max_size = size
