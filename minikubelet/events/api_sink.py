"""The API side of events: once the node joined a cluster, recorded events are written as core/v1 Events,
spam-filtered, aggregated and rate-limited like client-go's recorder."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import ApiError, RestClient, TokenBucket, TransportError

log = logging.getLogger("minikubelet.events")

# client-go tools/record (events_cache.go, event.go) and the kubelet's defaults
EVENT_QPS = 50.0  # eventRecordQPS
EVENT_BURST = 100  # eventBurst
MAX_QUEUED = 1000  # maxQueuedEvents: more waiting than this and new ones are dropped
CACHE_SIZE = 4096  # maxLruCacheEntries
SPAM_BURST = 25  # defaultSpamBurst: events per object ...
SPAM_QPS = 1.0 / 300  # defaultSpamQPS: ... then one per 5 minutes
AGGREGATE_MAX_EVENTS = 10  # defaultAggregateMaxEvents similar events ...
AGGREGATE_INTERVAL = 600.0  # defaultAggregateIntervalInSeconds ... within 10 minutes are combined
MAX_TRIES = 12  # maxTriesPerEvent
RETRY_SLEEP = 10.0  # the sleep between tries


@dataclass
class _Spam:
    tokens: float
    last: float


@dataclass
class _Similar:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass
class _Sent:
    name: str
    count: int
    first: str


class ApiEventSink:
    """Writes events to the API server as client-go's recorder does for the kubelet.

    Correlation (EventCorrelator), in order: the spam filter (per source and object: 25 events, then one
    every 5 minutes; the rest are dropped), the aggregator (10 events of one object, type and reason with
    different messages within 10 minutes become one `(combined from similar events): <message>` event),
    and the logger: the first event of a key is POSTed as `<object name>.<hex nanoseconds>`, every repeat
    PATCHes its `count`, `lastTimestamp` and `message` (`kubelet-11`; a 404 creates it again). Writes pass
    a token bucket (eventRecordQPS 50, eventBurst 100); at most 1000 wait, newer ones are dropped.
    """

    def __init__(self, client: RestClient, clock: Clock, *, qps: float = EVENT_QPS, burst: int = EVENT_BURST,
                 max_queued: int = MAX_QUEUED) -> None:
        self.client = client
        self.clock = clock
        self.limiter = TokenBucket(qps, burst, clock)
        self.max_queued = max_queued
        self.dropped = 0
        self._queue: deque[tuple[str, dict[str, Any]]] = deque()  # ("create" | "patch", event)
        self._ready = asyncio.Event()
        self._spam: OrderedDict[tuple[str, ...], _Spam] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()
        self._sent: OrderedDict[tuple[str, ...], _Sent] = OrderedDict()

    # ---------------------------------------------------------------- correlation (synchronous)
    def __call__(self, event: dict[str, Any]) -> None:
        # upstream EventCorrelate: aggregate, observe (count), then the spam filter on what would be written
        now = self.clock.monotonic()
        obj = event["involvedObject"]
        source = (event["source"]["component"], event["source"].get("host", ""))
        obj_key = (*source, obj["kind"], obj.get("namespace", ""), obj["name"], obj.get("uid", ""),
                   obj.get("apiVersion", ""))
        agg_key = (*obj_key, event["type"], event["reason"], event.get("reportingComponent", ""),
                   event.get("reportingInstance", ""))
        message = event["message"]
        key: tuple[str, ...] = (*agg_key, obj.get("fieldPath", ""), message)
        similar = _lru_get(self._similar, agg_key, _Similar)
        if now - similar.last > AGGREGATE_INTERVAL:
            similar.messages = set()
        similar.last = now
        similar.messages.add(message)
        combined = len(similar.messages) >= AGGREGATE_MAX_EVENTS
        if combined:
            message = f"(combined from similar events): {message}"
            key = (*agg_key, "combined")
        namespace = obj.get("namespace") or "default"
        sent = self._sent.get(key)
        if sent is None:
            sent = _Sent(f"{obj['name']}.{int(self.clock.now() * 1e9):x}", 1, event["firstTimestamp"])
            self._remember(key, sent)
            verb = "create"
        else:
            self._sent.move_to_end(key)
            sent.count += 1
            verb = "patch"
        if not self._allow((*obj_key, event["type"]), now):
            self.dropped += 1  # its count is kept: a later write carries it
            return
        meta: dict[str, Any] = {"name": sent.name, "namespace": namespace}
        annotations = (event.get("metadata") or {}).get("annotations")
        if annotations and not combined:
            meta["annotations"] = annotations  # upstream's aggregated event is a new one, without them
        self._enqueue(verb, {**event, "message": message, "metadata": meta, "count": sent.count,
                             "firstTimestamp": sent.first})

    def _allow(self, key: tuple[str, ...], now: float) -> bool:
        spam = self._spam.get(key)
        if spam is None:
            spam = _Spam(float(SPAM_BURST), now)
            self._spam[key] = spam
            while len(self._spam) > CACHE_SIZE:
                self._spam.popitem(last=False)
        self._spam.move_to_end(key)
        spam.tokens = min(float(SPAM_BURST), spam.tokens + (now - spam.last) * SPAM_QPS)
        spam.last = now
        if spam.tokens < 1.0:
            return False
        spam.tokens -= 1.0
        return True

    def _remember(self, key: tuple[str, ...], sent: _Sent) -> None:
        self._sent[key] = sent
        while len(self._sent) > CACHE_SIZE:
            self._sent.popitem(last=False)

    def _enqueue(self, verb: str, body: dict[str, Any]) -> None:
        if len(self._queue) >= self.max_queued:
            self.dropped += 1
            return
        self._queue.append((verb, body))
        self._ready.set()

    # ---------------------------------------------------------------- writing (the sink's task)
    async def run(self) -> None:
        while True:
            await self._ready.wait()
            while self._queue:
                verb, body = self._queue.popleft()
                await self._write(verb, body)
            self._ready.clear()

    async def _write(self, verb: str, body: dict[str, Any]) -> None:
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        for attempt in range(MAX_TRIES):
            await self.limiter.acquire()
            try:
                if verb == "patch":
                    try:
                        await self.client.patch(f"/api/v1/namespaces/{ns}/events/{name}", {
                            "count": body["count"], "lastTimestamp": body["lastTimestamp"],
                            "message": body["message"]})
                        return
                    except ApiError as e:
                        if not e.not_found:
                            raise
                        verb = "create"  # the event is gone (expired): write it again
                await self.client.create(f"/api/v1/namespaces/{ns}/events", body)
                return
            except ApiError as e:
                if e.code < 500 and e.code != 429:
                    # as recordToSink: an answer that will not change (AlreadyExists, invalid, forbidden)
                    log.info("event not written", extra={"kv": {"event": name, "err": str(e)}})
                    return
            except TransportError:
                pass
            if attempt + 1 < MAX_TRIES:
                await self.clock.sleep(RETRY_SLEEP)
        log.warning("event dropped after retries", extra={"kv": {"event": name}})


def _lru_get(cache: OrderedDict[tuple[str, ...], _Similar], key: tuple[str, ...],
             make: Callable[[], _Similar]) -> _Similar:
    entry = cache.get(key)
    if entry is None:
        entry = cache[key] = make()
        while len(cache) > CACHE_SIZE:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return entry
