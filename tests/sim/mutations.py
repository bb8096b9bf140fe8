"""Bugs put into the agent on purpose, to show the simulator finds them (`--mutate NAME`; docs/testing.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from minikubelet.base import podview
from minikubelet.base.podview import Pod, PodView
from minikubelet.pod.mirror import MirrorPods
from minikubelet.status.api_sync import PodStatusSync
from minikubelet.worker.backoff import Backoff
from minikubelet.worker.resize import PodResize
from minikubelet.worker.resize_plan import MEMORY, ContainerUpdate, requirements_of_values
from minikubelet.worker.sync import PodSyncer


def _no_backoff() -> None:
    """A crashed container is restarted at once, every time (the crash-loop back-off is gone)."""
    Backoff.in_backoff_since = lambda self, key, event_time: False  # type: ignore[method-assign]
    Backoff.remaining = lambda self, key, event_time: 0.0  # type: ignore[method-assign]


def _stuck_never_started() -> None:
    """A deleted pod none of whose containers was ever created is never cleaned up: its worker retries for ever
    (the pod stays Terminating), the bug class of issue 32's "deleted pod whose containers never started"."""
    cleanup = PodSyncer.cleanup

    async def mutated(self: PodSyncer, view: PodView, keep_status: bool = False) -> bool:
        state = await self.observe(view.uid)
        if not state.containers:
            return False
        return await cleanup(self, view, keep_status)

    PodSyncer.cleanup = mutated  # type: ignore[method-assign]


def _no_final_delete_never_started() -> None:
    """A pod deleted through the API none of whose containers ever started is never deleted for good: the status
    sync skips its final DELETE (the pod stays Terminating in the API, issue 32's example)."""
    final_delete = PodStatusSync._final_delete

    async def mutated(self: PodStatusSync, path: str, pod: Pod, api_uid: str) -> None:
        entry = self.statuses.get(podview.uid(pod))
        statuses = (entry.status.get("containerStatuses") or []) if entry is not None else []
        if not any((cs.get("state") or {}).get("running") or ((cs.get("state") or {}).get("terminated") or {}).get(
                "startedAt") or (cs.get("lastState") or {}).get("terminated") for cs in statuses):
            return
        await final_delete(self, path, pod, api_uid)

    PodStatusSync._final_delete = mutated  # type: ignore[method-assign]


def _resize_not_actuated() -> None:
    """An in-place resize the runtime is never told of: the actuated record takes the new values without the
    UpdateContainerResources call, so the agent reports the resize done (no PodResizeInProgress) while the container
    runs as before (issue 32's "an in-place resize that the status reports but the kernel never sees")."""
    async def mutated(self: PodResize, pod: PodView, resource: str, u: ContainerUpdate) -> None:
        values = (replace(u.current, memory_limit=u.desired.memory_limit, memory_request=u.desired.memory_request)
                  if resource == MEMORY else
                  replace(u.current, cpu_limit=u.desired.cpu_limit, cpu_request=u.desired.cpu_request))
        u.actuated.values = values
        self.actuated.set_container(pod.uid, u.name, requirements_of_values(values))

    PodResize._update_container = mutated  # type: ignore[method-assign]


def _mirror_not_recreated() -> None:
    """A mirror pod deleted through the API is not made again: the mirror pod manager creates each static pod's
    mirror once (issue 32's workload gap: the static pod runs on, the API server no longer shows it)."""
    create = MirrorPods._create

    async def mutated(self: MirrorPods, static: Pod) -> None:
        names: set[str] = self.__dict__.setdefault("_made", set())  # this agent's: a restart makes them again
        full = podview.full_name(static)
        if full in names:
            return
        await create(self, static)
        if full in self.mirrors:  # made
            names.add(full)

    MirrorPods._create = mutated  # type: ignore[method-assign]


MUTATIONS: dict[str, Callable[[], None]] = {"no-backoff": _no_backoff, "stuck-never-started": _stuck_never_started,
                                            "no-final-delete-never-started": _no_final_delete_never_started,
                                            "resize-not-actuated": _resize_not_actuated,
                                            "mirror-not-recreated": _mirror_not_recreated}


def apply(name: str) -> None:
    if name not in MUTATIONS:
        raise SystemExit(f"unknown mutation {name!r}: one of {', '.join(MUTATIONS)}")
    MUTATIONS[name]()
