"""What the deciders record for `explain`: one bounded `PodRecord` per pod the node knows.

Recorded with the decision, from the values the decider used (never recomputed on request), and only when it
changed: an idle pod's resync compares one small tuple and writes nothing. Messages are cut at `MAX_MESSAGE`;
no record holds a Secret's or ConfigMap's value (the messages name keys, never values)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_MESSAGE = 1024
MAX_EXIT_CODES = 5
MAX_CONTAINERS = 64  # per pod: a pod with more containers has the first ones explained

Detail = tuple[tuple[str, Any], ...]  # (key, JSON value) pairs: hashable, compared to find a change


def cut(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class ContainerDecision:
    """What the planner (and the start it led to) decided for one container on a sync, and why."""

    name: str
    kind: str  # init, sidecar, regular, ephemeral
    action: str  # keep, start, restart, kill, wait, none
    reason: str  # the cause's class (docs/explain.md): Running, WaitingOnInit, CrashLoopBackOff, ...
    message: str = ""
    detail: Detail = ()

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "action": self.action, "reason": self.reason}
        if self.message:
            out["message"] = self.message
        out.update(self.detail)
        return out


@dataclass(frozen=True)
class SyncDecision:
    containers: tuple[ContainerDecision, ...]
    note: str = ""  # a pod-level cause that stopped the sync before the planner (network not ready, ...)


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str = ""
    message: str = ""
    at: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Termination:
    reason: str
    message: str
    grace_seconds: int
    live_containers: tuple[str, ...]  # what the kill had to stop, as the runtime showed it


@dataclass(frozen=True)
class EvictionRank:
    """The eviction manager's last ranking that included this pod."""

    signal: str
    resource: str
    rank: int  # 1: the first to go
    of: int
    usage: int
    at: float


@dataclass
class PodRecord:
    uid: str
    namespace: str
    name: str
    stage: str = "pending"  # pending (not admitted yet), syncing, terminating, terminated
    stage_since: float = 0.0
    admission: Admission | None = None
    decision: SyncDecision | None = None
    decided_at: float = 0.0  # wall time the current decision was first made
    syncs: int = 0  # syncs that confirmed it since
    termination: Termination | None = None
    last_kills: dict[str, ContainerDecision] = field(default_factory=dict)  # container -> the last kill
    eviction: EvictionRank | None = None


class ExplainStore:
    """The node's records, one per pod it knows (admitted or refused); forgotten with the pod."""

    def __init__(self) -> None:
        self._pods: dict[str, PodRecord] = {}

    def get(self, uid: str) -> PodRecord | None:
        return self._pods.get(uid)

    def __len__(self) -> int:
        return len(self._pods)

    def _of(self, uid: str, namespace: str, name: str) -> PodRecord:
        rec = self._pods.get(uid)
        if rec is None:
            rec = self._pods[uid] = PodRecord(uid, namespace, name)
        return rec

    def admitted(self, uid: str, namespace: str, name: str, admission: Admission) -> None:
        rec = self._of(uid, namespace, name)
        rec.admission = admission
        self._stage(rec, "syncing" if admission.admitted else "terminated", admission.at)

    def synced(self, uid: str, namespace: str, name: str, decision: SyncDecision, now: float) -> bool:
        """The sync's decision; True when it differs from the one recorded (and replaced it)."""
        rec = self._of(uid, namespace, name)
        self._stage(rec, "syncing", now)
        if rec.decision == decision:
            rec.syncs += 1
            return False
        rec.decision, rec.decided_at, rec.syncs = decision, now, 1
        for c in decision.containers:
            if c.action in ("kill", "restart"):
                rec.last_kills[c.name] = c
        return True

    def terminating(self, uid: str, namespace: str, name: str, termination: Termination, now: float) -> None:
        rec = self._of(uid, namespace, name)
        rec.termination = termination
        self._stage(rec, "terminating", now)

    def terminated(self, uid: str, now: float) -> None:
        rec = self._pods.get(uid)
        if rec is not None:
            self._stage(rec, "terminated", now)

    def ranked(self, uid: str, rank: EvictionRank) -> None:
        rec = self._pods.get(uid)
        if rec is not None:
            rec.eviction = rank

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def keep_only(self, uids: Mapping[str, object]) -> None:
        """Drop the records of pods no longer known (refused pods leave no worker to forget them)."""
        for uid in [u for u in self._pods if u not in uids]:
            del self._pods[uid]

    @staticmethod
    def _stage(rec: PodRecord, stage: str, now: float) -> None:
        if rec.stage != stage:
            rec.stage, rec.stage_since = stage, now
