"""The read buffer of each TLS connection the agent holds (API client, kubelet API server).

asyncio's SSLProtocol allocates `max_size` bytes (256 KiB) per connection as its socket read buffer and touches
all of it; the joined agent holds ~6 such connections idle (its watches and requests), ~1.5 MiB. A TLS record
is at most 16 KiB of data: a 16 KiB read takes about one record, so larger bodies take more reads and the bytes
delivered are the same (docs/performance.md, "issue 31: memory" and "fourth round: memory": 64 KiB before)."""

from __future__ import annotations

import asyncio.sslproto

TLS_READ_BUFFER = 16 * 1024


def shrink_tls_read_buffers(size: int = TLS_READ_BUFFER) -> None:
    """For connections made from now on (the class attribute is read at each SSLProtocol's creation)."""
    asyncio.sslproto.SSLProtocol.max_size = size
