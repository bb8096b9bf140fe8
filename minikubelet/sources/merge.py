"""The source merge (upstream config.PodConfig): per-source snapshots in, one stream of pod changes out.

Each source (file, later URL and API server) hands over its whole set of pods (the kubelet's SET
operation). The merge diffs it against what that source said before and tells the pod manager what was
added, updated or removed, so nothing above it needs to know where a pod came from. A UID names one pod
on the node: a pod whose UID another pod (of any source) already holds is refused and logged, never
merged into the pod that holds it.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from minikubelet.base import podview
from minikubelet.base.podview import Pod

log = logging.getLogger("minikubelet.sources.merge")


class PodOp(enum.Enum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    REMOVE = "REMOVE"


@dataclass(frozen=True)
class PodUpdate:
    op: PodOp
    pods: tuple[Pod, ...]
    source: str


UpdateHandler = Callable[[PodUpdate], None]


def pod_origin(pod: Pod) -> str:
    """Where a pod was defined, for messages: its manifest file or URL when the source recorded one."""
    ann = podview.meta(pod).get("annotations")
    where = ann.get("kubernetes.io/config.source") if isinstance(ann, dict) else None
    return f"{podview.format_pod(pod)} from {where or 'unknown source'}"


class PodConfig:
    def __init__(self, handler: UpdateHandler) -> None:
        self._handler = handler
        self._by_source: dict[str, dict[str, Pod]] = {}
        self._owner: dict[str, str] = {}  # uid -> source that holds it
        self._refused: dict[tuple[str, str, str], str] = {}  # (source, uid, refused pod) -> why, logged once
        self.sources_ready: set[str] = set()

    def set_source_pods(self, source: str, pods: Sequence[Pod]) -> None:
        """A full snapshot of one source's pods."""
        old = self._by_source.get(source, {})
        by_uid: dict[str, list[Pod]] = {}
        for p in pods:
            by_uid.setdefault(podview.uid(p), []).append(p)
        new: dict[str, Pod] = {}
        refused_now: set[tuple[str, str, str]] = set()
        for uid, candidates in by_uid.items():
            owner = self._owner.get(uid, source)
            holder = self._by_source[owner].get(uid) if owner != source else None
            if holder is not None:
                for p in candidates:
                    self._refuse(source, uid, p, holder, refused_now)
                continue
            # Within one source the pod that already holds the uid keeps it; otherwise the first one.
            prev = old.get(uid)
            keep = candidates[0] if len(candidates) == 1 else next(
                (p for p in candidates if prev is not None and podview.full_name(p) == podview.full_name(prev)),
                candidates[0])
            new[uid] = keep
            for p in candidates:
                if p is not keep:
                    self._refuse(source, uid, p, keep, refused_now)
        for key in list(self._refused):
            if key[0] == source and key not in refused_now:
                del self._refused[key]
        self._by_source[source] = new
        self.sources_ready.add(source)
        for uid in old.keys() - new.keys():
            self._owner.pop(uid, None)
        for uid in new:
            self._owner[uid] = source
        added = tuple(p for uid, p in new.items() if uid not in old)
        updated = tuple(p for uid, p in new.items() if uid in old and old[uid] != p)
        removed = tuple(p for uid, p in old.items() if uid not in new)
        if removed:
            self._handler(PodUpdate(PodOp.REMOVE, removed, source))
        if added:
            self._handler(PodUpdate(PodOp.ADD, added, source))
        if updated:
            self._handler(PodUpdate(PodOp.UPDATE, updated, source))

    def _refuse(self, source: str, uid: str, refused: Pod, holder: Pod, seen: set[tuple[str, str, str]]) -> None:
        key = (source, uid, podview.full_name(refused))
        seen.add(key)
        why = f"{pod_origin(refused)} has the uid of {pod_origin(holder)}"
        if self._refused.get(key) == why:
            return
        self._refused[key] = why
        log.error("pod refused: duplicate uid", extra={"kv": {"uid": uid, "error": why}})

    def pods(self) -> list[Pod]:
        return [p for src in sorted(self._by_source) for p in self._by_source[src].values()]
