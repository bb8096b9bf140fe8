"""The pod manager: the pods the node should run (from the source merge), admission, static-pod
replacement, and the runtime's orphans. It drives the pod workers; statuses go to the status manager."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from cgroups.qos import qos_class
from cri.types import ANNOTATION_GRACE_PERIOD, LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID
from minikubelet.base import podview
from minikubelet.base.clock import Clock, sleep_until_woken
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod, PodView
from minikubelet.events import EXCEEDED_GRACE_PERIOD, EventRecorder
from minikubelet.explain.record import Admission, ExplainStore, cut
from minikubelet.metrics import Metrics, admission_rejection_reason
from minikubelet.pod.admission import PodAdmitHandler, can_admit_pod
from minikubelet.pod.allocation import (
    TRIGGER_POD_TERMINATED,
    TRIGGER_PODS_ADDED,
    TRIGGER_PODS_REMOVED,
    AllocationManager,
)
from minikubelet.pod.preemption import PREEMPT_MESSAGE, PREEMPT_REASON, preempted_status_fn
from minikubelet.sources.merge import PodOp, PodUpdate
from minikubelet.status.generate import TERMINAL_PHASES
from minikubelet.status.manager import StatusManager
from minikubelet.worker.lifecycle import KillPodOptions, PodLifecycle, kill_timeout
from minikubelet.worker.workers import PodWorkers

log = logging.getLogger("minikubelet.pod.manager")

ORPHAN_GRACE = 1


def _deletion_kill(pod: Pod) -> KillPodOptions | None:
    """A pod the API server is deleting gracefully (upstream HandlePodUpdates → the pod worker sees the
    deletionTimestamp): kill it with the smaller of `deletionGracePeriodSeconds` and the pod's own grace. The
    deletion's grace goes in as an override too, so a second, shorter delete shortens a kill under way."""
    md = podview.meta(pod)
    if not md.get("deletionTimestamp"):
        return None
    grace = md.get("deletionGracePeriodSeconds")
    return KillPodOptions(grace_override=grace if isinstance(grace, int) and not isinstance(grace, bool) else None)


def _terminal_phase(pod: Pod) -> bool:
    status = pod.get("status")
    return isinstance(status, dict) and status.get("phase") in TERMINAL_PHASES


def _differs_semantically(old: Pod, new: Pod) -> bool:
    """upstream podsDifferSemantically: spec, labels, annotations or the deletion fields changed. Anything
    else (status, resourceVersion, managedFields) makes a reconcile, not an update."""
    om, nm = podview.meta(old), podview.meta(new)
    return old.get("spec") != new.get("spec") or any(
        om.get(k) != nm.get(k) for k in ("labels", "annotations", "deletionTimestamp", "deletionGracePeriodSeconds"))


def _has_readiness_gates(pod: Pod) -> bool:
    """upstream NeedToReconcilePodReadiness needs readiness gates: then a condition another component set can
    change the pod's Ready condition, and the pod is synced."""
    return bool((pod.get("spec") or {}).get("readinessGates"))


