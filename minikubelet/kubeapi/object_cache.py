"""Single-object watches of the ConfigMaps and Secrets pods reference (upstream
pkg/kubelet/util/manager/watch_based_manager.go, `configMapAndSecretChangeDetectionStrategy: Watch`).

Every (namespace, name) some pod references gets its own list + watch with `fieldSelector=metadata.name=<name>`
(the only reads the Node authorizer allows a node: objects of pods bound to it), started by the first
reference and stopped when the last pod releases it. `get` answers from that cache, waiting at most a second
for its first list; an object marked `immutable` is not watched after it has been read once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import RestClient
from minikubelet.kubeapi.watch import LIST, ListWatch

log = logging.getLogger("minikubelet.kubeapi.object_cache")
Json = dict[str, Any]

SYNC_TIMEOUT = 1.0  # upstream Get: PollImmediate(10ms, 1s) until the reflector has listed once
MIN_WATCH_TIMEOUT = 1800.0  # upstream bumps these reflectors' MinWatchTimeout to 30 min


class CacheError(Exception):
    def __init__(self, message: str, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found


@dataclass
class _Item:
    refs: dict[str, int] = field(default_factory=dict)  # pod uid -> references
    obj: Json | None = None
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    immutable: bool = False
    waited: bool = False  # a get timed out before the first list: that list is a change for the pods
    task: asyncio.Task[None] | None = None

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None


class ObjectCache:
    def __init__(self, client: RestClient, resource: str, kind: str, clock: Clock, *,
                 on_change: Callable[[str, str], None] = lambda _ns, _name: None,
                 sync_timeout: float = SYNC_TIMEOUT, min_watch_timeout: float = MIN_WATCH_TIMEOUT) -> None:
        """`resource`: the plural in the path (`configmaps`); `kind`: upstream's name in messages (`configmap`).
        `on_change(namespace, name)` is called when a watched object changes after its first list, and at the
        first list when a `get` gave up waiting for it."""
        self.client = client
        self.resource = resource
        self.kind = kind
        self.clock = clock
        self.on_change = on_change
        self.sync_timeout = sync_timeout
        self.min_watch_timeout = min_watch_timeout
        self._items: dict[tuple[str, str], _Item] = {}

    def add_reference(self, namespace: str, name: str, uid: str) -> None:
        key = (namespace, name)
        item = self._items.get(key)
        if item is None:
            item = self._items[key] = _Item()
            item.task = asyncio.create_task(self._reflect(namespace, name, item), name=f"{self.kind}-{namespace}/{name}")
        item.refs[uid] = item.refs.get(uid, 0) + 1

    def delete_reference(self, namespace: str, name: str, uid: str) -> None:
        key = (namespace, name)
        item = self._items.get(key)
        if item is None:
            return
        left = item.refs.get(uid, 0) - 1
        if left > 0:
            item.refs[uid] = left
        else:
            item.refs.pop(uid, None)
        if not item.refs:
            item.stop()
            del self._items[key]

    def watched(self) -> dict[tuple[str, str], bool]:
        """(namespace, name) -> a watch runs for it (False: immutable, read once)."""
        return {k: i.task is not None for k, i in self._items.items()}

    def referenced_by(self, namespace: str, name: str) -> list[str]:
        item = self._items.get((namespace, name))
        return sorted(item.refs) if item is not None else []

    async def get(self, namespace: str, name: str) -> Json:
        item = self._items.get((namespace, name))
        if item is None:
            raise CacheError(f'object "{namespace}"/"{name}" not registered')
        if not item.synced.is_set():
            waiter = asyncio.ensure_future(item.synced.wait())
            timer = asyncio.ensure_future(self.clock.sleep(self.sync_timeout))
            try:
                await asyncio.wait({waiter, timer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in (waiter, timer):
                    t.cancel()
                await asyncio.gather(waiter, timer, return_exceptions=True)
            if not item.synced.is_set():
                item.waited = True
                raise CacheError(f"failed to sync {self.kind} cache: timed out waiting for the condition")
        if item.obj is None:
            raise CacheError(f'{self.kind} "{name}" not found', not_found=True)
        if item.obj.get("immutable") is True and not item.immutable:
            item.immutable = True
            item.stop()
            log.info("stopped watching an immutable object", extra={"kv": {"kind": self.kind,
                                                                            "object": f"{namespace}/{name}"}})
        return item.obj

    async def _reflect(self, namespace: str, name: str, item: _Item) -> None:
        watch = ListWatch(self.client, f"/api/v1/namespaces/{namespace}/{self.resource}", self.clock,
                          field_selector=f"metadata.name={name}", min_timeout=self.min_watch_timeout)
        async for event in watch.events():
            if event.type == LIST:
                found = [o for o in event.items if (o.get("metadata") or {}).get("name") == name]
                new = found[0] if found else None
            elif event.type == "DELETED":
                new = None
            else:
                new = event.object if (event.object.get("metadata") or {}).get("name") == name else item.obj
            changed = _version(new) != _version(item.obj) if item.synced.is_set() else item.waited
            item.obj = new
            item.synced.set()
            if changed:
                self.on_change(namespace, name)

    def close(self) -> None:
        for item in self._items.values():
            item.stop()
        self._items.clear()


def _version(obj: Json | None) -> str | None:
    if obj is None:
        return None
    return str((obj.get("metadata") or {}).get("resourceVersion"))
