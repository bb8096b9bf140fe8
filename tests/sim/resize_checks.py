"""The in-place resize invariants (`resize-actuated`, `resize-restart`): what the runtime runs each container with,
against the agent's allocation and its resize conditions, and how a resize reached the container (an
UpdateContainerResources call or a restart) against its resizePolicy. Written from upstream v1.36
(kuberuntime_manager.go computePodResizeAction, status_manager.go's resize conditions, kubelet_pods.go
convertContainerStatusResources), not from the agent's code: the runtime's values are converted back here."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cri.fake import _Object
from cri.types import ContainerState, LinuxResources
from minikubelet.base.quantity import parse_quantity
from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint
from minikubelet.status.resize_conditions import ResizeConditions
from tests.sim.invariants import SimRuntime, Violation

Json = dict[str, Any]
RESIZE_CONDITIONS = ("PodResizePending", "PodResizeInProgress")
RESIZE_BOUND = 360.0  # virtual seconds a resize may stay in progress: past the longest back-off (300 s) and hang
MIN_SHARES = 2  # the kernel's smallest cpu.shares: a request below 2m cannot be read back


def _milli(raw: Any) -> int:
    return math.ceil(parse_quantity(raw) * 1000)


def runtime_values(r: LinuxResources | None) -> dict[str, int]:
    """What the runtime runs a container with, as upstream reads it back (cm.QuotaToMilliCPU, SharesToMilliCPU):
    cpu limit and request in millicores, the memory limit in bytes; what is unset is left out."""
    r = r or LinuxResources()
    out: dict[str, int] = {}
    if r.cpu_quota > 0 and r.cpu_period > 0:
        out["limits.cpu"] = r.cpu_quota * 1000 // r.cpu_period
    if r.cpu_shares >= MIN_SHARES:
        out["requests.cpu"] = math.ceil(r.cpu_shares * 1000 / 1024)
    if r.memory_limit_bytes > 0:
        out["limits.memory"] = r.memory_limit_bytes
    return out


def wanted_values(requirements: Mapping[str, Mapping[str, Any]] | None) -> dict[str, int]:
    """The same values of an allocation (or a status's `resources`): only those the runtime holds (no memory
    request), cpu requests below the kernel's minimum left out."""
    req = (requirements or {}).get("requests") or {}
    lim = (requirements or {}).get("limits") or {}
    out: dict[str, int] = {}
    if "cpu" in lim:
        out["limits.cpu"] = _milli(lim["cpu"])
    if "cpu" in req and _milli(req["cpu"]) > MIN_SHARES:
        out["requests.cpu"] = _milli(req["cpu"])
    if "memory" in lim:
        out["limits.memory"] = math.ceil(parse_quantity(lim["memory"]))
    return out


def _differs(have: dict[str, int], want: dict[str, int]) -> list[str]:
    return sorted(k for k in want if have.get(k) != want[k])


def restart_resources(spec: Json | None) -> set[str]:
    """The resources whose resizePolicy says RestartContainer (the default is NotRequired)."""
    return {str(p.get("resourceName")) for p in (spec or {}).get("resizePolicy") or []
            if isinstance(p, dict) and p.get("restartPolicy") == "RestartContainer"}


@dataclass
class _Resized:
    instance: str  # the runtime id of the instance that ran when the allocation changed
    restart: bool  # a changed resource's policy is RestartContainer


