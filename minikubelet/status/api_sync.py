"""Pod statuses to the API server (upstream status_manager.go: syncPod, needsUpdate, mergePodStatus).

A listener of the status manager marks a pod dirty when its status changed; one task syncs dirty pods,
and every `sync_period` (10 s, upstream syncPeriod) the pods that need it (upstream syncBatch(all)):
whose newest status version the API server has not acknowledged yet, that wait for their worker to finish
(a terminal phase held back, the final DELETE: needsUpdate → canBeDeleted), or whose status in the API pod as the source last sent
it differs from ours in what the kubelet owns (needsReconcile: someone else wrote it). An unchanged status
sends nothing. One sync, as upstream:

1. A static pod's status goes through its mirror pod only: without one (as the API source last sent it),
   no request (upstream syncBatch skips it). GET the pod. 404: nothing to do (its status is dropped when it
   leaves the sources). A different uid under that name is a recreated pod (skipped), unless it is the
   mirror pod of our static pod.
2. Merge (mergePodStatus): conditions the kubelet does not own stay as the API has them; ours replace
   the kubelet's; our `DisruptionTarget` (shared) goes out only together with the terminal phase, once no
   container can run (until then the API's stays); the fields other components own (`nominatedNodeName`,
   resource claim statuses) stay; a terminal phase is held back while containers may still run.
3. PATCH `pods/<name>/status` with a strategic merge patch from the API's status to the merged one
   (`$setElementOrder/conditions`) and the uid precondition (`metadata.uid`), only when it differs.
   409 (uid precondition, conflict) and 404 are logged; the next period tries again.
4. A pod the API server is deleting whose phase there is terminal and whose status is final (written by
   the status manager's terminate_pod once the worker has finished with it, upstream canBeDeleted's
   podIsFinished) is deleted for good: DELETE with `gracePeriodSeconds: 0` and a uid precondition
   (`kubelet-13`). Mirror pods never (upstream: "We don't handle graceful deletion of mirror pods").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from minikubelet.base import podview
from minikubelet.base.clock import Clock, sleep_until_woken
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod
from minikubelet.kubeapi.patch import pod_status_patch
from minikubelet.kubeapi.rest import ApiError, RestClient, TransportError
from minikubelet.metrics import Metrics
from minikubelet.status.manager import StatusManager, normalize_status

log = logging.getLogger("minikubelet.status.api_sync")
Json = dict[str, Any]

SYNC_PERIOD = 10.0  # upstream syncPeriod
TERMINATION_POLL = 0.5  # how soon a terminated pod's final DELETE follows (upstream: TerminatePod's update)

# kubetypes.PodConditionsByKubelet (with PodReadyToStartContainers, on by default in 1.36)
KUBELET_CONDITIONS = frozenset({"PodScheduled", "Ready", "Initialized", "ContainersReady", "PodResizeInProgress",
                                "PodResizePending", "PodReadyToStartContainers"})
SHARED_CONDITIONS = frozenset({"DisruptionTarget"})
# status fields other components write; the kubelet leaves them as they are
NOT_OWNED_FIELDS = ("nominatedNodeName", "resourceClaimStatuses", "extendedResourceClaimStatus",
                    "nodeAllocatableResourceClaimStatuses")
TERMINAL = frozenset({"Succeeded", "Failed"})
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
HASH_ANNOTATION = "kubernetes.io/config.hash"


def _without_nulls(value: Any) -> Any:
    """Go prints unset pointers as null and unset structs as {} (`lastState`, `resources`); both equal an
    absent key. Both sides of the comparison go through this, so such a field never makes a PATCH on its own."""
    if isinstance(value, dict):
        out = {k: _without_nulls(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in out.items() if v != {}}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def merge_pod_status(old: Json, new: Json, could_have_running_containers: bool, now: str | None = None) -> Json:
    """upstream mergePodStatus: what the kubelet may write over the API's status `old`. `now`: the time a
    DisruptionTarget sent with the terminal phase transitions at (default: the one in `new`). The result shares
    its nested values with `new` and `old` (it is read and encoded, never changed: no deep copy per sync)."""
    merged = dict(new)
    conditions = [c for c in old.get("conditions") or [] if isinstance(c, dict)
                  and c.get("type") not in KUBELET_CONDITIONS]
    to_terminal = old.get("phase") not in TERMINAL and new.get("phase") in TERMINAL
    for c in new.get("conditions") or []:
        if not isinstance(c, dict):
            continue
        if c.get("type") in KUBELET_CONDITIONS:
            conditions.append(c)
        elif c.get("type") in SHARED_CONDITIONS and to_terminal and not could_have_running_containers:
            # The kubelet's DisruptionTarget goes out only with the terminal phase, once nothing runs: a
            # controller reading it may replace the pod at once. Its transition is then, unless the API's
            # copy already has that status.
            at = next((i for i, o in enumerate(conditions) if o.get("type") == c.get("type")), None)
            cond = dict(c)
            prev = conditions[at] if at is not None else None
            if prev is not None and prev.get("status") == cond.get("status"):
                cond["lastTransitionTime"] = prev.get("lastTransitionTime")
            elif now is not None:
                cond["lastTransitionTime"] = now
            if at is None:
                conditions.append(cond)
            else:
                conditions[at] = cond
    merged["conditions"] = conditions
    for key in NOT_OWNED_FIELDS:
        merged.pop(key, None)
        if key in old:
            merged[key] = old[key]
    # Never report a terminal phase while containers may still run: controllers would reuse what they hold.
    if to_terminal and could_have_running_containers:
        for key in ("phase", "reason", "message"):
            merged.pop(key, None)
            if key in old:
                merged[key] = old[key]
    return merged


def _owned_conditions(status: Json) -> dict[str, tuple[Any, Any, Any]]:
    return {str(c.get("type")): (c.get("status"), c.get("message"), c.get("reason"))
            for c in status.get("conditions") or [] if isinstance(c, dict)
            and (c.get("type") in KUBELET_CONDITIONS or c.get("type") in SHARED_CONDITIONS)}


def status_by_kubelet_equal(old: Json, new: Json) -> bool:
    """upstream isPodStatusByKubeletEqual: the conditions the kubelet owns or shares agree in status, reason
    and message (not in their times), and every other field but those other components own is equal."""
    if _owned_conditions(old) != _owned_conditions(new):
        return False
    skip = {"conditions", *NOT_OWNED_FIELDS}
    return bool(_without_nulls({k: v for k, v in old.items() if k not in skip})
                == _without_nulls({k: v for k, v in new.items() if k not in skip}))


class PodStatusSync:
    def __init__(self, client: RestClient, clock: Clock, statuses: StatusManager,
                 terminated: Callable[[str], bool], *, sync_period: float = SYNC_PERIOD,
                 source_pod: Callable[[Pod], Pod | None] = lambda _pod: None, metrics: Metrics | None = None) -> None:
        """`terminated(uid)`: the pod's worker has finished terminating it (nothing of it can run any more).
        `source_pod(pod)`: the API object as the pod source last received it (a static pod's mirror pod), or
        None (upstream: the pod manager's copy, which needsUpdate and needsReconcile read)."""
        self.client = client
        self.clock = clock
        self.statuses = statuses
        self.terminated = terminated
        self.source_pod = source_pod
        self.metrics = metrics or Metrics()
        self.sync_period = sync_period
        self._api_versions: dict[str, int] = {}  # uid -> the status version the API server has
        self._dirty: set[str] = set()
        # uids whose next write waits for the worker to finish: a terminal phase held back, the final DELETE
        self._awaiting_worker: set[str] = set()
        self._after_worker: set[str] = set()  # ... of which the prompt sync after termination ran (then: periodic)
        # uid -> (the API pod's resourceVersion, our status version) last found to agree: needs_reconcile is a
        # function of the two, asked for every pod every period
        self._agreed: dict[str, tuple[str, int]] = {}
        self._wake = asyncio.Event()
        statuses.add_listener(self._changed)

    def _changed(self, pod: Pod, status: Json | None) -> None:
        uid = podview.uid(pod)
        if status is None:
            self._api_versions.pop(uid, None)
            self._dirty.discard(uid)
            self._awaiting_worker.discard(uid)
            self._after_worker.discard(uid)
            self._agreed.pop(uid, None)
            return
        self._dirty.add(uid)
        self._wake.set()

    async def run(self) -> None:
        last_full = self.clock.monotonic()
        while True:
            timeout = TERMINATION_POLL if self._awaiting_worker - self._after_worker else self.sync_period
            await sleep_until_woken(self.clock, timeout, self._wake)
            self._wake.clear()
            uids = set(self._dirty)
            self._dirty.clear()
            finished = {u for u in self._awaiting_worker - self._after_worker if self.terminated(u)}
            self._after_worker |= finished
            uids |= finished
            if self.clock.monotonic() - last_full >= self.sync_period:
                last_full = self.clock.monotonic()
                uids |= self.due()
            for uid in sorted(uids):
                await self.sync_pod(uid)

    def due(self) -> set[str]:
        """The pods the periodic sync writes (upstream syncBatch(all)); a reconciled pod's acknowledged
        version is forgotten, so it is written even if its status version did not move."""
        out = set()
        for entry in self.statuses.statuses():
            uid = podview.uid(entry.pod)
            if self.needs_update(uid):
                out.add(uid)
            elif self.needs_reconcile(entry.pod, entry.status, entry.version):
                self._api_versions.pop(uid, None)
                out.add(uid)
        return out

    def written(self, uid: str) -> bool:
        """The API server has the pod's latest status, terminal phase included once nothing of it runs."""
        return not self.needs_update(uid) and uid not in self._dirty and uid not in self._awaiting_worker

    def needs_update(self, uid: str) -> bool:
        entry = self.statuses.get(uid)
        if entry is None:
            return False
        # upstream canBeDeleted: here the pods seen deleting by a sync wait in `_awaiting_worker`
        return self._api_versions.get(uid, -1) < entry.version or (uid in self._awaiting_worker
                                                                    and entry.finished)

    def needs_reconcile(self, pod: Pod, status: Json, version: int | None = None) -> bool:
        """upstream needsReconcile: the API pod's status as the source last sent it differs from ours in what
        the kubelet writes (someone else changed it, or a write was lost). `version`: our status's version; with
        it, a pair found to agree is not compared again until either side changes."""
        api = self.source_pod(pod)
        if api is None:
            return False
        rv = podview.meta(api).get("resourceVersion")
        key = (rv, version) if isinstance(rv, str) and rv and version is not None else None
        uid = podview.uid(pod)
        if key is not None and self._agreed.get(uid) == key:
            return False
        api_status = api.get("status")
        differs = not status_by_kubelet_equal(
            normalize_status(api, api_status if isinstance(api_status, dict) else {}), status)
        if key is not None and not differs:
            self._agreed[uid] = key
        return differs

    async def sync_pod(self, uid: str) -> None:
        """One sync of one pod; errors are logged, the next period retries."""
        try:
            await self._sync_pod(uid)
        except (ApiError, TransportError) as e:
            entry = self.statuses.get(uid)
            log.warning("pod status sync failed", extra={"kv": {
                "pod": podview.format_pod(entry.pod) if entry else uid, "err": str(e)}})

    async def _sync_pod(self, uid: str) -> None:
        entry = self.statuses.get(uid)
        if entry is None:
            return
        pod, version = entry.pod, entry.version
        if podview.is_static(pod) and self.source_pod(pod) is None:
            # upstream syncBatch: a static pod's status goes to its mirror pod only; none yet, no request (the
            # periodic sync writes it once the mirror pod is made)
            log.debug("static pod does not have a corresponding mirror pod; skipping",
                      extra={"kv": {"pod": podview.format_pod(pod)}})
            return
        path = f"/api/v1/namespaces/{podview.namespace(pod)}/pods/{podview.name(pod)}"
        try:
            api_pod = await self.client.get(path)
        except ApiError as e:
            if e.not_found:
                self._awaiting_worker.discard(uid)
                log.debug("pod does not exist on the server", extra={"kv": {"pod": podview.format_pod(pod)}})
                return
            raise
        api_md = api_pod.get("metadata") or {}
        api_uid = str(api_md.get("uid") or "")
        mirror = self._is_mirror_of(api_pod, pod)
        if api_uid != uid and not mirror:
            log.info("pod was deleted and then recreated, skipping status update",
                     extra={"kv": {"pod": podview.format_pod(pod), "oldPodUID": uid, "podUID": api_uid}})
            return
        old = api_pod.get("status") or {}
        merged = merge_pod_status(old, entry.status, not self.terminated(uid), rfc3339(self.clock.now()))
        # decided on the stripped forms, sent as the kubelet writes it (`resources: {}` included)
        patch = pod_status_patch(api_uid, old, merged)
        if _without_nulls(old) != _without_nulls(merged) and set(patch) != {"metadata"}:
            try:
                api_pod = await self.client.patch(path + "/status", patch)
            except ApiError as e:
                if e.not_found or e.code == 409:
                    log.info("pod status not written", extra={"kv": {"pod": podview.format_pod(pod), "err": str(e)}})
                    return
                raise
            self.metrics.pod_startup.status_written(api_pod)
        # upstream: from the status version's making to its write (or to finding the server has it already)
        self.metrics.pod_status_sync_duration.observe(max(0.0, self.statuses.now() - entry.at))
        held_back = merged.get("phase") != entry.status.get("phase")
        if held_back:
            self._awaiting_worker.add(uid)  # written again once nothing of the pod runs (upstream TerminatePod)
        current = self.statuses.get(uid)
        if current is not None and current.version == version:
            self._api_versions[uid] = version
        elif current is not None:
            self._dirty.add(uid)  # changed while we wrote: again
            self._wake.set()
        if mirror or not api_md.get("deletionTimestamp"):
            if not held_back:
                self._awaiting_worker.discard(uid)
            return
        self._awaiting_worker.add(uid)
        # upstream canBeDeleted: the phase the API server has is terminal and the status is the one
        # TerminatePod wrote at the end of the pod's termination (podIsFinished)
        if (api_pod.get("status") or {}).get("phase") in TERMINAL and entry.finished:
            await self._final_delete(path, pod, api_uid)

    async def _final_delete(self, path: str, pod: Pod, api_uid: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": api_uid}}
        try:
            await self.client.delete(path, body)
        except ApiError as e:
            if not (e.not_found or e.code == 409):
                raise
            log.info("final delete not needed", extra={"kv": {"pod": podview.format_pod(pod), "err": str(e)}})
        else:
            log.info("pod fully terminated and removed from the API server",
                     extra={"kv": {"pod": podview.format_pod(pod)}})
        self._awaiting_worker.discard(podview.uid(pod))

    @staticmethod
    def _is_mirror_of(api_pod: Json, pod: Pod) -> bool:
        """The API pod is the mirror of our static pod: its config.mirror names our pod's config hash."""
        ann = (api_pod.get("metadata") or {}).get("annotations") or {}
        ours = podview.meta(pod).get("annotations") or {}
        mirror = ann.get(MIRROR_ANNOTATION) if isinstance(ann, dict) else None
        return bool(mirror) and isinstance(ours, dict) and mirror == ours.get(HASH_ANNOTATION)
