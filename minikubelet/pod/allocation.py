"""The allocation manager (upstream pkg/kubelet/allocation): the resources each pod was admitted with, kept in the
`allocated_pods_state` checkpoint under the root dir, and the in-place resizes asked of them.

A pod is admitted (and sized, and run) with its *allocated* resources: after an agent restart those of the
checkpoint, not the spec's. A resize (the spec's resources differing from the allocation) is admitted like a pod,
against the node's allocatable less the other pods' allocated requests (the resize handler first, then every
admit handler, as upstream canAdmitPod with ResizeOperation); once admitted it is checkpointed and the pod worker
actuates it (`worker/resize.py`). A resize that does not fit now is Deferred and retried, in upstream's order,
when a pod is removed or finishes, when a resize completes, and periodically (30 s, then every 3 min); one that
can never be done here is Infeasible.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cgroups.qos import GUARANTEED, qos_class
from cgroups.resources import pod_requests
from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod, PodView
from minikubelet.base.quantity import parse_quantity
from minikubelet.events import EventRecorder
from minikubelet.events import resize as resize_events
from minikubelet.metrics import Metrics
from minikubelet.pod.admission import PodAdmitHandler, PodAdmitResult, can_admit_pod
from minikubelet.runtime.resource_checkpoint import (
    PodResourceCheckpoint,
    PodResourceInfo,
    Requirements,
    requirements_of,
)
from minikubelet.status.resize_conditions import INFEASIBLE, ResizeConditions

log = logging.getLogger("minikubelet.pod.allocation")

ALLOCATED_PODS_STATE = "allocated_pods_state"
INITIAL_RETRY_DELAY = 30.0
RETRY_DELAY = 180.0

TRIGGER_POD_RESIZED = "pod_resized"
TRIGGER_POD_UPDATED = "pod_updated"
TRIGGER_PODS_ADDED = "pods_added"
TRIGGER_PODS_REMOVED = "pods_removed"
TRIGGER_POD_TERMINATED = "pod_terminated"
TRIGGER_PERIODIC = "periodic_retry"

POD_LEVEL_UNSUPPORTED = "In-place pod-level resources resize is not supported on this node"


def _quantities(values: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in (values or {}).items():
        try:
            out[name] = parse_quantity(raw)
        except ValueError:
            out[name] = raw
    return out


def same_requirements(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Semantic equality of two `resources` (requests and limits by value; a missing list equals an empty one)."""
    a, b = a or {}, b or {}
    for key in ("requests", "limits"):
        x, y = a.get(key) or {}, b.get(key) or {}
        # the allocation is the spec's own text in the steady state: parse only when the text differs
        if x != y and _quantities(x) != _quantities(y):
            return False
    return True


def _with_requirements(resources: Any, wanted: Requirements) -> dict[str, Any]:
    """`resources` with its requests and limits replaced by the allocation's (claims and the rest kept)."""
    out = {k: v for k, v in (resources if isinstance(resources, dict) else {}).items()
           if k not in ("requests", "limits")}
    out.update(copy.deepcopy(wanted))
    return out


def allocation_from_pod(pod: Pod) -> PodResourceInfo:
    """upstream allocationFromPod: every container's requests and limits (init containers are resizable in 1.36,
    InPlacePodVerticalScalingInitContainers), and the pod-level resources."""
    containers = {str(c.get("name")): requirements_of(c.get("resources"))
                  for c in podview.init_containers(pod) + podview.app_containers(pod)}
    pod_level = podview.spec(pod).get("resources")
    return PodResourceInfo(containers, requirements_of(pod_level) if isinstance(pod_level, dict) else None)


