"""Container garbage collection (upstream kuberuntime_gc.go, with container_gc.go's default GCPolicy).

Every period: dead containers beyond the newest `max_per_pod_container` per (pod uid, container name)
are removed, and every dead container of a pod the node no longer has; then sandboxes that are neither
ready nor hold a container, except the newest one of a pod that still exists; then the log directories
of pods the node no longer has and legacy log links whose target is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.types import LABEL_POD_UID, ContainerState, ContainerStatus, PodSandboxStatus, SandboxState
from minikubelet.base.clock import Clock
from minikubelet.base.podview import PodView
from minikubelet.runtime.state import PodRuntimeState, name_of, restart_count_of
from minikubelet.worker.log_files import LogFiles

log = logging.getLogger("minikubelet.worker.gc")

CONTAINER_GC_PERIOD = 60.0  # upstream ContainerGCPeriod
_DEAD = (ContainerState.EXITED, ContainerState.UNKNOWN)


@dataclass(frozen=True)
class GCPolicy:
    """Upstream's kubelet defaults; its node-wide cap MaxContainers is -1 (none), so it has no field here."""

    min_age: float = 0.0  # seconds since creation before a dead container may go
    max_per_pod_container: int = 1  # dead instances kept per (pod, container); negative: no limit


def _newest_first(containers: Iterable[ContainerStatus]) -> list[ContainerStatus]:
    # The same order PodRuntimeState uses, so "newest dead" is what the status reports as lastState.
    return sorted(containers, key=lambda c: (restart_count_of(c), c.created_at), reverse=True)


def _surplus(unit: list[ContainerStatus], keep: int) -> list[ContainerStatus]:
    """Beyond the newest `keep`, sparing the newest dead instance: a container created but not yet started
    must not cost the pod its lastState."""
    if keep < 0:
        return []
    newest_dead = next((c for c in unit if c.state in _DEAD), None)
    return [c for c in unit[keep:] if c is not newest_dead]


async def remove_container(runtime: Runtime, logs: LogFiles, c: ContainerStatus) -> None:
    if c.state is ContainerState.UNKNOWN:
        # it may still run: kill it first, as upstream does, and leave it for the next round if that fails
        await runtime.stop_container(c.id, 0)
    await logs.remove_container(runtime, c)


async def prune_init_containers(runtime: Runtime, logs: LogFiles, pod: PodView, state: PodRuntimeState) -> None:
    """Keep only the newest dead instance of each init container (upstream pruneInitContainersBeforeStart)."""
    for c in pod.init_containers:
        dead = [s for s in state.attempts(c.name) if s.state in _DEAD]
        for s in dead[1:]:
            try:
                await logs.remove_container(runtime, s)
            except RuntimeError_ as e:
                log.warning("cannot remove init container", extra={"kv": {"container": s.id, "err": str(e)}})


class ContainerGC:
    def __init__(self, runtime: Runtime, clock: Clock, logs: LogFiles, pod_uids: Callable[[], Iterable[str]],
                 policy: GCPolicy | None = None, period: float = CONTAINER_GC_PERIOD) -> None:
        """`pod_uids`: the pods the node has (its pod workers); everything of any other uid is garbage."""
        self._runtime = runtime
        self._clock = clock
        self._logs = logs
        self._pod_uids = pod_uids
        self.policy = policy or GCPolicy()
        self.period = period

    async def run(self) -> None:
        while True:
            await self._clock.sleep(self.period)
            try:
                await self.collect()
            except (RuntimeError_, OSError) as e:
                log.warning("container garbage collection failed", extra={"kv": {"err": str(e)}})

    async def collect(self) -> None:
        # Both evictions pass over running containers and ready sandboxes, and their listings inspect every object
        # (Docker: one request each, ~300 a minute with 100 pods): a cheap listing first skips each one that
        # would find nothing to remove.
        summaries = await self._runtime.list_summaries()
        if any(not s.running for s in summaries if not s.is_sandbox):
            await self._evict_containers()
        if any(not s.running for s in summaries if s.is_sandbox):
            await self._evict_sandboxes()
        await self._evict_logs()

    async def _evict_containers(self) -> None:
        containers = await self._runtime.list_containers()
        # read after listing: a pod's worker exists before it creates anything
        existing = set(self._pod_uids())
        newest_gc_time = self._clock.now() - self.policy.min_age
        units: dict[tuple[str, str], list[ContainerStatus]] = {}
        for c in containers:
            if c.state is ContainerState.RUNNING or c.created_at > newest_gc_time:
                continue
            units.setdefault((c.labels.get(LABEL_POD_UID, ""), name_of(c)), []).append(c)
        for (uid, _), unit in units.items():
            ordered = _newest_first(unit)
            doomed = ordered if uid not in existing else _surplus(ordered, self.policy.max_per_pod_container)
            await self._remove_containers(doomed)

    async def _remove_containers(self, doomed: Sequence[ContainerStatus]) -> None:
        for c in doomed:
            try:
                await remove_container(self._runtime, self._logs, c)
            except RuntimeError_ as e:
                log.warning("cannot remove container", extra={"kv": {"container": c.id, "err": str(e)}})

    async def _evict_sandboxes(self) -> None:
        sandboxes = await self._runtime.list_pod_sandboxes()
        in_use = {c.sandbox_id for c in await self._runtime.list_containers()}
        existing = set(self._pod_uids())
        by_pod: dict[str, list[PodSandboxStatus]] = {}
        for s in sandboxes:
            by_pod.setdefault(s.metadata.uid, []).append(s)
        for uid, group in by_pod.items():
            group.sort(key=lambda s: (s.metadata.attempt, s.created_at), reverse=True)
            candidates = group if uid not in existing else group[1:]
            for s in candidates:
                if s.state is SandboxState.READY or s.id in in_use:
                    continue
                try:
                    await self._runtime.remove_pod_sandbox(s.id)
                except RuntimeError_ as e:
                    log.warning("cannot remove sandbox", extra={"kv": {"sandbox": s.id, "err": str(e)}})

    async def _evict_logs(self) -> None:
        self._logs.remove_stale_pod_dirs(set(self._pod_uids()))
        await self._logs.remove_dangling_legacy_links(self._runtime)
