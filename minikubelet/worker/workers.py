"""Pod workers (upstream pod_workers.go): one asyncio task per pod that serialises everything done to it.

A worker wakes on spec changes, runtime events (via the PLEG), probe result changes, backoff timers and a
periodic resync, and moves its pod through the lifecycle: syncing -> terminating -> terminated. When the
pod is removed from every source the worker finishes the termination, removes what the pod left in the
runtime and on disk, and ends.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

from cri.errors import RuntimeError_
from minikubelet.base import podview
from minikubelet.base.clock import Clock, sleep_until_woken
from minikubelet.base.grace import effective_grace_period
from minikubelet.base.podview import Pod, PodView
from minikubelet.metrics import Metrics
from minikubelet.runtime.pod_cache import RuntimeFact
from minikubelet.worker.lifecycle import KillPodOptions, PodLifecycle, PodStatusFn
from minikubelet.worker.pod_state import PodSyncState
from minikubelet.worker.sync import PodSyncer

log = logging.getLogger("minikubelet.worker.workers")

SYNC_ERROR_RETRY = 10.0
# upstream pod_workers.go: a failed sync is requeued after backOffPeriod, jittered by up to half of it
BACKOFF_PERIOD = 10.0
BACKOFF_JITTER = 0.5


class PodWorker:
    def __init__(self, pod: Pod, syncer: PodSyncer, clock: Clock, metrics: Metrics, resync_period: float = 10.0,
                 adopted: bool = False) -> None:
        self.pod = pod
        self.view = PodView.of(pod)  # built once per pod version
        self.uid = self.view.uid
        self._syncer = syncer
        self._clock = clock
        self._metrics = metrics
        self._resync_period = resync_period
        self.lifecycle = PodLifecycle.SYNCING
        self._kill: KillPodOptions | None = None
        self._status_fn: PodStatusFn | None = None  # the last kill's that had one
        self._grace: int | None = None  # the grace of the requested termination; a shorter one given later wins
        self._removed = False
        self._wake = asyncio.Event()
        # the runtime changes (from the PLEG) that woke it since the pass began; None once anything else did
        self._facts: list[RuntimeFact] | None = []
        self._news: list[RuntimeFact] = []  # every PLEG fact since the pass began: the cached state is stale if
        # one is not reflected in it
        self._urgent = False  # a new spec, a kill or a removal: synced even during a back-off
        self._backoff_until: float | None = None  # after a failed sync, runtime events wait for this
        # an adopted pod was started by an earlier agent: its start is not this agent's to measure
        self.st = PodSyncState(first_seen=-1.0 if adopted else clock.monotonic(), fresh=not adopted)
        self._update_type = "create"  # upstream's update type of the next sync: create, update or sync
        self.task: asyncio.Task[None] | None = None
        self._sync_task: asyncio.Future[KillPodOptions | None] | None = None
        self._completed: list[asyncio.Event] = []  # set once the termination is done

    # --- signals from outside -------------------------------------------------------------
    def wake(self, urgent: bool = False) -> None:
        """Sync soon. A plain wake (runtime event, probe result) waits out the back-off of a failed sync."""
        self._urgent = self._urgent or urgent
        self._facts = None
        self._wake.set()

    def runtime_changed(self, fact: RuntimeFact) -> None:
        """The PLEG saw the pod change in the runtime: sync soon, unless the last sync already saw it."""
        if self._facts is not None:
            self._facts.append(fact)
        self._news.append(fact)
        self._wake.set()

    def _woken(self) -> bool:
        """Woken by something the last sync has not seen (the PLEG's facts it already shows do not count)."""
        if not self._wake.is_set():
            return False
        seen, facts = self.st.seen, self._facts
        if seen is None or facts is None or not all(seen.reflects(f) for f in facts):
            return True
        self._wake.clear()
        facts.clear()
        return False

    def update(self, pod: Pod, *, sync: bool = True) -> None:
        """A new version of the same pod (same uid). Ignored once the pod is terminating. `sync=False`: keep it
        for the next sync without bringing one forward."""
        if self.lifecycle is PodLifecycle.SYNCING and self._kill is None and pod is not self.pod:
            self.pod = pod
            self.view = PodView.of(pod)
            if sync:
                self._urgent = True
                self._update_type = "update" if self._update_type == "sync" else self._update_type
        if sync:
            self.wake()

    def count_containers(self) -> None:
        self._metrics.containers_per_pod.observe(len((self.pod.get("spec") or {}).get("containers") or []))

    def kill(self, opts: KillPodOptions | None = None) -> None:
        """Terminate the pod (grace: the override, else the pod's own); a shorter grace given later wins."""
        opts = opts or KillPodOptions()
        spec = self.pod.get("spec") or {}
        meta = self.pod.get("metadata") or {}
        self._grace = effective_grace_period(spec.get("terminationGracePeriodSeconds"),
                                             meta.get("deletionGracePeriodSeconds"), opts.grace_override,
                                             previous=self._grace or 0)
        if self._kill is None:
            self._kill = opts
        if opts.status_fn is not None:
            # upstream UpdatePod keeps every kill's status function and SyncTerminatingPod gets the last one
            self._status_fn = opts.status_fn
        if opts.completed is not None:
            if self.lifecycle is PodLifecycle.TERMINATED:
                opts.completed.set()
            else:
                self._completed.append(opts.completed)
        if self._sync_task is not None and not self._sync_task.done():
            self._sync_task.cancel()
        self.wake(urgent=True)

    def remove(self) -> None:
        """The pod left every source: terminate it if needed, then clean up and end the worker."""
        self._removed = True
        if self._kill is None and self.lifecycle is PodLifecycle.SYNCING:
            self.kill()
        self.wake(urgent=True)

    @property
    def terminating(self) -> bool:
        """Termination was requested or is under way (upstream IsPodTerminationRequested)."""
        return self._kill is not None or self.lifecycle is not PodLifecycle.SYNCING

    @property
    def removed(self) -> bool:
        return self._removed

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self.run(), name=f"pod-worker-{self.view.full_name}")
        return self.task

    # --- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self._syncer.worker_ended()

    async def _run(self) -> None:
        while True:
            t0 = time.monotonic()
            if self._news and (self.st.seen is None or not all(self.st.seen.reflects(f) for f in self._news)):
                self.st.cached = None
            self._facts, self._news, self.st.seen = [], [], None
            op = self._operation()
            self.st.sync_failed = False
            try:
                if await self._step():
                    return
            except RuntimeError_ as e:
                log.warning("pod sync failed", extra={"kv": {"pod": self.view.format_pod, "err": str(e)}})
                self.st.sync_failed = True
            except Exception:
                log.exception("pod sync crashed", extra={"kv": {"pod": self.view.format_pod}})
                self.st.sync_failed = True
            if self.st.sync_failed:
                self._back_off()
            self._metrics.pod_worker_duration.labels(op).observe(time.monotonic() - t0)
            await self._wait()

    def _operation(self) -> str:
        """kubelet_pod_worker_duration_seconds' operation_type for the coming pass."""
        if self.lifecycle is PodLifecycle.TERMINATED:
            return "terminated"
        return "kill" if self._kill is not None else self._update_type

    async def _step(self) -> bool:
        """One pass of the lifecycle; True when the worker is done."""
        if self.lifecycle is PodLifecycle.SYNCING:
            if self._kill is None:
                kill = await self._sync()
                if kill is None and self._kill is None:
                    return False
                if kill is not None:
                    self.kill(kill)
            self.lifecycle = PodLifecycle.TERMINATING
        if self.lifecycle is PodLifecycle.TERMINATING:
            assert self._kill is not None and self._grace is not None
            await self._syncer.sync_terminating_pod(self.view, self.st, self._grace, self._status_fn)
            self.lifecycle = PodLifecycle.TERMINATED
            for done in self._completed:
                done.set()
            self._completed.clear()
            # upstream: SyncTerminatedPod follows at once (its final status is what allows the final DELETE)
        if self._removed:
            if await self._syncer.cleanup(self.view, keep_status=not self.st.owns_status):
                return True
            self.st.wake_no_later_than(self._clock.monotonic() + SYNC_ERROR_RETRY)
            return False
        await self._syncer.sync_terminated_pod(self.view, self.st)
        return False

    async def _sync(self) -> KillPodOptions | None:
        """SyncPod, cancelled when a kill arrives meanwhile (upstream cancels the sync's context), so a hung
        postStart hook or image pull never keeps a deleted pod alive."""
        if self._update_type == "create" and self.st.first_seen >= 0:
            self._metrics.pod_worker_start_duration.observe(self._clock.monotonic() - self.st.first_seen)
        self._update_type = "sync"
        self._sync_task = asyncio.ensure_future(self._syncer.sync_pod(self.view, self.st))
        try:
            return await self._sync_task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._kill is None or (me is not None and me.cancelling()):
                raise
            return None
        finally:
            self._sync_task = None

    def _back_off(self) -> None:
        """upstream completeWork: requeue the pod after the jittered back-off period."""
        period = BACKOFF_PERIOD * (1 + BACKOFF_JITTER * random.random())
        self._backoff_until = self._clock.monotonic() + period
        self.st.wake_no_later_than(self._backoff_until)

    async def _wait(self) -> None:
        while self._backoff_until is not None and not self._urgent:
            left = self._backoff_until - self._clock.monotonic()
            if left <= 0:
                break
            # a runtime event about the pod (a sandbox that failed to start, say) does not cut the back-off
            self._wake.clear()
            await sleep_until_woken(self._clock, left, self._wake)
        if self._backoff_until is not None:
            self._backoff_until = None
            self._urgent = False
            self._wake.clear()
            self.st.wake_at = None
            return
        self._urgent = False
        if self._woken():
            self._wake.clear()
            self.st.wake_at = None
            return
        if self.st.wake_at is not None:
            deadline = self.st.wake_at
        else:
            # upstream jitters the periodic resync by up to half a period so pods do not sync in lockstep
            deadline = self._clock.monotonic() + self._resync_period * (1 + 0.5 * random.random())
        while True:
            delay = max(0.0, deadline - self._clock.monotonic())
            await sleep_until_woken(self._clock, delay, self._wake)
            if not self._wake.is_set() or self._woken() or self._clock.monotonic() >= deadline:
                break
        self._wake.clear()
        self.st.wake_at = None


