"""The pure planner: given the desired pod and what the runtime shows, what to do next.

Mirrors upstream kuberuntime_manager.go computePodActions / computeInitContainerActions:
the pod worker executes the returned actions (kill first, then sandbox, then starts).
Backoff is checked when a start is executed, as upstream does, via `restart_allowed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cri.types import ContainerState, ContainerStatus
from minikubelet.base.podview import ContainerView, PodView
from minikubelet.runtime.state import PodRuntimeState, hash_of
from minikubelet.worker.backoff import pod_key_prefix
from minikubelet.worker.resize_plan import ActuatedLookup, ResizeActions, compute_container_resize
from probes.result import ProbeResults, Result

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
    ephemeral_to_start: list[str] = field(default_factory=list)
    containers_to_kill: dict[str, KillContainer] = field(default_factory=dict)
    resize: ResizeActions = field(default_factory=ResizeActions)  # running containers to resize in place

    @property
    def idle(self) -> bool:
        return not (
            self.kill_pod
            or self.create_sandbox
            or self.init_to_start
            or self.containers_to_start
            or self.ephemeral_to_start
            or self.containers_to_kill
            or not self.resize.idle
        )


def should_container_be_restarted(c: ContainerView, pod: PodView, state: PodRuntimeState) -> bool:
    """Upstream ShouldContainerBeRestarted for regular containers."""
    if pod.deletion_timestamp:
        return False
    status = state.latest(c.name)
    if status is None:
        return True
    if status.state is ContainerState.RUNNING:
        return False
    if status.state in (ContainerState.UNKNOWN, ContainerState.CREATED):
        return True
    policy = pod.restart_policy
    if policy == "Never":
        return False
    if policy == "OnFailure" and status.exit_code == 0:
        return False
    return True


def _container_changed(c: ContainerView, status: ContainerStatus) -> bool:
    h = hash_of(status)
    return bool(h) and h != c.spec_hash


def _succeeded(state: PodRuntimeState, name: str) -> bool:
    s = state.latest(name)
    return s is not None and s.state is ContainerState.EXITED and s.exit_code == 0


def _init_failed(status: ContainerStatus) -> bool:
    """Upstream isInitContainerFailed: an OOM kill is a failure even with exit code 0."""
    if status.reason == "OOMKilled":
        return True
    if status.state is ContainerState.EXITED and status.exit_code != 0:
        return True
    return status.state is ContainerState.UNKNOWN


def _any_regular_created(pod: PodView, state: PodRuntimeState) -> bool:
    return any(state.latest(c.name) is not None for c in pod.app_containers)


def _restart_for_resize(name: str, status: ContainerStatus) -> KillContainer:
    return KillContainer(status.id, name, f"Container {name} resize requires restart")


def compute_pod_actions(pod: PodView, state: PodRuntimeState, probes: ProbeResults,
                        actuated: ActuatedLookup | None = None) -> PodActions:
    """`actuated`: what each container was last given (None: no in-place resize is planned)."""
    create, attempt = state.sandbox_changed(pod.host_network)
    sandbox = state.sandbox
    actions = PodActions(
        kill_pod=create and bool(state.sandboxes),
        create_sandbox=create,
        sandbox_id=sandbox.id if sandbox else "",
        attempt=attempt,
    )
    inits = pod.init_containers
    if create:
        if not pod.should_restart_on_failure and attempt != 0 and state.containers:
            actions.create_sandbox = False
            actions.kill_pod = True
            return actions
        to_start = [
            c.name
            for c in pod.app_containers
            if not (pod.restart_policy == "OnFailure" and _succeeded(state, c.name))
        ]
        if not to_start and _any_regular_created(pod, state):
            actions.create_sandbox = False
            actions.kill_pod = True
            return actions
        if inits:
            actions.init_to_start = [inits[0].name]
            return actions
        actions.containers_to_start = to_start
        return actions

    # Upstream: ephemeral containers may start before initialization completes, and are never restarted:
    # one the runtime has ever known (running, exited or unknown) is left alone.
    actions.ephemeral_to_start = [c.name for c in pod.ephemeral_containers if state.latest(c.name) is None]
    initialized = _compute_init_actions(pod, state, probes, actions, actuated)
    if actions.kill_pod:
        actions.ephemeral_to_start = []
        return actions
    if not initialized:
        return actions

    keep = 0
    for c in pod.app_containers:
        cname = c.name
        status = state.latest(cname)
        if status is None or status.state is not ContainerState.RUNNING:
            if should_container_be_restarted(c, pod, state):
                actions.containers_to_start.append(cname)
                if status is not None and status.state is ContainerState.UNKNOWN:
                    actions.containers_to_kill[status.id] = KillContainer(
                        status.id, cname, 'Container is in "unknown" state, try killing it before restart',
                        REASON_UNKNOWN,
                    )
            continue
        restart = pod.should_restart_on_failure
        if _container_changed(c, status):
            message = f"Container {cname} definition changed"
            reason = ""
            restart = True
        elif probes.liveness.get(status.id) is Result.FAILURE:
            message, reason = f"Container {cname} failed liveness probe", REASON_LIVENESS
        elif probes.startup.get(status.id) is Result.FAILURE:
            message, reason = f"Container {cname} failed startup probe", REASON_STARTUP
        elif actuated is not None and not compute_container_resize(pod, c, status, actuated, actions.resize):
            # its resize policy restarts it with the new resources
            actions.containers_to_kill[status.id] = _restart_for_resize(cname, status)
            actions.containers_to_start.append(cname)
            continue
        else:
            keep += 1
            continue
        if restart:
            message += ", will be restarted"
            actions.containers_to_start.append(cname)
        actions.containers_to_kill[status.id] = KillContainer(status.id, cname, message, reason)

    if keep == 0 and not actions.containers_to_start:
        # nothing is started in a sandbox about to stop (upstream would try, and fail, in the stopped sandbox)
        actions.kill_pod = True
        actions.init_to_start = []
        actions.ephemeral_to_start = []
    return actions


def _compute_init_actions(pod: PodView, state: PodRuntimeState, probes: ProbeResults, actions: PodActions,
                          actuated: ActuatedLookup | None = None) -> bool:
    inits = pod.init_containers
    if not inits:
        return True
    initialized = False
    for c in pod.app_containers:
        s = state.latest(c.name)
        if s is not None and s.state in (ContainerState.CREATED, ContainerState.RUNNING):
            initialized = True
            break
    previously = initialized
    restart_on_failure = pod.should_restart_on_failure
    last = len(inits) - 1

    # Walk backwards: completed init containers may have been garbage-collected, so the
    # furthest one the runtime still knows is the reliable progress marker.
    for i in range(last, -1, -1):
        c = inits[i]
        cname = c.name
        sidecar = c.is_sidecar
        status = state.latest(cname)
        if status is None:
            if previously and sidecar:
                actions.init_to_start.append(cname)
            continue
        if previously and not sidecar:
            continue

        if status.state is ContainerState.CREATED:
            actions.init_to_start.append(cname)
        elif status.state is ContainerState.RUNNING:
            if sidecar:
                _sidecar_running(pod, c, i, status, probes, actions, previously, inits, actuated)
                if i == last and _sidecar_started(c, status, probes):
                    initialized = True
            elif actuated is not None:
                # InPlacePodVerticalScalingInitContainers: a running init container is resized in place (the API
                # refuses RestartContainer for it)
                compute_container_resize(pod, c, status, actuated, actions.resize)
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
                actions.init_to_start.append(inits[i + 1].name)
        else:
            if not sidecar and not restart_on_failure:
                actions.kill_pod = True
                actions.init_to_start = []
                return False
            actions.containers_to_kill[status.id] = KillContainer(
                status.id, cname, 'Init container is in "unknown" state, try killing it before restart',
                REASON_UNKNOWN,
            )
            actions.init_to_start.append(cname)
        # Upstream keeps walking: every init container before the furthest one found has run, and the
        # sidecars among them must be kept running (restarted when they exited or fail their probes).
        previously = True

    if not previously:
        actions.init_to_start.append(inits[0].name)
    return initialized


def _sidecar_started(c: ContainerView, status: ContainerStatus, probes: ProbeResults) -> bool:
    if c.startup_probe is None:
        return True
    return probes.startup.get(status.id) is Result.SUCCESS


def _sidecar_running(
    pod: PodView,
    c: ContainerView,
    i: int,
    status: ContainerStatus,
    probes: ProbeResults,
    actions: PodActions,
    previously: bool,
    inits: tuple[ContainerView, ...],
    actuated: ActuatedLookup | None = None,
) -> None:
    cname = c.name
    if c.startup_probe is not None:
        result = probes.startup.get(status.id)
        if result is None or result is Result.UNKNOWN:
            return
        if result is Result.FAILURE:
            actions.containers_to_kill[status.id] = KillContainer(
                status.id, cname, f"Init container {cname} failed startup probe", REASON_STARTUP
            )
            actions.init_to_start.append(cname)
            return
    if i != len(inits) - 1 and not previously:
        actions.init_to_start.append(inits[i + 1].name)
    if _container_changed(c, status):
        actions.containers_to_kill[status.id] = KillContainer(
            status.id, cname, f"Init container {cname} definition changed"
        )
        actions.init_to_start.append(cname)
        return
    if c.liveness_probe is not None and probes.liveness.get(status.id) is Result.FAILURE:
        actions.containers_to_kill[status.id] = KillContainer(
            status.id, cname, f"Init container {cname} failed liveness probe", REASON_LIVENESS
        )
        actions.init_to_start.append(cname)
        return
    if actuated is not None and not compute_container_resize(pod, c, status, actuated, actions.resize):
        actions.containers_to_kill[status.id] = _restart_for_resize(cname, status)
        actions.init_to_start.append(cname)


def backoff_key(pod: PodView, c: ContainerView) -> str:
    """Upstream getStableKey: pod name, namespace, uid, container name and spec hash."""
    return f"{pod_key_prefix(pod.name, pod.namespace, pod.uid)}{c.name}_{c.spec_hash}"
