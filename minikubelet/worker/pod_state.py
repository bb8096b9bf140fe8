"""What a pod worker remembers about its pod between syncs. All of it can be lost: a restart of the agent
re-derives it (waiting reasons come back with the next attempt; backoff history is checkpointed elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass, field

from minikubelet.runtime.pod_cache import CachedPod, SeenPod


@dataclass
class ImageFailure:
    message: str
    at: float  # wall-clock time of the failed pull (the backoff's event time)


@dataclass
class PodSyncState:
    first_seen: float
    reasons: dict[str, tuple[str, str]] = field(default_factory=dict)  # container -> (waiting reason, message)
    image_errors: dict[str, ImageFailure] = field(default_factory=dict)
    volume_paths: dict[str, str] | None = None
    log_fallbacks: dict[str, str] = field(default_factory=dict)  # container id -> log tail
    # container id -> its termination log as read once it had exited (an exited container writes no more)
    termination_logs: dict[str, str] = field(default_factory=dict)
    start_recorded: bool = False
    override: tuple[str, str, str] | None = None  # (phase, reason, message) set by the active deadline
    # False for a stand-in worker that stops a runtime pod no source wants, or one admission refused (upstream
    # SyncTerminatingRuntimePod): it has no spec to report, so it writes and removes no status
    owns_status: bool = True
    wake_at: float | None = None  # monotonic time of the earliest wake-up a sync asked for
    sync_failed: bool = False  # this pass failed (upstream SyncPod's error): the worker backs off
    # the pod as this pass left it in the runtime, when the pass ended with nothing left to do (None otherwise):
    # a runtime change it already shows wakes the worker no sooner
    seen: SeenPod | None = None
    # the same pass's runtime state, for the next sync when no runtime change came since (the worker drops it
    # when one did)
    cached: CachedPod | None = None
    # no sync has read the runtime for this pod yet, and no earlier agent started it (not adopted)
    fresh: bool = False

    def wake_no_later_than(self, at: float) -> None:
        if self.wake_at is None or at < self.wake_at:
            self.wake_at = at
