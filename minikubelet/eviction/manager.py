"""The eviction manager (upstream eviction_manager.go): every monitoring interval (and at once when the memcg
notifier fires) it reads the Summary, decides which thresholds are met (grace periods, minimum reclaim,
the pressure transition period), reports node conditions, reclaims node-level resources, and otherwise
evicts one pod, then waits until that pod has cleaned up. Also the admission handler refusing pods under
pressure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Protocol

from cgroups.qos import BEST_EFFORT, qos_class
from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod, PodView
from minikubelet.eviction import signals
from minikubelet.eviction.filesystems import (
    ALL_FS_STATS,
    DiskLayout,
    containerfs_thresholds,
    rank_fs_stats,
    reclaim_steps,
)
from minikubelet.eviction.ranking import (
    REASON,
    eviction_message,
    local_storage_signal,
    local_storage_violation,
    node_condition_message,
    pod_usage,
    rank,
)
from minikubelet.eviction.thresholds import (
    MEMORY_PRESSURE,
    SIGNAL_RESOURCE,
    Observation,
    Threshold,
    by_eviction_priority,
    merge,
    node_conditions,
    thresholds_met,
)
from minikubelet.explain.record import EvictionRank, ExplainStore
from minikubelet.metrics import Metrics
from minikubelet.node.labels import Taint
from minikubelet.pod.admission import ADMIT, PodAdmitResult
from minikubelet.pod.preemption import is_critical
from minikubelet.pod.tolerations import tolerates
from minikubelet.worker.lifecycle import PodStatusFn

log = logging.getLogger("minikubelet.eviction")

MONITORING_INTERVAL = 10.0  # upstream evictionMonitoringPeriod
POD_CLEANUP_TIMEOUT = 30.0
IMMEDIATE_GRACE = 1  # upstream immediateEvictionGracePeriodSeconds: hard thresholds and storage limits
POD_CLEANUP_POLL = 1.0
NOTIFIER_REFRESH_INTERVAL = 10.0
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
CONDITION_TAINT = {MEMORY_PRESSURE: TAINT_MEMORY_PRESSURE, "DiskPressure": TAINT_DISK_PRESSURE,
                   "PIDPressure": TAINT_PID_PRESSURE}
THRESHOLD_MET_REASON = "EvictionThresholdMet"

Json = Mapping[str, Any]
KillPod = Callable[[Pod, int, PodStatusFn], None]
PodEvent = Callable[[Pod, str, str, str, Mapping[str, str]], None]
"""(pod, type, reason, message, annotations): an Event on the pod with those annotations (upstream AnnotatedEventf)."""
Reclaim = Callable[[], Awaitable[None]]


class Notifier(Protocol):
    """A kernel notification that makes the manager synchronize at once (memcg_notifier, pressure_notifier)."""

    def description(self) -> str: ...

    def update(self, pods_memory: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


@dataclass
class Settings:
    thresholds: Sequence[Threshold]
    max_pod_grace_period: int = 0  # evictionMaxPodGracePeriod, for soft thresholds
    pressure_transition_period: float = 300.0
    local_storage_capacity_isolation: bool = True
    # signal -> node-level reclaim steps (dead containers, unused images), tried before any pod is evicted
    reclaim: Mapping[str, Sequence[Reclaim]] = field(default_factory=dict)
    layout: DiskLayout = field(default_factory=DiskLayout)


def evicted_status_fn(message: str, now: str, generation: int | None, condition: bool) -> PodStatusFn:
    """The evicted pod's terminal status: Failed/Evicted with the message, and (pressure evictions) the
    DisruptionTarget condition with reason TerminationByKubelet."""

    def apply(status: dict[str, Any]) -> None:
        status["phase"] = "Failed"
        status["reason"] = REASON
        status["message"] = message
        if not condition:
            return
        cond: dict[str, Any] = {"type": "DisruptionTarget"}
        if generation is not None:
            cond["observedGeneration"] = generation
        cond.update({"status": "True", "lastProbeTime": None, "lastTransitionTime": now,
                     "reason": "TerminationByKubelet", "message": message})
        conditions = [c for c in status.get("conditions", []) if c.get("type") != "DisruptionTarget"]
        conditions.append(cond)
        status["conditions"] = conditions

    return apply


class EvictionManager:
    def __init__(self, settings: Settings, clock: Clock, summary: Callable[[bool], Awaitable[Json]],
                 active_pods: Callable[[], Sequence[Pod]], kill: KillPod,
                 pod_event: PodEvent, node_event: Callable[[str, str, str], None],
                 cleaned_up: Callable[[Pod], bool], comparison_operators: bool = False,
                 metrics: Metrics | None = None) -> None:
        self.settings = settings
        self._metrics = metrics or Metrics()
        self.clock = clock
        self._summary = summary
        self._active_pods = active_pods
        self._kill = kill
        self._pod_event = pod_event
        self._node_event = node_event
        self._cleaned_up = cleaned_up
        self._comparison_operators = comparison_operators
        self.conditions: list[str] = []
        self._first_observed: dict[Threshold, float] = {}
        self._condition_last_observed: dict[str, float] = {}
        self._thresholds_met: list[Threshold] = []
        self._last_observations: dict[str, Observation] = {}
        self.observations: dict[str, Observation] = {}
        self.notifiers: list[Notifier] = []
        self._notifiers_updated: float | None = None
        self._wake = asyncio.Event()
        self._fresh_stats = False  # the next pass needs stats taken now (a notifier fired)
        self._lock = asyncio.Lock()
        self.evictions = 0
        self.explain: ExplainStore | None = None  # each ranking, for `explain`

    # --- what other parts ask ------------------------------------------------------------------
    @property
    def memory_pressure(self) -> bool:
        return MEMORY_PRESSURE in self.conditions

    @property
    def disk_pressure(self) -> bool:
        return "DiskPressure" in self.conditions

    @property
    def pid_pressure(self) -> bool:
        return "PIDPressure" in self.conditions

    def use_disk_layout(self, layout: DiskLayout, dead_containers: Reclaim, unused_images: Reclaim) -> None:
        """The filesystems as found at start (upstream: on the first synchronize): containerfs thresholds,
        ranking and node-level reclaim follow the layout."""
        thresholds, warnings = containerfs_thresholds(self.settings.thresholds, layout)
        for w in warnings:
            log.error("eviction manager: found conflicting containerfs eviction. Ignoring.", extra={"kv": {"err": w}})
        self.settings.thresholds = thresholds
        self.settings.layout = layout
        self.settings.reclaim = reclaim_steps(layout, dead_containers, unused_images)
        log.info("eviction manager: filesystem layout", extra={"kv": {
            "layout": layout.describe(), "dedicatedImageFs": layout.dedicated_image_fs,
            "splitImageFs": layout.split_container_fs}})

    def notify(self, reason: str) -> None:
        """A threshold notifier fired: synchronize now instead of at the end of the interval."""
        log.info("eviction threshold notification", extra={"kv": {"reason": reason}})
        self._fresh_stats = True
        self._wake.set()

    def admit(self, pod: Pod, admitted: Sequence[Pod]) -> PodAdmitResult:
        """Upstream's eviction admit handler: under memory pressure alone, only BestEffort pods that do not
        tolerate the memory-pressure taint are refused; under any other pressure every non-critical pod."""
        if not self.conditions:
            return ADMIT
        view = PodView.of(pod)
        if is_critical(view):
            return ADMIT
        if self.conditions == [MEMORY_PRESSURE]:
            if qos_class(view) != BEST_EFFORT:
                return ADMIT
            taint = Taint(TAINT_MEMORY_PRESSURE, "", "NoSchedule")
            tolerations = (pod.get("spec") or {}).get("tolerations") or []
            if any(isinstance(t, dict) and tolerates(t, taint, self._comparison_operators) for t in tolerations):
                return ADMIT
        return PodAdmitResult(False, REASON, node_condition_message(self.conditions))

    # --- the control loop ----------------------------------------------------------------------
    async def run(self, interval: float = MONITORING_INTERVAL) -> None:
        while True:
            evicted: list[Pod] = []
            try:
                evicted = await self.synchronize()
            except Exception:
                log.exception("eviction manager: synchronize failed")
            if evicted:
                await self._wait_for_cleanup(evicted)
                continue
            self._wake.clear()
            sleeper = asyncio.ensure_future(self.clock.sleep(interval))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()

    async def _wait_for_cleanup(self, pods: Sequence[Pod]) -> None:
        deadline = self.clock.monotonic() + POD_CLEANUP_TIMEOUT
        while self.clock.monotonic() < deadline:
            await self.clock.sleep(POD_CLEANUP_POLL)
            if all(self._cleaned_up(p) for p in pods):
                log.info("eviction manager: pods successfully cleaned up",
                         extra={"kv": {"pods": [podview.format_pod(p) for p in pods]}})
                return
        log.info("eviction manager: timed out waiting for pods to be cleaned up",
                 extra={"kv": {"pods": [podview.format_pod(p) for p in pods]}})

    async def synchronize(self) -> list[Pod]:
        async with self._lock:
            return await self._synchronize()

    async def _synchronize(self) -> list[Pod]:
        settings = self.settings
        if not settings.thresholds and not settings.local_storage_capacity_isolation:
            return []
        active = list(self._active_pods())
        fresh, self._fresh_stats = self._fresh_stats, False
        try:
            summary = await self._summary(fresh)
        except Exception as e:
            log.error("eviction manager: failed to get summary stats", extra={"kv": {"err": str(e)}})
            return []
        self._update_notifiers(summary)
        observations = signals.observations(summary)
        stats = signals.pod_stats(summary)
        self.observations = observations
        met = thresholds_met(settings.thresholds, observations, False)
        if self._thresholds_met:
            met = merge(met, thresholds_met(self._thresholds_met, observations, True))
        now = self.clock.monotonic()
        first = {t: self._first_observed.get(t, now) for t in met}
        observed_conditions = node_conditions(met)
        last = dict(self._condition_last_observed)
        for c in observed_conditions:
            last[c] = now
        conditions: list[str] = [c for c in ("MemoryPressure", "DiskPressure", "PIDPressure")
                      if c in last and now - last[c] < settings.pressure_transition_period]
        ready = [t for t, at in first.items() if now - at >= t.grace_period]
        if conditions != self.conditions:
            log.info("eviction manager: node conditions changed", extra={"kv": {"conditions": conditions}})
        self.conditions = conditions
        self._first_observed = first
        self._condition_last_observed = last
        self._thresholds_met = ready
        # only stats newer than the last pass's are acted on (upstream thresholdsUpdatedStats): the pass after an
        # eviction must not evict again on stats taken before the evicted pod was gone
        ready = [t for t in ready if t.signal in observations and (
            t.signal not in self._last_observations or observations[t.signal].time == 0
            or observations[t.signal].time > self._last_observations[t.signal].time)]
        self._last_observations = observations

        def stats_of(pod: Pod) -> Json | None:
            return stats.get(podview.uid(pod))

        if settings.local_storage_capacity_isolation:
            evicted = [p for p in active if self._local_storage_eviction(p, stats_of(p))]
            if evicted:
                return evicted
        if not ready:
            return []
        ordered = by_eviction_priority(ready)
        to_reclaim = next((t for t in ordered if t.signal in SIGNAL_RESOURCE), None)
        if to_reclaim is None:
            return []
        resource = SIGNAL_RESOURCE[to_reclaim.signal]
        log.info("eviction manager: attempting to reclaim", extra={"kv": {"resourceName": resource}})
        self._node_event("Warning", THRESHOLD_MET_REASON, f"Attempting to reclaim {resource}")
        if await self._reclaim_node_level(to_reclaim.signal):
            log.info("eviction manager: able to reduce resource pressure without evicting pods",
                     extra={"kv": {"resourceName": resource}})
            return []
        if not active:
            log.error("eviction manager: eviction thresholds have been met, but no pods are active to evict")
            return []
        fs_stats = rank_fs_stats(settings.layout).get(to_reclaim.signal, ALL_FS_STATS)
        # the age of the stats each met threshold is acted on with (upstream: wall time of the observation)
        for t in ready:
            observed = observations[t.signal].time
            if observed:
                self._metrics.eviction_stats_age.labels(t.signal).observe(self.clock.now() - observed)
        ranked = rank(active, stats_of, resource, fs_stats)
        if self.explain is not None:
            self._record_ranking(ranked, stats_of, to_reclaim.signal, resource, fs_stats)
        for pod in ranked:
            grace = IMMEDIATE_GRACE
            if not to_reclaim.hard:
                grace = settings.max_pod_grace_period
                spec_grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
                if isinstance(spec_grace, int):
                    grace = min(grace, spec_grace)
            message, annotations = eviction_message(resource, pod, stats_of(pod), ready, observations)
            if self._evict(pod, grace, message, condition=True, annotations=annotations):
                self._metrics.evictions.labels(to_reclaim.signal).inc()
                return [pod]
        log.info("eviction manager: unable to evict any pods from the node")
        return []

    def _record_ranking(self, ranked: Sequence[Pod], stats_of: Callable[[Pod], Json | None], signal: str,
                        resource: str, fs_stats: AbstractSet[str]) -> None:
        """For `explain`: the order this pass ranked the pods in, with the usage it ranked them by."""
        assert self.explain is not None
        now = self.clock.now()
        for i, pod in enumerate(ranked):
            stats = stats_of(pod)
            usage = pod_usage(pod, stats, resource, fs_stats) if stats is not None else 0
            self.explain.ranked(podview.uid(pod), EvictionRank(signal, resource, i + 1, len(ranked), usage, now))

    def _update_notifiers(self, summary: Json) -> None:
        now = self.clock.monotonic()
        if not self.notifiers or (self._notifiers_updated is not None
                                  and now - self._notifiers_updated <= NOTIFIER_REFRESH_INTERVAL):
            return
        self._notifiers_updated = now
        pods = next((c for c in (summary.get("node") or {}).get("systemContainers") or []
                     if c.get("name") == "pods"), None)
        for n in self.notifiers:
            try:
                n.update((pods or {}).get("memory") or {})
            except OSError as e:
                log.info("eviction manager: failed to update notifier",
                         extra={"kv": {"notifier": n.description(), "err": str(e)}})

    def close(self) -> None:
        for n in self.notifiers:
            n.close()

    async def _reclaim_node_level(self, signal: str) -> bool:
        steps = self.settings.reclaim.get(signal, ())
        for step in steps:
            try:
                await step()
            except Exception as e:
                log.info("eviction manager: unexpected error when attempting to reduce resource pressure",
                         extra={"kv": {"signal": signal, "err": str(e) or type(e).__name__}})
        if not steps:
            return False
        try:
            summary = await self._summary(True)
        except Exception as e:
            log.error("eviction manager: failed to get summary stats after resource reclaim",
                      extra={"kv": {"err": str(e)}})
            return False
        return not thresholds_met(self.settings.thresholds, signals.observations(summary), True)

    def _local_storage_eviction(self, pod: Pod, stats: Json | None) -> bool:
        message = local_storage_violation(pod, stats, self.settings.layout.dedicated_image_fs)
        if message is None or not self._evict(pod, IMMEDIATE_GRACE, message, condition=False):
            return False
        self._metrics.evictions.labels(local_storage_signal(message)).inc()
        return True

    def _evict(self, pod: Pod, grace: int, message: str, condition: bool,
               annotations: Mapping[str, str] | None = None) -> bool:
        """False only for a critical pod, which is never evicted (static pods are not re-admitted)."""
        if is_critical(PodView.of(pod)):
            log.error("eviction manager: cannot evict a critical pod", extra={"kv": {"pod": podview.format_pod(pod)}})
            return False
        self._pod_event(pod, "Warning", REASON, message, annotations or {})
        log.info("evicting pod", extra={"kv": {"pod": podview.format_pod(pod), "message": message, "grace": grace}})
        generation = PodView.of(pod).generation
        self._kill(pod, grace, evicted_status_fn(message, rfc3339(self.clock.now()), generation, condition))
        self.evictions += 1
        return True
