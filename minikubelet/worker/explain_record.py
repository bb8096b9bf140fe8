"""The pod worker's side of `explain`: each sync's decision per container, from the planner's actions, the
runtime state and the waiting reasons that sync produced (the same values its status was generated from).

Built after the sync's status was published; the store keeps it only when it differs from the last one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cri.types import ContainerState, ContainerStatus
from minikubelet.base.clock import Clock
from minikubelet.base.podview import ContainerView, PodView
from minikubelet.explain.record import (
    MAX_CONTAINERS,
    MAX_EXIT_CODES,
    ContainerDecision,
    Detail,
    ExplainStore,
    SyncDecision,
    Termination,
    cut,
)
from minikubelet.runtime.state import PodRuntimeState, name_of, restart_count_of
from minikubelet.worker.backoff import Backoff
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.planner import REASON_LIVENESS, REASON_STARTUP, REASON_UNKNOWN, PodActions, backoff_key
from minikubelet.worker.pod_state import PodSyncState

# (pod uid, container name, probe kind "liveness"/"startup"/"readiness") -> the probe's last result, or None
ProbeDetail = Callable[[str, str, str], dict[str, Any] | None]

IMAGE_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName"})


class SyncExplainer:
    def __init__(self, store: ExplainStore, clock: Clock, container_backoff: Backoff, images: ImagePuller,
                 probe_detail: ProbeDetail | None = None) -> None:
        self.store = store
        self._clock = clock
        self._backoff = container_backoff
        self._images = images
        self._probe_detail = probe_detail

    def evidence(self, view: PodView, actions: PodActions) -> dict[str, dict[str, Any]]:
        """The probe results behind this sync's probe kills, taken before the kills (the new container's probes
        replace them)."""
        out: dict[str, dict[str, Any]] = {}
        if self._probe_detail is None:
            return out
        for k in actions.containers_to_kill.values():
            if k.reason in (REASON_LIVENESS, REASON_STARTUP):
                probe = self._probe_detail(view.uid, k.name, "liveness" if k.reason == REASON_LIVENESS else "startup")
                if probe is not None:
                    out[k.name] = probe
        return out

    def synced(self, view: PodView, state: PodRuntimeState, st: PodSyncState, actions: PodActions | None,
               note: str = "", evidence: dict[str, dict[str, Any]] | None = None) -> None:
        evidence = evidence or {}
        decisions = tuple(self._container(view, c, state, st, actions, evidence)
                          for c in (*view.init_containers, *view.app_containers, *view.ephemeral_containers)
                          [:MAX_CONTAINERS])
        self.store.synced(view.uid, view.namespace, view.name, SyncDecision(decisions, cut(note)), self._clock.now())

    def terminating(self, view: PodView, state: PodRuntimeState, grace: int, status: dict[str, Any] | None) -> None:
        reason, message = _kill_reason(view, status)
        live = tuple(sorted({name_of(c) for c in state.containers
                             if c.state in (ContainerState.RUNNING, ContainerState.CREATED)}))
        self.store.terminating(view.uid, view.namespace, view.name, Termination(reason, cut(message), grace, live),
                               self._clock.now())

    def terminated(self, view: PodView) -> None:
        self.store.terminated(view.uid, self._clock.now())

    def forget(self, uid: str) -> None:
        self.store.forget(uid)

    # --- one container --------------------------------------------------------------------------
    def _container(self, view: PodView, c: ContainerView, state: PodRuntimeState, st: PodSyncState,
                   actions: PodActions | None, evidence: dict[str, dict[str, Any]]) -> ContainerDecision:
        name, kind = c.name, c.kind
        latest = state.latest(name)
        if actions is None:
            return self._observed(view, c, latest, state)
        kill = next((k for k in actions.containers_to_kill.values() if k.name == name), None)
        starting = name in actions.containers_to_start or name in actions.init_to_start \
            or name in actions.ephemeral_to_start
        if kill is not None:
            detail: Detail = ()
            cause = kill.reason or ("DefinitionChanged" if "definition changed" in kill.message else "ResizeRestart")
            if name in evidence:
                detail = (("probe", evidence[name]),)
            if kill.reason == REASON_UNKNOWN:
                cause = "UnknownState"
            return ContainerDecision(name, kind, "restart" if starting else "kill", cause, cut(kill.message),
                                     detail + _restarts(latest, state, name))
        if starting:
            waiting = st.reasons.get(name)
            if waiting is None:
                return ContainerDecision(name, kind, "start", "Starting", "", _restarts(latest, state, name))
            reason, message = waiting
            detail = _restarts(latest, state, name)
            if reason == "CrashLoopBackOff" and latest is not None and latest.finished_at:
                key = backoff_key(view, c)
                delay = self._backoff.get(key)
                # the end of the back-off, not what is left of it: the same on every sync while it lasts
                detail += (("backoffSeconds", round(delay, 3)), ("backoffUntil", round(latest.finished_at + delay, 3)))
            elif reason in IMAGE_REASONS:
                failure = st.image_errors.get(ImagePuller.key(view.uid, c))
                detail += (("image", c.image),)
                if failure is not None:
                    delay = self._images.backoff_delay(view.uid, c)
                    detail += (("lastPullError", cut(failure.message)), ("lastPullAt", round(failure.at, 3)),
                               ("backoffSeconds", round(delay, 3)), ("backoffUntil", round(failure.at + delay, 3)))
            return ContainerDecision(name, kind, "wait", reason, cut(message), detail)
        if kind == "regular" and latest is None and _init_pending(view, state):
            blocker = _blocking_init(view, state, actions)
            message = f"waiting on init container {blocker}" if blocker else "waiting on the init containers"
            detail = (("initContainer", blocker),) if blocker else ()
            blocked = st.reasons.get(blocker) if blocker else None
            if blocked is not None:
                message += f" ({blocked[0]}: {cut(blocked[1], 200)})"
            return ContainerDecision(name, kind, "wait", "WaitingOnInit", message, detail)
        return self._observed(view, c, latest, state)

    def _observed(self, view: PodView, c: ContainerView, latest: ContainerStatus | None,
                  state: PodRuntimeState) -> ContainerDecision:
        """Nothing to do for it on this sync: the runtime's state says why."""
        name, kind = c.name, c.kind
        if latest is None:
            return ContainerDecision(name, kind, "none", "NotCreated")
        restarts = _restarts(latest, state, name)
        if latest.state is ContainerState.RUNNING:
            return ContainerDecision(name, kind, "keep", "Running", "", restarts)
        if latest.state is ContainerState.EXITED:
            code = latest.exit_code
            if code == 0 and kind in ("init", "regular"):
                return ContainerDecision(name, kind, "none", "Completed", "", restarts)
            return ContainerDecision(name, kind, "none", "NotRestarted",
                                     f"exited with {code}; restartPolicy {view.restart_policy}", restarts)
        return ContainerDecision(name, kind, "none", latest.state.name.capitalize(), "", restarts)


