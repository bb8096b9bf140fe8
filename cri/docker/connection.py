"""One HTTP/1.1 connection to the Docker Engine: h11's state machine over an asyncio stream pair.

h11 only parses and frames; reading and writing the socket is ours, so a response body is pulled
chunk by chunk as the caller asks for it (nothing is buffered beyond one socket read).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import h11

READ_SIZE = 64 * 1024
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


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(h11.CLIENT)
        self.idle_since = time.monotonic()

    def reusable(self) -> bool:
        """After a complete exchange both sides are DONE; anything else (a close, an upgrade) ends it."""
        return self.http.our_state is h11.DONE and self.http.their_state is h11.DONE

    def fresh(self, max_idle: float) -> bool:
        """Still worth reusing: the Engine has not closed it and it has not idled too long."""
        return not self.reader.at_eof() and not self.writer.is_closing() and time.monotonic() - self.idle_since < max_idle

    async def send(self, *events: h11.Event) -> None:
        self.writer.write(b"".join(self.http.send(event) or b"" for event in events))
        await self.writer.drain()

    async def next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            event = self.http.next_event()
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            # b"" at EOF: h11 then raises RemoteProtocolError if the message was incomplete.
            self.http.receive_data(await self.reader.read(READ_SIZE))

    async def body(self) -> bytes:
        """The rest of the response body (for bounded answers: JSON and error messages). Past MAX_BODY
        bytes it raises: an Engine answer that large is a fault, and holding it would cost the agent."""
        data = bytearray()
        while isinstance(event := await self.next_event(), h11.Data):
            data.extend(event.data)
            if len(data) > MAX_BODY:
                raise h11.RemoteProtocolError(f"the Engine sent an answer longer than {MAX_BODY} bytes")
        return bytes(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
