"""Objects and their history, as etcd plus the watch cache keep them.

One global resourceVersion counter for every write; each write is an event in a bounded history
(the window a watch can resume from); watches get the events after their resourceVersion, filtered
by their selector, with the ADDED/DELETED a selector change implies (as the watch cache does).
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.apiserver import gozero

Json = dict[str, Any]
Predicate = Callable[[Json], bool]


def json_copy(obj: Any) -> Any:
    """copy.deepcopy for a JSON document (dicts, lists, scalars), several times faster: every read and write of
    the store copies. Anything else falls back to deepcopy."""
    t = type(obj)
    if t is dict:
        return {k: v if type(v) in _SCALARS else json_copy(v) for k, v in obj.items()}
    if t is list:
        return [v if type(v) in _SCALARS else json_copy(v) for v in obj]
    if t in _SCALARS:
        return obj
    return copy.deepcopy(obj)


_SCALARS = frozenset((str, int, float, bool, type(None)))


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str
    obj: Json
    old: Json | None


_METADATA_ORDER = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                   "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
                   "finalizers", "managedFields")


def _ordered_metadata(md: Json) -> Json:
    """ObjectMeta's field order, as Go serialises it: easier to read next to the recordings."""
    out = {k: md[k] for k in _METADATA_ORDER if k in md}
    out.update({k: v for k, v in md.items() if k not in out})
    return out


class TooOld(Exception):
    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass(eq=False)
class Watch:
    resource: str
    namespace: str | None
    predicate: Predicate
    queue: asyncio.Queue[tuple[str, Json] | None] = field(default_factory=asyncio.Queue)

    def offer(self, change: Change) -> None:
        if change.resource != self.resource:
            return
        if self.namespace and change.obj.get("metadata", {}).get("namespace") != self.namespace:
            return
        new_ok = change.type != "DELETED" and self.predicate(change.obj)
        old_ok = change.old is not None and self.predicate(change.old)
        if change.type == "DELETED":
            if self.predicate(change.obj):
                self.queue.put_nowait(("DELETED", change.obj))
        elif new_ok and old_ok:
            self.queue.put_nowait(("MODIFIED", change.obj))
        elif new_ok:
            self.queue.put_nowait(("ADDED", change.obj))
        elif old_ok:
            self.queue.put_nowait(("DELETED", change.obj))

    def close(self) -> None:
        self.queue.put_nowait(None)


class Store:
    def __init__(self, history: int = 1000, first_rv: int = 100) -> None:
        self.rv = first_rv
        self.history_size = history
        self._objects: dict[str, dict[tuple[str, str], Json]] = {}
        self._history: deque[Change] = deque()
        self._compacted = first_rv
        # in the order they were opened: a set would offer each change in memory-address order, which varies
        self.watches: dict[Watch, None] = {}

    # reads ---------------------------------------------------------------------------------------
    def get(self, resource: str, namespace: str, name: str) -> Json | None:
        obj = self._objects.get(resource, {}).get((namespace, name))
        return json_copy(obj) if obj is not None else None

    def list_objects(self, resource: str, namespace: str | None = None) -> list[Json]:
        items = self._objects.get(resource, {})
        keys = sorted(k for k in items if namespace is None or k[0] == namespace)
        return [json_copy(items[k]) for k in keys]

    # writes --------------------------------------------------------------------------------------
    def create(self, resource: str, obj: Json) -> Json:
        md = obj.setdefault("metadata", {})
        md["uid"] = md.get("uid") or str(uuid.uuid4())
        md["creationTimestamp"] = now_rfc3339()
        return self._write(resource, obj, "ADDED", None)

    def update(self, resource: str, obj: Json) -> Json:
        md = obj["metadata"]
        old = self._objects[resource][(md.get("namespace", ""), md["name"])]
        return self._write(resource, obj, "MODIFIED", old)

    def delete(self, resource: str, namespace: str, name: str) -> Json:
        old = self._objects[resource].pop((namespace, name))
        obj = json_copy(old)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._record(Change(self.rv, "DELETED", resource, obj, old))
        out: Json = json_copy(obj)
        return out

    def _write(self, resource: str, obj: Json, kind: str, old: Json | None) -> Json:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        md = obj["metadata"] = _ordered_metadata(obj["metadata"])
        if isinstance(obj.get("status"), dict):
            {"pods": gozero.pod_status, "nodes": gozero.node_status}.get(resource, lambda _s: None)(obj["status"])
        stored = json_copy(obj)
        self._objects.setdefault(resource, {})[(md.get("namespace", ""), md["name"])] = stored
        self._record(Change(self.rv, kind, resource, stored, old))
        out: Json = json_copy(stored)
        return out

    def _record(self, change: Change) -> None:
        self._history.append(change)
        while len(self._history) > self.history_size:
            self._compacted = self._history.popleft().rv
        for watch in list(self.watches):
            watch.offer(change)

    # history -------------------------------------------------------------------------------------
    def compact(self) -> None:
        """Forget all history: every resourceVersion before now is too old to watch from."""
        self._history.clear()
        self._compacted = self.rv

    @property
    def oldest(self) -> int:
        """The oldest resourceVersion a watch can start from."""
        return self._compacted

    def changes_since(self, rv: int) -> list[Change]:
        if rv < self._compacted:
            raise TooOld(rv, self._compacted + 1)
        return [c for c in self._history if c.rv > rv]

    def open_watch(self, resource: str, namespace: str | None, predicate: Predicate, since: int | None) -> Watch:
        """A watch that gets every change after `since` (None: only future ones)."""
        watch = Watch(resource, namespace, predicate)
        if since is not None:
            for change in self.changes_since(since):
                watch.offer(change)
        self.watches[watch] = None
        return watch

    def close_watch(self, watch: Watch) -> None:
        self.watches.pop(watch, None)