def _restarts(latest: ContainerStatus | None, state: PodRuntimeState, name: str) -> Detail:
    if latest is None:
        return ()
    codes = [a.exit_code for a in state.attempts(name) if a.state is ContainerState.EXITED][:MAX_EXIT_CODES]
    out: Detail = (("restartCount", restart_count_of(latest)),)
    if codes:
        out += (("exitCodes", tuple(codes)),)
        last = next(a for a in state.attempts(name) if a.state is ContainerState.EXITED)
        if last.reason:
            out += (("lastTerminationReason", last.reason),)
    return out


def _init_pending(view: PodView, state: PodRuntimeState) -> bool:
    return bool(view.init_containers) and not any(state.latest(c.name) is not None for c in view.app_containers)


def _blocking_init(view: PodView, state: PodRuntimeState, actions: PodActions) -> str:
    """The init container the regular ones wait on: the one being started, else the first not done."""
    for c in view.init_containers:
        if c.name in actions.init_to_start and not c.is_sidecar:
            return c.name
    for c in view.init_containers:
        latest = state.latest(c.name)
        if c.is_sidecar:
            continue
        if latest is None or not (latest.state is ContainerState.EXITED and latest.exit_code == 0):
            return c.name
    return actions.init_to_start[0] if actions.init_to_start else ""


def _kill_reason(view: PodView, status: dict[str, Any] | None) -> tuple[str, str]:
    """Why the pod is being killed: the kill's status function's reason (eviction, shutdown, preemption,
    deadline), else a deletion, else the pod's own terminal phase, else its removal from its source."""
    if status is not None and status.get("reason"):
        return str(status["reason"]), str(status.get("message") or "")
    if view.deletion_timestamp:
        return "Deleted", f"deletionTimestamp {view.deletion_timestamp}"
    if status is not None and status.get("phase") in ("Succeeded", "Failed"):
        return str(status["phase"]), "every container has terminated and none will restart"
    return "Removed", "the pod left its source"