class PodManager:
    def __init__(self, workers: PodWorkers, statuses: StatusManager, admit_handlers: Sequence[PodAdmitHandler],
                 clock: Clock, recorder: EventRecorder,
                 refetch_node: Callable[[str], None] | None = None, metrics: Metrics | None = None) -> None:
        """`refetch_node(uid)`: read the Node from the API server again, then call `readmit(uid)` (joined
        agents only)."""
        self.workers = workers
        self.refetch_node = refetch_node
        self._metrics = metrics or Metrics()
        self._refetching: set[str] = set()  # uids waiting for a fresh Node before their admission ends
        self.statuses = statuses
        self.admit_handlers = list(admit_handlers)
        self._clock = clock
        self._recorder = recorder
        self.desired: dict[str, Pod] = {}  # uid -> pod, over all sources
        self._waiting: dict[str, Pod] = {}  # uid -> pod blocked behind an older pod of the same full name
        self._rejected: set[str] = set()
        self._rejections: dict[str, dict[str, Any]] = {}  # uid -> the status _reject wrote
        self.runtime_only: set[str] = set()  # uids of runtime pods no source knows, stopped by adopt_orphans
        self.mirror_count: Callable[[], int] = lambda: 0  # joined: the mirror pods the API source sees
        self.allocation: AllocationManager | None = None  # in-place resize: admission keeps the allocation
        self.explain: ExplainStore | None = None  # admission decisions for `explain`
        self._finished_at: dict[str, float] = {}  # uid -> when its worker finished, until a relist listed after it
        # Preemption: upstream's admission blocks the kubelet's sync loop in killPodNow until each victim is dead.
        # Here the critical pod waits in `_preempting` and the pods that come meanwhile in `_queued`, admitted in
        # order once it is in. `preempt` kills one victim; its event is set once nothing of the victim runs.
        self._preempting: dict[str, Pod] = {}
        self._queued: dict[str, Pod] = {}
        self._preemptions: set[asyncio.Task[None]] = set()
        self.preempt: Callable[[Pod], asyncio.Event] = self._kill_for_preemption

    # --- updates from the source merge ----------------------------------------------------
    def handle(self, update: PodUpdate) -> None:
        allocation = self.allocation
        if update.op is PodOp.REMOVE:
            for p in update.pods:
                self._remove(p)
            if allocation is not None:
                allocation.retry_pending_resizes(TRIGGER_PODS_REMOVED)
        elif update.op is PodOp.ADD:
            for p in update.pods:
                self.desired[podview.uid(p)] = p
                self._admit(p)
            if allocation is not None:
                # upstream: the resizes of the pods already running are tried once every pod of the batch is in
                allocation.conditions.backfill(update.pods)
                if allocation.has_pending_resizes():
                    allocation.retry_pending_resizes(TRIGGER_PODS_ADDED)
        else:
            for p in update.pods:
                uid = podview.uid(p)
                prev = self.desired.get(uid)
                self.desired[uid] = p
                if uid in self._waiting:
                    self._waiting[uid] = p
                elif uid in self.workers:
                    if prev is not None and not _differs_semantically(prev, p) and not _has_readiness_gates(p):
                        # e.g. our own status write coming back through the API watch: no sync for it
                        self.workers.reconcile_pod(p)
                        if (allocation is not None and allocation.has_pending_resizes() and _terminal_phase(p)
                                and not _terminal_phase(prev)):
                            allocation.retry_pending_resizes(TRIGGER_POD_TERMINATED)
                    else:
                        if allocation is not None:
                            allocation.pod_updated(prev, p)
                        self.workers.update_pod(p, kill=_deletion_kill(p))

    def _remove(self, pod: Pod) -> None:
        uid = podview.uid(pod)
        self.desired.pop(uid, None)
        self._waiting.pop(uid, None)
        self._refetching.discard(uid)
        self._queued.pop(uid, None)
        self._preempting.pop(uid, None)  # its victims still stop; it is not admitted afterwards
        if self.allocation is not None:
            self.allocation.remove_pod(uid)
        if uid in self._rejected:
            self._rejected.discard(uid)
            self._rejections.pop(uid, None)
            if self.explain is not None:
                self.explain.forget(uid)
        w = self.workers.get(uid)
        if w is None:
            self.statuses.remove_pod(uid)
            return
        if not w.removed:  # a refused pod's stand-in worker (adopt_orphans) is removed from its start
            log.info("pod removed from source", extra={"kv": {"pod": podview.format_pod(w.pod)}})
            self.workers.remove_pod(uid)

    def _admit(self, pod: Pod, refetched: bool = False) -> None:
        uid = podview.uid(pod)
        if (uid in self._rejected or uid in self.workers or uid in self._preempting
                or (uid in self._refetching and not refetched)):
            return
        kill = _deletion_kill(pod)
        if kill is not None:
            # Deleted before it ran here (or while the agent was down): no admission, straight to
            # terminating, so what may run of it stops within its grace and the final DELETE follows.
            self.workers.update_pod(pod, kill=kill)
            return
        if _terminal_phase(pod):
            # Upstream HandlePodAdditions admits no pod whose phase is already terminal: a pod rejected
            # before an agent restart stays rejected, a finished pod is not run again.
            self._rejected.add(uid)
            return
        full = podview.full_name(pod)
        blocker = next((p for p in self.workers.pods() if podview.full_name(p) == full), None)
        if blocker is not None:
            # Like the kubelet, a new version of a static pod waits until the old one has stopped.
            self._waiting[uid] = pod
            self.statuses.set_pod_status(pod, {"phase": "Pending"})
            blocker_uid = podview.uid(blocker)
            if blocker_uid not in self.desired:
                self.workers.remove_pod(blocker_uid)
            return
        if self._preempting:
            self._queued[uid] = pod
            return
        result = self.allocation.add_pod(pod) if self.allocation is not None else can_admit_pod(
            self.admit_handlers, pod, [p for p in self.active_pods() if podview.uid(p) != uid])
        if not result.admit and result.refetch_node and not refetched and self.refetch_node is not None:
            self._refetching.add(uid)
            self.refetch_node(uid)
            return
        self._refetching.discard(uid)
        # the topology manager (policy none) admits every pod its turn reaches: counted, never refused
        self._metrics.topology_manager_admission_requests.inc()
        self._metrics.topology_manager_admission_duration.observe(0)
        if not result.admit:
            self._metrics.admission_rejections.labels(admission_rejection_reason(result.reason)).inc()
            self._reject(pod, result.reason, result.message, result.details)
            return
        if result.victims:
            self._preempting[uid] = pod
            task = asyncio.get_running_loop().create_task(self._preempt_then_admit(uid, result.victims),
                                                          name=f"preemption-for-{podview.format_pod(pod)}")
            self._preemptions.add(task)
            task.add_done_callback(self._preemptions.discard)
            return
        self._run_admitted(pod)

    def _run_admitted(self, pod: Pod) -> None:
        if self.explain is not None:
            self.explain.admitted(podview.uid(pod), podview.namespace(pod), podview.name(pod),
                                  Admission(True, at=self._clock.now()))
        self.workers.update_pod(pod)
        if self.allocation is not None:
            self.allocation.pod_added(pod)

    def _kill_for_preemption(self, victim: Pod) -> asyncio.Event:
        """upstream CriticalPodAdmissionHandler's killPodFunc: Failed/Preempting, with a Warning event."""
        done = asyncio.Event()
        self._recorder.pod_event(victim, "Warning", PREEMPT_REASON, PREEMPT_MESSAGE)
        self.workers.update_pod(victim, kill=KillPodOptions(
            status_fn=preempted_status_fn(rfc3339(self._clock.now())), completed=done))
        return done

    async def _preempt_then_admit(self, uid: str, victims: Sequence[Pod]) -> None:
        """Kill the victims one after another, each awaited up to upstream's kill timeout, then run the critical
        pod. A victim that overran is logged and left stopping: upstream admits the pod all the same."""
        try:
            for victim in victims:
                vuid = podview.uid(victim)
                if vuid not in self.desired and vuid not in self.workers:
                    # removed from its source while an earlier victim stopped, before it ever ran here (it waited
                    # behind an older pod of its name): nothing of it runs, and a worker made to kill it would
                    # never be removed. Upstream's admission blocks its sync loop, so no removal comes between.
                    continue
                done = self.preempt(victim)
                grace = (victim.get("spec") or {}).get("terminationGracePeriodSeconds")
                await sleep_until_woken(self._clock, kill_timeout(grace if isinstance(grace, int) else 0), done)
                if not done.is_set():
                    self._recorder.pod_event(victim, "Warning", EXCEEDED_GRACE_PERIOD,
                                             "Container runtime did not kill the pod within specified grace period.")
                    log.error("Failed to evict pod", extra={"kv": {"pod": podview.format_pod(victim),
                                                                   "err": "timeout waiting to kill pod"}})
        finally:
            self._preempting.pop(uid, None)
        pod = self.desired.get(uid)
        if pod is not None:
            kill = _deletion_kill(pod)  # deleted through the API meanwhile
            if kill is not None:
                self.workers.update_pod(pod, kill=kill)
            else:
                self._run_admitted(pod)
        queued, self._queued = self._queued, {}
        for quid in queued:
            if quid in self.desired:
                self._admit(self.desired[quid])

    def active_pods(self) -> list[Pod]:
        """upstream GetActivePods (filterOutInactivePods over the pod manager's pods): the pods the sources
        want, without those whose worker has terminated them (IsPodKnownTerminated) and those in a terminal
        phase (the API's or ours: isAdmittedPodTerminal) unless still terminating (IsPodTerminationRequested).
        A pod in its grace period still holds what it was admitted with. Pods still waiting for a Node read,
        for their preemption's victims to stop, or behind that preemption have not been decided yet: upstream
        admits synchronously, so they never count."""
        out = []
        for uid, pod in self.desired.items():
            if uid in self._refetching or uid in self._preempting or uid in self._queued:
                continue
            w = self.workers.get(uid)
            if w is not None and w.lifecycle is PodLifecycle.TERMINATED:
                continue
            if self._admitted_pod_terminal(uid, pod) and not (w is not None and w.terminating):
                continue
            out.append(pod)
        return out

    def _admitted_pod_terminal(self, uid: str, pod: Pod) -> bool:
        """upstream isAdmittedPodTerminal: the source's phase or the status manager's is terminal."""
        ours = self.statuses.get_pod_status(uid)
        return _terminal_phase(pod) or (ours is not None and ours.get("phase") in TERMINAL_PHASES)

    def rejected(self, uid: str) -> bool:
        """Whether admission refused the pod (or found its phase already terminal) and it has not gone since."""
        return uid in self._rejected

    def readmit(self, uid: str) -> None:
        """The Node was read again (or could not be): admit the pod against it, without another read."""
        if uid in self._refetching and uid in self.desired:
            self._admit(self.desired[uid], refetched=True)

    def _reject(self, pod: Pod, reason: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        """Upstream rejectPod: Failed with the reason, the message prefixed, the pod's QoS class."""
        self._rejected.add(podview.uid(pod))
        status = {"phase": "Failed", "reason": reason, "message": f"Pod was rejected: {message}",
                  "qosClass": qos_class(PodView.of(pod)), "startTime": rfc3339(self._clock.now())}
        self._rejections[podview.uid(pod)] = status
        self.statuses.set_pod_status(pod, status)
        # no worker will ever run it: its status is final at once (upstream: a deleted rejected pod gets a pod
        # worker that terminates nothing and ends in TerminatePod), so its deletion can complete
        self.statuses.terminate_pod(pod)
        self._recorder.pod_event(pod, "Warning", reason, message)
        if self.explain is not None:
            self.explain.admitted(podview.uid(pod), podview.namespace(pod), podview.name(pod),
                                  Admission(False, reason, cut(message), self._clock.now(), dict(details or {})))
        log.warning("pod rejected", extra={"kv": {"pod": podview.format_pod(pod), "reason": reason}})

    def worker_finished(self, uid: str, pod: Pod) -> None:
        """Called by the pod workers when a removed pod's worker has cleaned up: admit who waited for it."""
        self.runtime_only.discard(uid)
        self._finished_at[uid] = self._clock.monotonic()
        if uid not in self.desired:
            # a stand-in worker (adopt_orphans) keeps the refusal it found; once the pod is gone, so is that
            self.statuses.remove_pod(uid)
        full = podview.full_name(pod)
        for wuid, p in list(self._waiting.items()):
            if podview.full_name(p) == full and wuid in self.desired:
                del self._waiting[wuid]
                self._admit(p)
                break

    def restart_unknown(self, active: Sequence[Pod] | None = None) -> None:
        """upstream HandlePodCleanups: an active pod no worker knows (its uid came back while its previous worker
        was terminating it: a static pod's fixed uid) starts again; kubelet_restarted_pods_total counts them.
        `active`: `active_pods()` when the caller has it already (a restart does not change it)."""
        restarted = {"true": 0, "": 0}
        for pod in self.active_pods() if active is None else active:
            uid = podview.uid(pod)
            if uid in self.workers or uid in self._waiting or uid in self._rejected or uid in self._queued:
                continue
            log.info("pod restarted: wanted again after its worker finished", extra={"kv": {
                "pod": podview.format_pod(pod), "podUID": uid}})
            self.workers.update_pod(pod)
            restarted["true" if podview.is_static(pod) else ""] += 1
        for static, count in restarted.items():
            self._metrics.restarted_pods.labels(static).inc(count)

    # --- runtime adoption -----------------------------------------------------------------
    def adopt_orphans(self, runtime_uids: Mapping[str, Mapping[str, str]]) -> int:
        """Stop pods the runtime runs that no source wants (removed while the agent was down), or that admission
        rejected now (admitted before an agent restart, rejected after it: upstream HandlePodCleanups kills every
        running pod no worker syncs); how many."""
        count = 0
        for uid, labels in runtime_uids.items():
            # A pod not admitted because its phase was already terminal is no orphan: what is left of it
            # (exited containers after a reboot) is its own, and a stand-in worker would write a made-up status
            # over its terminal one. Only a pod admission refused in this run is stopped here.
            if uid in self.workers or (uid in self.desired and uid not in self._rejections):
                continue
            try:
                grace = int(labels.get("annotation." + ANNOTATION_GRACE_PERIOD, labels.get(ANNOTATION_GRACE_PERIOD, "30")))
            except ValueError:
                grace = 30
            pod: Pod = {
                "metadata": {"name": labels.get(LABEL_POD_NAME, uid), "namespace": labels.get(LABEL_POD_NAMESPACE, "default"),
                             "uid": labels.get(LABEL_POD_UID, uid)},
                "spec": {"containers": [], "terminationGracePeriodSeconds": grace},
            }
            log.info("stopping orphaned pod", extra={"kv": {"pod": podview.format_pod(pod)}})
            # Upstream HandlePodCleanups kills a running pod no source knows with a grace of 1 s (the
            # container kill's 2 s minimum still applies): a pod force-deleted while the agent was down
            # stops at once, not after its own grace.
            worker = self.workers.update_pod(pod, kill=KillPodOptions(grace_override=ORPHAN_GRACE), adopted=True)
            worker.st.owns_status = False  # a refused pod keeps its refusal; a pod no source wants has none
            self.workers.remove_pod(uid)
            self.runtime_only.add(uid)
            count += 1
        return count

    def kill_running_orphans(self, runtime_uids: Mapping[str, Mapping[str, str]], running: AbstractSet[str],
                             listed_from: float) -> int:
        """upstream HandlePodCleanups, every housekeeping pass: a pod the runtime runs (a running container or a
        ready sandbox) that no worker owns and no source wants is killed (grace 1), e.g. a pod that waited behind
        another of its name after an agent restart and was removed before it started; how many. `listed_from`:
        when the listing was asked for; a pod whose worker finished since is not judged on it."""
        recent = {uid for uid, at in self._finished_at.items() if at >= listed_from}
        self._finished_at = {uid: self._finished_at[uid] for uid in recent}
        return self.adopt_orphans({uid: labels for uid, labels in runtime_uids.items()
                                   if uid in running and uid not in recent})
