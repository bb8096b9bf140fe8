"""The /pods body, rendered again only when the pods changed."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

PodList = Callable[[], list[dict[str, Any]]]
PodsVersion = Callable[[], int]

_HEAD = b'{"kind":"PodList","apiVersion":"v1","metadata":{},"items":'


class RenderedPods:
    """`body()` returns (JSON bytes, ETag).

    With `version` (a counter the status owner bumps on every change) an unchanged version costs one
    call. Without it, the items are serialised to compare their digest: the whole body and its ETag
    are still reused, but the serialisation is paid on every call.

    An item that is the same object as in the last render (the status owner hands out one object per pod
    version) is not serialised again: during a start burst each change re-renders one pod, not all.
    """

    def __init__(self, pods: PodList, version: PodsVersion | None = None) -> None:
        self._pods = pods
        self._version = version
        # ETags must not repeat across agent restarts, where the version counter starts again.
        self._epoch = os.urandom(4).hex()
        self._key: object = None
        self._body = b""
        self._etag = ""
        self.renders = 0
        self.item_renders = 0
        self._parts: dict[int, tuple[dict[str, Any], bytes]] = {}  # id(item) -> (the item, its JSON)

    def body(self) -> tuple[bytes, str]:
        if self._version is not None:
            version = self._version()
            if version != self._key or not self._body:
                self._store(version, self._items_json(self._pods()), str(version))
        else:
            items = self._items_json(self._pods())
            digest = hashlib.blake2b(items, digest_size=12).hexdigest()
            if digest != self._key:
                self._store(digest, items, digest)
        return self._body, self._etag

    def _store(self, key: object, items: bytes, tag: str) -> None:
        self._key = key
        self._body = _HEAD + items + b"}"
        self._etag = f'"{self._epoch}-{tag}"'
        self.renders += 1


    def _items_json(self, pods: list[dict[str, Any]]) -> bytes:
        """The same bytes as one `json.dumps` of the list, each item's JSON kept while the item is the same."""
        parts: dict[int, tuple[dict[str, Any], bytes]] = {}
        for pod in pods:
            known = self._parts.get(id(pod))
            if known is None or known[0] is not pod:
                known = (pod, json.dumps(pod, separators=(",", ":")).encode())
                self.item_renders += 1
            parts[id(pod)] = known
        self._parts = parts
        return b"[" + b",".join(parts[id(pod)][1] for pod in pods) + b"]"
