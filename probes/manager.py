"""The probe manager: keeps one worker per running container and probe, answers status queries."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from cri.runtime import RuntimeService
from minikubelet.base.clock import Clock
from minikubelet.base.podview import ContainerView, Pod, PodView, ProbeSpec
from minikubelet.base.prometheus import CollectorRegistry
from probes.metrics import ProbeIdentity, ProbeMetrics
from probes.prober import run_probe
from probes.result import ProbeKind, ProbeOutcome, Result
from probes.results import ResultsCache
from probes.worker import ProbeWorker


class EventFn(Protocol):
    """Records a pod event; called with keywords, so EventRecorder.pod_event fits as it is."""

    def __call__(self, pod: Pod, etype: str, reason: str, message: str, container: str = "") -> None: ...


EVENT_WARNING = "Warning"
REASON_UNHEALTHY = "Unhealthy"
REASON_PROBE_WARNING = "ProbeWarning"

WorkerKey = tuple[str, str, ProbeKind]


@dataclass(frozen=True)
class ProbeFailure:
    """A liveness or startup probe crossed its failure threshold: the container must be killed."""

    kind: ProbeKind
    container_name: str
    container_id: str
    output: str
    since: float

    @property
    def reason(self) -> str:
        """Upstream's kill reason: LivenessProbe or StartupProbe."""
        return f"{self.kind.label}Probe"

    def message(self, will_restart: bool = True) -> str:
        """The Killing event's message."""
        text = f"Container {self.container_name} failed {self.kind.value} probe"
        return f"{text}, will be restarted" if will_restart else text


@dataclass
class _PodState:
    pod: PodView
    pod_ip: str = ""
    container_ids: dict[str, str] = field(default_factory=dict)
    terminating: bool = False


