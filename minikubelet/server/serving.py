"""A bounded HTTP listener for aiohttp applications.

asyncio's own accept loop (`loop.create_server`, hence aiohttp's TCPSite) accepts as fast as connections
arrive and, on EMFILE, logs a traceback per queued connection and retries; aiohttp closes a client that
trickles its headers only after the keep-alive timeout and logs every malformed request with a traceback.
So this module runs its own accept loop on the listening socket (`loop.sock_accept` +
`loop.connect_accepted_socket`, which also takes TLS for the 10250 API), refuses connections beyond a cap,
and serves each one with a `RequestHandler` subclass that adds a header deadline, a write-stall deadline,
431 for oversized heads and one rate-limited log line per rejection.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong

from minikubelet.server.limits import ServingLimits, connection_cap
from minikubelet.server.listener import bounded_accepts
from minikubelet.server.listener import listen as _listen
from minikubelet.server.listener import peer_text as _peer
from minikubelet.server.ratelog import RateLimitedLog

log = logging.getLogger("minikubelet.server")

_MAX_ERROR_TEXT = 160

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def bounded_app(limits: ServingLimits) -> web.Application:
    """An Application whose handlers read at most `limits.max_body_size` bytes of body."""
    app = web.Application(client_max_size=limits.max_body_size)
    app.middlewares.insert(0, _request_bounds)
    return app


async def serve(app: web.Application, host: str, port: int, limits: ServingLimits,
                ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, BoundedSite]:
    """Serve `app` (made by `bounded_app`) on host:port; `runner.cleanup()` stops it."""
    if _request_bounds not in app.middlewares:
        app.middlewares.insert(0, _request_bounds)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=limits.shutdown_timeout)
    await runner.setup()
    site = BoundedSite(runner, host, port, limits, ssl_context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, site


@web.middleware
async def _request_bounds(request: web.Request, handler: Handler) -> web.StreamResponse:
    conn = request.protocol
    if not isinstance(conn, BoundedHandler):
        return await handler(request)
    conn.request_started()
    try:
        declared = request.content_length
        if declared is not None and declared > conn.site.limits.max_body_size:
            conn.site.log("body-too-large", "rejected a request: body too large", peer=conn.peer,
                          size=declared, limit=conn.site.limits.max_body_size)
            resp = web.Response(status=413, text="413 Request Entity Too Large\n")
            resp.force_close()
            return resp
        return await handler(request)
    finally:
        conn.request_finished()


class BoundedSite(web.BaseSite):
    """A listening socket with its own accept loop: at most `cap` open connections."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, limits: ServingLimits,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=limits.backlog)
        self.limits = limits
        self.cap = connection_cap(limits)
        self.connections: set[BoundedHandler] = set()
        self.log = RateLimitedLog(log, limits.log_interval)
        self._host = host
        self._port = port
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connecting: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1]) if self._sock is not None else self._port

    async def start(self) -> None:
        await super().start()
        self._sock = _listen(self._host, self._port, self.limits.backlog)
        self._accepting = asyncio.create_task(self._accept_loop(), name=f"accept {self.name}")

    async def stop(self) -> None:
        tasks = [t for t in (self._accepting, *self._connecting) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()
        await super().stop()

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        server = self._runner.server
        assert server is not None

        def factory() -> BoundedHandler:
            return BoundedHandler(server, self, loop=loop)

        accepted = bounded_accepts(self._sock, self.limits, self.log, self.name, self.cap,
                                   lambda: len(self.connections) + len(self._connecting))
        async for conn, _peer_text in accepted:
            task = asyncio.create_task(self._connect(loop, factory, conn))
            self._connecting.add(task)
            task.add_done_callback(self._connecting.discard)

    async def _connect(self, loop: asyncio.AbstractEventLoop, factory: Callable[[], BoundedHandler],
                       conn: socket.socket) -> None:
        tls: dict[str, Any] = {}
        if self._ssl_context is not None:
            tls = {"ssl": self._ssl_context, "ssl_handshake_timeout": self.limits.header_timeout}
        try:
            await loop.connect_accepted_socket(factory, conn, **tls)
        except (OSError, TimeoutError) as e:
            conn.close()
            self.log("handshake-failed", "dropped a connection during set-up", listener=self.name,
                     err=str(e) or type(e).__name__)


class BoundedHandler(web.RequestHandler):
    """aiohttp's HTTP/1.1 connection protocol with the deadlines and the error handling above."""

    def __init__(self, manager: web.Server, site: BoundedSite, *, loop: asyncio.AbstractEventLoop) -> None:
        lim = site.limits
        super().__init__(
            manager, loop=loop, keepalive_timeout=lim.idle_timeout, max_line_size=lim.max_line_size,
            max_field_size=lim.max_field_size, max_headers=lim.max_headers, lingering_time=lim.lingering_time,
            access_log=None, logger=log,  # type: ignore[arg-type]  # aiohttp's own AppRunner passes None: no access log
        )
        self.site = site
        self.peer = ""
        self._head_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._in_request = False
        self._hijacked: asyncio.StreamReader | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.peer = _peer(transport.get_extra_info("peername"))
        self.site.connections.add(self)
        super().connection_made(transport)
        self._arm_head()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.site.connections.discard(self)
        if self._hijacked is not None:
            self._hijacked.feed_eof()
        for timer in (self._head_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._write_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._hijacked is not None:
            self._hijacked.feed_data(data)
            return
        # The first byte of the next request on a kept-alive connection starts its head's deadline.
        if data and self._head_timer is None and not self._in_request:
            self._arm_head()
        super().data_received(data)

    def hijack(self, limit: int = 256 * 1024) -> asyncio.StreamReader:
        """Every byte received from now on, for a protocol taking the connection over after its own 101
        (SPDY/3.1: aiohttp's parser treats only WebSocket upgrades as upgrades and would parse the frames as
        the next request). The reader pauses the socket beyond `limit` unread bytes; the write-stall deadline
        still applies."""
        reader = asyncio.StreamReader(limit=limit, loop=self._loop)
        if self.transport is not None:
            reader.set_transport(self.transport)
        self._hijacked = reader
        return reader

    def request_started(self) -> None:
        self._in_request = True
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def request_finished(self) -> None:
        self._in_request = False

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self._loop.call_later(self.site.limits.write_timeout, self._write_expired)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _arm_head(self) -> None:
        self._head_timer = self._loop.call_later(self.site.limits.header_timeout, self._head_expired)

    def _head_expired(self) -> None:
        self._head_timer = None
        self.site.log("header-timeout", "closed a connection: no complete request head in time",
                      level=logging.INFO, listener=self.site.name, peer=self.peer,
                      timeout=f"{self.site.limits.header_timeout}s")
        self.force_close()

    def _write_expired(self) -> None:
        self._write_timer = None
        self.site.log("write-timeout", "dropped a connection: the client does not read its response",
                      level=logging.INFO, listener=self.site.name, peer=self.peer,
                      timeout=f"{self.site.limits.write_timeout}s")
        transport = self.transport
        if transport is not None:
            # close() would wait for the unread buffer to drain, which is what never happens here.
            transport.abort()

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if _head_too_large(exc):
            status = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
        if status >= 500:
            self.site.log("handler-error", "request handler failed", level=logging.ERROR, exc_info=exc,
                          listener=self.site.name, path=request.path)
        else:
            self.site.log("bad-request", "rejected a malformed request", listener=self.site.name,
                          peer=self.peer, status=status, err=_error_text(exc))
        if request.writer.output_size > 0:
            raise ConnectionError("response already started; cannot send the error response")
        phrase = HTTPStatus(status).phrase
        resp = web.Response(status=status, text=f"{status} {phrase}\n")
        resp.force_close()
        return resp

    def log_exception(self, *args: Any, **kw: Any) -> None:
        message = (str(args[0]) % args[1:] if len(args) > 1 else str(args[0])) if args else "error"
        exc = kw.get("exc_info")
        self.site.log("internal-error", message, level=logging.ERROR,
                      exc_info=exc if isinstance(exc, BaseException) else None, listener=self.site.name)


def _head_too_large(exc: BaseException | None) -> bool:
    if isinstance(exc, LineTooLong):
        return True
    return isinstance(exc, BadHttpMessage) and "too many headers" in exc.message.lower()


def _error_text(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    text = exc.message if isinstance(exc, HttpProcessingError) else str(exc)
    text = text.splitlines()[0] if text else type(exc).__name__
    return text[:_MAX_ERROR_TEXT]
