"""One pass over one pod (upstream SyncPod, SyncTerminatingPod, SyncTerminatedPod): observe the runtime,
plan, execute, and hand the status to the status manager."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from cri.errors import NotFoundError, RuntimeError_
from cri.runtime import Runtime
from cri.types import LABEL_POD_UID, ContainerState, PodSandboxStatus, SandboxState
from minikubelet import events as ev
from minikubelet.base.clock import Clock
from minikubelet.base.kubetime import parse_time
from minikubelet.base.podview import PodView
from minikubelet.base.safepath import UnsafePathError
from minikubelet.events import EventRecorder
from minikubelet.events import resize as resize_events
from minikubelet.metrics import Metrics
from minikubelet.runtime.pod_cache import CachedPod, SeenPod
from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint
from minikubelet.runtime.state import PodRuntimeState, name_of, restart_count_of
from minikubelet.status.generate import StatusInputs, compute_status
from minikubelet.status.manager import StatusManager
from minikubelet.status.resize_conditions import ERROR, ResizeConditions
from minikubelet.volumes.manager import teardown_pod_dir, termination_log_path, unmount_pod_volumes
from minikubelet.worker.backoff import Backoff, pod_key_prefix
from minikubelet.worker.containers import Containers
from minikubelet.worker.dependencies import CgroupSource, ProbeSource
from minikubelet.worker.explain_record import SyncExplainer
from minikubelet.worker.gc import prune_init_containers
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.lifecycle import KillPodOptions, PodStatusFn
from minikubelet.worker.planner import (
    REASON_LIVENESS,
    REASON_STARTUP,
    KillContainer,
    PodActions,
    backoff_key,
    compute_pod_actions,
)
from minikubelet.worker.pod_state import PodSyncState
from minikubelet.worker.resize import PodResize, ResizeError
from minikubelet.worker.resize_plan import ActuatedLookup, ResizeActions, resize_in_progress
from minikubelet.worker.termination_order import TerminationOrdering
from probes.result import ProbeResults

NOTHING_SEEN = SeenPod({})

log = logging.getLogger("minikubelet.worker.sync")

EXCEEDED_GRACE_SLACK = 1.0
MAX_TERMINATION_MESSAGE = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048
NETWORK_NOT_READY_MESSAGE = "network is not ready"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


class PodSyncer:
    def __init__(self, runtime: Runtime, clock: Clock, recorder: EventRecorder, metrics: Metrics,
                 containers: Containers, images: ImagePuller, container_backoff: Backoff, statuses: StatusManager,
                 probes: ProbeSource | None, root_dir: str, host_ip: str) -> None:
        self._runtime = runtime
        self._clock = clock
        self._recorder = recorder
        self._metrics = metrics
        self.containers = containers
        self._images = images
        self._backoff = container_backoff
        self._statuses = statuses
        self._probes = probes
        self._root_dir = root_dir
        self._host_ip = host_ip
        self.container_id_scheme = "docker://"  # set from the runtime's version at start-up
        self.network_errors: Callable[[], tuple[str, ...]] | None = None  # the pod network's, when it has one
        # the PLEG's `confirms`, when one relists the runtime: whether a pod's cached state is still current
        self.relist_confirms: Callable[[str, SeenPod, float], bool] | None = None
        # in-place resize (set by the agent): what each container was last given, the resize conditions, the
        # executor, and who to tell when a resize completed (pending ones may fit now)
        self.actuated: PodResourceCheckpoint | None = None
        self.resize_conditions: ResizeConditions | None = None
        self.resizer: PodResize | None = None
        self.on_resize_completed: Callable[[], None] | None = None
        self.explain: SyncExplainer | None = None  # records each sync's decision for `explain` (set by the agent)
        # the resource checkpoints on disk (set by the agent): awaited before the runtime acts on a pod, as upstream
        # writes them synchronously before (the allocation at admission, the actuated resources at a create)
        self.durable: Callable[[], Awaitable[None]] | None = None
        self._worker_ended_at = 0.0  # clock.monotonic when a pod worker last ended: its runtime calls had too

    @property
    def cgroups(self) -> CgroupSource | None:
        return self.containers.cgroups

    def worker_ended(self) -> None:
        self._worker_ended_at = self._clock.monotonic()

    async def observe(self, uid: str) -> PodRuntimeState:
        asked = self._clock.monotonic()
        sandboxes, containers = await asyncio.gather(
            self._runtime.list_pod_sandboxes({LABEL_POD_UID: uid}), self._runtime.list_containers({LABEL_POD_UID: uid})
        )
        read_at = dict.fromkeys([*(s.id for s in sandboxes), *(c.id for c in containers)], asked)
        return PodRuntimeState(uid, list(sandboxes), list(containers), read_at)

    def _probe_results(self, uid: str) -> ProbeResults:
        return self._probes.results(uid) if self._probes is not None else ProbeResults()

    # --- SyncPod ----------------------------------------------------------------------------
    async def sync_pod(self, view: PodView, st: PodSyncState) -> KillPodOptions | None:
        """Make the runtime match the spec. Returns how to terminate the pod once it must stop, else None."""
        uid = view.uid
        pod = view.raw
        st.seen = None
        state = await self._current(uid, st)
        reported = self._statuses.get_pod_status(uid)
        if reported is not None and reported.get("phase") in ("Succeeded", "Failed"):
            await self.publish(view, state, st, terminal=False)
            return KillPodOptions()
        if self._deadline_exceeded(view, st, reported):
            # upstream's active-deadline handler overrides the phase before the conditions are generated
            st.override = ("Failed", ev.DEADLINE_EXCEEDED, DEADLINE_MESSAGE)
            self._recorder.pod_event(pod, "Normal", ev.DEADLINE_EXCEEDED, DEADLINE_MESSAGE)
            return KillPodOptions()
        self._track_resize(view, state)
        # upstream SyncPod sets the status from what it observed before it touches the runtime: the first
        # status (and its startTime) comes before the sandbox, and an exit shows before anything is stopped
        status = await self.publish(view, state, st, terminal=False)
        if status.get("phase") in ("Succeeded", "Failed"):
            # upstream: a terminal pod is set up no further; its termination stops what is left
            return KillPodOptions()
        if not view.host_network and (errors := self.network_errors() if self.network_errors else ()):
            # upstream SyncPod: only host-network pods start while the runtime network is not ready
            self._recorder.pod_event(pod, "Warning", ev.NETWORK_NOT_READY, f"{NETWORK_NOT_READY_MESSAGE}: {errors[0]}")
            if self.explain is not None:
                self.explain.synced(view, state, st, None, f"{NETWORK_NOT_READY_MESSAGE}: {errors[0]}")
            return None
        await self.containers.refresh_volumes(view)
        for c in view.init_containers:  # the pod start SLI leaves out the init containers' run time
            if c.kind == "init" and (done := state.latest(c.name)) is not None and done.finished_at:
                self._metrics.pod_startup.init_container_finished(uid, done.finished_at)
        actions = compute_pod_actions(view, state, self._probe_results(uid), self._actuated_lookup(uid))
        planned = state  # what the planner saw
        evidence = self.explain.evidence(view, actions) if self.explain is not None else None
        if not actions.idle:
            state = await self._execute(view, actions, state, st) or await self.observe(uid)
            if not actions.resize.idle:
                self._track_resize(view, state)
            status = await self.publish(view, state, st, terminal=False)
        await self._remove_unused_sandboxes(state)
        self._after_sync(view, state, st)
        if self.explain is not None:
            self.explain.synced(view, planned, st, actions, evidence=evidence)
        if status.get("phase") in ("Succeeded", "Failed"):
            return KillPodOptions()
        # A sync from this state would do nothing more; an active deadline is armed from the status this sync
        # published, by the next one.
        if not (view.active_deadline_seconds or 0) > 0 and compute_pod_actions(
                view, state, self._probe_results(uid), self._actuated_lookup(uid)).idle:
            st.seen = SeenPod.of(state)
            st.cached = CachedPod(state, st.seen, self._clock.monotonic())
        return None

    async def _current(self, uid: str, st: PodSyncState) -> PodRuntimeState:
        """The pod's runtime state: the last sync's when a relist since listed the pod just as that sync left it
        (no runtime request: an idle pod's periodic resync asks the runtime nothing), else read from the
        runtime. Upstream waits for the next relist when its cache is older than the last sync; this reads."""
        cached, st.cached = st.cached, None
        fresh, st.fresh = st.fresh, False
        confirms = self.relist_confirms
        if confirms is not None:
            if cached is not None and confirms(uid, cached.seen, cached.synced_at):
                return cached.state
            # A new pod's first sync: upstream reads its pod cache (the last relist) and asks the runtime nothing.
            # Here only when that relist was asked after every earlier worker had ended (a worker is the only
            # writer of a pod's objects, and one of this uid may have just gone) and listed nothing for the uid.
            if fresh and confirms(uid, NOTHING_SEEN, self._worker_ended_at):
                return PodRuntimeState(uid)
        return await self.observe(uid)

    def _deadline_exceeded(self, view: PodView, st: PodSyncState, reported: dict[str, Any] | None) -> bool:
        ads = view.active_deadline_seconds
        if ads is None or ads <= 0:
            return False
        # upstream pastActiveDeadline: the status manager's status, else the API's (after an agent restart)
        started = parse_time((reported if reported is not None else view.api_status).get("startTime"))
        if started is None:
            return False
        remaining = started + ads - self._clock.now()
        if remaining > 0:
            st.wake_no_later_than(self._clock.monotonic() + remaining)
            return False
        return True

    def _after_sync(self, view: PodView, state: PodRuntimeState, st: PodSyncState) -> None:
        # Wake when a crash-loop backoff or an image backoff expires.
        uid = view.uid
        now = self._clock.monotonic()
        for c in (*view.containers, *view.ephemeral_containers):
            latest = state.latest(c.name)
            if latest is not None and latest.state is ContainerState.EXITED and latest.finished_at:
                rem = self._backoff.remaining(backoff_key(view, c), latest.finished_at)
                if rem > 0:
                    st.wake_no_later_than(now + rem + 0.05)
            rem = self._images.backoff_remaining(uid, c, st)
            if rem > 0:
                st.wake_no_later_than(now + rem + 0.05)

    async def _execute(self, view: PodView, actions: PodActions, state: PodRuntimeState,
                       st: PodSyncState) -> PodRuntimeState | None:
        """Carry out the actions. Returns the pod's runtime state afterwards when the runtime's answers give it
        exactly (a pod that had no container yet and whose starts all succeeded), else None: observe again."""
        uid = view.uid
        if self.durable is not None:
            await self.durable()
        if actions.kill_pod:
            await self.kill_pod(view, state, view.grace_period)
            if actions.create_sandbox and state.sandboxes:
                self._recorder.pod_event(view.raw, "Normal", ev.SANDBOX_CHANGED,
                                         "Pod sandbox changed, it will be killed and re-created.")
            if actions.create_sandbox:
                await self._purge_init_containers(view, state)
            state = await self.observe(uid)
        else:
            await self._kill_listed(view, actions.containers_to_kill, state)
        await prune_init_containers(self._runtime, self.containers.logs, view, state)
        # nothing of the pod was there to kill or prune: what this pass creates is all there is
        fresh = not state.containers
        if actions.create_sandbox:
            sandbox_id = await self.containers.create_sandbox(view, actions.attempt, st)
            if not sandbox_id:
                return None
            asked = self._clock.monotonic()
            sandbox = await self._status_of_sandbox(sandbox_id) if fresh else None
            # the new sandbox's own status instead of listing the pod's sandboxes and containers again
            state = (PodRuntimeState(uid, [sandbox, *state.sandboxes], [], {**state.read_at, sandbox.id: asked})
                     if sandbox else await self.observe(uid))
        if state.sandbox is None:
            return None
        reported = self._statuses.get_pod_status(uid)
        started: list[str] = []

        async def start_each(names: list[str]) -> bool:
            """Start each named container (a failed one blocks nothing); whether all of them started."""
            ok = True
            for name in names:
                c = view.find(name)
                if c is not None:
                    cid = await self.containers.start(view, c, state, st, reported)
                    ok = ok and bool(cid)
                    started.append(cid)
            return ok

        # upstream SyncPod starts ephemeral containers before init containers, so that a pod whose init
        # container cannot start can still be debugged
        all_started = await start_each(actions.ephemeral_to_start)
        fresh = fresh and all_started
        for name in actions.init_to_start:
            c = view.find(name)
            if c is None:
                continue
            cid = await self.containers.start(view, c, state, st, reported)
            if not cid:
                if not c.is_sidecar:
                    return None
                fresh = False
            started.append(cid)
        if not actions.resize.idle:
            await self._resize(view, actions.resize)
        all_started = await start_each(actions.containers_to_start)
        if not (fresh and all_started):
            return None
        asked = self._clock.monotonic()
        try:
            statuses = await asyncio.gather(*(self._runtime.container_status(cid) for cid in started))
        except NotFoundError:  # gone already (removed from outside): the relist says what is left
            return None
        return PodRuntimeState(uid, list(state.sandboxes), list(statuses),
                               {**state.read_at, **dict.fromkeys((s.id for s in statuses), asked)})

    # --- in-place resize ----------------------------------------------------------------------
    def _actuated_lookup(self, uid: str) -> ActuatedLookup | None:
        actuated = self.actuated
        if actuated is None:
            return None
        return lambda name: actuated.container(uid, name)

    def _track_resize(self, view: PodView, state: PodRuntimeState) -> None:
        """upstream SyncPod: PodResizeInProgress while a running container's actuated resources differ from its
        allocation; once they agree the condition goes, with a ResizeCompleted event."""
        conditions, lookup = self.resize_conditions, self._actuated_lookup(view.uid)
        if conditions is None or lookup is None:
            return
        if resize_in_progress(view, state, lookup):
            conditions.set_in_progress(view.uid, "", "", view.generation or 0)
            return
        generation, cleared = conditions.clear_in_progress(view.uid)
        if cleared:
            self._recorder.pod_event(view.raw, "Normal", resize_events.RESIZE_COMPLETED,
                                     resize_events.resize_completed(view.raw, generation))
            if self.on_resize_completed is not None:
                self.on_resize_completed()

    async def _resize(self, view: PodView, actions: ResizeActions) -> None:
        """doPodResizeAction; a refusal becomes PodResizeInProgress with reason Error and a ResizeError event
        (the next sync tries again)."""
        if self.resizer is None:
            return
        self.resizer.cgroups = self.cgroups  # known once the runtime named its cgroup driver
        try:
            await self.resizer.run(view, actions)
        except ResizeError as e:
            log.warning("pod resize failed", extra={"kv": {"pod": view.format_pod, "err": str(e)}})
            if self.resize_conditions is None:
                return
            generation, updated = self.resize_conditions.set_in_progress(view.uid, ERROR, str(e), view.generation or 0)
            if updated:
                self._recorder.pod_event(view.raw, "Warning", resize_events.RESIZE_ERROR,
                                         resize_events.resize_error(view.raw, generation, str(e)))

    async def _remove_unused_sandboxes(self, state: PodRuntimeState) -> None:
        """The pod's sandboxes that are not its newest, not ready and hold no container (upstream evictSandboxes'
        rule): e.g. one an agent killed between its create and its start left `created`. Removed at once rather
        than at the next garbage collection, so an adopted pod has one sandbox as soon as it runs."""
        newest = state.sandbox
        if newest is None or newest.state is not SandboxState.READY:
            return
        holding = {c.sandbox_id for c in state.containers}
        for sb in state.sandboxes[1:]:
            if sb.state is SandboxState.READY or sb.id in holding:
                continue
            try:
                await self._runtime.stop_pod_sandbox(sb.id)
                await self._runtime.remove_pod_sandbox(sb.id)
            except RuntimeError_ as e:  # the garbage collection tries again
                log.warning("removing an unused sandbox failed", extra={"kv": {"sandbox": sb.id, "err": str(e)}})

    async def _status_of_sandbox(self, sandbox_id: str) -> PodSandboxStatus | None:
        try:
            return await self._runtime.pod_sandbox_status(sandbox_id)
        except NotFoundError:
            return None

    async def _purge_init_containers(self, view: PodView, state: PodRuntimeState) -> None:
        """Upstream purgeInitContainers: a new sandbox runs every init container again, so the instances of
        the old one go (else a completed one would count as done in the new sandbox)."""
        names = {c.name for c in view.init_containers}
        for c in state.containers:
            if name_of(c) in names:
                await self.containers.logs.remove_container(self._runtime, c)

    async def _kill_listed(self, view: PodView, kills: dict[str, KillContainer], state: PodRuntimeState) -> None:
        if not kills:
            return
        by_id = {c.id: c for c in state.containers}
        pod_ip = self._pod_ip(view.uid)
        await asyncio.gather(
            *(
                self.containers.kill(view, by_id[k.container_id], kill_grace_period(view, k), pod_ip, k.message,
                                     reason=k.reason)
                for k in kills.values()
                if k.container_id in by_id
            )
        )

    # --- status ---------------------------------------------------------------------------
    async def publish(self, view: PodView, state: PodRuntimeState, st: PodSyncState, terminal: bool,
                      status_fn: PodStatusFn | None = None) -> dict[str, Any]:
        uid = view.uid
        await self._fill_log_fallbacks(view, state, st)
        if self._probes is not None and state.sandbox is not None and not terminal:
            running = {name_of(c): c for c in state.running()}
            self._probes.update_pod(view, state.sandbox.ip or self._host_ip, running)
        cgroups = self.cgroups
        conditions = self.resize_conditions
        if conditions is not None and terminal:  # upstream determinePodResizeStatus
            conditions.clear_in_progress(uid)
            conditions.clear_pending(uid)
        actuated = self.actuated.get(uid) if self.actuated is not None else None
        status = compute_status(
            StatusInputs(
                pod=view,
                state=state,
                now=self._clock.now(),
                host_ip=self._host_ip,
                qos_class=cgroups.qos_class(view) if cgroups else "",
                reasons=dict(st.reasons),
                probes=self._probe_results(uid),
                termination_messages=self._termination_messages(uid, state, st),
                old=self._statuses.get_pod_status(uid),
                pod_is_terminal=terminal,
                override=st.override,
                container_id_scheme=self.container_id_scheme,
                resize_conditions=tuple(conditions.conditions(uid)) if conditions is not None else (),
                actuated=actuated.containers if actuated is not None else {},
            )
        )
        if status_fn is not None:
            status_fn(status)
        if not st.owns_status:
            return status
        self._statuses.set_pod_status(view.raw, status)
        if not st.start_recorded and status.get("phase") == "Running":
            st.start_recorded = True
            if st.first_seen >= 0:
                self._metrics.pod_start_duration.observe(self._clock.monotonic() - st.first_seen)
        return status

    def _termination_messages(self, uid: str, state: PodRuntimeState, st: PodSyncState) -> dict[str, str]:
        out: dict[str, str] = {}
        read: dict[str, str] = {}
        for c in state.containers:
            if c.state is not ContainerState.EXITED:
                continue
            msg = st.termination_logs.get(c.id)
            if msg is None:
                try:
                    path = termination_log_path(self._root_dir, uid, name_of(c), restart_count_of(c))
                    with open(path, "rb") as f:
                        data = f.read(MAX_TERMINATION_MESSAGE)
                except (OSError, UnsafePathError):
                    data = b""
                msg = data.decode(errors="replace")
            read[c.id] = msg
            if msg:
                out[c.id] = msg
            elif c.id in st.log_fallbacks:
                out[c.id] = st.log_fallbacks[c.id]
        st.termination_logs = read  # the containers gone from the runtime drop out
        return out

    async def _fill_log_fallbacks(self, view: PodView, state: PodRuntimeState, st: PodSyncState) -> None:
        """FallbackToLogsOnError: a failed container with an empty termination log reports its log tail."""
        for status in state.containers:
            if status.state is not ContainerState.EXITED or status.exit_code == 0 or status.id in st.log_fallbacks:
                continue
            c = view.find(name_of(status))
            if c is None or c.termination_message_policy != "FallbackToLogsOnError":
                continue
            try:
                data = await self._runtime.container_logs(status.id, tail=FALLBACK_LOG_LINES)
            except RuntimeError_:
                continue
            st.log_fallbacks[status.id] = data[-FALLBACK_LOG_BYTES:].decode(errors="replace")

    def _pod_ip(self, uid: str) -> str:
        reported = self._statuses.get_pod_status(uid)
        if reported and reported.get("podIP"):
            return str(reported["podIP"])
        return self._host_ip

    # --- termination ----------------------------------------------------------------------
    async def kill_pod(self, view: PodView, state: PodRuntimeState, grace: int) -> None:
        """Stop every container (regular first, sidecars last in reverse order), then the sandbox."""
        clock = self._clock
        deadline = clock.monotonic() + grace
        live = [c for c in state.containers if c.state in (ContainerState.RUNNING, ContainerState.CREATED)]
        # upstream terminationOrdering: sidecars wait for the regular containers only; ephemeral containers
        # stop at once, alongside the regular ones
        ephemeral = {c.name for c in view.ephemeral_containers}
        order = TerminationOrdering([c.name for c in view.sidecars],
                                    (name_of(c) for c in live if name_of(c) not in ephemeral))
        pod_ip = self._pod_ip(view.uid)

        async def stop(c: Any) -> None:
            name = name_of(c)
            waits = bool(order.waits_for(name))
            try:
                await self.containers.kill(view, c, grace, pod_ip, deadline=deadline,
                                           wait_turn=(lambda: order.wait_for_turn(name)) if waits else None)
            finally:
                order.container_terminated(name)

        if live:
            await asyncio.gather(*(stop(c) for c in live))
        if live and clock.monotonic() > deadline + 2 + EXCEEDED_GRACE_SLACK:
            # SIGKILL is sent at the deadline (plus the 2 s minimum), so only a stuck runtime gets here.
            self._recorder.pod_event(view.raw, "Warning", ev.EXCEEDED_GRACE_PERIOD,
                                     "Container runtime did not kill the pod within specified grace period.")
        for sb in state.sandboxes:
            try:
                await self._runtime.stop_pod_sandbox(sb.id)
            except RuntimeError_ as e:
                log.warning("stop sandbox failed", extra={"kv": {"sandbox": sb.id, "err": str(e)}})
        if self._probes is not None:
            self._probes.remove_pod(view.uid)

    async def sync_terminating_pod(self, view: PodView, st: PodSyncState, grace: int,
                                   status_fn: PodStatusFn | None) -> None:
        """Kill everything the pod runs within `grace`, then write its final status.

        As upstream's SyncTerminatingPod: `status_fn` (the kill's reason: eviction, node shutdown, preemption)
        shapes only the status written before the kill; the final one is generated from what the runtime
        reports afterwards, so a container that exits 0 on SIGTERM ends the pod `Succeeded` without the
        kill's reason (a `DisruptionTarget` it set stays)."""
        uid = view.uid
        log.info("terminating pod", extra={"kv": {"pod": view.format_pod, "grace": grace}})
        if self._probes is not None:
            self._probes.stop_liveness_and_startup(uid)
        state = await self.observe(uid)
        status: dict[str, Any] | None = None
        if status_fn is not None:
            # as upstream: the reason for the kill (eviction, node shutdown) is reported before the containers
            # stop, so it reaches the API even if the node goes down before the end of the grace
            status = await self.publish(view, state, st, terminal=True, status_fn=status_fn)
        if self.explain is not None:
            self.explain.terminating(view, state, grace, status or self._statuses.get_pod_status(uid))
        await self.kill_pod(view, state, grace)
        state = await self.observe(uid)
        await self.publish(view, state, st, terminal=True)

    async def sync_terminated_pod(self, view: PodView, st: PodSyncState) -> None:
        """A terminated pod that is still wanted (upstream SyncTerminatedPod): nothing may run again; the
        final status, once the volumes are unmounted, goes through the status manager's terminate_pod. Later
        passes write no status unless something had to be killed again: upstream's runs once."""
        uid = view.uid
        state = await self.observe(uid)
        killed = False
        if state.running() or any(s.state.name == "READY" for s in state.sandboxes):
            await self.kill_pod(view, state, view.grace_period)
            state = await self.observe(uid)
            killed = True
        # as upstream's volume manager once nothing of the pod runs: memory volumes give their memory back
        unmount_pod_volumes(self._root_dir, uid, self.containers.mounter)
        self.containers.volume_ops.unwanted(uid)
        entry = self._statuses.get(uid)
        if (entry is not None and entry.finished and not killed) or not st.owns_status:
            return
        await self.publish(view, state, st, terminal=True)
        self._statuses.terminate_pod(view.raw)
        if self.explain is not None:
            self.explain.terminated(view)

    async def cleanup(self, view: PodView, keep_status: bool = False) -> bool:
        """The pod is gone from every source: remove its containers, sandboxes, logs, volumes and pod directory,
        its cgroup, backoff entries and status (`keep_status`: a stand-in worker's pod keeps the status it has,
        a refusal). False when something is still left (the worker retries); a runtime error raises, and is
        retried the same way."""
        uid = view.uid
        state = await self.observe(uid)
        for c in state.containers:
            await self.containers.logs.remove_container(self._runtime, c)
        for sb in state.sandboxes:
            await self._runtime.remove_pod_sandbox(sb.id)
        self.containers.logs.remove_pod_dir(view.namespace, view.name, uid)
        if not teardown_pod_dir(self._root_dir, uid, self.containers.mounter, self.containers.volume_ops):
            log.warning("pod directory not removed yet", extra={"kv": {"pod": view.format_pod}})
            return False
        cgroups = self.cgroups
        if cgroups is not None:
            try:
                cgroups.remove_pod(uid)  # a busy cgroup is retried in the background and by the orphan sweep
            except Exception as e:
                log.warning("pod cgroup removal failed", extra={"kv": {"uid": uid, "err": str(e)}})
        self._backoff.forget_prefix(pod_key_prefix(view.name, view.namespace, uid))
        self._images.forget_pod(uid)
        if self.actuated is not None:
            self.actuated.remove(uid)
        if self.resize_conditions is not None:
            self.resize_conditions.remove(uid)
        if not keep_status:
            self._statuses.remove_pod(uid)
        if self.explain is not None:
            self.explain.forget(uid)
        if self.containers.objects is not None:
            self.containers.objects.release(uid)  # upstream UnregisterPod: its ConfigMap/Secret watches may stop
        return True


def kill_grace_period(view: PodView, k: KillContainer) -> int:
    """Upstream setTerminationGracePeriod: the deletion's grace first; else a probe-level grace when a
    liveness/startup probe failure is the reason; else the pod's terminationGracePeriodSeconds."""
    deletion = view.raw.get("metadata", {}).get("deletionGracePeriodSeconds")
    if isinstance(deletion, int) and not isinstance(deletion, bool):
        return deletion
    c = view.find(k.name)
    if c is not None and k.reason in (REASON_LIVENESS, REASON_STARTUP):
        probe = c.probe("liveness" if k.reason == REASON_LIVENESS else "startup")
        pg = probe.termination_grace_period_seconds if probe is not None else None
        if pg is not None and pg >= 0:
            return pg
    return view.grace_period