class ProbeManager:
    def __init__(
        self,
        runtime: RuntimeService,
        clock: Clock,
        registry: CollectorRegistry,
        on_change: Callable[[str], None],
        *,
        events: EventFn | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._runtime = runtime
        self._clock = clock
        self._metrics = ProbeMetrics(registry)
        self._on_change = on_change
        self._events = events
        self._rng = rng
        self._start = clock.monotonic()
        self.results = ResultsCache(self._result_changed)
        self._pods: dict[str, _PodState] = {}
        self._workers: dict[WorkerKey, ProbeWorker] = {}
        self._identities: dict[WorkerKey, ProbeIdentity] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    # ---- keeping workers in line with the pod ----

    def update_pod(
        self,
        pod: PodView,
        pod_ip: str,
        container_ids: Mapping[str, str | None],
        started_at: Mapping[str, float],
    ) -> None:
        """Start and stop workers so that each running container has one per probe it declares.

        `container_ids[name]` is the running container's ID, None (or absent) when it is not
        running; `started_at[name]` is its start time in wall-clock seconds."""
        uid = pod.uid
        state = self._pods.setdefault(uid, _PodState(pod))
        state.pod = pod
        state.pod_ip = pod_ip
        state.container_ids = {name: cid for name, cid in container_ids.items() if cid}
        # Upstream stops liveness and startup probing once the pod is being deleted.
        state.terminating = state.terminating or pod.deletion_timestamp is not None
        wanted: set[WorkerKey] = set()
        for container in pod.probed_containers:
            name = container.name
            container_id = state.container_ids.get(name)
            for kind in ProbeKind:
                spec = container.probe(kind.value)
                if spec is None or not container_id:
                    continue
                if state.terminating and kind is not ProbeKind.READINESS:
                    continue
                key = (uid, name, kind)
                wanted.add(key)
                worker = self._workers.get(key)
                if worker is None:
                    since = started_at.get(name, self._clock.now())
                    self._start_worker(key, pod, container, spec, container_id, since)
                else:
                    worker.set_container(container_id, started_at.get(name, worker.started_at))
        for key in [k for k in self._workers if k[0] == uid and k not in wanted]:
            self._stop_worker(key)

    def stop_liveness_and_startup(self, pod_uid: str) -> None:
        """For termination: liveness and startup must not kill a container that is being stopped."""
        state = self._pods.get(pod_uid)
        if state is not None:
            state.terminating = True
        for key in [k for k in self._workers if k[0] == pod_uid and k[2] is not ProbeKind.READINESS]:
            self._stop_worker(key)

    def remove_pod(self, pod_uid: str) -> None:
        for key in [k for k in self._workers if k[0] == pod_uid]:
            self._stop_worker(key)
        self._pods.pop(pod_uid, None)
        self.results.remove_pod(pod_uid)

    async def close(self) -> None:
        for key in list(self._workers):
            self._stop_worker(key)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    # ---- queries for the pod worker and status computation ----

    def started(self, pod_uid: str, container_name: str) -> bool:
        """Running, and its startup probe (if it has one being run) has succeeded."""
        container_id = self._running_id(pod_uid, container_name)
        if container_id is None:
            return False
        if (pod_uid, container_name, ProbeKind.STARTUP) not in self._workers:
            return True
        result = self.results.get_for(pod_uid, container_name, ProbeKind.STARTUP, container_id)
        return result is Result.SUCCESS

    def readiness(self, pod_uid: str, container_name: str) -> bool:
        """Started, and its readiness probe (if any) last reported Success for this container."""
        if not self.started(pod_uid, container_name):
            return False
        if (pod_uid, container_name, ProbeKind.READINESS) not in self._workers:
            return True
        container_id = self._running_id(pod_uid, container_name)
        assert container_id is not None  # started() checked it
        result = self.results.get_for(pod_uid, container_name, ProbeKind.READINESS, container_id)
        return result is Result.SUCCESS

    def liveness_failed(self, pod_uid: str, container_name: str, container_id: str) -> ProbeFailure | None:
        """The liveness (or else startup) failure that requires killing this container, if any."""
        for kind in (ProbeKind.LIVENESS, ProbeKind.STARTUP):
            entry = self.results.get(pod_uid, container_name, kind)
            if entry is not None and entry.container_id == container_id and entry.result is Result.FAILURE:
                return ProbeFailure(kind, container_name, container_id, entry.output, entry.since)
        return None

    def worker_keys(self) -> set[WorkerKey]:
        return set(self._workers)

    def worker(self, pod_uid: str, container_name: str, kind: ProbeKind) -> ProbeWorker | None:
        return self._workers.get((pod_uid, container_name, kind))

    # ---- internals ----

    def _running_id(self, pod_uid: str, container_name: str) -> str | None:
        state = self._pods.get(pod_uid)
        return None if state is None else state.container_ids.get(container_name)

    def _start_worker(
        self,
        key: WorkerKey,
        pod: PodView,
        container: ContainerView,
        spec: ProbeSpec,
        container_id: str,
        started_at: float,
    ) -> None:
        uid, name, kind = key
        identity = ProbeIdentity(kind, name, pod.name, pod.namespace, uid)
        period = float(spec.period_seconds)
        # As upstream: spread probes out only when the agent itself has just started, so
        # a restart does not fire every probe at once.
        recent = self._clock.monotonic() - self._start < period
        jitter = self._rng() * period if recent else 0.0

        async def probe(cid: str) -> ProbeOutcome:
            state = self._pods.get(uid)
            pod_ip = state.pod_ip if state is not None else ""
            return await run_probe(self._runtime, spec, container, pod_ip, cid)

        def outcome(result: ProbeOutcome, seconds: float) -> None:
            self._metrics.record(identity, result.result, seconds)
            self._emit(uid, name, kind, result)

        worker = ProbeWorker(
            kind=kind,
            pod_uid=uid,
            container_name=name,
            spec=spec,
            clock=self._clock,
            results=self.results,
            probe=probe,
            container_id=container_id,
            started_at=started_at,
            is_started=lambda: self.started(uid, name),
            jitter=jitter,
            on_outcome=outcome,
        )
        self._workers[key] = worker
        self._identities[key] = identity
        worker.start()

    def _stop_worker(self, key: WorkerKey) -> None:
        worker = self._workers.pop(key, None)
        identity = self._identities.pop(key, None)
        if worker is None:
            return
        self.results.remove(*key)
        task = asyncio.get_running_loop().create_task(worker.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)
        if identity is not None:
            self._metrics.forget(identity)

    def _emit(self, pod_uid: str, container_name: str, kind: ProbeKind, outcome: ProbeOutcome) -> None:
        state = self._pods.get(pod_uid)
        if self._events is None or state is None:
            return
        if outcome.result is Result.FAILURE:
            reason, message = REASON_UNHEALTHY, f"{kind.label} probe failed: {outcome.output}"
        elif outcome.result is Result.UNKNOWN:
            reason = REASON_UNHEALTHY
            message = f"{kind.label} probe errored and resulted in unknown state: {outcome.output}"
        elif outcome.warning:
            reason, message = REASON_PROBE_WARNING, f"{kind.label} probe warning: {outcome.output}"
        else:
            return
        self._events(
            pod=state.pod.raw, etype=EVENT_WARNING, reason=reason, message=message, container=container_name
        )

    def _result_changed(self, pod_uid: str, container_name: str, kind: ProbeKind) -> None:
        if kind is ProbeKind.STARTUP:
            entry = self.results.get(pod_uid, container_name, kind)
            readiness = self._workers.get((pod_uid, container_name, ProbeKind.READINESS))
            if entry is not None and entry.result is Result.SUCCESS and readiness is not None:
                readiness.trigger()  # Ready as soon as possible once started, as upstream.
        self._on_change(pod_uid)
