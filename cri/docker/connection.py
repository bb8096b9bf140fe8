"""Where the Docker Engine listens, and how far its answers may go; the HTTP/1.1 connection itself
(h11 over an asyncio stream pair) is the agent's shared one, minikubelet.base.http1.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from minikubelet.base.http1 import READ_SIZE, Connection

__all__ = ["MAX_BODY", "READ_SIZE", "Connection", "Endpoint"]
# A JSON answer past this is no Engine we know (1000 containers list in ~3 MiB); holding it would
# cost the agent more than failing the call.
MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class Endpoint:
    """Where the Engine listens: a unix socket path, or a plain-TCP host and port."""

    url: str
    path: str = ""
    host: str = ""
    port: int = 0

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        if url.startswith("unix://") and len(url) > len("unix://"):
            return cls(url, path=url[len("unix://") :])
        for scheme in ("tcp://", "http://"):
            if url.startswith(scheme):
                host, _, port = url[len(scheme) :].rstrip("/").rpartition(":")
                if not host or not port.isdigit():
                    raise ValueError(f"Docker endpoint {url!r}: want {scheme}HOST:PORT")
                return cls(url, host=host.strip("[]"), port=int(port))
        raise ValueError(f"Docker endpoint {url!r}: only unix:// and tcp:// (plain HTTP) are supported")

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.path:
            return await asyncio.open_unix_connection(self.path, limit=READ_SIZE)
        return await asyncio.open_connection(self.host, self.port, limit=READ_SIZE)