WorkerFactory = Callable[[Pod, bool], PodWorker]


class PodWorkers:
    """The set of pod workers by uid; restarts a worker that crashed while its pod is still wanted."""

    def __init__(self, factory: WorkerFactory, on_finished: Callable[[str, Pod], None] = lambda _u, _p: None) -> None:
        self._factory = factory
        self._on_finished = on_finished
        self._workers: dict[str, PodWorker] = {}
        self._closing = False
        # upstream UpdatePod runs a pod as allocated (in-place resize: the admitted resources, not the spec's)
        self.allocated: Callable[[Pod], Pod] = lambda pod: pod

    def get(self, uid: str) -> PodWorker | None:
        return self._workers.get(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._workers

    def uids(self) -> list[str]:
        return list(self._workers)

    def pods(self) -> list[Pod]:
        return [w.pod for w in self._workers.values()]

    def active_pods(self) -> list[Pod]:
        """Pods whose workers are not terminating (they hold node resources)."""
        return [w.pod for w in self._workers.values() if not w.terminating]

    def update_pod(self, pod: Pod, kill: KillPodOptions | None = None, adopted: bool = False) -> PodWorker:
        """Start a worker for a new pod, hand a new version to a running one, or kill it."""
        uid = podview.uid(pod)
        pod = self.allocated(pod)
        w = self._workers.get(uid)
        if w is None:
            w = self._start(pod, adopted)
            if kill is None:  # upstream counts the containers of a pod its worker starts
                w.count_containers()
        else:
            w.update(pod)
        if kill is not None:
            w.kill(kill)
        return w

    def reconcile_pod(self, pod: Pod) -> None:
        """Only the pod's status changed in its source (upstream HandlePodReconcile): the worker keeps the new
        object (its status carries other owners' conditions) for its next sync, which is not brought forward."""
        w = self._workers.get(podview.uid(pod))
        if w is not None:
            w.update(self.allocated(pod), sync=False)

    def remove_pod(self, uid: str) -> None:
        w = self._workers.get(uid)
        if w is not None:
            w.remove()

    def wake(self, uid: str, urgent: bool = False) -> None:
        """`urgent`: a change of the pod's inputs (a ConfigMap or Secret it uses), synced even in a back-off."""
        w = self._workers.get(uid)
        if w is not None:
            w.wake(urgent)

    def runtime_changed(self, uid: str, fact: RuntimeFact) -> None:
        w = self._workers.get(uid)
        if w is not None:
            w.runtime_changed(fact)

    def wake_all(self, urgent: bool = False) -> None:
        for w in self._workers.values():
            w.wake(urgent)

    def _start(self, pod: Pod, adopted: bool) -> PodWorker:
        w = self._factory(pod, adopted)
        uid = podview.uid(pod)
        self._workers[uid] = w

        def done(task: asyncio.Task[None]) -> None:
            self._done(uid, w, task)

        w.start().add_done_callback(done)
        return w

    def _done(self, uid: str, w: PodWorker, task: asyncio.Task[None]) -> None:
        if self._workers.get(uid) is not w:
            return
        del self._workers[uid]
        if self._closing or task.cancelled():
            return
        if task.exception() is not None or not w.removed:
            log.error("pod worker ended unexpectedly; starting it again",
                      extra={"kv": {"pod": podview.format_pod(w.pod), "err": repr(task.exception())}})
            restarted = self._start(w.pod, adopted=True)
            if w.removed:
                restarted.remove()
            return
        self._on_finished(uid, w.pod)

    async def shutdown(self) -> None:
        """Stop the workers without stopping any pod: the pods outlive the agent."""
        self._closing = True
        tasks = [w.task for w in self._workers.values() if w.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
