"""Pure computation of a pod's v1 status from the spec, the runtime and the probe results.

Follows upstream kubelet_pods.go (getPhase, convertToAPIContainerStatuses) and
status/generate.go (conditions). Inputs are plain data; output is the status dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cri.types import ContainerState, ContainerStatus
from minikubelet.base import podview
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Container, Pod
from minikubelet.runtime.state import PodRuntimeState, restart_count_of

CONTAINER_RUNTIME_PREFIX = "docker://"
OWNED_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class StatusInputs:
    pod: Pod
    state: PodRuntimeState
    now: float
    host_ip: str = ""
    qos_class: str = ""
    # container name -> (waiting reason, message) from the last failed start (upstream reasonCache)
    reasons: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # container id -> latest probe results
    startup: Mapping[str, str] = field(default_factory=dict)
    readiness: Mapping[str, str] = field(default_factory=dict)
    # container id -> terminated.message (termination-log file or log tail)
    termination_messages: Mapping[str, str] = field(default_factory=dict)
    old: Mapping[str, Any] | None = None  # the status computed last time
    pod_is_terminal: bool = False  # deleted / evicted / past its deadline
    # (phase, reason, message) forced by the agent itself, e.g. DeadlineExceeded
    override: tuple[str, str, str] | None = None


def _ts(t: float) -> str | None:
    return rfc3339(t) if t > 0 else None


def _terminated(c: ContainerStatus, message: str) -> dict[str, Any]:
    t: dict[str, Any] = {"exitCode": c.exit_code}
    if c.reason:
        t["reason"] = c.reason
    if message:
        t["message"] = message
    t["startedAt"] = _ts(c.started_at)
    t["finishedAt"] = _ts(c.finished_at)
    t["containerID"] = CONTAINER_RUNTIME_PREFIX + c.id
    return t


def _state(c: ContainerStatus, message: str) -> dict[str, Any]:
    if c.state is ContainerState.RUNNING:
        return {"running": {"startedAt": _ts(c.started_at)}}
    if c.state is ContainerState.EXITED:
        return {"terminated": _terminated(c, message)}
    return {"waiting": {}}


def _volume_mounts(c: Container) -> list[dict[str, Any]]:
    out = []
    for m in c.get("volumeMounts") or []:
        if not isinstance(m, dict):
            continue
        vm: dict[str, Any] = {"name": m.get("name"), "mountPath": m.get("mountPath")}
        if m.get("readOnly"):
            vm["readOnly"] = True
            vm["recursiveReadOnly"] = "Disabled"
        out.append(vm)
    return out


def _container_status(
    inp: StatusInputs, c: Container, kind: str, default_reason: str, old: Mapping[str, Any] | None
) -> dict[str, Any]:
    cname = str(c.get("name"))
    latest = inp.state.latest(cname)
    prev = inp.state.previous(cname)
    cs: dict[str, Any] = {"name": cname, "state": {}, "lastState": {}, "ready": False, "restartCount": 0}
    cs["image"] = c.get("image", "")
    cs["imageID"] = ""
    if latest is not None:
        cs["state"] = _state(latest, inp.termination_messages.get(latest.id, latest.message))
        cs["restartCount"] = restart_count_of(latest)
        cs["imageID"] = latest.image_ref
        cs["containerID"] = CONTAINER_RUNTIME_PREFIX + latest.id
        if prev is not None and prev.state is ContainerState.EXITED:
            cs["lastState"] = {"terminated": _terminated(prev, inp.termination_messages.get(prev.id, prev.message))}
        elif old and old.get("lastState") and old.get("restartCount") == cs["restartCount"]:
            cs["lastState"] = old["lastState"]
    else:
        cs["state"] = {"waiting": {"reason": default_reason}}
        if old:
            # The runtime forgot the container (removed); the last report stays the truth.
            cs["restartCount"] = old.get("restartCount", 0)
            if old.get("lastState"):
                cs["lastState"] = old["lastState"]
    cached = inp.reasons.get(cname)
    if cached is not None and not (latest is not None and latest.state is ContainerState.RUNNING):
        if "terminated" in cs["state"]:
            cs["lastState"] = cs["state"]
        waiting: dict[str, Any] = {"reason": cached[0]}
        if cached[1]:
            waiting["message"] = cached[1]
        cs["state"] = {"waiting": waiting}

    running = latest is not None and latest.state is ContainerState.RUNNING
    if kind == "init":
        started = running
        ready = "terminated" in cs["state"] and cs["state"]["terminated"]["exitCode"] == 0
    else:
        started = running and (
            podview.probe(c, "startup") is None or (latest is not None and inp.startup.get(latest.id) == "success")
        )
        if not started or latest is None:
            ready = False
        elif podview.probe(c, "readiness") is not None:
            ready = inp.readiness.get(latest.id) == "success"
        else:
            ready = True
    cs["ready"] = ready
    cs["started"] = started
    res = c.get("resources")
    if isinstance(res, dict):
        if isinstance(res.get("requests"), dict) and res["requests"]:
            cs["allocatedResources"] = dict(res["requests"])
        cs["resources"] = {k: dict(v) for k, v in res.items() if k in ("limits", "requests") and isinstance(v, dict)}
    mounts = _volume_mounts(c)
    if mounts:
        cs["volumeMounts"] = mounts
    return cs


def _old_by_name(old: Mapping[str, Any] | None, key: str) -> dict[str, Mapping[str, Any]]:
    if not old or not isinstance(old.get(key), list):
        return {}
    return {str(s.get("name")): s for s in old[key] if isinstance(s, dict)}


def container_statuses(inp: StatusInputs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pod = inp.pod
    has_inits = bool(podview.init_containers(pod))
    default_reason = "PodInitializing" if has_inits else "ContainerCreating"
    old_init = _old_by_name(inp.old, "initContainerStatuses")
    old_app = _old_by_name(inp.old, "containerStatuses")
    inits = [
        _container_status(inp, c, "sidecar" if podview.is_sidecar(c) else "init", default_reason, old_init.get(str(c.get("name"))))
        for c in podview.init_containers(pod)
    ]
    apps = [
        _container_status(inp, c, "regular", default_reason, old_app.get(str(c.get("name"))))
        for c in podview.app_containers(pod)
    ]
    return inits, apps


def any_regular_started(apps: list[dict[str, Any]]) -> bool:
    return any("running" in s["state"] or "terminated" in s["state"] for s in apps)


def get_phase(pod: Pod, inits: list[dict[str, Any]], apps: list[dict[str, Any]], pod_is_terminal: bool) -> str:
    """Upstream getPhase (sidecar-aware)."""
    by_name = {s["name"]: s for s in inits}
    pending_init = failed_init = 0
    unknown = running = waiting = stopped = succeeded = 0
    for c in podview.init_containers(pod):
        s = by_name.get(str(c.get("name")))
        if podview.is_sidecar(c):
            if s is None:
                unknown += 1
            elif "running" in s["state"]:
                if not s.get("started"):
                    pending_init += 1
                running += 1
            elif "terminated" in s["state"]:
                pass
            elif "waiting" in s["state"]:
                if not s["lastState"].get("terminated"):
                    pending_init += 1
                    waiting += 1
            else:
                pending_init += 1
                unknown += 1
            continue
        if s is None or "running" in s["state"]:
            pending_init += 1
        elif "terminated" in s["state"]:
            if s["state"]["terminated"]["exitCode"] != 0:
                failed_init += 1
        elif "waiting" in s["state"]:
            last = s["lastState"].get("terminated")
            if last:
                if last["exitCode"] != 0:
                    failed_init += 1
            else:
                pending_init += 1
        else:
            pending_init += 1

    for s in apps:
        st = s["state"]
        if "running" in st:
            running += 1
        elif "terminated" in st:
            stopped += 1
            if st["terminated"]["exitCode"] == 0:
                succeeded += 1
        elif "waiting" in st:
            if s["lastState"].get("terminated"):
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1

    policy = podview.restart_policy(pod)
    if failed_init > 0 and policy == "Never":
        return "Failed"
    if (pending_init > 0 and not any_regular_started(apps)) or waiting > 0:
        return "Pending"
    if running > 0 and unknown == 0:
        return "Running"
    if running == 0 and stopped > 0 and unknown == 0:
        if pod_is_terminal and not podview.is_static(pod):
            return "Succeeded" if stopped == succeeded else "Failed"
        if policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


Cond = tuple[bool, str, str]  # status, reason, message


def _ready_lists(pod: Pod, inits: list[dict[str, Any]], apps: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    by_name = {s["name"]: s for s in inits + apps}
    names = [str(c.get("name")) for c in podview.sidecars(pod)] + [str(c.get("name")) for c in podview.app_containers(pod)]
    unknown = [n for n in names if n not in by_name]
    unready = [n for n in names if n in by_name and not by_name[n]["ready"]]
    return unknown, unready


def containers_ready(pod: Pod, inits: list[dict[str, Any]], apps: list[dict[str, Any]], phase: str) -> Cond:
    unknown, unready = _ready_lists(pod, inits, apps)
    if phase == "Succeeded" and not unknown:
        return False, "PodCompleted", ""
    if phase == "Failed":
        return False, "PodFailed", ""
    return _listed("ContainersNotReady", unknown, "unready", unready)


def _listed(reason: str, unknown: list[str], label: str, names: list[str]) -> Cond:
    """False with the kubelet's "containers with … status: [a b]" message when any name is listed."""
    msgs = []
    if unknown:
        msgs.append(f"containers with unknown status: [{' '.join(unknown)}]")
    if names:
        msgs.append(f"containers with {label} status: [{' '.join(names)}]")
    if msgs:
        return False, reason, ", ".join(msgs)
    return True, "", ""


