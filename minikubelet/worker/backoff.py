"""Per-key exponential backoff with upstream flowcontrol.Backoff semantics.

The kubelet checks `in_backoff_since(key, finished_at)` before restarting a container and
calls `next(key, finished_at)` when it does restart it, so the first restart is immediate and
later gaps run 10 s, 20 s, 40 s … capped at 300 s; an entry whose last update is more than
twice the cap before the new event is forgotten (the "ran 10 minutes" reset).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from minikubelet.base.clock import Clock

CONTAINER_BACKOFF_INITIAL = 10.0
CONTAINER_BACKOFF_MAX = 300.0
IMAGE_BACKOFF_INITIAL = 10.0
IMAGE_BACKOFF_MAX = 300.0
RESET_AFTER = 600.0  # seconds of run time that forgive a crash loop


def pod_key_prefix(name: str, namespace: str, uid: str) -> str:
    """The start of every container backoff key of one pod (upstream getStableKey: pod name, namespace, uid)."""
    return f"{name}_{namespace}_{uid}_"


@dataclass
class _Entry:
    delay: float
    last_update: float


class Backoff:
    def __init__(self, clock: Clock, initial: float, maximum: float) -> None:
        self._clock = clock
        self.initial = initial
        self.maximum = maximum
        self._entries: dict[str, _Entry] = {}

    def get(self, key: str) -> float:
        e = self._entries.get(key)
        return e.delay if e else 0.0

    def _expired(self, event_time: float, e: _Entry) -> bool:
        # The kubelet's HasExpiredFunc: the container ran for more than 10 minutes since it was (re)started.
        return event_time - e.last_update > RESET_AFTER

    def in_backoff_since(self, key: str, event_time: float) -> bool:
        e = self._entries.get(key)
        if e is None or self._expired(event_time, e):
            return False
        return self._clock.now() - event_time < e.delay

    def remaining(self, key: str, event_time: float) -> float:
        """Seconds until `in_backoff_since` turns false (0 if not in backoff)."""
        e = self._entries.get(key)
        if e is None or self._expired(event_time, e):
            return 0.0
        return max(0.0, e.delay - (self._clock.now() - event_time))

    def next(self, key: str, event_time: float) -> None:
        """Record a restart now of what stopped at `event_time` (upstream Backoff.Next: lastUpdate is now)."""
        now = self._clock.now()
        e = self._entries.get(key)
        if e is None or self._expired(event_time, e):
            self._entries[key] = _Entry(self.initial, now)
        else:
            e.delay = min(e.delay * 2, self.maximum)
            e.last_update = now

    def reset(self, key: str) -> None:
        self._entries.pop(key, None)

    def forget_prefix(self, prefix: str) -> None:
        for k in [k for k in self._entries if k.startswith(prefix)]:
            del self._entries[k]

    def gc(self) -> None:
        """Drop entries untouched for longer than twice the cap (upstream GC)."""
        now = self._clock.now()
        for k in [k for k, e in self._entries.items() if now - e.last_update > 2 * self.maximum]:
            del self._entries[k]

    # Backoff history must survive an agent restart (the runtime does not record it).
    def dump(self) -> dict[str, list[float]]:
        return {k: [e.delay, e.last_update] for k, e in self._entries.items()}

    def load(self, data: object) -> None:
        if not isinstance(data, dict):
            return
        for k, v in data.items():
            if isinstance(k, str) and isinstance(v, list) and len(v) == 2:
                try:
                    self._entries[k] = _Entry(float(v[0]), float(v[1]))
                except (TypeError, ValueError):
                    continue


class BackoffCheckpoint:
    """Persists backoff tables as one small JSON file under the root dir."""

    def __init__(self, path: str, tables: dict[str, Backoff]) -> None:
        self._path = path
        self._tables = tables
        self._last = ""

    def restore(self) -> None:
        try:
            with open(self._path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return
        if isinstance(data, dict):
            for name, table in self._tables.items():
                table.load(data.get(name))

    def save(self) -> None:
        body = json.dumps({name: t.dump() for name, t in self._tables.items()}, sort_keys=True)
        if body == self._last:
            return
        tmp = self._path + ".tmp"
        os.makedirs(os.path.dirname(self._path) or ".", exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
        os.replace(tmp, self._path)
        self._last = body
