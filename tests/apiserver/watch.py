"""Watch streams: chunked newline-delimited JSON events, as watch-*.raw show them (one event per
chunk), with initial events, bookmarks and the in-stream 410 ERROR for too-old resourceVersions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.apiserver import errors
from tests.apiserver.resources import ZERO, Resource
from tests.apiserver.store import Store, TooOld

Json = dict[str, Any]

def dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def bookmark(res: Resource, rv: int, initial_end: bool = False) -> Json:
    md: Json = {"resourceVersion": str(rv)}
    if initial_end:
        md["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"type": "BOOKMARK", "object": {"kind": res.kind, "apiVersion": res.api_version, "metadata": md,
                                            **ZERO.get(res.kind, {})}}


@dataclass
class WatchParams:
    rv: str
    send_initial: bool
    bookmarks: bool
    timeout: float


class WatchStreams:
    """Open watch responses, so a fault can drop them."""

    def __init__(self) -> None:
        self.open: set[web.StreamResponse] = set()
        self.requests: dict[web.StreamResponse, web.Request] = {}
        self.bookmark_interval = 60.0
        self._drop = asyncio.Event()

    def drop(self) -> int:
        """Cut every open watch connection (the TCP connection, without a final chunk)."""
        n = 0
        for resp in list(self.open):
            req = self.requests.get(resp)
            if req is not None and req.transport is not None:
                req.transport.close()
                n += 1
        return n

    async def serve(self, request: web.Request, store: Store, res: Resource, ns: str,
                    matches: Callable[[Json], bool], p: WatchParams, extra_headers: dict[str, str]) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={
            "Cache-Control": "no-cache, private", "Content-Type": "application/json", **extra_headers})
        resp.enable_chunked_encoding()
        initial: list[tuple[str, Json]] = []
        too_old: TooOld | None = None
        watch = None
        try:
            if p.send_initial or p.rv in ("", "0"):
                watch = store.open_watch(res.plural, ns or None, matches, since=None)
                initial = [("ADDED", o) for o in store.list_objects(res.plural, ns or None) if matches(o)]
            else:
                watch = store.open_watch(res.plural, ns or None, matches, since=int(p.rv))
        except TooOld as exc:
            too_old = exc
        except ValueError as exc:
            raise errors.bad_request(f'invalid resource version: "{p.rv}"') from exc
        start_rv = store.rv
        await resp.prepare(request)
        self.open.add(resp)
        self.requests[resp] = request
        try:
            if too_old is not None:
                body = errors.expired(str(too_old)).body
                await resp.write(dumps({"type": "ERROR", "object": body}) + b"\n")
                return resp
            for kind, obj in initial:
                await resp.write(dumps({"type": kind, "object": obj}) + b"\n")
            if p.send_initial and p.bookmarks:
                await resp.write(dumps(bookmark(res, start_rv, initial_end=True)) + b"\n")
            assert watch is not None
            await self._pump(resp, store, res, watch.queue, p)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        finally:
            if watch is not None:
                store.close_watch(watch)
            self.open.discard(resp)
            self.requests.pop(resp, None)
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp

    async def _pump(self, resp: web.StreamResponse, store: Store, res: Resource,
                    queue: asyncio.Queue[tuple[str, Json] | None], p: WatchParams) -> None:
        deadline = time.monotonic() + p.timeout
        # Bookmarks come ~2 s before the timeout and then at the interval (watch-pods-node.raw).
        next_bookmark = None
        if p.bookmarks:
            before_end = deadline - 2
            next_bookmark = min(before_end if before_end > time.monotonic() else deadline + 1,
                                time.monotonic() + self.bookmark_interval)
        while True:
            now = time.monotonic()
            if now >= deadline:
                return
            wake = deadline if next_bookmark is None else min(deadline, next_bookmark)
            try:
                item = await asyncio.wait_for(queue.get(), timeout=max(wake - now, 0))
            except TimeoutError:
                if next_bookmark is not None and time.monotonic() >= next_bookmark:
                    await resp.write(dumps(bookmark(res, store.rv)) + b"\n")
                    next_bookmark = time.monotonic() + self.bookmark_interval
                continue
            if item is None:
                return
            kind, obj = item
            await resp.write(dumps({"type": kind, "object": obj}) + b"\n")