def pod_ready(pod: Pod, cr: Cond, conditions: list[dict[str, Any]]) -> Cond:
    if not cr[0]:
        return cr
    msgs = []
    for gate in podview.spec(pod).get("readinessGates") or []:
        if not isinstance(gate, dict):
            continue
        t = gate.get("conditionType")
        c = next((c for c in conditions if c.get("type") == t), None)
        if c is None:
            msgs.append(f'corresponding condition of pod readiness gate "{t}" does not exist.')
        elif c.get("status") != "True":
            msgs.append(f'the status of pod readiness gate "{t}" is not "True", but {c.get("status")}')
    if msgs:
        return False, "ReadinessGatesNotReady", ", ".join(msgs)
    return True, "", ""


def initialized(pod: Pod, inits: list[dict[str, Any]], apps: list[dict[str, Any]], phase: str) -> Cond:
    if not podview.init_containers(pod) or any_regular_started(apps):
        return True, "", ""
    by_name = {s["name"]: s for s in inits}
    unknown, incomplete = [], []
    for c in podview.init_containers(pod):
        n = str(c.get("name"))
        s = by_name.get(n)
        if s is None:
            unknown.append(n)
        elif podview.is_sidecar(c):
            if not s.get("started"):
                incomplete.append(n)
        elif "terminated" not in s["state"] or s["state"]["terminated"]["exitCode"] != 0:
            incomplete.append(n)
    if phase == "Succeeded" and not unknown:
        return False, "PodCompleted", ""
    return _listed("ContainersNotInitialized", unknown, "incomplete", incomplete)


