"""The pods' `PodResizePending` and `PodResizeInProgress` conditions (upstream status_manager.go
podResizeConditions): set by the allocation manager and the pod sync, read into each generated status.

Pending carries reason `Infeasible` or `Deferred` (any other reason a handler gives is reported as Deferred);
InProgress has no reason while actuating, `Error` with the runtime's message when it refused. A condition keeps
its lastTransitionTime while its reason stays; lastProbeTime is the last time it was set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod

PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
INFEASIBLE = "Infeasible"
DEFERRED = "Deferred"
ERROR = "Error"
Condition = dict[str, Any]


@dataclass
class _PodConditions:
    pending: Condition | None = None
    in_progress: Condition | None = None


class ResizeConditions:
    def __init__(self, clock: Clock, on_change: Callable[[ResizeConditions], None] | None = None) -> None:
        """`on_change`: after the set of pending or in-progress resizes changed (the resize gauges)."""
        self._clock = clock
        self._pods: dict[str, _PodConditions] = {}
        self._on_change = on_change

    def _condition(self, ctype: str, old: Condition | None, reason: str, message: str, generation: int) -> Condition:
        """updatedPodResizeCondition: the transition time stays while the reason does."""
        now = rfc3339(self._clock.now())
        since = old["lastTransitionTime"] if old is not None and old.get("reason", "") == reason else now
        c: Condition = {"type": ctype}
        if generation:
            c["observedGeneration"] = generation
        c.update({"status": "True", "lastProbeTime": now, "lastTransitionTime": since})
        if reason:
            c["reason"] = reason
        if message:
            c["message"] = message
        return c

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    def conditions(self, uid: str) -> list[Condition]:
        """Pending first, then InProgress, as upstream lists them."""
        p = self._pods.get(uid)
        if p is None:
            return []
        return [dict(c) for c in (p.pending, p.in_progress) if c is not None]

    def pending(self, uid: str) -> Condition | None:
        p = self._pods.get(uid)
        return dict(p.pending) if p is not None and p.pending is not None else None

    def in_progress(self, uid: str) -> Condition | None:
        p = self._pods.get(uid)
        return dict(p.in_progress) if p is not None and p.in_progress is not None else None

    def set_pending(self, uid: str, reason: str, message: str, generation: int) -> bool:
        """True when the reason or the observed generation changed (a new event is due)."""
        if reason != INFEASIBLE:
            reason = DEFERRED
        p = self._pods.setdefault(uid, _PodConditions())
        previous = p.pending
        p.pending = self._condition(PENDING, previous, reason, message, generation)
        if previous is None:
            self._changed()
            return True
        return previous.get("reason") != reason or previous.get("observedGeneration", 0) != generation

    def set_in_progress(self, uid: str, reason: str, message: str, generation: int) -> tuple[int, bool]:
        """An existing condition keeps its observed generation, and its reason and message unless new ones are
        given. Returns that generation and whether anything but the times changed."""
        p = self._pods.setdefault(uid, _PodConditions())
        previous = p.in_progress
        if previous is not None:
            if not reason and not message:
                reason, message = previous.get("reason", ""), previous.get("message", "")
            generation = int(previous.get("observedGeneration", 0))
        p.in_progress = self._condition(IN_PROGRESS, previous, reason, message, generation)
        if previous is None:
            self._changed()
            return generation, True
        timeless = ("lastProbeTime", "lastTransitionTime")
        same = {k: v for k, v in previous.items() if k not in timeless} == {
            k: v for k, v in p.in_progress.items() if k not in timeless}
        return generation, not same

    def clear_pending(self, uid: str) -> None:
        p = self._pods.get(uid)
        if p is None or p.pending is None:
            return
        p.pending = None
        self._changed()

    def clear_in_progress(self, uid: str) -> tuple[int, bool]:
        """The cleared condition's observed generation, and whether there was one."""
        p = self._pods.get(uid)
        if p is None or p.in_progress is None:
            return 0, False
        generation = int(p.in_progress.get("observedGeneration", 0))
        p.in_progress = None
        self._changed()
        return generation, True

    def is_deferred(self, uid: str) -> bool:
        c = self.pending(uid)
        return c is not None and c.get("reason") == DEFERRED

    def is_infeasible(self, uid: str) -> bool:
        c = self.pending(uid)
        return c is not None and c.get("reason") == INFEASIBLE

    def backfill(self, pods: Iterable[Pod]) -> None:
        """After a restart: the conditions the API status still shows (upstream BackfillPodResizeConditions)."""
        for pod in pods:
            uid = str((pod.get("metadata") or {}).get("uid", ""))
            for c in (pod.get("status") or {}).get("conditions") or []:
                if not isinstance(c, dict) or c.get("type") not in (PENDING, IN_PROGRESS):
                    continue
                p = self._pods.setdefault(uid, _PodConditions())
                cond = self._condition(str(c["type"]), None, str(c.get("reason") or ""), str(c.get("message") or ""),
                                       int(c.get("observedGeneration") or 0))
                if c["type"] == PENDING:
                    p.pending = cond
                else:
                    p.in_progress = cond
        self._changed()

    def remove(self, uid: str) -> None:
        if self._pods.pop(uid, None) is not None:
            self._changed()

    def counts(self) -> tuple[Mapping[str, int], int]:
        """Pending resizes by lower-case reason, and the number in progress (the resize gauges)."""
        pending: dict[str, int] = {}
        in_progress = 0
        for p in self._pods.values():
            if p.pending is not None:
                reason = str(p.pending.get("reason", "")).lower()
                pending[reason] = pending.get(reason, 0) + 1
            if p.in_progress is not None:
                in_progress += 1
        return pending, in_progress
