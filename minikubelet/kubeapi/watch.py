"""List, then watch from the list's resourceVersion (client-go's Reflector, for one resource and selector).

The watch asks for bookmarks and resumes from the last resourceVersion it saw whenever the server ends
the stream; a 410 (an ERROR event or the answer itself) means that version is gone: list again. A
failed list or watch is retried with client-go's reflector backoff (0.8 s doubling to 30 s, jittered).
Lines are bounded by the client's `max_line`; a stream silent longer than its timeout plus a margin
counts as cut.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError

log = logging.getLogger("minikubelet.kubeapi.watch")
Json = dict[str, Any]

MIN_WATCH_TIMEOUT = 300.0  # client-go minWatchTimeout: each watch asks for 5-10 min
IDLE_MARGIN = 30.0
BACKOFF_INITIAL = 0.8
BACKOFF_MAX = 30.0

LIST = "LIST"  # a (re)list: `items` holds every object; consumers replace what they knew


@dataclass(frozen=True)
class WatchEvent:
    type: str  # LIST, ADDED, MODIFIED, DELETED
    object: Json = field(default_factory=dict)
    items: tuple[Json, ...] = ()


class _Relist(Exception):
    pass


class ListWatch:
    def __init__(self, client: RestClient, path: str, clock: Clock, *, field_selector: str = "",
                 label_selector: str = "", min_timeout: float = MIN_WATCH_TIMEOUT) -> None:
        self.client = client
        self.path = path
        self.clock = clock
        self.selectors = {k: v for k, v in (("fieldSelector", field_selector), ("labelSelector", label_selector)) if v}
        self.min_timeout = min_timeout
        self.resource_version = ""
        self._backoff = BACKOFF_INITIAL
        # A watch stream is open: what the consumer holds is being kept current. False while the server is
        # away and the watch waits out its backoff (up to a minute), when the cache may be far behind.
        self.established = False

    async def _sleep_backoff(self, what: str, err: Exception) -> None:
        delay = self._backoff * (1 + random.random())
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)
        log.info(f"{what} failed, retrying", extra={"kv": {"path": self.path, "err": str(err), "in": round(delay, 2)}})
        await self.clock.sleep(delay)

    async def _list(self) -> WatchEvent:
        while True:
            try:
                doc = await self.client.get(self.path, dict(self.selectors))
                items = doc.get("items")
                if not isinstance(items, list):
                    raise TransportError("list answer without items")
                self.resource_version = str((doc.get("metadata") or {}).get("resourceVersion") or "")
                return WatchEvent(LIST, items=tuple(i for i in items if isinstance(i, dict)))
            except (ApiError, TransportError) as e:
                await self._sleep_backoff("list", e)

    async def events(self) -> AsyncIterator[WatchEvent]:
        """LIST first, then every change, forever (a LIST again after a 410)."""
        yield await self._list()
        while True:
            try:
                async for event in self._watch_once():
                    yield event
            except _Relist:
                yield await self._list()
            except (ApiError, TransportError) as e:
                if isinstance(e, ApiError) and e.gone:
                    yield await self._list()
                    continue
                await self._sleep_backoff("watch", e)

    async def _watch_once(self) -> AsyncIterator[WatchEvent]:
        timeout = self.min_timeout * (1 + random.random())
        query = {**self.selectors, "allowWatchBookmarks": "true", "resourceVersion": self.resource_version,
                 "timeoutSeconds": str(int(timeout)), "watch": "true"}
        async with self.client.stream_lines(self.path, query, timeout + IDLE_MARGIN) as lines:
            self.established = True
            try:
                async for event in self._decode(lines):
                    yield event
            finally:
                self.established = False

    async def _decode(self, lines: AsyncIterator[bytes]) -> AsyncIterator[WatchEvent]:
        async for line in lines:
            try:
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
            except (ValueError, KeyError, TypeError):
                raise TransportError("watch event is not JSON with type and object") from None
            if not isinstance(obj, dict):
                raise TransportError("watch event object is not an object")
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise _Relist()
                raise ApiError(int(obj.get("code") or 500), obj)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.resource_version = str(rv)
            self._backoff = BACKOFF_INITIAL
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                yield WatchEvent(kind, obj)
