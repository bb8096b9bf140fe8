"""The pure planner: given the desired pod and what the runtime shows, what to do next.

Mirrors upstream kuberuntime_manager.go computePodActions / computeInitContainerActions:
the pod worker executes the returned actions (kill first, then sandbox, then starts).
Backoff is checked when a start is executed, as upstream does, via `restart_allowed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cri.types import ContainerState, ContainerStatus
from minikubelet.base import podview
from minikubelet.base.podview import Pod
from minikubelet.runtime.state import PodRuntimeState, hash_of
from minikubelet.worker.backoff import pod_key_prefix

# Probe results as the planner sees them: container id -> "success" | "failure" | "unknown".
ProbeResults = Mapping[str, str]

REASON_LIVENESS = "LivenessProbe"
REASON_STARTUP = "StartupProbe"
REASON_UNKNOWN = "Unknown"


@dataclass(frozen=True)
class KillContainer:
    container_id: str
    name: str
    message: str
    reason: str = ""  # why, for events and the probe-level grace period


@dataclass
class PodActions:
    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = ""
    attempt: int = 0
    init_to_start: list[str] = field(default_factory=list)
    containers_to_start: list[str] = field(default_factory=list)
    containers_to_kill: dict[str, KillContainer] = field(default_factory=dict)

    @property
    def idle(self) -> bool:
        return not (
            self.kill_pod
            or self.create_sandbox
            or self.init_to_start
            or self.containers_to_start
            or self.containers_to_kill
        )


@dataclass(frozen=True)
class ProbeView:
    startup: ProbeResults = field(default_factory=dict)
    liveness: ProbeResults = field(default_factory=dict)


def should_container_be_restarted(c: podview.Container, pod: Pod, state: PodRuntimeState) -> bool:
    """Upstream ShouldContainerBeRestarted for regular containers."""
    if podview.meta(pod).get("deletionTimestamp"):
        return False
    status = state.latest(str(c.get("name")))
    if status is None:
        return True
    if status.state is ContainerState.RUNNING:
        return False
    if status.state in (ContainerState.UNKNOWN, ContainerState.CREATED):
        return True
    policy = podview.restart_policy(pod)
    if policy == "Never":
        return False
    if policy == "OnFailure" and status.exit_code == 0:
        return False
    return True


def _container_changed(c: podview.Container, status: ContainerStatus) -> bool:
    h = hash_of(status)
    return bool(h) and h != podview.container_hash(c)


def _succeeded(state: PodRuntimeState, name: str) -> bool:
    s = state.latest(name)
    return s is not None and s.state is ContainerState.EXITED and s.exit_code == 0


def _init_failed(status: ContainerStatus) -> bool:
    if status.state is ContainerState.EXITED and status.exit_code != 0:
        return True
    return status.state is ContainerState.UNKNOWN


def _any_regular_created(pod: Pod, state: PodRuntimeState) -> bool:
    return any(state.latest(str(c.get("name"))) is not None for c in podview.app_containers(pod))


def compute_pod_actions(pod: Pod, state: PodRuntimeState, probes: ProbeView) -> PodActions:
    create, attempt = state.sandbox_changed(podview.host_network(pod))
    sandbox = state.sandbox
    actions = PodActions(
        kill_pod=create and bool(state.sandboxes),
        create_sandbox=create,
        sandbox_id=sandbox.id if sandbox else "",
        attempt=attempt,
    )
    inits = podview.init_containers(pod)
    if create:
        if not podview.should_restart_on_failure(pod) and attempt != 0 and state.containers:
            actions.create_sandbox = False
            actions.kill_pod = True
            return actions
        to_start = [
            str(c.get("name"))
            for c in podview.app_containers(pod)
            if not (podview.restart_policy(pod) == "OnFailure" and _succeeded(state, str(c.get("name"))))
        ]
        if not to_start and _any_regular_created(pod, state):
            actions.create_sandbox = False
            actions.kill_pod = True
            return actions
        if inits:
            actions.init_to_start = [str(inits[0].get("name"))]
            return actions
        actions.containers_to_start = to_start
        return actions

    initialized = _compute_init_actions(pod, state, probes, actions)
    if actions.kill_pod or not initialized:
        return actions

    keep = 0
    for c in podview.app_containers(pod):
        cname = str(c.get("name"))
        status = state.latest(cname)
        if status is None or status.state is not ContainerState.RUNNING:
            if should_container_be_restarted(c, pod, state):
                actions.containers_to_start.append(cname)
                if status is not None and status.state is ContainerState.UNKNOWN:
                    actions.containers_to_kill[status.id] = KillContainer(
                        status.id, cname, 'Container is in "Unknown" state, try killing it before restart',
                        REASON_UNKNOWN,
                    )
            continue
        restart = podview.should_restart_on_failure(pod)
        if _container_changed(c, status):
            message = f"Container {cname} definition changed"
            reason = ""
            restart = True
        elif probes.liveness.get(status.id) == "failure":
            message, reason = f"Container {cname} failed liveness probe", REASON_LIVENESS
        elif probes.startup.get(status.id) == "failure":
            message, reason = f"Container {cname} failed startup probe", REASON_STARTUP
        else:
            keep += 1
            continue
        if restart:
            message += ", will be restarted"
            actions.containers_to_start.append(cname)
        actions.containers_to_kill[status.id] = KillContainer(status.id, cname, message, reason)

    if keep == 0 and not actions.containers_to_start:
        actions.kill_pod = True
        actions.init_to_start = []
    return actions


def _compute_init_actions(pod: Pod, state: PodRuntimeState, probes: ProbeView, actions: PodActions) -> bool:
    inits = podview.init_containers(pod)
    if not inits:
        return True
    initialized = False
    for c in podview.app_containers(pod):
        s = state.latest(str(c.get("name")))
        if s is not None and s.state in (ContainerState.CREATED, ContainerState.RUNNING):
            initialized = True
            break
    previously = initialized
    restart_on_failure = podview.should_restart_on_failure(pod)
    last = len(inits) - 1
    saw_status = False

    # Walk backwards: completed init containers may have been garbage-collected, so the
    # furthest one the runtime still knows is the reliable progress marker.
    for i in range(last, -1, -1):
        c = inits[i]
        cname = str(c.get("name"))
        sidecar = podview.is_sidecar(c)
        status = state.latest(cname)
        if status is None:
            if previously and sidecar:
                actions.init_to_start.append(cname)
            continue
        saw_status = True
        if previously and not sidecar:
            continue

        if status.state is ContainerState.CREATED:
            actions.init_to_start.append(cname)
        elif status.state is ContainerState.RUNNING:
            if sidecar:
                _sidecar_running(pod, c, i, status, probes, actions, previously, inits)
                if i == last and _sidecar_started(c, status, probes):
                    initialized = True
        elif status.state is ContainerState.EXITED:
            if sidecar:
                actions.init_to_start.append(cname)
            elif _init_failed(status):
                if not restart_on_failure:
                    actions.kill_pod = True
                    actions.init_to_start = []
                    return False
                actions.init_to_start.append(cname)
            elif i == last:
                initialized = True
            else:
                actions.init_to_start.append(str(inits[i + 1].get("name")))
        else:
            if not sidecar and not restart_on_failure:
                actions.kill_pod = True
                actions.init_to_start = []
                return False
            actions.containers_to_kill[status.id] = KillContainer(
                status.id, cname, 'Init container is in "Unknown" state, try killing it before restart',
                REASON_UNKNOWN,
            )
            actions.init_to_start.append(cname)
        if not previously:
            break

    if not saw_status and not previously:
        actions.init_to_start.append(str(inits[0].get("name")))
    return initialized


def _sidecar_started(c: podview.Container, status: ContainerStatus, probes: ProbeView) -> bool:
    if podview.probe(c, "startup") is None:
        return True
    return probes.startup.get(status.id) == "success"


def _sidecar_running(
    pod: Pod,
    c: podview.Container,
    i: int,
    status: ContainerStatus,
    probes: ProbeView,
    actions: PodActions,
    previously: bool,
    inits: list[podview.Container],
) -> None:
    cname = str(c.get("name"))
    if podview.probe(c, "startup") is not None:
        result = probes.startup.get(status.id)
        if result is None or result == "unknown":
            return
        if result == "failure":
            actions.containers_to_kill[status.id] = KillContainer(
                status.id, cname, f"Init container {cname} failed startup probe", REASON_STARTUP
            )
            actions.init_to_start.append(cname)
            return
    if i != len(inits) - 1 and not previously:
        actions.init_to_start.append(str(inits[i + 1].get("name")))
    if _container_changed(c, status):
        actions.containers_to_kill[status.id] = KillContainer(
            status.id, cname, f"Init container {cname} definition changed"
        )
        actions.init_to_start.append(cname)
        return
    if podview.probe(c, "liveness") is not None and probes.liveness.get(status.id) == "failure":
        actions.containers_to_kill[status.id] = KillContainer(
            status.id, cname, f"Init container {cname} failed liveness probe", REASON_LIVENESS
        )
        actions.init_to_start.append(cname)


def backoff_key(pod: Pod, c: podview.Container) -> str:
    """Upstream getStableKey: pod name, namespace, uid, container name and spec hash."""
    prefix = pod_key_prefix(podview.name(pod), podview.namespace(pod), podview.uid(pod))
    return f"{prefix}{c.get('name')}_{podview.container_hash(c)}"
