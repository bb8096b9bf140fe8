"""The invariants the simulator checks after every step (and some at the instant a runtime object starts). Each
has a name and a one-line statement; docs/testing.md lists them."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cri.fake import FakeRuntime, _Object
from cri.types import ANNOTATION_CONTAINER_KIND, ContainerState, LinuxResources
from minikubelet.base.clock import FakeClock
from minikubelet.worker.backoff import CONTAINER_BACKOFF_INITIAL, CONTAINER_BACKOFF_MAX, RESET_AFTER

TERMINAL = ("Succeeded", "Failed")
KILL_REASONS = ("Evicted", "Preempting", "Terminated")  # a kill's status function: eviction, preemption, shutdown
MAX_CALLS_AT_INSTANT = 500  # a busy loop: the agent calls the runtime this often without virtual time passing
DELETE_BOUND = 180.0  # virtual seconds after grace by which a deleted pod's worker is done (see docs/testing.md)
# upstream flowcontrol.Backoff for containers: first restart at once, then 10 s doubling to 300 s, forgiven after
# a run of 10 minutes. Written out here, not read from minikubelet.worker.backoff, so a change there is caught.
UPSTREAM_BACKOFF_INITIAL = 10.0
UPSTREAM_BACKOFF_MAX = 300.0
UPSTREAM_RESET_AFTER = 600.0
assert (CONTAINER_BACKOFF_INITIAL, CONTAINER_BACKOFF_MAX, RESET_AFTER) == (  # the agent's own, for the reader
    UPSTREAM_BACKOFF_INITIAL, UPSTREAM_BACKOFF_MAX, UPSTREAM_RESET_AFTER)

INVARIANTS: dict[str, str] = {
    "one-running-instance": "never two running instances of one container (pod uid, name) at once",
    "one-ready-sandbox": "never two running sandboxes of one pod at once",
    "terminal-phase-final": "a pod whose phase is Succeeded or Failed never runs a container again and never "
                            "leaves that phase (but Failed by a kill's reason becomes Succeeded once every container "
                            "exited 0, as upstream's final status)",
    "restart-counts-monotonic": "a container's restartCount never decreases",
    "backoff-schedule": "a container is never restarted sooner than upstream's crash-loop back-off allows",
    "admitted-within-capacity": "the pods admitted and not terminated never exceed the node's max pods",
    "deleted-pod-finishes": "a deleted pod's worker is done and nothing of it runs within its grace + "
                            f"{DELETE_BOUND:.0f} s",
    "quiescence-clean": "once every pod is deleted and time has passed, nothing is left: containers, sandboxes, "
                        "pod dirs, volumes, log files, workers, statuses",
    "admitted-within-allocatable": "the cpu and memory the admitted pods not terminated request never exceed the "
                                   "node's allocatable",
    "probe-kill-restarts": "a container its liveness probe killed (pod neither deleted nor evicted, policy not "
                           "Never) starts again as a later attempt (a counted restart) within 600 s",
    "sidecar-order": "a pod's regular containers first start only once its sidecars have started, and a sidecar is "
                     "stopped before the grace is up only once every running regular container was asked to stop",
    "eviction-terminal": "a pod the eviction manager or a preemption killed never starts a container again, and "
                         "its phase is terminal within its grace + 180 s: Failed with reason Evicted (Preempting; "
                         "Terminated if a node shutdown stopped it too), or Succeeded if every container exited 0",
    "shutdown-order": "in a node shutdown, a pod of a higher priority group is asked to stop only once every pod of "
                      "each lower group has stopped or that group's grace has passed",
    "final-delete": "every pod deleted through the API is gone from the API (the agent's final DELETE) within its "
                    "grace + 210 s, counted from when the API is back if it was unreachable meanwhile",
    "api-converges": "while the API is reachable, its status of each pod (phase, container states, restart "
                     "counts) equals the agent's within 120 s",
    "lease-fresh": "once the API and the agent's heartbeat have run 20 s, the node's Lease is never older than its "
                   "leaseDurationSeconds (the node controller would mark the node NotReady)",
    "node-status-fresh": "once the API and the agent have run 60 s, the Node is registered and its Ready "
                         "condition's heartbeat is no older than 1.5 x nodeStatusReportFrequency + 30 s",
    "resize-actuated": "a running container of a pod with no PodResizePending/PodResizeInProgress condition runs "
                       "with its allocated cpu and memory (the runtime's values, read back as upstream does), and "
                       "a status without those conditions reports what the runtime runs, never the spec",
    "resize-restart": "an in-place resize changes a resource whose resizePolicy is RestartContainer only by "
                      "restarting the container (never by UpdateContainerResources), so once done the instance "
                      "that ran before no longer runs (a NotRequired-only resize's avoiding a restart is not checked)",
    "resize-completes": "a resize the agent allocated is carried out: the PodResizeInProgress condition of a pod "
                        "whose worker is not terminating goes within 360 s",
    "mirror-converges": "once the API has been reachable 120 s (since the agent's start or the static pod's change "
                        "too), each static pod the agent runs (admitted, worker not terminating) has a mirror pod "
                        "not being deleted whose config.mirror is its config.hash, and no mirror pod is left whose "
                        "static pod is gone and finished",
    "mirror-not-run": "nothing of a mirror pod ever runs: no sandbox or container has a mirror pod's uid",
    "no-crash": "no pod worker or loop dies of an unexpected exception",
    "progress": f"tasks never keep one another busy at one virtual instant (a livelock): at most "
                f"{MAX_CALLS_AT_INSTANT} runtime calls or 5000 loop iterations without time passing",
}


class Violation(Exception):
    def __init__(self, name: str, message: str) -> None:
        assert name in INVARIANTS, name
        self.name = name
        self.message = message
        super().__init__(f"{name}: {message}")


@dataclass
class _Run:
    """One run of one container attempt, as the runtime saw it."""

    started: float
    finished: float | None = None
    vanished: bool = False
    stopped: bool = False  # the agent stopped it while it ran (a probe's kill, a failed postStart)
    image: str = ""  # the image it ran: a new one is a new container spec


@dataclass
class _Backoff:
    delay: float = 0.0  # 0: no entry (the next restart may be immediate)
    last_update: float = 0.0


@dataclass
class Deletion:
    uid: str
    deadline: float  # monotonic


class SimRuntime(FakeRuntime):
    """FakeRuntime that tells the checker of every start and exit as it happens."""

    def __init__(self, clock: FakeClock, **kwargs: Any) -> None:
        super().__init__(clock, **kwargs)
        self.on_start: Callable[[_Object], None] = lambda _o: None
        self.on_exit: Callable[[_Object, bool], None] = lambda _o, _v: None
        self.on_stop: Callable[[_Object, float], None] = lambda _o, _t: None
        self.on_remove: Callable[[_Object], None] = lambda _o: None
        self.on_stop_exited: Callable[[_Object], None] = lambda _o: None
        self.on_update: Callable[[_Object, LinuxResources | None], None] = lambda _o, _r: None
        self.vanishing = False

    async def update_container_resources(self, container_id: str, resources: LinuxResources) -> None:
        obj = self._find(container_id)
        before = obj.resources if obj is not None else None
        await super().update_container_resources(container_id, resources)
        if obj is not None:
            self.on_update(obj, before)

    async def remove_container(self, container_id: str) -> None:
        obj = self._find(container_id)
        await super().remove_container(container_id)
        if obj is not None and self._find(container_id) is None:
            self.on_remove(obj)

    async def stop_container(self, container_id: str, timeout: float, signal: str = "") -> None:
        obj = self._find(container_id)
        if obj is not None:
            if not obj.is_sandbox and obj.state is ContainerState.EXITED:
                self.on_stop_exited(obj)
            self.on_stop(obj, timeout)
        await super().stop_container(container_id, timeout, signal)

    def _start(self, obj: _Object) -> None:
        self.on_start(obj)
        super()._start(obj)

    def _exit(self, obj: _Object, exit_code: int, reason: str, message: str, emit: bool = True) -> None:
        super()._exit(obj, exit_code, reason, message, emit)
        self.on_exit(obj, self.vanishing)

    def objects(self) -> list[_Object]:
        return list(self._objects.values())


@dataclass
class Checker:
    runtime: SimRuntime
    clock: FakeClock
    max_pods: int
    terminal: dict[str, tuple[str, float]] = field(default_factory=dict)  # uid -> (phase, wall time first seen)
    restarts: dict[tuple[str, str], int] = field(default_factory=dict)
    runs: dict[tuple[str, str], list[_Run]] = field(default_factory=dict)
    backoff: dict[tuple[str, str], _Backoff] = field(default_factory=dict)
    deletions: dict[str, Deletion] = field(default_factory=dict)
    _instant: float = -1.0
    _calls_at_instant: int = 0
    # removed behind the agent -> the id of the instance started since (None before), until a status shows it
    recounting: dict[tuple[str, str], str | None] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    killed_failed: set[str] = field(default_factory=set)  # Failed by a kill's reason, not yet by the runtime's
    deadlines: set[str] = field(default_factory=set)  # pods given an activeDeadlineSeconds through the API
    # a violation seen inside a runtime call: raising there would only fail the agent's call, so it waits here
    pending: Violation | None = None

    def __post_init__(self) -> None:
        self.runtime.on_start = self.on_start
        self.runtime.on_exit = self.on_exit
        self.runtime.on_remove = self.on_remove
        self.runtime.on_stop_exited = self.stop_exited

    # -- at the instant -----------------------------------------------------------------------------------
    def on_start(self, obj: _Object) -> None:
        try:
            self._on_start(obj)
        except Violation as v:
            self.pending = self.pending or v

    def _on_start(self, obj: _Object) -> None:
        uid = obj.pod.uid
        for other in self.runtime.objects():
            if other is obj or other.state is not ContainerState.RUNNING or other.pod.uid != uid:
                continue
            if obj.is_sandbox and other.is_sandbox:
                raise Violation("one-ready-sandbox", f"pod {uid}: sandbox {obj.name} starts while {other.name} runs")
            if not obj.is_sandbox and not other.is_sandbox and other.container.name == obj.container.name:
                raise Violation("one-running-instance",
                                f"pod {uid}: {obj.name} starts while {other.name} runs")
        if obj.is_sandbox:
            return
        if uid in self.terminal:
            phase, at = self.terminal[uid]
            raise Violation("terminal-phase-final", f"pod {uid} was {phase} at {at:.1f}, container {obj.name} "
                                                    f"starts at {self.clock.now():.1f}")
        if (uid, obj.container.name) in self.recounting:
            self.recounting[(uid, obj.container.name)] = obj.id
        self._check_backoff(uid, obj.container.name, obj.image)

    def _check_backoff(self, uid: str, name: str, image: str = "") -> None:
        key = (uid, name)
        now = self.clock.now()
        runs = self.runs.setdefault(key, [])
        prev = runs[-1] if runs else None
        if prev is not None and prev.image != image:
            # a new spec (api-update's image, seen by the agent when its watch delivered it, maybe long after the
            # patch): upstream's back-off key holds the spec hash (name and image), so it starts fresh
            self.backoff.pop(key, None)
        if prev is not None and prev.stopped and prev.finished is not None and not prev.vanished:
            # upstream restarts a container it killed in the same sync, its back-off judged by the exit before
            # (doBackOff reads the first exited status the sync began with): none, or that older one
            prev = runs[-2] if len(runs) > 1 else None
        runs.append(_Run(now, image=image))
        if prev is None:
            return
        if prev.finished is None or prev.vanished:
            # its status is gone (removed behind the agent's back, or never seen exiting): no back-off to keep
            self.backoff.pop(key, None)
            return
        b = self.backoff.get(key)
        if b is None or prev.finished - b.last_update > UPSTREAM_RESET_AFTER:
            self.backoff[key] = _Backoff(UPSTREAM_BACKOFF_INITIAL, now)
            return
        if now - prev.finished < b.delay - 1e-6:
            raise Violation("backoff-schedule", f"pod {uid} container {name}: restarted {now - prev.finished:.1f} s "
                                                f"after its exit, back-off is {b.delay:.0f} s")
        b.delay = min(b.delay * 2, UPSTREAM_BACKOFF_MAX)
        b.last_update = now

    def spec_changed(self, uid: str, name: str) -> None:
        """The container's spec was changed through the API (its image): upstream's back-off key is the pod and
        the container's spec hash (getStableKey), so the new spec starts on a fresh back-off."""
        self.backoff.pop((uid, name), None)

    def on_exit(self, obj: _Object, vanished: bool) -> None:
        if obj.is_sandbox:
            return
        runs = self.runs.get((obj.pod.uid, obj.container.name))
        if runs and runs[-1].finished is None:
            runs[-1].finished = self.clock.now()
            runs[-1].vanished = vanished

    def stopped(self, uid: str, name: str) -> None:
        """The agent asks the runtime to stop the running instance of a container."""
        runs = self.runs.get((uid, name))
        if runs and runs[-1].finished is None:
            runs[-1].stopped = True

    def stop_exited(self, obj: _Object) -> None:
        """The agent stops an instance that has exited meanwhile: the pass killing it began while it ran (the agent
        stops only what its state shows running or created), e.g. a probe's kill whose preStop hook ran past the
        container's own exit. Upstream restarts it in that pass with doBackOff reading the exited instance the pass
        began with, the one before (seed 100: restarted 4.1 s after this exit, 26 s after the one before), so it
        counts as stopped while it ran."""
        runs = self.runs.get((obj.pod.uid, obj.container.name))
        newest = max((o.container.attempt for o in self.runtime.objects() if not o.is_sandbox
                      and o.pod.uid == obj.pod.uid and o.container.name == obj.container.name), default=-1)
        if runs and runs[-1].finished is not None and obj.container.attempt == newest:
            runs[-1].stopped = True

    def removed_behind_agent(self, uid: str, name: str) -> None:
        """The newest instance of a container is removed by someone else: the status then shows the restart count
        of the newest one left, as upstream's does (the count goes on from it), so the count starts over."""
        self.restarts.pop((uid, name), None)
        self.recounting[(uid, name)] = None

    def on_remove(self, obj: _Object) -> None:
        """The agent removed a container. When it was the last instance of an init container (upstream's
        purgeInitContainers when the sandbox is re-created; pruning keeps the newest exited one), the count starts
        over as after a removal behind the agent: upstream's next instance counts from the runtime's instances as
        the sync began, else from the log files left (calcRestartCountByLogDir), and removeContainer took the
        removed one's log with it, so a start deferred to a later sync (the new sandbox's status failed, the agent
        restarted) counts from 0 while the status still shows the old count (seed 85)."""
        if obj.is_sandbox or any(not o.is_sandbox and o.pod.uid == obj.pod.uid and o.container.name == obj.container.name
                                 for o in self.runtime.objects()):
            return
        runs = self.runs.get((obj.pod.uid, obj.container.name))
        if runs and runs[-1].finished is not None:
            # no exited instance is left for the next start to be judged by: upstream's doBackOff returns before it
            # looks at (or advances) the back-off when the sync's pod status has none (seed 248)
            runs[-1].vanished = True
        if obj.annotations.get(ANNOTATION_CONTAINER_KIND) in ("init", "sidecar"):
            self.removed_behind_agent(obj.pod.uid, obj.container.name)

    def agent_restarted(self) -> None:
        """The agent keeps back-off, a file pod's phase and its admission in memory (as upstream does for static
        pods): after a restart the pods are admitted afresh, in source order, and may be rejected or admitted
        differently, so the per-pod history of phase, restart count and back-off starts over."""
        self.backoff.clear()
        self.terminal.clear()
        self.killed_failed.clear()
        self.restarts.clear()
        for runs in self.runs.values():
            if runs:
                runs[-1].vanished = True

    def deleted(self, uid: str, grace: float) -> None:
        self.deletions.setdefault(uid, Deletion(uid, self.clock.monotonic() + grace + DELETE_BOUND))

    def interrupt(self) -> None:
        if self.pending is not None:
            raise self.pending
        now = self.clock.monotonic()
        calls = len(self.runtime.calls)
        if now != self._instant:
            self._instant, self._calls_at_instant = now, calls
        elif calls - self._calls_at_instant > MAX_CALLS_AT_INSTANT:
            raise Violation("progress", f"{calls - self._calls_at_instant} runtime calls at t={now:.3f} "
                                        "without time passing (a busy loop)")

    # -- after every step ---------------------------------------------------------------------------------
    def check(self, statuses: list[tuple[str, dict[str, Any]]], worker_uids: set[str], active_admitted: int) -> None:
        if self.pending is not None:
            raise self.pending
        if self.errors:
            raise Violation("no-crash", self.errors[0])
        now = self.clock.now()
        for uid, status in statuses:
            phase = str(status.get("phase") or "")
            seen = self.terminal.get(uid)
            if seen is not None and (seen[0], phase) == ("Failed", "Succeeded") and uid in self.killed_failed:
                # upstream SyncTerminatingPod: the kill's reason (eviction, preemption, node shutdown) is written
                # before the containers stop, the final status from what they did: all exited 0 is Succeeded
                self.terminal[uid] = (phase, now)
                self.killed_failed.discard(uid)
                seen = self.terminal[uid]
            if seen is not None and phase != seen[0]:
                raise Violation("terminal-phase-final", f"pod {uid} was {seen[0]} at {seen[1]:.1f}, now {phase}")
            if seen is None and phase in TERMINAL:
                self.terminal[uid] = (phase, now)
                if phase == "Failed" and status.get("reason") in KILL_REASONS:
                    self.killed_failed.add(uid)
            for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
                key = (uid, str(cs.get("name")))
                count = int(cs.get("restartCount") or 0)
                if key in self.recounting:
                    # the count a status infers for a container gone from the runtime (the old one + 1) is no
                    # baseline: upstream's next instance counts from the newest log file left (N.log -> N), and
                    # the status shows that count once it shows that instance
                    started = self.recounting[key]
                    shown = {str(cs.get("containerID") or ""),
                             str(((cs.get("lastState") or {}).get("terminated") or {}).get("containerID") or "")}
                    if started is None or not any(started and c.endswith(started) for c in shown):
                        continue
                    del self.recounting[key]
                if count < self.restarts.get(key, 0):
                    raise Violation("restart-counts-monotonic",
                                    f"pod {uid} container {key[1]}: restartCount {self.restarts[key]} -> {count}")
                self.restarts[key] = count
        if active_admitted > self.max_pods:
            raise Violation("admitted-within-capacity", f"{active_admitted} pods admitted, max pods {self.max_pods}")
        mono = self.clock.monotonic()
        for d in list(self.deletions.values()):
            if mono <= d.deadline:
                continue
            running = [o.name for o in self.runtime.objects()
                       if o.pod.uid == d.uid and o.state is ContainerState.RUNNING]
            if d.uid in worker_uids or running:
                raise Violation("deleted-pod-finishes", f"pod {d.uid}: worker alive={d.uid in worker_uids}, "
                                                        f"running={running} at {mono:.1f} (deadline {d.deadline:.1f})")
            del self.deletions[d.uid]

    def check_clean(self, root: Path, worker_uids: set[str], statuses: int) -> None:
        left = [f"{'sandbox' if o.is_sandbox else 'container'} {o.name}" for o in self.runtime.objects()]
        if left:
            raise Violation("quiescence-clean", f"runtime objects left: {left[:5]}")
        for sub in ("pods", "logs", "containers"):
            d = root / sub
            if d.exists():
                found = [str(Path(dp, f).relative_to(root)) for dp, _dn, fs in os.walk(d) for f in fs]
                found += [str(Path(dp).relative_to(root)) for dp, dn, _fs in os.walk(d) if dp != str(d) and not dn]
                if found:
                    raise Violation("quiescence-clean", f"files left: {sorted(found)[:5]}")
        if worker_uids:
            raise Violation("quiescence-clean", f"pod workers left: {sorted(worker_uids)}")
        if statuses:
            raise Violation("quiescence-clean", f"{statuses} pod statuses left")