def _condition(ctype: str, c: Cond, old: Mapping[str, Mapping[str, Any]], now: float, gen: Any) -> dict[str, Any]:
    status = "True" if c[0] else "False"
    prev = old.get(ctype)
    since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else None
    out: dict[str, Any] = {"type": ctype}
    if gen is not None:
        out["observedGeneration"] = gen
    out.update({"status": status, "lastProbeTime": None, "lastTransitionTime": since or rfc3339(now)})
    if c[1]:
        out["reason"] = c[1]
    if c[2]:
        out["message"] = c[2]
    return out


def compute_status(inp: StatusInputs) -> dict[str, Any]:
    pod = inp.pod
    old = inp.old or {}
    api_status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    inits, apps = container_statuses(inp)
    phase = get_phase(pod, inits, apps, inp.pod_is_terminal)
    reason = message = ""
    old_phase = old.get("phase") or (api_status or {}).get("phase")
    if inp.override is not None:
        phase, reason, message = inp.override
    elif old_phase in TERMINAL_PHASES and phase not in TERMINAL_PHASES:
        phase = str(old_phase)  # a terminal phase never goes back
        reason, message = str(old.get("reason", "")), str(old.get("message", ""))

    gen = podview.meta(pod).get("generation")
    old_conds = {str(c.get("type")): c for c in old.get("conditions") or [] if isinstance(c, dict)}
    foreign = [
        c
        for c in (api_status or {}).get("conditions") or []
        if isinstance(c, dict) and c.get("type") not in OWNED_CONDITIONS
    ]
    sandbox_needed, _ = inp.state.sandbox_changed(podview.host_network(pod))
    cr = containers_ready(pod, inits, apps, phase)
    conditions = [
        _condition("PodReadyToStartContainers", (not sandbox_needed, "", ""), old_conds, inp.now, gen),
        _condition("Initialized", initialized(pod, inits, apps, phase), old_conds, inp.now, gen),
        _condition("Ready", pod_ready(pod, cr, foreign), old_conds, inp.now, gen),
        _condition("ContainersReady", cr, old_conds, inp.now, gen),
        _condition("PodScheduled", (True, "", ""), old_conds, inp.now, gen),
        *foreign,
    ]
    status: dict[str, Any] = {}
    if gen is not None:
        status["observedGeneration"] = gen
    status["phase"] = phase
    status["conditions"] = conditions
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    if inp.host_ip:
        status["hostIP"] = inp.host_ip
        status["hostIPs"] = [{"ip": inp.host_ip}]
    pod_ip = _pod_ip(inp)
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    elif old.get("podIP"):
        status["podIP"], status["podIPs"] = old["podIP"], old.get("podIPs", [{"ip": old["podIP"]}])
    status["startTime"] = old.get("startTime") or rfc3339(inp.now)
    if inits:
        status["initContainerStatuses"] = inits
    status["containerStatuses"] = apps
    if inp.qos_class:
        status["qosClass"] = inp.qos_class
    return status


def _pod_ip(inp: StatusInputs) -> str:
    if podview.host_network(inp.pod):
        return inp.host_ip
    sb = inp.state.sandbox
    return sb.ip if sb is not None else ""
