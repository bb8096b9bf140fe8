"""HTTP/1.1 to the API server: h11 over asyncio streams (TLS or not), keep-alive connections, gzip answers.

client-go's transport for what a kubelet sends, on the agent's shared HTTP/1.1 pool (minikubelet.base.http1):
up to MAX_REQUESTS requests in flight (the rest queue), MAX_IDLE connections kept warm, long answers (watches)
on connections of their own that go back to the pool when the server ends them cleanly. A request that finds
its reused connection closed by the server before any answer is sent again once on a new connection when it
is idempotent (Go's net/http does the same); anything else is the caller's to retry. Every answer is bounded:
the head by h11 (base.http1.MAX_HEAD), the body by the caller's limit, after gzip decoding too.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

from minikubelet.base.http1 import READ_SIZE, BodyTooLarge, Connection, ConnectionPool, header

MAX_REQUESTS = 32  # the bound the aiohttp connector had; the agent's own concurrency stays far below it
MAX_IDLE = 8
IDLE_TIMEOUT = 90.0  # Go's http.Transport IdleConnTimeout in client-go's default transport
PIECE = 1 << 20  # decoded gzip output per step: a small compressed chunk cannot become one huge buffer
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
Headers = dict[str, str] | list[tuple[str, str]]  # a list when a name repeats


@dataclass(frozen=True)
class Server:
    """The kubeconfig's `server` URL, split for the socket and the request line."""

    url: str
    tls: bool
    host: str
    port: int
    authority: str  # the Host header
    prefix: str  # a path the server is mounted under ("" for most)

    @classmethod
    def parse(cls, url: str) -> Server:
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"API server URL {url!r}: want https://HOST[:PORT]")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ValueError(f"API server URL {url!r}: bad port") from None
        return cls(url, parts.scheme == "https", parts.hostname, port, parts.netloc.rpartition("@")[2],
                   parts.path.rstrip("/"))


class _Identity:
    def feed(self, data: bytes) -> Iterator[bytes]:
        yield data

    def end(self) -> None:
        pass


class _Gunzip:
    def __init__(self) -> None:
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data and not self._z.eof:
            try:
                out = self._z.decompress(data, PIECE)
            except zlib.error as e:
                raise h11.RemoteProtocolError(f"gzip answer does not decode: {e}") from None
            data = self._z.unconsumed_tail
            if out:
                yield out

    def end(self) -> None:
        if not self._z.eof:
            raise h11.RemoteProtocolError("gzip answer cut short")


class Response:
    """An answer whose head has arrived; the body is read as the caller goes, decoded."""

    def __init__(self, head: h11.Response, conn: Connection) -> None:
        self.status = head.status_code
        self.head = head
        self._conn = conn
        encoding = header(head, b"content-encoding").strip().lower()
        if encoding not in ("", "identity", "gzip"):
            raise h11.RemoteProtocolError(f"answer in an encoding not asked for: {encoding!r}")
        self._decoder = _Gunzip() if encoding == "gzip" else _Identity()

    def header(self, name: str) -> str:
        return header(self.head, name.lower().encode())

    async def pieces(self, idle_timeout: float | None = None) -> AsyncIterator[bytes]:
        """The decoded body as it comes; a read waiting longer than `idle_timeout` raises TimeoutError."""
        while True:
            async with asyncio.timeout(idle_timeout):
                chunk = await self._conn.chunk()
            if not chunk:
                self._decoder.end()
                return
            for piece in self._decoder.feed(chunk):
                yield piece

    async def read(self, limit: int) -> bytes:
        """The whole decoded body, at most `limit` bytes (BodyTooLarge past it)."""
        length = self.header("content-length")
        if length.isdigit() and int(length) > limit:
            raise BodyTooLarge(f"answer of {length} bytes is larger than {limit}")
        data = bytearray()
        async for piece in self.pieces():
            data += piece
            if len(data) > limit:
                raise BodyTooLarge(f"answer is larger than {limit} bytes")
        return bytes(data)


class Transport:
    def __init__(self, server: str, tls: ssl.SSLContext | None, *, tls_server_name: str = "",
                 connect_timeout: float = 30.0, name: str = "API server") -> None:
        self.server = Server.parse(server)
        if self.server.tls and tls is None:
            raise ValueError(f"API server URL {server!r} is https but there is no TLS configuration")
        self.tls = tls if self.server.tls else None
        self.tls_server_name = tls_server_name or self.server.host
        self.pool = ConnectionPool(self._open, f"{name} {server}", connect_timeout, MAX_REQUESTS, MAX_IDLE,
                                   IDLE_TIMEOUT)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.tls is None:
            return await asyncio.open_connection(self.server.host, self.server.port, limit=READ_SIZE)
        return await asyncio.open_connection(self.server.host, self.server.port, ssl=self.tls,
                                             server_hostname=self.tls_server_name, limit=READ_SIZE)

    def _request(self, method: str, target: str, headers: Headers, body: bytes | None) -> h11.Request:
        fields = [("Host", self.server.authority), *(headers.items() if isinstance(headers, dict) else headers)]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            fields.append(("Content-Length", str(len(body or b""))))
        return h11.Request(method=method, target=self.server.prefix + target, headers=fields)

    async def _exchange(self, conn: Connection, request: h11.Request, body: bytes | None) -> Response:
        events: list[h11.Event] = [request]
        if body:
            events.append(h11.Data(data=body))
        await conn.send(*events, h11.EndOfMessage())
        return Response(await conn.response(), conn)

    async def request(self, method: str, target: str, headers: dict[str, str], body: bytes | None,
                      limit: int) -> tuple[Response, bytes]:
        """One bounded exchange: the answer's head and its whole (decoded) body."""
        request = self._request(method, target, headers, body)
        for fresh in (False, True):
            async with self.pool.request_slot(fresh=fresh) as conn:
                try:
                    response = await self._exchange(conn, request, body)
                except (h11.RemoteProtocolError, ConnectionError):
                    if fresh or not conn.reused or method not in _IDEMPOTENT:
                        raise
                    continue  # the server closed an idle connection as we reused it
                return response, await response.read(limit)
        raise AssertionError("unreachable")

    @asynccontextmanager
    async def stream(self, target: str, headers: Headers, head_timeout: float) -> AsyncIterator[Response]:
        """A GET whose answer is read as it comes (a watch), on a connection outside the request slots."""
        request = self._request("GET", target, headers, None)
        for fresh in (False, True):
            async with self.pool.stream_connection(fresh=fresh) as conn:
                try:
                    async with asyncio.timeout(head_timeout):
                        response = await self._exchange(conn, request, None)
                except (h11.RemoteProtocolError, ConnectionError):
                    if fresh or not conn.reused:
                        raise
                    continue
                yield response
                return

    def close(self) -> None:
        """Every connection closed, those in use too: their exchanges fail and the caller's retry reconnects."""
        self.pool.abort()
