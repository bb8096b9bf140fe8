"""Keep-alive connections to the Docker Engine, bounded both ways.

At most `max_requests` plain requests are in flight at once (the rest wait for a slot, as with
aiohttp's connector limit), and at most `max_idle` finished connections are kept for reuse: a burst
from a hundred pod workers runs in parallel, and afterwards only a few sockets stay open.
Streams and hijacked connections are owned by their caller and count against neither bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from cri.docker.connection import Connection, Endpoint

MAX_REQUESTS = 64
MAX_IDLE = 8
# Past this an idle socket is closed rather than reused (aiohttp's keepalive_timeout default).
IDLE_TIMEOUT = 15.0


class ConnectFailed(ConnectionError):
    """The Engine's socket could not be opened (absent, refused, timed out)."""


class ConnectionPool:
    def __init__(
        self,
        endpoint: Endpoint,
        connect_timeout: float,
        max_requests: int = MAX_REQUESTS,
        max_idle: int = MAX_IDLE,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        self.idle_timeout = idle_timeout
        self._slots = asyncio.Semaphore(max_requests)
        self._idle: list[Connection] = []
        self._waiting = 0  # requests queued for a slot
        self.opened = 0  # sockets opened over the pool's life (tests and profiles read it)

    @property
    def idle_count(self) -> int:
        return len(self._idle)

    async def connect(self) -> Connection:
        """A fresh connection, not from the idle list (for hijacks that never come back)."""
        try:
            reader, writer = await asyncio.wait_for(self.endpoint.open(), self.connect_timeout)
        except TimeoutError as exc:
            raise ConnectFailed(f"Cannot connect to Docker Engine via {self.endpoint.url} [timed out]") from exc
        except OSError as exc:
            raise ConnectFailed(f"Cannot connect to Docker Engine via {self.endpoint.url} [{exc}]") from exc
        self.opened += 1
        return Connection(reader, writer)

    async def take(self) -> Connection:
        """An idle connection if one is still good, else a new one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.fresh(self.idle_timeout):
                return conn
            conn.close()
        return await self.connect()

    def give_back(self, conn: Connection) -> None:
        # While requests wait for a slot every finished connection is worth keeping: one of them
        # takes it next. Once none wait, the idle list shrinks back to its bound (oldest first).
        if conn.reusable() and (len(self._idle) < self.max_idle or self._waiting):
            conn.http.start_next_cycle()
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()
        while not self._waiting and len(self._idle) > self.max_idle:
            self._idle.pop(0).close()

    @asynccontextmanager
    async def request_slot(self) -> AsyncIterator[Connection]:
        """A connection for one bounded request; kept for reuse only if the exchange completed."""
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            conn = await self.take()
            try:
                yield conn
            except BaseException:
                conn.close()
                raise
            self.give_back(conn)
        finally:
            self._slots.release()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
