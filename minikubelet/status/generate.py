"""Pure computation of a pod's v1 status from the spec, the runtime and the probe results.

Follows upstream kubelet_pods.go (getPhase, convertToAPIContainerStatuses) and
status/generate.go (conditions). Inputs are plain data; container statuses and conditions are
typed values until `compute_status` renders the status dict, once, at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cri.types import ContainerState, ContainerStatus, LinuxResources
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import ContainerKind, ContainerView, PodView, VolumeMount
from minikubelet.runtime.state import PodRuntimeState, name_of, restart_count_of
from minikubelet.status.container_resources import status_resources
from minikubelet.status.pod_resources import pod_resources_status
from probes.result import ProbeResults, Result

OWNED_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
RESIZE_CONDITIONS = ("PodResizePending", "PodResizeInProgress")
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class StatusInputs:
    pod: PodView
    state: PodRuntimeState
    now: float
    host_ip: str = ""
    qos_class: str = ""
    # container name -> (waiting reason, message) from the last failed start (upstream reasonCache)
    reasons: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    probes: ProbeResults = field(default_factory=ProbeResults)
    # container id -> terminated.message (termination-log file or log tail)
    termination_messages: Mapping[str, str] = field(default_factory=dict)
    old: Mapping[str, Any] | None = None  # the status computed last time
    pod_is_terminal: bool = False  # deleted / evicted / past its deadline
    # (phase, reason, message) forced by the agent itself, e.g. DeadlineExceeded
    override: tuple[str, str, str] | None = None
    container_id_scheme: str = "docker://"  # the runtime's, from RuntimeVersion
    # in-place resize: the pod's PodResizePending / PodResizeInProgress conditions, and what each container was
    # last given (container name -> {"requests", "limits"}; the memory request no runtime reports)
    resize_conditions: Sequence[Mapping[str, Any]] = ()
    actuated: Mapping[str, Mapping[str, Mapping[str, str]]] = field(default_factory=dict)


# ---- typed container statuses ------------------------------------------------------------


@dataclass(frozen=True)
class Waiting:
    reason: str = ""
    message: str = ""

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return {"waiting": out}


@dataclass(frozen=True)
class Running:
    started_at: str | None

    def render(self) -> dict[str, Any]:
        return {"running": {"startedAt": self.started_at}}


@dataclass(frozen=True)
class Terminated:
    exit_code: int
    reason: str
    message: str
    started_at: str | None
    finished_at: str | None
    container_id: str  # with the runtime prefix

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Terminated:
        """Back from the JSON this module rendered earlier (a previous status)."""
        return cls(
            exit_code=int(raw.get("exitCode", 0)),
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
            started_at=raw.get("startedAt"),
            finished_at=raw.get("finishedAt"),
            container_id=str(raw.get("containerID") or ""),
        )

    def render(self) -> dict[str, Any]:
        t: dict[str, Any] = {"exitCode": self.exit_code}
        if self.reason:
            t["reason"] = self.reason
        if self.message:
            t["message"] = self.message
        t["startedAt"] = self.started_at
        t["finishedAt"] = self.finished_at
        if self.container_id:
            t["containerID"] = self.container_id
        return {"terminated": t}


State = Waiting | Running | Terminated


def _render_state(s: State | None) -> dict[str, Any]:
    return s.render() if s is not None else {}


def _parse_last_state(raw: Mapping[str, Any]) -> Terminated | None:
    # A last state is always a termination (or empty) in what this module renders.
    terminated = raw.get("terminated")
    return Terminated.parse(terminated) if terminated else None


@dataclass(frozen=True)
class ContainerStatusValue:
    name: str
    kind: ContainerKind
    state: State
    last_state: Terminated | None
    ready: bool
    started: bool
    restart_count: int
    image: str
    image_id: str
    container_id: str  # "" before the runtime knows the container
    spec: ContainerView
    known: bool = True  # the runtime has (or had) this container: only then are its resources reported
    running: bool = False
    runtime_resources: LinuxResources | None = None  # what the runtime says the container runs with
    actuated: Mapping[str, Mapping[str, str]] | None = None  # what the agent last gave it
    old_resources: Mapping[str, Any] | None = None  # the last status's, when it showed this container running

    def render(self) -> dict[str, Any]:
        cs: dict[str, Any] = {
            "name": self.name,
            "state": self.state.render(),
            "lastState": _render_state(self.last_state),
            "ready": self.ready,
            "restartCount": self.restart_count,
            "image": self.image,
            "imageID": self.image_id,
        }
        if self.container_id:
            cs["containerID"] = self.container_id
        if self.kind != "ephemeral":
            # upstream's prober sets `started` on init and regular container statuses only
            cs["started"] = self.started
        c = self.spec
        if self.known:
            # upstream convertToAPIContainerStatuses: only for containers the runtime reported
            if c.requests:
                cs["allocatedResources"] = dict(c.requests)
            cs["resources"] = status_resources(c.requests, c.limits, self.running, self.runtime_resources,
                                               self.actuated, self.old_resources)
        mounts = [_render_mount(m) for m in c.volume_mounts]
        if mounts:
            cs["volumeMounts"] = mounts
        return cs


def _render_mount(m: VolumeMount) -> dict[str, Any]:
    vm: dict[str, Any] = {"name": m.name, "mountPath": m.mount_path}
    if m.read_only:
        vm["readOnly"] = True
        vm["recursiveReadOnly"] = "Disabled"
    return vm


def _ts(t: float) -> str | None:
    return rfc3339(t) if t > 0 else None


def _terminated(c: ContainerStatus, message: str, scheme: str) -> Terminated:
    return Terminated(
        exit_code=c.exit_code,
        reason=c.reason,
        message=message,
        started_at=_ts(c.started_at),
        finished_at=_ts(c.finished_at),
        container_id=scheme + c.id,
    )


def _state(c: ContainerStatus, message: str, scheme: str) -> State:
    if c.state is ContainerState.RUNNING:
        return Running(_ts(c.started_at))
    if c.state is ContainerState.EXITED:
        return _terminated(c, message, scheme)
    return Waiting()


UNKNOWN_REASON = "ContainerStatusUnknown"
VANISHED_MESSAGE = "The container could not be located when the pod was deleted.  The container used to be Running"
INIT_INFERRED_MESSAGE = ("Unable to get init container status from container runtime and pod has been initialized, "
                         "treat it as exited normally")


def _container_status(
    inp: StatusInputs, c: ContainerView, default_reason: str, old: Mapping[str, Any] | None
) -> ContainerStatusValue:
    latest = inp.state.latest(c.name)
    prev = inp.state.previous(c.name)
    messages = inp.termination_messages
    state: State
    last: Terminated | None = None
    restart_count = 0
    image = c.image
    image_id = container_id = ""
    known = latest is not None
    if latest is not None:
        state = _state(latest, messages.get(latest.id, latest.message), inp.container_id_scheme)
        restart_count = restart_count_of(latest)
        image = latest.image or c.image  # the runtime's reference, as upstream reports it
        image_id = latest.image_ref
        container_id = inp.container_id_scheme + latest.id
        if prev is not None and prev.state is ContainerState.EXITED:
            last = _terminated(prev, messages.get(prev.id, prev.message), inp.container_id_scheme)
        elif old and old.get("lastState") and old.get("restartCount") == restart_count:
            last = _parse_last_state(old["lastState"])
    elif old and (old.get("state") or {}).get("terminated"):
        # The runtime removed a container that had terminated: its last report stays the truth (upstream).
        state = Terminated.parse(old["state"]["terminated"])
        restart_count = int(old.get("restartCount", 0))
        image, image_id = str(old.get("image") or c.image), str(old.get("imageID") or "")
        container_id = str(old.get("containerID") or "")
        last = _parse_last_state(old["lastState"]) if old.get("lastState") else None
        known = True
    else:
        state = Waiting(default_reason)
        if old:
            restart_count = int(old.get("restartCount", 0))
            if old.get("lastState"):
                last = _parse_last_state(old["lastState"])
            elif "running" in (old.get("state") or {}):
                # It ran and vanished (removed behind our back, or a reboot): not "never ran".
                last = Terminated(137, UNKNOWN_REASON, VANISHED_MESSAGE, None, None, "")
                if inp.pod.deletion_timestamp is None:
                    restart_count += 1
        if (c.kind == "init" and _any_regular_created(inp) and isinstance(state, Waiting)
                and state.reason == default_reason):
            # upstream: removed init containers of an initialized pod count as completed
            state = Terminated(0, "Completed", INIT_INFERRED_MESSAGE, None, None, "")
    running = latest is not None and latest.state is ContainerState.RUNNING
    cached = inp.reasons.get(c.name)
    if cached is not None and not running:
        if isinstance(state, Terminated):
            last = state
        state = Waiting(cached[0], cached[1])

    if c.kind == "init":
        started = running
        ready = isinstance(state, Terminated) and state.exit_code == 0
    elif c.kind == "ephemeral":
        started = ready = False  # never probed, never part of readiness
    else:
        started = running and (
            c.startup_probe is None
            or (latest is not None and inp.probes.startup.get(latest.id) is Result.SUCCESS)
        )
        if not started or latest is None:
            ready = False
        elif c.readiness_probe is not None:
            ready = inp.probes.readiness.get(latest.id) is Result.SUCCESS
        else:
            ready = True
    old_running = old is not None and "running" in (old.get("state") or {}) and old.get("containerID") == container_id
    return ContainerStatusValue(
        name=c.name, kind=c.kind, state=state, last_state=last, ready=ready, started=started,
        restart_count=restart_count, image=image, image_id=image_id, container_id=container_id, spec=c,
        known=known, running=running, runtime_resources=latest.resources if latest is not None else None,
        actuated=inp.actuated.get(c.name), old_resources=old.get("resources") if old is not None and old_running
        else None,
    )


def _any_regular_created(inp: StatusInputs) -> bool:
    """Upstream HasAnyRegularContainerCreated: a regular container exists in the runtime."""
    return any(inp.state.latest(c.name) is not None for c in inp.pod.app_containers)


def has_active_regular_container(inp: StatusInputs) -> bool:
    """Upstream HasAnyActiveRegularContainerStarted: a regular container exists in the newest sandbox."""
    names = {c.name for c in inp.pod.app_containers}
    return any(name_of(c) in names for c in inp.state.active())


def _old_by_name(old: Mapping[str, Any] | None, key: str) -> dict[str, Mapping[str, Any]]:
    """The statuses this module rendered last time, by container name."""
    return {str(s["name"]): s for s in (old or {}).get(key) or []}


Statuses = Sequence[ContainerStatusValue]


def container_statuses(inp: StatusInputs) -> tuple[list[ContainerStatusValue], list[ContainerStatusValue]]:
    pod = inp.pod
    default_reason = "PodInitializing" if pod.init_containers else "ContainerCreating"
    old_init = _old_by_name(inp.old, "initContainerStatuses")
    old_app = _old_by_name(inp.old, "containerStatuses")
    inits = [_container_status(inp, c, default_reason, old_init.get(c.name)) for c in pod.init_containers]
    apps = [_container_status(inp, c, default_reason, old_app.get(c.name)) for c in pod.app_containers]
    apps.sort(key=lambda cs: cs.name)  # upstream SortedContainerStatuses
    return inits, apps


def ephemeral_container_statuses(inp: StatusInputs) -> list[ContainerStatusValue]:
    """Upstream convertToAPIContainerStatuses over spec.ephemeralContainers: read from the runtime like the
    others (the same default waiting reason), never counted in the phase or the conditions."""
    pod = inp.pod
    default_reason = "PodInitializing" if pod.init_containers else "ContainerCreating"
    old = _old_by_name(inp.old, "ephemeralContainerStatuses")
    out = [_container_status(inp, c, default_reason, old.get(c.name)) for c in pod.ephemeral_containers]
    out.sort(key=lambda cs: cs.name)
    return out


def any_regular_started(apps: Statuses) -> bool:
    return any(isinstance(s.state, (Running, Terminated)) for s in apps)


def get_phase(pod: PodView, inits: Statuses, apps: Statuses, pod_is_terminal: bool,
              pod_has_initialized: bool = False) -> str:
    """Upstream getPhase (1.36, with ContainerRestartRules' per-container restart decision).

    `pod_has_initialized`: a regular container exists in the newest sandbox
    (HasAnyActiveRegularContainerStarted), so a restarting sidecar does not send the pod back to Pending."""
    by_name = {s.name: s for s in inits}
    pending_regular_init = pending_sidecar = failed_init_not_restartable = failed_init = 0
    unknown = running = waiting = stopped = stopped_not_restartable = succeeded = 0
    policy = pod.restart_policy
    for c in pod.init_containers:
        s = by_name.get(c.name)
        if c.is_sidecar:
            if s is None:
                unknown += 1
            elif isinstance(s.state, Running):
                if not s.started:
                    pending_sidecar += 1
                running += 1
            elif isinstance(s.state, Waiting) and s.last_state is None:
                pending_sidecar += 1
                waiting += 1
            continue
        if s is None or isinstance(s.state, Running):
            pending_regular_init += 1
            continue
        exit_code = s.state.exit_code if isinstance(s.state, Terminated) else (
            s.last_state.exit_code if s.last_state is not None else None)
        if exit_code is None:
            pending_regular_init += 1
        elif exit_code != 0:
            failed_init += 1
            if not _should_restart(policy, exit_code):
                failed_init_not_restartable += 1

    for s in apps:
        if isinstance(s.state, Running):
            running += 1
        elif isinstance(s.state, Terminated):
            stopped += 1
            if not _should_restart(policy, s.state.exit_code):
                stopped_not_restartable += 1
            if s.state.exit_code == 0:
                succeeded += 1
        elif s.last_state is not None:
            stopped += 1
            if not _should_restart(policy, s.last_state.exit_code):
                stopped_not_restartable += 1
        else:
            waiting += 1
    unknown += sum(1 for c in pod.app_containers if c.name not in {s.name for s in apps})

    if failed_init_not_restartable > 0:
        return "Failed"
    if pending_regular_init > 0 or (pending_sidecar > 0 and not pod_has_initialized) or waiting > 0:
        return "Pending"
    if running > 0 and unknown == 0:
        return "Running"
    if running == 0 and stopped > 0 and unknown == 0:
        if pod_is_terminal and not pod.is_static:
            return "Succeeded" if stopped == succeeded else "Failed"
        if stopped != stopped_not_restartable:
            return "Running"
        return "Succeeded" if stopped == succeeded else "Failed"
    return "Pending"


def _should_restart(policy: str, exit_code: int) -> bool:
    """podutil.ContainerShouldRestart for a container without a restart policy of its own."""
    if policy == "Always":
        return True
    if policy == "OnFailure":
        return exit_code != 0
    return False


# ---- conditions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    status: bool
    reason: str = ""
    message: str = ""


TRUE = Condition(True)


def _ready_lists(pod: PodView, inits: Statuses, apps: Statuses) -> tuple[list[str], list[str]]:
    by_name = {s.name: s for s in [*inits, *apps]}
    names = [c.name for c in pod.sidecars] + [c.name for c in pod.app_containers]
    unknown = [n for n in names if n not in by_name]
    unready = [n for n in names if n in by_name and not by_name[n].ready]
    return unknown, unready


def containers_ready(pod: PodView, inits: Statuses, apps: Statuses, phase: str) -> Condition:
    unknown, unready = _ready_lists(pod, inits, apps)
    if phase == "Succeeded" and not unknown:
        return Condition(False, "PodCompleted")
    if phase == "Failed":
        return Condition(False, "PodFailed")
    return _listed("ContainersNotReady", unknown, "unready", unready)


def _listed(reason: str, unknown: list[str], label: str, names: list[str]) -> Condition:
    """False with the kubelet's "containers with … status: [a b]" message when any name is listed."""
    msgs = []
    if unknown:
        msgs.append(f"containers with unknown status: [{' '.join(unknown)}]")
    if names:
        msgs.append(f"containers with {label} status: [{' '.join(names)}]")
    if msgs:
        return Condition(False, reason, ", ".join(msgs))
    return TRUE


def pod_ready(pod: PodView, cr: Condition, conditions: Sequence[Mapping[str, Any]]) -> Condition:
    if not cr.status:
        return cr
    msgs = []
    for t in pod.readiness_gates:
        c = next((c for c in conditions if c.get("type") == t), None)
        if c is None:
            msgs.append(f'corresponding condition of pod readiness gate "{t}" does not exist.')
        elif c.get("status") != "True":
            msgs.append(f'the status of pod readiness gate "{t}" is not "True", but {c.get("status")}')
    if msgs:
        return Condition(False, "ReadinessGatesNotReady", ", ".join(msgs))
    return TRUE


def initialized(pod: PodView, inits: Statuses, apps: Statuses, phase: str) -> Condition:
    """Upstream GeneratePodInitializedCondition."""
    by_name = {s.name: s for s in inits}
    if phase == "Succeeded" and all(c.name in by_name for c in pod.init_containers):
        return Condition(True, "PodCompleted")
    if not pod.init_containers or any_regular_started(apps):
        return TRUE
    unknown, incomplete = [], []
    for c in pod.init_containers:
        s = by_name.get(c.name)
        if s is None:
            unknown.append(c.name)
        elif c.is_sidecar:
            if not s.started:
                incomplete.append(c.name)
        elif not isinstance(s.state, Terminated) or s.state.exit_code != 0:
            incomplete.append(c.name)
    return _listed("ContainersNotInitialized", unknown, "incomplete", incomplete)


def _condition(
    ctype: str, c: Condition, old: Mapping[str, Mapping[str, Any]], now: float, gen: int | None
) -> dict[str, Any]:
    status = "True" if c.status else "False"
    prev = old.get(ctype)
    since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else None
    out: dict[str, Any] = {"type": ctype}
    if gen is not None:
        out["observedGeneration"] = gen
    out.update({"status": status, "lastProbeTime": None, "lastTransitionTime": since or rfc3339(now)})
    if c.reason:
        out["reason"] = c.reason
    if c.message:
        out["message"] = c.message
    return out


def compute_status(inp: StatusInputs) -> dict[str, Any]:
    pod = inp.pod
    old = inp.old or {}
    api_status = pod.api_status
    inits, apps = container_statuses(inp)
    phase = get_phase(pod, inits, apps, inp.pod_is_terminal, has_active_regular_container(inp))
    # upstream generateAPIPodStatus: the status manager's status, else the API's, is the previous one
    prev = inp.old if inp.old is not None else api_status
    if phase not in TERMINAL_PHASES:
        if prev.get("phase") in TERMINAL_PHASES:
            phase = str(prev["phase"])  # a terminal phase never goes back
        elif api_status.get("phase") in TERMINAL_PHASES:
            phase = str(api_status["phase"])
    reason = message = ""
    if phase == prev.get("phase"):
        # the reason and message belong to the phase: kept while it lasts
        reason = str(prev.get("reason") or api_status.get("reason") or "")
        message = str(prev.get("message") or api_status.get("message") or "")
    if inp.override is not None:
        phase, reason, message = inp.override

    gen = pod.generation
    old_conds = {str(c.get("type")): c for c in old.get("conditions") or []}
    foreign = [
        c
        for c in api_status.get("conditions") or []
        if isinstance(c, dict) and c.get("type") not in OWNED_CONDITIONS and c.get("type") not in RESIZE_CONDITIONS
    ]
    sandbox_needed, _ = inp.state.sandbox_changed(pod.host_network)
    cr = containers_ready(pod, inits, apps, phase)
    # upstream: the conditions other owners set come first; a DisruptionTarget set at eviction or node
    # shutdown is carried over; then the kubelet's own
    carried = list(foreign)
    if not inp.pod_is_terminal:  # upstream determinePodResizeStatus: none for a terminal pod
        carried += [dict(c) for c in inp.resize_conditions]
    disruption = old_conds.get("DisruptionTarget")
    if disruption is not None:  # ReplaceOrAppendPodCondition
        at = next((i for i, c in enumerate(carried) if c.get("type") == "DisruptionTarget"), None)
        if at is None:
            carried.append(dict(disruption))
        else:
            carried[at] = dict(disruption)
    initialized_cond = _condition("Initialized", initialized(pod, inits, apps, phase), old_conds, inp.now, gen)
    ready_to_start = _condition("PodReadyToStartContainers", Condition(not sandbox_needed), old_conds, inp.now, gen)
    conditions = [
        *carried,
        ready_to_start,
        initialized_cond,
        _condition("Ready", pod_ready(pod, cr, [*carried, ready_to_start, initialized_cond]), old_conds, inp.now,
                   gen),
        _condition("ContainersReady", cr, old_conds, inp.now, gen),
        _condition("PodScheduled", TRUE, old_conds, inp.now, gen),
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
        status["podIPs"] = [{"ip": ip} for ip in (pod_ip, *_additional_pod_ips(inp))]
    elif old.get("podIP"):
        status["podIP"], status["podIPs"] = old["podIP"], old.get("podIPs", [{"ip": old["podIP"]}])
    status["startTime"] = old.get("startTime") or rfc3339(inp.now)
    if inits:
        status["initContainerStatuses"] = [s.render() for s in inits]
    status["containerStatuses"] = [s.render() for s in apps]
    if pod.ephemeral_containers:
        status["ephemeralContainerStatuses"] = [s.render() for s in ephemeral_container_statuses(inp)]
    if inp.qos_class:
        status["qosClass"] = inp.qos_class
    status.update(pod_resources_status(pod))
    return status


def _additional_pod_ips(inp: StatusInputs) -> tuple[str, ...]:
    """The dual-stack sandbox's other family, as upstream's determinePodIPs (one address per family)."""
    sb = inp.state.sandbox
    if inp.pod.host_network or sb is None or not sb.ip:
        return ()
    primary_v6 = ":" in sb.ip
    return tuple(ip for ip in sb.additional_ips if (":" in ip) != primary_v6)[:1]


def _pod_ip(inp: StatusInputs) -> str:
    if inp.pod.host_network:
        return inp.host_ip
    sb = inp.state.sandbox
    return sb.ip if sb is not None else ""