def update_pod_from_allocation(pod: Pod, allocated: PodResourceInfo | None) -> tuple[Pod, bool]:
    """The pod as allocated (a copy, only when it differs), and whether it differed."""
    if allocated is None:
        return pod, False
    out: Pod | None = None

    def copy_once() -> Pod:
        nonlocal out
        if out is None:
            out = copy.deepcopy(pod)
        return out

    spec = podview.spec(pod)
    pod_level = spec.get("resources")
    if not same_requirements(pod_level if isinstance(pod_level, dict) else None, allocated.pod):
        target = copy_once()["spec"]
        if allocated.pod is None:
            target.pop("resources", None)
        else:
            target["resources"] = _with_requirements(pod_level, allocated.pod)
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            if not isinstance(c, dict):
                continue
            wanted = allocated.containers.get(str(c.get("name")))
            if wanted is None or same_requirements(c.get("resources"), wanted):
                continue
            copy_once()["spec"][key][i]["resources"] = _with_requirements(c.get("resources"), wanted)
    return (out, True) if out is not None else (pod, False)


def _resize_operation(new: Any, old: Any) -> str:
    """resizeOperationForResources: add, remove, increase, decrease or nothing."""
    n = parse_quantity(new) if new is not None else 0
    o = parse_quantity(old) if old is not None else 0
    if n == 0 and o != 0:
        return "remove"
    if o == 0 and n != 0:
        return "add"
    if n < o:
        return "decrease"
    if n > o:
        return "increase"
    return ""


