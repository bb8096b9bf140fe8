"""The pod lifecycle as upstream's pod workers know it: syncing, terminating, terminated.

A pod leaves `SYNCING` when its status turns terminal (Succeeded/Failed, an active deadline) or when it is
killed (removed from its source, gracefully deleted, evicted, node shutdown). Every kill goes through one path
with `KillPodOptions`: an optional shorter grace and an optional function that writes the terminal status.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PodStatusFn = Callable[[dict[str, Any]], None]
"""Mutates the pod's final API status in place (phase, reason, message, conditions), as upstream's PodStatusFunc."""


class PodLifecycle(enum.Enum):
    SYNCING = "syncing"
    TERMINATING = "terminating"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class KillPodOptions:
    """How to kill a pod: `grace_override` shortens the pod's own grace; `status_fn` sets the terminal status;
    `completed` is set once nothing of the pod runs any more (upstream's CompletedCh)."""

    grace_override: int | None = None
    status_fn: PodStatusFn | None = None
    completed: asyncio.Event | None = None


KILL_TIMEOUT_MIN = 10


def kill_timeout(grace: int) -> int:
    """upstream killPodNow: how long a kill is awaited before it is given up as timed out, 1.5 times the grace
    (integer seconds) and at least 10 s for the runtime's SIGKILL traffic."""
    return max(grace + grace // 2, KILL_TIMEOUT_MIN)


def terminal_status_fn(phase: str, reason: str, message: str) -> PodStatusFn:
    """A status function giving the pod a terminal phase with a reason (deadline, eviction, shutdown)."""

    def apply(status: dict[str, Any]) -> None:
        status["phase"] = phase
        status["reason"] = reason
        status["message"] = message

    return apply
