"""The invariants of the pod shapes and node pressure (tests/sim/shapes.py, tests/sim/pressure.py): probes,
sidecars, resources and evictions. Named and stated in tests/sim/invariants.py INVARIANTS and docs/testing.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from cri.fake import _Object
from cri.types import ContainerState
from minikubelet.base.clock import FakeClock
from minikubelet.base.podview import Pod
from minikubelet.nodeshutdown.groups import SHUTDOWN_REASON
from minikubelet.worker.containers import MIN_GRACE
from tests.sim.invariants import Checker, SimRuntime, Violation
from tests.sim.shapes import ALLOCATABLE_CPU, ALLOCATABLE_MEMORY, ExecScript, is_sidecar, pod_requests

PROBE_RESTART_BOUND = 600.0  # virtual seconds: back-off's 300 s cap, the probe period, injected faults
REASONS = {"evicted": "Evicted", "preempted": "Preempting"}
EVICTED_BOUND = 180.0  # virtual seconds after its grace by which an evicted pod's phase is Failed


@dataclass
class _Kill:
    attempt: int
    deadline: float


@dataclass
class ShapeChecker:
    runtime: SimRuntime
    clock: FakeClock
    checker: Checker
    script: ExecScript
    pods: dict[str, Pod] = field(default_factory=dict)  # uid -> every pod ever created
    stop_asked: set[str] = field(default_factory=set)  # container ids the agent asked to stop
    probe_kills: dict[tuple[str, str], _Kill] = field(default_factory=dict)
    evicted: dict[str, tuple[str, float]] = field(default_factory=dict)  # uid -> (how, deadline for Failed)
    sandbox_starts: set[str] = field(default_factory=set)  # sandbox ids in which a regular container started
    shutdown_killed: set[str] = field(default_factory=set)  # uids a node shutdown asked to stop (ShutdownOrder's)
    own_end_allowed: set[str] = field(default_factory=set)  # victims already terminating for their own reason

    def __post_init__(self) -> None:
        self.runtime.on_stop = self.on_stop

    # -- at the instant ---------------------------------------------------------------------------------
    def on_start(self, obj: _Object) -> None:
        try:
            self._on_start(obj)
        except Violation as v:
            self.checker.pending = self.checker.pending or v

    def _on_start(self, obj: _Object) -> None:
        if obj.is_sandbox:
            return
        uid, name = obj.pod.uid, obj.container.name
        if uid in self.evicted:
            how, _ = self.evicted[uid]
            raise Violation("eviction-terminal", f"pod {uid} was {how}, container {name} starts")
        kill = self.probe_kills.pop((uid, name), None)
        if kill is not None and obj.container.attempt <= kill.attempt:
            raise Violation("probe-kill-restarts", f"pod {uid} container {name}: killed by its liveness probe at "
                                                   f"attempt {kill.attempt}, restarted as attempt {obj.container.attempt}")
        pod = self.pods.get(uid)
        if pod is None or is_sidecar(name) or name.startswith("init-"):
            return
        if obj.sandbox_id in self.sandbox_starts:
            return
        self.sandbox_starts.add(obj.sandbox_id)
        started = {o.container.name for o in self.runtime.objects()
                   if not o.is_sandbox and o.sandbox_id == obj.sandbox_id and o.started_at}
        missing = [c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []
                   if is_sidecar(c["name"]) and c["name"] not in started]
        if missing:
            raise Violation("sidecar-order", f"pod {uid}: {name} starts before its sidecars {missing}")

    def on_stop(self, obj: _Object, timeout: float) -> None:
        try:
            self._on_stop(obj, timeout)
        except Violation as v:
            self.checker.pending = self.checker.pending or v

    def _on_stop(self, obj: _Object, timeout: float) -> None:
        if obj.is_sandbox or obj.state is not ContainerState.RUNNING:
            return
        self.stop_asked.add(obj.id)
        uid, name = obj.pod.uid, obj.container.name
        self.checker.stopped(uid, name)
        pod = self.pods.get(uid) or {}
        if is_sidecar(name) and timeout > MIN_GRACE:
            regular = [o.name for o in self.runtime.objects()
                       if not o.is_sandbox and o.pod.uid == uid and o.state is ContainerState.RUNNING
                       and not is_sidecar(o.container.name) and o.id not in self.stop_asked]
            if regular:
                raise Violation("sidecar-order", f"pod {uid}: sidecar {name} stopped ({timeout:.0f} s) while "
                                                 f"{regular} run and were not asked to stop")
        if (self.script.liveness_failing.get(obj.id) and not is_sidecar(name) and uid not in self.checker.deletions
                and uid not in self.evicted and uid not in self.checker.terminal
                and (pod.get("spec") or {}).get("restartPolicy") != "Never"):
            self.probe_kills[(uid, name)] = _Kill(obj.container.attempt, self.clock.monotonic() + PROBE_RESTART_BOUND)

    def evict(self, pod: Pod, how: str) -> None:
        uid = str(pod["metadata"]["uid"])
        grace = float((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 0)
        if uid in self.evicted:  # a pod preempted and then evicted while it stops: either reason may be final
            hows, deadline = self.evicted[uid]
            self.evicted[uid] = (f"{hows}+{how}" if how not in hows.split("+") else hows, deadline)
        else:
            self.evicted[uid] = (how, self.clock.monotonic() + grace + EVICTED_BOUND)
        for key in [k for k in self.probe_kills if k[0] == uid]:
            del self.probe_kills[key]

    def agent_restarted(self, still_terminal: set[str]) -> None:
        """Probe kills and back-off start over; an evicted pod stays so only if its source shows it terminal
        (an API pod whose Failed status the API has): a static pod is admitted afresh, as upstream's."""
        self.probe_kills.clear()
        self.evicted = {u: e for u, e in self.evicted.items() if u in still_terminal}

    # -- after every step ---------------------------------------------------------------------------------
    def check(self, statuses: dict[str, dict[str, Any]], admitted: list[Pod]) -> None:
        mono = self.clock.monotonic()
        cpu = mem = Fraction(0)
        for p in admitted:
            c, m = pod_requests(p)
            cpu, mem = cpu + c, mem + m
        if cpu > ALLOCATABLE_CPU or mem > ALLOCATABLE_MEMORY:
            raise Violation("admitted-within-allocatable", f"{len(admitted)} pods admitted request cpu {float(cpu)}, "
                                                           f"memory {int(mem)}: over the allocatable")
        for key, kill in list(self.probe_kills.items()):
            uid = key[0]
            if uid in self.checker.deletions or uid in self.evicted or uid in self.checker.terminal:
                del self.probe_kills[key]
            elif mono > kill.deadline:
                raise Violation("probe-kill-restarts", f"pod {uid} container {key[1]}: killed by its liveness "
                                                       f"probe, not running again after {PROBE_RESTART_BOUND:.0f} s")
        for uid, (how, deadline) in self.evicted.items():
            status = statuses.get(uid)
            if status is None or uid in self.checker.deletions:
                continue
            phase, reason = status.get("phase"), status.get("reason")
            # as upstream's SyncTerminatingPod, the final status comes from what the runtime reports after the
            # kill: Succeeded when every container exited 0 (without the kill's reason), else Failed with it
            # a pod whose active deadline passed while it was killed may end with the deadline's reason: the last
            # status function asked before a terminating sync wins, as for two kills (api-update's deadline), and
            # so may a pod a node shutdown stopped while it was evicted or preempted (seed 21, with the runtime
            # restarts: the shutdown manager's killPodFunc hands the terminating worker its status function)
            allowed: set[object] = {REASONS[h] for h in how.split("+")} | ({"DeadlineExceeded"} if uid in self.checker.deadlines
                                                              else set())
            if uid in self.shutdown_killed:
                allowed.add(SHUTDOWN_REASON)
            if uid in self.own_end_allowed:
                allowed.add(status.get("reason"))
            if phase == "Failed" and reason not in allowed:
                raise Violation("eviction-terminal", f"pod {uid} was {how}, it ends {phase}/{reason}")
            if mono > deadline and phase not in ("Failed", "Succeeded"):
                raise Violation("eviction-terminal", f"pod {uid} was {how}, its phase is still {phase} "
                                                     f"at {mono:.1f} (deadline {deadline:.1f})")
