"""The bounded HTTP/1.1 listener of every port (read-only, healthz, and the 10250 API over TLS): h11 over asyncio.

Its own accept loop on the listening socket (`loop.sock_accept`) refuses connections beyond a cap and pauses
on EMFILE with one log line; each connection (TLS handshake within the header deadline) gets a header deadline
(from its opening, or from the first byte of the next request on a kept-alive one), an idle timeout between
requests, a write-stall deadline, 431 for a head beyond the line/field/count limits, 413 for a body beyond its
limit, 400 for anything h11 cannot parse, and one rate-limited log line per rejection. Handlers answer with a
whole `Response`, a `Streamed` body (ended early when the client hangs up), or an `Upgrade`: our 101, then the
connection is the handler's (SPDY/3.1, WebSocket), still under the write-stall deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import h11

from minikubelet.base.http_date import format_http_date
from minikubelet.server.limits import ServingLimits, connection_cap
from minikubelet.server.ratelog import RateLimitedLog
from minikubelet.server.routes import (
    ByteReader,
    ByteWriter,
    Headers,
    Query,
    Request,
    Response,
    Routes,
    Streamed,
    Upgrade,
)

log = logging.getLogger("minikubelet.server")

OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_MAX_ERROR_TEXT = 160
_READ_SIZE = 65536
_LINGER_BYTES = 1 << 20
_TLS_WRITE = 256 * 1024


class _Reject(Exception):
    def __init__(self, status: int, kind: str, message: str, **kv: Any) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.kv = kv


class HttpSite:
    """A listening socket serving `routes` over HTTP/1.1 (over TLS with `ssl_context`): at most `cap` open
    connections."""

    def __init__(self, routes: Routes, host: str, port: int, limits: ServingLimits,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.routes = routes
        self.ssl_context = ssl_context
        self.limits = limits
        self.cap = connection_cap(limits)
        self.connections: set[asyncio.Task[None]] = set()
        # connections waiting for a request head (new, or kept alive between requests) -> since when
        self.waiting: dict[asyncio.Task[None], float] = {}
        self.log = RateLimitedLog(log, limits.log_interval)
        self._host = host
        self._port = port
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def name(self) -> str:
        return f"{'https' if self.ssl_context is not None else 'http'}://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1]) if self._sock is not None else self._port

    async def start(self) -> None:
        self._sock = listen(self._host, self._port, self.limits.backlog)
        self._accepting = asyncio.create_task(self._accept_loop(), name=f"accept {self.name}")

    async def stop(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()
        # Requests in flight get the shutdown grace; idle connections go at once.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.limits.shutdown_timeout):
                await self._idle.wait()
        conns = list(self.connections)
        for task in conns:
            task.cancel()
        await asyncio.gather(*conns, return_exceptions=True)

    async def _accept_loop(self) -> None:
        assert self._sock is not None
        accepted = bounded_accepts(self._sock, self.limits, self.log, self.name, self.cap,
                                   lambda: len(self.connections), self._make_room)
        async for conn, peer in accepted:
            task = asyncio.create_task(self._serve_connection(conn, peer))
            self.connections.add(task)
            task.add_done_callback(self.connections.discard)

    async def _serve_connection(self, sock: socket.socket, peer: str) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_READ_SIZE, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        tls: dict[str, Any] = {}
        if self.ssl_context is not None:
            tls = {"ssl": self.ssl_context, "ssl_handshake_timeout": self.limits.header_timeout}
        try:
            transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock, **tls)
        except (OSError, TimeoutError) as e:
            sock.close()
            self.log("handshake-failed", "dropped a connection during set-up", listener=self.name,
                     err=str(e) or type(e).__name__)
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        try:
            await _Connection(self, reader, writer, peer).run()
        except (ConnectionError, TimeoutError, OSError):
            writer.transport.abort()
        except asyncio.CancelledError:
            writer.transport.abort()
            raise
        except Exception as e:
            self.log("internal-error", "connection failed", level=logging.ERROR, exc_info=e, listener=self.name)
            writer.transport.abort()
        finally:
            if not writer.transport.is_closing():
                writer.transport.close()

    def _make_room(self) -> bool:
        """At the cap: close the connection that has waited longest without a request, so that idle connections
        (a client that opens many and sends nothing) never keep /healthz or /pods from being answered. A
        connection with a request in flight is never closed for this."""
        if not self.waiting:
            return False
        oldest = min(self.waiting, key=self.waiting.__getitem__)
        del self.waiting[oldest]
        oldest.cancel()
        self.log("evicted-idle", "closed the longest-idle connection to make room", level=logging.INFO,
                 listener=self.name, limit=self.cap)
        return True

    def request_started(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def request_finished(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._idle.set()


class _Connection:
    def __init__(self, site: HttpSite, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 peer: str) -> None:
        lim = site.limits
        self.site = site
        self.lim = lim
        self.reader = reader
        self.writer = writer
        self.peer = peer
        ssl_obj = writer.get_extra_info("ssl_object")
        self.tls = ssl_obj is not None
        self.certificate = ssl_obj.getpeercert(binary_form=True) if isinstance(ssl_obj, ssl.SSLObject) else None
        # The most a complete head can take within the limits; h11 answers 431 beyond it.
        self.max_head = lim.max_line_size + 2 + lim.max_headers * (lim.max_field_size + 2) + 2
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=self.max_head)

    async def run(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        waiting = self.site.waiting
        try:
            await self._run(task, waiting)
        finally:
            waiting.pop(task, None)

    async def _run(self, task: asyncio.Task[None], waiting: dict[asyncio.Task[None], float]) -> None:
        loop = asyncio.get_running_loop()
        first = True
        while True:
            waiting[task] = loop.time()
            if not first and not await self._await_next_request():
                return
            first = False
            try:
                # A head that arrived whole (the usual case) needs no deadline: a timer per request is
                # a fair share of what a small request costs.
                event = self.h11.next_event()
                if event is h11.NEED_DATA:
                    async with asyncio.timeout(self.lim.header_timeout):
                        event = await self._next_event()
            except TimeoutError:
                self.site.log("header-timeout", "closed a connection: no complete request head in time",
                              level=logging.INFO, listener=self.site.name, peer=self.peer,
                              timeout=f"{self.lim.header_timeout}s")
                return
            except h11.RemoteProtocolError as e:
                await self._reject(_malformed(e))
                return
            if isinstance(event, h11.ConnectionClosed):
                return
            assert isinstance(event, h11.Request)
            waiting.pop(task, None)
            self.site.request_started()
            try:
                keep = await self._serve(event)
            finally:
                self.site.request_finished()
            if not keep:
                return

    async def _await_next_request(self) -> bool:
        """Between requests: the next one's first byte within the idle timeout (pipelined bytes count)."""
        if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
            return False
        self.h11.start_next_cycle()
        if self.h11.trailing_data[0]:
            return True
        try:
            async with asyncio.timeout(self.lim.idle_timeout):
                data = await self.reader.read(_READ_SIZE)
        except TimeoutError:
            return False
        self.h11.receive_data(data)
        return bool(data)

    async def _next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                if self.h11.their_state is h11.DONE:
                    return event
                self.h11.receive_data(await self.reader.read(_READ_SIZE))
                continue
            return event

    async def _serve(self, head: h11.Request) -> bool:
        method = head.method.decode("ascii", "replace")
        try:
            request = await self._request(head, method)
        except h11.RemoteProtocolError as e:
            await self._reject(_malformed(e))
            return False
        except _Reject as r:
            await self._reject(r)
            return False
        try:
            answer = await self.site.routes.dispatch(request)
        except Exception as e:
            self.site.log("handler-error", "request handler failed", level=logging.ERROR, exc_info=e,
                          listener=self.site.name, path=request.path)
            answer = Response.text(f"500 {HTTPStatus(500).phrase}\n", 500)
        if isinstance(answer, Response):
            await self._respond(answer, head=method == "HEAD")
            return True
        try:
            if isinstance(answer, Streamed):
                await self._stream(answer, head=method == "HEAD")
                return True
            await self._upgrade(answer)
            return False
        finally:
            if answer.finish is not None:
                answer.finish()

    async def _stream(self, answer: Streamed, *, head: bool) -> None:
        headers = self._head_fields(answer.content_type, answer.headers.items())
        if answer.length is not None:
            headers.append(("Content-Length", str(answer.length)))
        await self._write(self.h11.send(h11.Response(status_code=answer.status, headers=headers,
                                                     reason=HTTPStatus(answer.status).phrase)) or b"")
        if not head:
            await self._produce(answer)
        await self._write(self.h11.send(h11.EndOfMessage()) or b"")

    async def _produce(self, answer: Streamed) -> None:
        """Run the body's producer while watching the client: a hang-up (EOF) ends the producer, as it would
        otherwise follow a log into a closed connection."""

        async def write(data: bytes) -> None:
            if self.writer.transport.is_closing():
                raise ConnectionResetError("the client closed the connection")
            if data:
                await self._write(self.h11.send(h11.Data(data=data)) or b"")

        async def run() -> None:
            await answer.produce(write)

        producer = asyncio.create_task(run())
        watch = asyncio.create_task(self._until_hangup())
        try:
            await asyncio.wait((producer, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (producer, watch):
                task.cancel()
            await asyncio.gather(producer, watch, return_exceptions=True)
        if producer.cancelled():
            raise ConnectionResetError("the client closed the connection")
        if (exc := producer.exception()) is not None:
            raise exc

    async def _until_hangup(self) -> None:
        # pipelined requests wait their turn; more than a head's worth ends the connection
        while data := await self.reader.read(_READ_SIZE):
            self.h11.receive_data(data)
            if len(self.h11.trailing_data[0]) > self.max_head:
                return

    async def _upgrade(self, answer: Upgrade) -> None:
        """Our own 101 (h11 would insist on its own reading of the request's Upgrade header), then the
        connection is the handler's, starting with what the client sent after its request."""
        head = "HTTP/1.1 101 Switching Protocols\r\n" + "".join(f"{k}: {v}\r\n" for k, v in answer.headers)
        await self._write((head + "\r\n").encode("latin-1"))
        await answer.serve(_TakenReader(self.h11.trailing_data[0], self.reader), _TakenWriter(self))

    async def _request(self, head: h11.Request, method: str) -> Request:
        target = head.target.decode("latin-1")
        if len(target) + len(head.method) + 10 > self.lim.max_line_size:
            raise _Reject(431, "bad-request", "rejected a malformed request", err="request line too long")
        if len(head.headers) > self.lim.max_headers:
            raise _Reject(431, "bad-request", "rejected a malformed request", err="too many headers")
        headers: list[tuple[str, str]] = []
        for name, value in head.headers:
            if len(name) + len(value) + 2 > self.lim.max_field_size:
                raise _Reject(431, "bad-request", "rejected a malformed request", err="header field too long")
            headers.append((name.decode("latin-1"), value.decode("latin-1")))
        hdrs = Headers(headers)
        declared = hdrs.get("Content-Length")
        if declared is not None and int(declared) > self.lim.max_body_size:
            raise _Reject(413, "body-too-large", "rejected a request: body too large", size=int(declared),
                          limit=self.lim.max_body_size)
        body = await self._body()
        path, _, query = target.partition("?")
        if not path.startswith("/"):
            raise _Reject(400, "bad-request", "rejected a malformed request", err="request target is not a path")
        return Request(method, unquote(path), Query.parse(query), hdrs, body, raw_path=target,
                       peer_certificate=self.certificate)

    async def _body(self) -> bytes:
        if self.h11.they_are_waiting_for_100_continue:
            await self._write(self.h11.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._next_event()
            if isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.lim.max_body_size:
                    raise _Reject(413, "body-too-large", "rejected a request: body too large", size=f">{size}",
                                  limit=self.lim.max_body_size)
                chunks.append(event.data)
                continue
            if isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the client closed during the request body")

    def _head_fields(self, content_type: str | None, fields: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = [("Date", _http_date())]
        if content_type is not None:
            headers.append(("Content-Type", content_type))
        headers += fields
        return headers

    async def _respond(self, response: Response, *, head: bool = False, close: bool = False) -> None:
        headers = self._head_fields(response.content_type, (*response.headers.items(), *response.repeated))
        if response.status != 304:
            headers.append(("Content-Length", str(len(response.body))))
        if close:
            headers.append(("Connection", "close"))
        data = self.h11.send(h11.Response(status_code=response.status, headers=headers,
                                          reason=HTTPStatus(response.status).phrase))
        if response.body and not head and response.status != 304:
            data = (data or b"") + (self.h11.send(h11.Data(data=response.body)) or b"")
        data = (data or b"") + (self.h11.send(h11.EndOfMessage()) or b"")
        await self._write(data)

    async def _write(self, data: bytes) -> None:
        if self.tls and len(data) > _TLS_WRITE:
            # TLS encrypts a whole write into the socket's buffer at once and pauses us only at the next write:
            # in pieces, a client that does not read is noticed after the first one.
            view = memoryview(data)
            for i in range(0, len(data), _TLS_WRITE):
                self.writer.write(view[i:i + _TLS_WRITE])
                await self._drain()
            return
        self.writer.write(data)
        await self._drain()

    async def _drain(self) -> None:
        if not self.writer.transport.get_write_buffer_size():
            return  # all sent at once: nothing to wait for
        try:
            async with asyncio.timeout(self.lim.write_timeout):
                await self.writer.drain()
        except TimeoutError:
            self.site.log("write-timeout", "dropped a connection: the client does not read its response",
                          level=logging.INFO, listener=self.site.name, peer=self.peer,
                          timeout=f"{self.lim.write_timeout}s")
            # close() would wait for the unread buffer to drain, which is what never happens here.
            self.writer.transport.abort()
            raise ConnectionAbortedError("write stalled") from None

    async def _reject(self, r: _Reject) -> None:
        self.site.log(r.kind, str(r), listener=self.site.name,
                      peer=self.peer, status=r.status, **r.kv)
        body = f"{r.status} {HTTPStatus(r.status).phrase}\n".encode()
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                await self._respond(Response(r.status, body, "text/plain; charset=utf-8"), close=True)
            except h11.LocalProtocolError:
                await self._write(_raw_response(r.status, body))
        else:
            await self._write(_raw_response(r.status, body))
        await self._linger()

    async def _linger(self) -> None:
        """Read what the client still sends for a while before closing, so that closing with unread bytes
        does not reset the connection before the client read the error response."""
        with contextlib.suppress(OSError, RuntimeError):
            if self.writer.can_write_eof():
                self.writer.write_eof()
        got = 0
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(self.lim.lingering_time):
                while got < _LINGER_BYTES and (chunk := await self.reader.read(_READ_SIZE)):
                    got += len(chunk)


class _TakenReader(ByteReader):
    def __init__(self, leftover: bytes, reader: asyncio.StreamReader) -> None:
        self._leftover = leftover
        self._reader = reader

    async def read(self, n: int) -> bytes:
        if self._leftover:
            chunk, self._leftover = self._leftover[:n], self._leftover[n:]
            return chunk
        try:
            return await self._reader.read(n)
        except OSError:
            return b""  # a reset is the end of the stream, as a hang-up


class _TakenWriter(ByteWriter):
    def __init__(self, conn: _Connection) -> None:
        self._conn = conn

    def write(self, data: bytes) -> None:
        if self._conn.writer.transport.is_closing():
            raise ConnectionResetError("connection closed")
        self._conn.writer.write(data)

    async def drain(self) -> None:
        await self._conn._drain()

    def close(self) -> None:
        self._conn.writer.transport.close()


def _malformed(e: h11.RemoteProtocolError) -> _Reject:
    return _Reject(e.error_status_hint, "bad-request", "rejected a malformed request", err=_error_text(e))


def _raw_response(status: int, body: bytes) -> bytes:
    phrase = HTTPStatus(status).phrase
    return (f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, format_http_date(now))
    return _date_cache[1]


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    text = text.splitlines()[0] if text else type(exc).__name__
    return text[:_MAX_ERROR_TEXT]


def peer_text(peername: Any) -> str:
    if isinstance(peername, tuple) and len(peername) >= 2:
        return f"{peername[0]}:{peername[1]}"
    return str(peername or "")


def listen(host: str, port: int, backlog: int) -> socket.socket:
    family, kind, proto, _, addr = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        with contextlib.suppress(OSError):
            sock.close()
        raise
    return sock


async def bounded_accepts(sock: socket.socket, limits: ServingLimits, log: RateLimitedLog, name: str, cap: int,
                          open_count: Callable[[], int], make_room: Callable[[], bool] = lambda: False,
                          ) -> AsyncIterator[tuple[socket.socket, str]]:
    """Accepted connections with their peer text, both listeners' bounds: a failing accept() pauses (one log line)
    instead of spinning, and a connection over the cap is closed at once unless `make_room()` closed an idle one."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            conn, peer = await loop.sock_accept(sock)
        except ConnectionAbortedError:
            continue
        except OSError as e:
            # Accepting again at once would fail again: leave the connections queued in the backlog.
            what = "out of descriptors" if e.errno in OUT_OF_RESOURCES else "failed"
            log("accept-failed", f"accept() {what}: pausing accept", listener=name, err=str(e),
                pause=f"{limits.accept_retry_delay}s")
            await asyncio.sleep(limits.accept_retry_delay)
            continue
        if open_count() >= cap and not make_room():
            conn.close()
            log("over-cap", "refused a connection: too many open connections", listener=name,
                peer=peer_text(peer), limit=cap)
            continue
        yield conn, peer_text(peer)
