"""HTTP/1.1 client connections: h11's state machine over an asyncio stream pair, and a bounded keep-alive pool.

h11 only parses and frames; reading and writing the socket is ours, so a response body is pulled chunk by
chunk as the caller asks for it (nothing is buffered beyond one socket read). h11 also bounds what it holds
while a message head is incomplete (`MAX_HEAD`): a server sending endless headers or a status line without
an end gets a RemoteProtocolError, as does a body cut short (EOF inside a chunked or sized body).

Every HTTP client of the agent uses it: the Docker Engine client (cri.docker), the API server client
(minikubelet.kubeapi.rest), the manifest URL source, and httpGet probes and lifecycle hooks (one connection per
request, `URL` and `connect`). None needs aiohttp in the agent's process (issue 31: memory).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import quote, unquote, urljoin, urlsplit

import h11

READ_SIZE = 64 * 1024
# A status line plus headers larger than this is no server we talk to (h11's default is 16 KiB; the API
# server's answers carry a few hundred bytes of headers, audit IDs and warnings included).
MAX_HEAD = 64 * 1024

Opener = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


class BodyTooLarge(h11.RemoteProtocolError):
    """An answer past the caller's bound: the connection is dropped, not drained."""


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        self.idle_since = time.monotonic()
        self.reused = False  # it served an exchange before this one

    def reusable(self) -> bool:
        """After a complete exchange both sides are DONE; anything else (a close, an upgrade) ends it."""
        return self.http.our_state is h11.DONE and self.http.their_state is h11.DONE

    def fresh(self, max_idle: float) -> bool:
        """Still worth reusing: the peer has not closed it and it has not idled too long."""
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

    async def response(self) -> h11.Response:
        """The final response head (1xx informational answers skipped)."""
        while True:
            event = await self.next_event()
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise h11.RemoteProtocolError(f"unexpected {type(event).__name__} instead of a response")

    async def chunk(self) -> bytes:
        """The next piece of the response body (at most one socket read); b"" at its end."""
        while True:
            event = await self.next_event()
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
                continue
            return b""  # EndOfMessage (or the peer closed a read-until-close body)

    async def body(self, limit: int) -> bytes:
        """The rest of the response body, at most `limit` bytes: past that it raises BodyTooLarge."""
        data = bytearray()
        while chunk := await self.chunk():
            data.extend(chunk)
            if len(data) > limit:
                raise BodyTooLarge(f"answer longer than {limit} bytes")
        return bytes(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


def header(response: h11.Response | h11.InformationalResponse, name: bytes) -> str:
    """A response header's value ("" when absent); `name` in lower case, as h11 gives names."""
    for key, value in response.headers:
        if key == name:
            return value.decode("latin-1")
    return ""


# What a request target keeps unescaped (as Go's url.URL.RequestURI): a space or a control character is
# escaped, an escape already written is kept.
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = _PATH_SAFE + "?"


@dataclass(frozen=True)
class URL:
    """An absolute http(s) URL, split as a request needs it (the fields of Go's url.URL the clients read)."""

    text: str
    scheme: str  # lower case
    host: str  # Go's URL.Hostname(): no brackets, no port, case as written
    port: int
    authority: str  # Go's URL.Host: host[:port] as written, the Host header
    target: str  # the request line's path?query ("/" for none)
    username: str | None  # user information (unescaped), for Basic authentication
    password: str

    @classmethod
    def parse(cls, text: str) -> URL:
        """Raises ValueError for anything but an absolute http or https URL with a host."""
        parts = urlsplit(text)  # ValueError for an unclosed IPv6 bracket
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported protocol scheme {parts.scheme!r}")
        authority = parts.netloc.rpartition("@")[2]
        if authority.startswith("["):
            host = authority[1:authority.index("]")]
        else:
            host = authority.partition(":")[0]
        if not host:
            raise ValueError(f"no host in URL {text!r}")
        port = parts.port or (443 if scheme == "https" else 80)  # ValueError for a port out of range
        path = quote(parts.path, safe=_PATH_SAFE) or "/"
        target = f"{path}?{quote(parts.query, safe=_QUERY_SAFE)}" if parts.query else path
        username = None if parts.username is None else unquote(parts.username)
        return cls(text, scheme, host, port, authority, target, username, unquote(parts.password or ""))

    def join(self, location: str) -> URL:
        """A Location header's URL, relative to this one (ValueError when unusable)."""
        return URL.parse(urljoin(self.text, location))

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    def __str__(self) -> str:
        return self.text


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    return True


_insecure: ssl.SSLContext | None = None


def insecure_tls() -> ssl.SSLContext:
    """TLS without verifying the peer (Go's InsecureSkipVerify): probes and hooks, which have no CA to trust."""
    global _insecure
    if _insecure is None:
        _insecure = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        _insecure.check_hostname = False
        _insecure.verify_mode = ssl.CERT_NONE
    return _insecure


async def connect(url: URL, tls: ssl.SSLContext) -> Connection:
    """One new connection to the URL's host (`tls` for https); OSError (ssl.SSLError too) when refused."""
    if not url.tls:
        reader, writer = await asyncio.open_connection(url.host, url.port, limit=READ_SIZE)
    else:
        # No SNI for an address, as Go's TLS client.
        reader, writer = await asyncio.open_connection(
            url.host, url.port, ssl=tls, limit=READ_SIZE,
            server_hostname="" if is_ip(url.host) else url.host)
    return Connection(reader, writer)


class ConnectFailed(ConnectionError):
    """The peer could not be reached (absent socket, refused, timed out, TLS handshake refused)."""


class ConnectionPool:
    """Keep-alive connections to one peer, bounded both ways.

    At most `max_requests` plain requests are in flight at once (the rest wait for a slot, as with aiohttp's
    connector limit), and at most `max_idle` finished connections are kept for reuse: a burst runs in
    parallel, and afterwards only a few sockets stay open. Streams (`stream_connection`) and hijacked
    connections (`connect`) count against neither bound.
    """

    def __init__(self, opener: Opener, where: str, connect_timeout: float, max_requests: int,
                 max_idle: int, idle_timeout: float) -> None:
        self.opener = opener
        self.where = where
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        self.idle_timeout = idle_timeout
        self._slots = asyncio.Semaphore(max_requests)
        self._idle: list[Connection] = []
        self._busy: set[Connection] = set()
        self._waiting = 0  # requests queued for a slot
        self._aborted = False
        self.opened = 0  # sockets opened over the pool's life (tests and profiles read it)

    @property
    def idle_count(self) -> int:
        return len(self._idle)

    async def connect(self) -> Connection:
        """A fresh connection, not from the idle list (for hijacks that never come back)."""
        try:
            reader, writer = await asyncio.wait_for(self.opener(), self.connect_timeout)
        except TimeoutError as exc:
            raise ConnectFailed(f"Cannot connect to {self.where} [timed out]") from exc
        except OSError as exc:  # ssl.SSLError included: a refused handshake is no connection
            raise ConnectFailed(f"Cannot connect to {self.where} [{exc}]") from exc
        self.opened += 1
        return Connection(reader, writer)

    async def take(self) -> Connection:
        """An idle connection if one is still good, else a new one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.fresh(self.idle_timeout):
                conn.reused = True
                return conn
            conn.close()
        return await self.connect()

    def give_back(self, conn: Connection) -> None:
        # While requests wait for a slot every finished connection is worth keeping: one of them
        # takes it next. Once none wait, the idle list shrinks back to its bound (oldest first).
        if conn.reusable() and not self._aborted and (len(self._idle) < self.max_idle or self._waiting):
            conn.http.start_next_cycle()
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()
        while not self._waiting and len(self._idle) > self.max_idle:
            self._idle.pop(0).close()

    @asynccontextmanager
    async def _held(self, conn_factory: Callable[[], Awaitable[Connection]]) -> AsyncIterator[Connection]:
        conn = await conn_factory()
        self._busy.add(conn)
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        finally:
            self._busy.discard(conn)
        self.give_back(conn)

    @asynccontextmanager
    async def request_slot(self, fresh: bool = False) -> AsyncIterator[Connection]:
        """A connection for one bounded request (a new one when `fresh`); kept for reuse only if the exchange
        completed."""
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            async with self._held(self.connect if fresh else self.take) as conn:
                yield conn
        finally:
            self._slots.release()

    @asynccontextmanager
    async def stream_connection(self, fresh: bool = False) -> AsyncIterator[Connection]:
        """A connection for a long answer (a watch): outside the request slots, reused if it ended cleanly."""
        async with self._held(self.connect if fresh else self.take) as conn:
            yield conn

    def close(self) -> None:
        """Close the idle connections; those in use finish their exchange and are closed on return."""
        while self._idle:
            self._idle.pop().close()

    def abort(self) -> None:
        """Close every connection, those in use too (their exchanges fail), and keep none given back later:
        a credential rotation."""
        self._aborted = True
        self.close()
        for conn in list(self._busy):
            conn.close()
