"""Pod shapes beyond a container's program: exec probes (liveness, readiness, startup), lifecycle hooks (postStart,
preStop; one that fails, one that hangs past any grace), sidecars (restartable init containers), resources
(requests and limits, admitted against the node's allocatable), emptyDir volumes (on disk or tmpfs), priority,
and the source (a static file, or the API: the only pods the eviction manager may evict).

A probe's or hook's command says what it does (`sim-probe KIND BEHAVIOUR`, `sim-hook BEHAVIOUR`); `ExecScript`
answers it in the FakeRuntime, and a container can be made unhealthy by its runtime id (an `unhealthy` event):
its liveness probe fails until it is replaced by a new instance."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from cri.types import ExecResult
from minikubelet.base.clock import FakeClock

SIDECAR = "side"  # a sidecar's name starts with this (its program is `run`)
PROBE_PERIOD = 5
HOOK_HANG = 120.0  # virtual seconds a hanging hook runs: past every grace the workload draws
# the node's allocatable as the predicate admission sees it (pods: the harness's max pods)
ALLOCATABLE_CPU = Fraction(2)
ALLOCATABLE_MEMORY = Fraction(2 * 1024**3)
CPU_REQUESTS = ("", "", "100m", "500m", "1")
MEMORY_REQUESTS = ("", "", "64Mi", "256Mi", "1Gi")
PRIORITIES = (None, None, 0, 1000)
SOURCES = ("file", "file", "api")


@dataclass
class ExecScript:
    """The answers of every exec the agent runs in a sim container: probes and hooks by their command."""

    clock: FakeClock
    unhealthy: set[str] = field(default_factory=set)  # container ids whose liveness probe fails
    liveness_failing: dict[str, bool] = field(default_factory=dict)  # container id -> failing when last asked

    async def __call__(self, container_id: str, cmd: list[str]) -> ExecResult:
        if cmd[:1] == ["sim-hook"]:
            behaviour = cmd[1]
            if behaviour == "hang":
                await self.clock.sleep(HOOK_HANG)
            return ExecResult(exit_code=1 if behaviour == "fail" else 0, stderr=b"hook failed" if behaviour == "fail" else b"")
        if cmd[:1] == ["sim-probe"]:
            kind, behaviour = cmd[1], cmd[2]
            fails = behaviour == "fail" or (kind == "liveness" and container_id in self.unhealthy)
            if kind == "liveness":
                self.liveness_failing[container_id] = fails
            return ExecResult(exit_code=1 if fails else 0)
        return ExecResult(exit_code=0)


def _probe(kind: str, behaviour: str, rng: random.Random) -> dict[str, Any]:
    return {"exec": {"command": ["sim-probe", kind, behaviour]}, "periodSeconds": PROBE_PERIOD,
            "failureThreshold": rng.choice((1, 3)), "initialDelaySeconds": rng.choice((0, 0, 5))}


def _hook(behaviour: str) -> dict[str, Any]:
    return {"exec": {"command": ["sim-hook", behaviour]}}


def decorate(spec: dict[str, Any], rng: random.Random) -> str:
    """Give the drawn containers probes, hooks and resources, maybe sidecars and volumes; the pod's source."""
    for c in spec["containers"]:
        if rng.random() < 0.35:
            c["livenessProbe"] = _probe("liveness", rng.choice(("ok", "ok", "ok", "fail")), rng)
        if rng.random() < 0.3:
            c["readinessProbe"] = _probe("readiness", rng.choice(("ok", "fail")), rng)
        if rng.random() < 0.15:
            c["startupProbe"] = _probe("startup", rng.choice(("ok", "ok", "fail")), rng)
        lifecycle: dict[str, Any] = {}
        if rng.random() < 0.2:
            lifecycle["postStart"] = _hook(rng.choice(("ok", "ok", "fail", "hang")))
        if rng.random() < 0.25:
            lifecycle["preStop"] = _hook(rng.choice(("ok", "fail", "hang")))
        if lifecycle:
            c["lifecycle"] = lifecycle
        requests = {k: v for k, v in (("cpu", rng.choice(CPU_REQUESTS)), ("memory", rng.choice(MEMORY_REQUESTS))) if v}
        if requests:
            c["resources"] = {"requests": requests, **({"limits": dict(requests)} if rng.random() < 0.5 else {})}
    if rng.random() < 0.25:
        inits = spec.setdefault("initContainers", [])
        for i in range(rng.randint(1, 2)):
            side: dict[str, Any] = {"name": f"{SIDECAR}-{i}", "image": spec["containers"][0]["image"],
                                    "restartPolicy": "Always"}
            if rng.random() < 0.3:
                side["startupProbe"] = _probe("startup", "ok", rng)
            if rng.random() < 0.3:
                side["lifecycle"] = {"preStop": _hook(rng.choice(("ok", "hang")))}
            inits.append(side)
    if rng.random() < 0.3:
        memory = rng.random() < 0.5
        empty: dict[str, Any] = {"medium": "Memory", "sizeLimit": "16Mi"} if memory else {}
        spec["volumes"] = [{"name": "scratch", "emptyDir": empty}]
        for c in spec["containers"]:
            c["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    priority = rng.choice(PRIORITIES)
    if priority is not None:
        spec["priority"] = priority
    return rng.choice(SOURCES)


def is_sidecar(name: str) -> bool:
    return name.startswith(SIDECAR + "-")


def _quantity(q: str) -> Fraction:
    from minikubelet.base.quantity import parse_quantity

    return Fraction(parse_quantity(q))


def pod_requests(pod: dict[str, Any]) -> tuple[Fraction, Fraction]:
    """(cpu, memory) the pod requests: only regular containers carry resources in the sim, so their sum."""
    cpu = mem = Fraction(0)
    for c in (pod.get("spec") or {}).get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += _quantity(req["cpu"]) if "cpu" in req else 0
        mem += _quantity(req["memory"]) if "memory" in req else 0
    return cpu, mem
