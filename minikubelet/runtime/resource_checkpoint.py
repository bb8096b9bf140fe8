"""Per-pod resource records kept on disk (upstream pkg/kubelet/allocation/state: the `allocated_pods_state` and
`actuated_pods_state` checkpoints): for each pod uid, each container's `{"requests", "limits"}` and the pod-level
`resources`.

The file is JSON `{"data": "<the entries as JSON>", "checksum": "<sha256 of data>"}`, written whole to a
temporary file, synced and renamed over the old one, so a crash leaves the old or the new record, never half of
one. A file that does not parse or whose checksum does not match is set aside (`<name>.corrupt`) with an error
line and the agent starts with no record (upstream refuses to start: see docs/decisions.md).

The agent's checkpoints write behind (`write_behind=True`): a change is in memory at once and written by a task,
the fsync on a thread, changes made meanwhile together in one write; `durable()` waits until every change made
before it is on disk, and the pod sync awaits it before it asks the runtime to act on the pod (as upstream's
synchronous write comes before). An fsync (2-8 ms here) on the event loop held up every other pod once per admitted
pod and once per created container.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("minikubelet.runtime.resource_checkpoint")

Requirements = dict[str, dict[str, str]]  # {"requests": {name: quantity}, "limits": {...}}


@dataclass
class PodResourceInfo:
    containers: dict[str, Requirements] = field(default_factory=dict)
    pod: Requirements | None = None  # pod-level spec.resources

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"containers": self.containers}
        if self.pod is not None:
            out["pod"] = self.pod
        return out

    @classmethod
    def from_json(cls, raw: Any) -> PodResourceInfo:
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        containers = raw.get("containers") or {}
        pod = raw.get("pod")
        if not isinstance(containers, dict) or not all(_is_requirements(v) for v in containers.values()):
            raise ValueError("containers is not a map of resource requirements")
        if pod is not None and not _is_requirements(pod):
            raise ValueError("pod is not resource requirements")
        return cls({str(k): _requirements(v) for k, v in containers.items()},
                   _requirements(pod) if pod is not None else None)


def _write(path: str, data: str) -> None:
    body = json.dumps({"data": data, "checksum": hashlib.sha256(data.encode()).hexdigest()})
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _is_requirements(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(v.get(k, {}), dict) for k in ("requests", "limits"))


def _requirements(v: Mapping[str, Any]) -> Requirements:
    return {k: {str(n): str(q) for n, q in (v.get(k) or {}).items()} for k in ("requests", "limits") if v.get(k)}


def requirements_of(resources: Mapping[str, Any] | None) -> Requirements:
    """A container's (or the pod's) `resources` as a record: its requests and limits, nothing else."""
    return _requirements(resources or {})


class PodResourceCheckpoint:
    def __init__(self, path: str, write_behind: bool = False) -> None:
        self.path = path
        self._entries: dict[str, PodResourceInfo] = {}
        self._last = ""
        self._write_behind = write_behind  # only inside a running event loop
        self._pending: str | None = None  # data not yet handed to a write
        self._writer: asyncio.Task[None] | None = None
        self._changes = 0  # changes made so far (write-behind)
        self._written = 0  # of those, the ones a finished write covered
        self._wrote: asyncio.Event | None = None  # set (and replaced) when a write finishes

    def restore(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return
        except OSError as e:
            log.error("cannot read the checkpoint", extra={"kv": {"path": self.path, "err": str(e)}})
            return
        try:
            outer = json.loads(text)
            data = outer["data"]
            if hashlib.sha256(data.encode()).hexdigest() != outer["checksum"]:
                raise ValueError("checksum mismatch")
            entries = json.loads(data)
            if not isinstance(entries, dict):
                raise ValueError("entries is not an object")
            self._entries = {str(uid): PodResourceInfo.from_json(v) for uid, v in entries.items()}
            self._last = data
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            aside = self.path + ".corrupt"
            log.error("the checkpoint is corrupt; set aside, starting without it",
                      extra={"kv": {"path": self.path, "aside": aside, "err": str(e)}})
            self._entries = {}
            try:
                os.replace(self.path, aside)
            except OSError:
                pass

    def _store(self) -> None:
        data = json.dumps({uid: info.to_json() for uid, info in sorted(self._entries.items())}, sort_keys=True,
                          separators=(",", ":"))
        if data == self._last:
            return
        if not self._write_behind:
            _write(self.path, data)
            self._last = data
            return
        self._last = self._pending = data
        self._changes += 1
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_pending(), name="checkpoint-write")

    async def _write_pending(self) -> None:
        try:
            while (data := self._pending) is not None:
                self._pending, covers = None, self._changes
                try:
                    await asyncio.to_thread(_write, self.path, data)
                except OSError as e:
                    if self._pending is None:
                        self._last = ""  # the next change writes everything again
                    log.error("writing the checkpoint failed", extra={"kv": {"path": self.path, "err": str(e)}})
                self._written = covers
                self._wake_waiters()
        finally:
            self._wake_waiters()  # also when cancelled: `durable` returns once no write runs

    def _wake_waiters(self) -> None:
        if self._wrote is not None:
            self._wrote.set()
            self._wrote = None

    @property
    def writing(self) -> bool:
        """A write is under way or waiting (write-behind only)."""
        return self._writer is not None and not self._writer.done()

    async def durable(self) -> None:
        """Every change made so far is on disk (or its write failed, and said so). Changes made later, by other
        pods, are not waited for."""
        wanted = self._changes
        while self._written < wanted and self.writing:
            if self._wrote is None:
                self._wrote = asyncio.Event()
            await self._wrote.wait()

    def get(self, uid: str) -> PodResourceInfo | None:
        info = self._entries.get(uid)
        return copy.deepcopy(info) if info is not None else None

    def peek(self, uid: str) -> PodResourceInfo | None:
        """The record itself, not a copy: for readers that do not change it."""
        return self._entries.get(uid)

    def container(self, uid: str, name: str) -> Requirements | None:
        info = self._entries.get(uid)
        found = info.containers.get(name) if info is not None else None
        return copy.deepcopy(found) if found is not None else None

    def pod_level(self, uid: str) -> Requirements | None:
        info = self._entries.get(uid)
        return copy.deepcopy(info.pod) if info is not None and info.pod is not None else None

    def uids(self) -> list[str]:
        return list(self._entries)

    def set(self, uid: str, info: PodResourceInfo) -> None:
        self._entries[uid] = copy.deepcopy(info)
        self._store()

    def set_container(self, uid: str, name: str, resources: Requirements) -> None:
        info = self._entries.setdefault(uid, PodResourceInfo())
        info.containers[name] = copy.deepcopy(resources)
        self._store()

    def set_pod_level(self, uid: str, resources: Requirements | None) -> None:
        info = self._entries.setdefault(uid, PodResourceInfo())
        info.pod = copy.deepcopy(resources)
        self._store()

    def remove(self, uid: str) -> None:
        if self._entries.pop(uid, None) is not None:
            self._store()

    def remove_orphans(self, keep: Iterable[str]) -> None:
        wanted = set(keep)
        for uid in [u for u in self._entries if u not in wanted]:
            del self._entries[uid]
        self._store()