class AllocationManager:
    def __init__(self, state: PodResourceCheckpoint, conditions: ResizeConditions,
                 handlers: Sequence[PodAdmitHandler], clock: Clock, recorder: EventRecorder, metrics: Metrics, *,
                 active_pods: Callable[[], list[Pod]], pod_by_uid: Callable[[str], Pod | None],
                 sync_pod: Callable[[Pod], None], sources_ready: Callable[[], bool] = lambda: True,
                 known_uids: Callable[[], Iterable[str]] | None = None,
                 preempt: Callable[[Pod], object] = lambda _p: None) -> None:
        """`handlers`: the node's admit handlers (those a new pod goes through); `active_pods` as upstream
        GetActivePods (desired pods that hold resources); `sync_pod`: hand the pod to its worker now;
        `known_uids`: every pod the node still knows (the others' records go once the sources were seen);
        `preempt`: kill a pod a critical pod's resize preempts (the pod manager's kill; not awaited here)."""
        self.state = state
        self.conditions = conditions
        self.handlers = list(handlers)
        self._clock = clock
        self._recorder = recorder
        self._metrics = metrics
        self._active_pods = active_pods
        self._pod_by_uid = pod_by_uid
        self._sync_pod = sync_pod
        self._sources_ready = sources_ready
        self._known_uids = known_uids
        self._preempt = preempt
        self._pending: list[str] = []  # uids with a resize not allocated yet, in retry order
        self._delay = INITIAL_RETRY_DELAY

    # --- the allocation -----------------------------------------------------------------------
    def update_pod_from_allocation(self, pod: Pod) -> tuple[Pod, bool]:
        return update_pod_from_allocation(pod, self.state.peek(podview.uid(pod)))

    def allocated(self, pod: Pod) -> Pod:
        """The pod as admitted: what its worker runs and its status reports (upstream pod_workers' UpdatePod)."""
        return self.update_pod_from_allocation(pod)[0]

    def allocated_pods(self, pods: Sequence[Pod]) -> list[Pod]:
        return [self.allocated(p) for p in pods]

    def set_allocated(self, pod: Pod) -> None:
        self.state.set(podview.uid(pod), allocation_from_pod(pod))

    def remove_pod(self, uid: str) -> None:
        try:
            self.state.remove(uid)
        except OSError as e:  # RemoveOrphans tries again
            log.warning("removing a pod's allocation failed", extra={"kv": {"uid": uid, "err": str(e)}})
        self.conditions.remove(uid)
        if uid in self._pending:
            self._pending.remove(uid)

    def remove_orphans(self, keep: Sequence[str]) -> None:
        self.state.remove_orphans(keep)

    # --- admission ----------------------------------------------------------------------------
    def _can_admit(self, pod: Pod, resize: bool) -> PodAdmitResult:
        uid = podview.uid(pod)
        others = [p for p in self.allocated_pods(self._active_pods()) if podview.uid(p) != uid]
        if resize:
            refusal = self._resize_refusal(pod)
            if refusal is not None:
                return refusal
        result = can_admit_pod(self.handlers, pod, others)
        if not result.admit:
            log.info("pod admission denied", extra={"kv": {
                "pod": podview.format_pod(pod), "reason": result.reason, "message": result.message,
                "operation": "resize" if resize else "add"}})
        return result

    def _resize_refusal(self, pod: Pod) -> PodAdmitResult | None:
        """upstream podResizesAdmitHandler, on this node: a change of the pod-level resources cannot be actuated
        (as a node without InPlacePodLevelResourcesVerticalScaling support says); no CPU or memory manager
        policy and no swap make any other resize infeasible."""
        allocated = self.state.pod_level(podview.uid(pod))
        pod_level = podview.spec(pod).get("resources")
        if not same_requirements(pod_level if isinstance(pod_level, dict) else None, allocated):
            self._metrics.pod_infeasible_resizes.labels("unsupported_platform").inc()
            return PodAdmitResult(False, INFEASIBLE, POD_LEVEL_UNSUPPORTED)
        return None

    def add_pod(self, pod: Pod) -> PodAdmitResult:
        """A new pod, admitted with its allocation if it has one (an agent restart), then checkpointed."""
        allocated = self.allocated(pod)
        result = self._can_admit(allocated, resize=False)
        if result.admit:
            try:
                self.set_allocated(allocated)
            except OSError as e:
                log.error("checkpointing a pod's allocation failed",
                          extra={"kv": {"pod": podview.format_pod(pod), "err": str(e)}})
        return result

    # --- resizes ------------------------------------------------------------------------------
    def pod_added(self, pod: Pod) -> None:
        """After an admission: a spec that differs from its allocation (resized while the agent was down) is a
        pending resize, tried once the batch is in (`retry_pending_resizes`)."""
        if self.update_pod_from_allocation(pod)[1]:
            self.push_pending_resize(podview.uid(pod))

    def pod_updated(self, old: Pod | None, new: Pod) -> None:
        """upstream HandlePodUpdates: count the requested changes; a resize is tried at once, a reverted one
        drops its pending condition."""
        if not self.record_resize_operations(old, new):
            return
        if self.update_pod_from_allocation(new)[1]:
            self.push_pending_resize(podview.uid(new))
            self.retry_pending_resizes(TRIGGER_POD_UPDATED)
        else:
            self.conditions.clear_pending(podview.uid(new))

    def record_resize_operations(self, old: Pod | None, new: Pod) -> bool:
        """upstream recordResizeOperations: per container and resource, add/remove/increase/decrease counted."""
        if old is None:
            return True
        has = not same_requirements(podview.spec(old).get("resources"), podview.spec(new).get("resources"))
        new_by_name = {str(c.get("name")): c for c in podview.init_containers(new) + podview.app_containers(new)}
        for c in podview.init_containers(old) + podview.app_containers(old):
            n = new_by_name.get(str(c.get("name")))
            if n is None:
                continue
            o_res, n_res = c.get("resources") or {}, n.get("resources") or {}
            for resource in ("memory", "cpu"):
                for requirement in ("requests", "limits"):
                    op = _resize_operation((n_res.get(requirement) or {}).get(resource),
                                           (o_res.get(requirement) or {}).get(resource))
                    if op:
                        has = True
                        self._metrics.container_requested_resizes.labels(resource, requirement, op).inc()
        return has

    def handle_pod_resources_resize(self, pod: Pod) -> bool:
        """upstream handlePodResourcesResize: allocate the resize if it fits (True), else set PodResizePending."""
        uid = podview.uid(pod)
        if not self.update_pod_from_allocation(pod)[1]:
            self.conditions.clear_pending(uid)
            return False
        generation = PodView.of(pod).generation or 0
        result = self._can_admit(pod, resize=True)
        if result.admit:
            for victim in result.victims:
                self._preempt(victim)
            self.set_allocated(pod)
            self.conditions.clear_pending(uid)
            # a new resize clears an earlier one's error and starts at this generation
            self.conditions.clear_in_progress(uid)
            self.conditions.set_in_progress(uid, "", "", generation)
            self._recorder.pod_event(pod, "Normal", resize_events.RESIZE_STARTED,
                                     resize_events.resize_started(pod, generation))
            return True
        if result.reason and self.conditions.set_pending(uid, result.reason, result.message, generation):
            reason = resize_events.RESIZE_INFEASIBLE if result.reason == INFEASIBLE else resize_events.RESIZE_DEFERRED
            self._recorder.pod_event(pod, "Warning", reason,
                                     resize_events.resize_pending(pod, result.reason, result.message, generation))
        return False

    def push_pending_resize(self, uid: str) -> None:
        if uid not in self._pending:
            self._pending.append(uid)
            self._sort_pending()

    def has_pending_resizes(self) -> bool:
        return bool(self._pending)

    def _is_increasing_requests(self, pod: Pod) -> bool:
        allocated, updated = self.update_pod_from_allocation(pod)
        if not updated:
            return False
        old, new = pod_requests(PodView.of(allocated)), pod_requests(PodView.of(pod))
        return any(new.get(r, 0) > old.get(r, 0) for r in ("memory", "cpu"))

    def _sort_pending(self) -> None:
        """upstream sortPendingResizes: resizes that ask for no more first, then by priority, Guaranteed before
        Burstable, then the longest pending."""
        pods = [(uid, p) for uid in self._pending if (p := self._pod_by_uid(uid)) is not None]

        def key(item: tuple[str, Pod]) -> tuple[bool, int, bool, bool, str]:
            uid, pod = item
            view = PodView.of(pod)
            pending = self.conditions.pending(uid)
            since = str(pending.get("lastTransitionTime", "")) if pending is not None else ""
            return (self._is_increasing_requests(pod), -(view.priority or 0), qos_class(view) != GUARANTEED,
                    pending is None, since)

        self._pending = [uid for uid, _ in sorted(pods, key=key)]

    def retry_pending_resizes(self, trigger: str) -> list[Pod]:
        """Try every pending resize again, in order; returns the pods whose resize was allocated."""
        if not self._sources_ready():
            self._delay = INITIAL_RETRY_DELAY
            return []
        self._delay = RETRY_DELAY
        still: list[str] = []
        done: list[Pod] = []
        for uid in list(self._pending):
            pod = self._pod_by_uid(uid)
            if pod is None:
                continue
            before = self.conditions.conditions(uid)
            was_deferred = self.conditions.is_deferred(uid)
            try:
                allocated = self.handle_pod_resources_resize(pod)
            except OSError as e:  # the checkpoint could not be written: the resize stays pending
                log.error("allocating a resize failed", extra={"kv": {"pod": podview.format_pod(pod), "err": str(e)}})
                still.append(uid)
                continue
            if self.conditions.is_deferred(uid):
                still.append(uid)
            elif not self.conditions.is_infeasible(uid):
                done.append(pod)
                if was_deferred:
                    self._metrics.pod_deferred_accepted_resizes.labels(trigger).inc()
            if allocated or before != self.conditions.conditions(uid):
                self._sync_pod(pod)
        self._pending = still
        return done

    async def run(self) -> None:
        """The periodic retry of pending resizes: 30 s after the start, then every 3 minutes; the records of pods
        the node no longer knows go then too (upstream RemoveOrphanedPods in HandlePodCleanups)."""
        while True:
            delay = self._delay
            await self._clock.sleep(delay)
            for pod in self.retry_pending_resizes(TRIGGER_PERIODIC):
                log.info("successfully retried resize after timeout", extra={"kv": {"pod": podview.format_pod(pod)}})
            if self._known_uids is not None and self._sources_ready():
                try:
                    self.remove_orphans(list(self._known_uids()))
                except OSError as e:
                    log.warning("removing orphaned allocations failed", extra={"kv": {"err": str(e)}})