@dataclass
class ResizeChecker:
    runtime: SimRuntime
    resized: dict[tuple[str, str], _Resized] = field(default_factory=dict)  # (uid, container) -> the last resize
    _allocated: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)  # as of the last step
    _running: dict[tuple[str, str], str] = field(default_factory=dict)  # the running instance, as of the last step
    _in_progress: dict[str, float] = field(default_factory=dict)  # uid -> since when it is PodResizeInProgress
    container_spec: Callable[[str, str], Json | None] = lambda _u, _n: None  # the pod's container, as desired

    def on_update(self, obj: _Object, before: LinuxResources | None) -> None:
        """An UpdateContainerResources the runtime accepted: never for a resource the container's resizePolicy
        says to restart for (upstream computePodResizeAction restarts the container instead)."""
        spec = self.container_spec(obj.pod.uid, obj.container.name)
        changed = {k.split(".")[1] for k in _differs(runtime_values(before), runtime_values(obj.resources))}
        if restart := changed & restart_resources(spec):
            raise Violation("resize-restart", f"pod {obj.pod.uid} container {obj.container.name}: {sorted(restart)} "
                                              f"changed by UpdateContainerResources, its resizePolicy says "
                                              f"RestartContainer")

    def in_progress_bound(self, conditions: ResizeConditions, uids: set[str], now: float) -> None:
        """`resize-completes`: a PodResizeInProgress condition of a pod that runs (`uids`) goes within
        RESIZE_BOUND of virtual time (every fault the workload injects is over by then)."""
        for uid in sorted(uids):
            if conditions.in_progress(uid) is None:
                self._in_progress.pop(uid, None)
                continue
            since = self._in_progress.setdefault(uid, now)
            if now - since > RESIZE_BOUND:
                raise Violation("resize-completes", f"pod {uid}: PodResizeInProgress since {since:.1f} (now "
                                                    f"{now:.1f}): {conditions.in_progress(uid)}")

    def agent_restarted(self) -> None:
        self._in_progress.clear()
        self._allocated.clear()
        self._running.clear()

    def check(self, allocated: PodResourceCheckpoint, conditions: ResizeConditions,
              statuses: Mapping[str, Json], terminating: set[str]) -> None:
        running: dict[tuple[str, str], _Object] = {
            (o.pod.uid, o.container.name): o for o in self.runtime.objects()
            if not o.is_sandbox and o.state is ContainerState.RUNNING}
        now_allocated: dict[tuple[str, str], dict[str, int]] = {}
        for uid in allocated.uids():
            info = allocated.peek(uid)
            for name, req in (info.containers.items() if info is not None else ()):
                now_allocated[(uid, name)] = wanted_values(req)
        for key, want in now_allocated.items():
            before = self._allocated.get(key)
            ran = self._running.get(key)  # as of the last step: the resize may have been carried out since
            if before is not None and before != want and ran is not None:
                changed = {k.split(".")[1] for k in _differs(before, want) + _differs(want, before)}
                self.resized[key] = _Resized(ran, bool(changed & restart_resources(self.container_spec(*key))))
        self._allocated = now_allocated
        self._running = {key: obj.id for key, obj in running.items()}
        for key, obj in running.items():
            uid, name = key
            allocation = now_allocated.get(key)
            if allocation is None or uid not in statuses or uid in terminating or conditions.conditions(uid):
                continue
            have, want = runtime_values(obj.resources), allocation
            # the resize is done, as the agent says: the runtime holds the allocation
            if wrong := _differs(have, want):
                raise Violation("resize-actuated", f"pod {uid} container {name} ({obj.id}): no resize pending or in "
                                                   f"progress, the runtime runs {have}, allocated {want} ({wrong})")
            last = self.resized.pop(key, None)
            if last is not None and last.restart and last.instance == obj.id:
                raise Violation("resize-restart", f"pod {uid} container {name}: resized with RestartContainer, the "
                                                  f"instance {obj.id} that ran before still runs")
            status = statuses.get(uid) or {}
            if any(c.get("type") in RESIZE_CONDITIONS for c in status.get("conditions") or []):
                continue
            for cs in status.get("containerStatuses") or []:
                if cs.get("name") != name or not str(cs.get("containerID", "")).endswith(obj.id) \
                        or "running" not in (cs.get("state") or {}) or cs.get("resources") is None:
                    continue
                shown = wanted_values(cs["resources"])
                if wrong := _differs(have, {k: v for k, v in shown.items() if k in want}):
                    raise Violation("resize-actuated", f"pod {uid} container {name} ({obj.id}): the status reports "
                                                       f"{shown}, the runtime runs {have} ({wrong})")
