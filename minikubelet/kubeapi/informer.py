"""A list + watch kept as a local store (client-go's informer, for what the kubelet reads in bulk: the
Services behind the pods' service environment variables)."""

from __future__ import annotations

from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import RestClient
from minikubelet.kubeapi.watch import LIST, ListWatch

Json = dict[str, Any]


def _key(obj: Json) -> tuple[str, str] | None:
    md = obj.get("metadata")
    if not isinstance(md, dict) or not isinstance(md.get("name"), str):
        return None
    ns = md.get("namespace")
    return (ns if isinstance(ns, str) else "", md["name"])


class Informer:
    def __init__(self, client: RestClient, path: str, clock: Clock, *, field_selector: str = "",
                 max_items: int = 100_000) -> None:
        self.watch = ListWatch(client, path, clock, field_selector=field_selector)
        self.max_items = max_items  # a broken or hostile server cannot grow the agent without bound
        self._items: dict[tuple[str, str], Json] = {}
        self.synced = False  # the first list arrived (upstream HasSynced)

    def list(self) -> list[Json]:
        return list(self._items.values())

    async def run(self) -> None:
        async for event in self.watch.events():
            if event.type == LIST:
                self._items = {}
                for obj in event.items:
                    self._put(obj)
                self.synced = True
                continue
            key = _key(event.object)
            if key is None:
                continue
            if event.type == "DELETED":
                self._items.pop(key, None)
            else:
                self._put(event.object)

    def _put(self, obj: Json) -> None:
        key = _key(obj)
        if key is not None and (key in self._items or len(self._items) < self.max_items):
            self._items[key] = obj
