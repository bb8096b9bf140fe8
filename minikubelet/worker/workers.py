"""One asyncio task per pod: observe the runtime, plan, execute, publish status.

Everything that happens to a pod is serialised through its worker. A worker wakes on spec
changes, runtime events (via the PLEG), probe result changes, backoff timers and a periodic
resync; it never keeps state a restart of the agent could not rebuild from the runtime
(backoff history is checkpointed by the agent).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from cri.errors import (
    CreateContainerError,
    ImagePullError,
    NotFoundError,
    RuntimeError_,
    StartContainerError,
)
from cri.runtime import Runtime
from cri.types import (
    LABEL_POD_UID,
    ContainerState,
    ContainerStatus,
    LinuxResources,
)
from minikubelet import events as ev
from minikubelet.api.expansion import EnvSourceError
from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.durations import go_duration
from minikubelet.base.podview import Container, ContainerView, Pod, PodView
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.runtime.state import PodRuntimeState, name_of, restart_count_of
from minikubelet.status.generate import StatusInputs, compute_status
from minikubelet.volumes.manager import (
    VolumeError,
    container_mounts,
    setup_volumes,
    teardown_pod_dir,
    termination_log_path,
)
from minikubelet.worker.backoff import Backoff
from minikubelet.worker.container_config import container_config, sandbox_config
from minikubelet.worker.hooks import HookError, run_hook
from minikubelet.worker.planner import (
    REASON_LIVENESS,
    REASON_STARTUP,
    KillContainer,
    PodActions,
    backoff_key,
    compute_pod_actions,
)
from probes.result import ProbeResults

log = logging.getLogger("minikubelet.worker.workers")

MIN_GRACE = 2  # upstream minimumGracePeriodInSeconds
PRESTOP_EXTRA_GRACE = 2  # upstream gives an overrunning preStop hook 2 s more, once
EXCEEDED_GRACE_SLACK = 1.0
MAX_TERMINATION_MESSAGE = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048


class ProbeSource(Protocol):
    """What the pod worker needs from the prober: results keyed by container id."""

    def update_pod(self, pod: PodView, pod_ip: str, running: dict[str, ContainerStatus]) -> None: ...

    def remove_pod(self, uid: str) -> None: ...

    def stop_liveness_and_startup(self, uid: str) -> None: ...

    def results(self, uid: str) -> ProbeResults:
        """Per kind: container id -> latest result."""


class CgroupSource(Protocol):
    def ensure_pod(self, pod: PodView) -> str:
        """Create the pod's cgroup; returns the runtime's cgroup parent for its containers."""

    def cgroup_parent(self, pod: PodView) -> str: ...

    def container_resources(self, pod: PodView, container: ContainerView) -> LinuxResources | None: ...

    def sandbox_resources(self) -> LinuxResources | None: ...

    def remove_pod(self, uid: str) -> None: ...

    def qos_class(self, pod: PodView) -> str: ...


@dataclass
class WorkerContext:
    runtime: Runtime
    clock: Clock
    recorder: EventRecorder
    metrics: Metrics
    container_backoff: Backoff
    image_backoff: Backoff
    root_dir: str
    pod_logs_dir: str
    host_ip: str
    publish: Callable[[Pod, dict[str, Any] | None], None]  # status None = pod is gone
    probes: ProbeSource | None = None
    cgroups: CgroupSource | None = None
    resync_period: float = 10.0
    on_backoff_change: Callable[[], None] = lambda: None


@dataclass
class _ImageFailure:
    message: str
    at: float  # wall-clock time of the failed pull (the backoff's event time)


@dataclass
class WorkerState:
    """In-memory facts of one pod version; all recoverable (reasons are re-derived by retrying)."""

    reasons: dict[str, tuple[str, str]] = field(default_factory=dict)
    image_errors: dict[str, _ImageFailure] = field(default_factory=dict)
    status: dict[str, Any] | None = None
    first_seen: float = 0.0
    start_recorded: bool = False
    override: tuple[str, str, str] | None = None


class PodWorker:
    def __init__(self, ctx: WorkerContext, pod: Pod, adopted: bool = False) -> None:
        self.ctx = ctx
        self.pod = pod
        self.view = PodView.of(pod)
        self.uid = podview.uid(pod)
        self._wake = asyncio.Event()
        self._terminate_grace: int | None = None
        self._terminate_remove = True
        self.terminated = asyncio.Event()
        self.st = WorkerState(first_seen=ctx.clock.monotonic())
        self._next_wake: float | None = None
        self._adopted = adopted
        self.task: asyncio.Task[None] | None = None
        self._volume_paths: dict[str, str] | None = None
        self._log_fallbacks: dict[str, str] = {}

    # --- signals from outside -------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def update(self, pod: Pod) -> None:
        self.pod = pod
        self.view = PodView.of(pod)
        self.wake()

    def terminate(self, grace: int | None = None, remove: bool = True) -> None:
        """Stop the pod (grace None = the pod's own); a shorter grace given later wins."""
        g = podview.grace_period(self.pod) if grace is None else grace
        if self._terminate_grace is None or g < self._terminate_grace:
            self._terminate_grace = g
        self._terminate_remove = remove
        self.wake()

    @property
    def terminating(self) -> bool:
        return self._terminate_grace is not None

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self.run(), name=f"pod-worker-{podview.full_name(self.pod)}")
        return self.task

    # --- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            while True:
                if self._terminate_grace is not None:
                    await self._terminate()
                    return
                t0 = time.monotonic()
                try:
                    await self.sync()
                except RuntimeError_ as e:
                    log.warning("pod sync failed", extra={"kv": {"pod": podview.format_pod(self.pod), "err": str(e)}})
                    self._schedule(10.0)
                except Exception:
                    log.exception("pod sync crashed", extra={"kv": {"pod": podview.format_pod(self.pod)}})
                    self._schedule(10.0)
                self.ctx.metrics.pod_worker_duration.labels("sync").observe(time.monotonic() - t0)
                await self._wait()
        finally:
            self.terminated.set()

    def _schedule(self, delay: float) -> None:
        at = self.ctx.clock.monotonic() + max(delay, 0.0)
        if self._next_wake is None or at < self._next_wake:
            self._next_wake = at

    async def _wait(self) -> None:
        if self._wake.is_set():
            self._wake.clear()
            self._next_wake = None
            return
        if self._next_wake is not None:
            deadline = self._next_wake
        else:
            # upstream jitters the periodic resync by up to half a period so pods do not sync in lockstep
            deadline = self.ctx.clock.monotonic() + self.ctx.resync_period * (1 + 0.5 * random.random())
        delay = max(0.0, deadline - self.ctx.clock.monotonic())
        sleeper = asyncio.create_task(self.ctx.clock.sleep(delay))
        waker = asyncio.create_task(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()
        self._wake.clear()
        self._next_wake = None

    async def observe(self) -> PodRuntimeState:
        rt = self.ctx.runtime
        sandboxes, containers = await asyncio.gather(
            rt.list_pod_sandboxes({LABEL_POD_UID: self.uid}), rt.list_containers({LABEL_POD_UID: self.uid})
        )
        return PodRuntimeState(self.uid, list(sandboxes), list(containers))

    def _probe_view(self) -> ProbeResults:
        return self.ctx.probes.results(self.uid) if self.ctx.probes is not None else ProbeResults()

    async def sync(self) -> None:
        state = await self.observe()
        terminal = bool(self.st.status and self.st.status.get("phase") in ("Succeeded", "Failed"))
        if not terminal and self._deadline_exceeded():
            self.st.override = (
                "Failed",
                ev.DEADLINE_EXCEEDED,
                "Pod was active on the node longer than the specified deadline",
            )
            self.ctx.recorder.pod_event(self.pod, "Normal", ev.DEADLINE_EXCEEDED, self.st.override[2])
            terminal = True
        if terminal:
            if state.running() or any(s.state.name == "READY" for s in state.sandboxes):
                await self.kill_pod(state, podview.grace_period(self.pod))
                state = await self.observe()
            await self._publish(state)
            return

        actions = compute_pod_actions(self.view, state, self._probe_view())
        if not actions.idle:
            await self.execute(actions, state)
            state = await self.observe()
        await self._publish(state)
        self._after_sync(state)

    def _deadline_exceeded(self) -> bool:
        ads = podview.spec(self.pod).get("activeDeadlineSeconds")
        if not isinstance(ads, int) or isinstance(ads, bool) or ads <= 0 or self.st.status is None:
            return False
        start = self.st.status.get("startTime")
        if not start:
            return False
        started = datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        remaining = started + ads - self.ctx.clock.now()
        if remaining > 0:
            self._schedule(remaining)
            return False
        return True

    def _after_sync(self, state: PodRuntimeState) -> None:
        # Wake when a crash-loop backoff or an image backoff expires.
        for c in podview.init_containers(self.pod) + podview.app_containers(self.pod):
            latest = state.latest(str(c.get("name")))
            if latest is not None and latest.state is ContainerState.EXITED and latest.finished_at:
                key = backoff_key(self.view, self.view.container(str(c.get("name"))))
                rem = self.ctx.container_backoff.remaining(key, latest.finished_at)
                if rem > 0:
                    self._schedule(rem + 0.05)
            image_key = self._image_key(c)
            if image_key in self.st.image_errors:
                rem = self.ctx.image_backoff.remaining(image_key, self.st.image_errors[image_key].at)
                if rem > 0:
                    self._schedule(rem + 0.05)
        if not self.st.start_recorded and self.st.status and self.st.status.get("phase") == "Running":
            self.st.start_recorded = True
            if not self._adopted:
                self.ctx.metrics.pod_start_duration.observe(self.ctx.clock.monotonic() - self.st.first_seen)

    # --- status ---------------------------------------------------------------------------
    async def _publish(self, state: PodRuntimeState) -> None:
        await self._fill_log_fallbacks(state)
        if self.ctx.probes is not None and state.sandbox is not None:
            running = {name_of(c): c for c in state.running()}
            self.ctx.probes.update_pod(self.view, state.sandbox.ip or self.ctx.host_ip, running)
        qos = self.ctx.cgroups.qos_class(self.view) if self.ctx.cgroups else ""
        status = compute_status(
            StatusInputs(
                pod=self.view,
                state=state,
                now=self.ctx.clock.now(),
                host_ip=self.ctx.host_ip,
                qos_class=qos,
                reasons=dict(self.st.reasons),
                probes=self._probe_view(),
                termination_messages=self._termination_messages(state),
                old=self.st.status,
                pod_is_terminal=self.terminating,
                override=self.st.override,
            )
        )
        self.st.status = status
        self.ctx.publish(self.pod, status)

    def _termination_messages(self, state: PodRuntimeState) -> dict[str, str]:
        out: dict[str, str] = {}
        for c in state.containers:
            if c.state is not ContainerState.EXITED:
                continue
            path = termination_log_path(self.ctx.root_dir, self.uid, name_of(c), restart_count_of(c))
            try:
                with open(path, "rb") as f:
                    data = f.read(MAX_TERMINATION_MESSAGE)
            except OSError:
                data = b""
            msg = data.decode(errors="replace")
            if msg:
                out[c.id] = msg
            elif c.id in self._log_fallbacks:
                out[c.id] = self._log_fallbacks[c.id]
        return out

    # --- execution ------------------------------------------------------------------------
    async def execute(self, actions: PodActions, state: PodRuntimeState) -> None:
        if actions.kill_pod:
            await self.kill_pod(state, podview.grace_period(self.pod))
            if actions.create_sandbox and state.sandboxes:
                self.ctx.recorder.pod_event(self.pod, "Normal", ev.SANDBOX_CHANGED,
                                            "Pod sandbox changed, it will be killed and re-created.")
            state = await self.observe()
        else:
            await self._kill_listed(actions.containers_to_kill, state)
        if actions.create_sandbox:
            sandbox_id = await self._create_sandbox(actions.attempt)
            if not sandbox_id:
                return
            state = await self.observe()
        if state.sandbox is None:
            return
        for name in actions.init_to_start:
            c = podview.find_container(self.pod, name)
            if c is None:
                continue
            ok = await self.start_container(c, state)
            if not ok and not podview.is_sidecar(c):
                return
        for name in actions.containers_to_start:
            c = podview.find_container(self.pod, name)
            if c is not None:
                await self.start_container(c, state)

    async def _kill_listed(self, kills: dict[str, KillContainer], state: PodRuntimeState) -> None:
        if not kills:
            return
        by_id = {c.id: c for c in state.containers}
        await asyncio.gather(
            *(
                self.kill_container(by_id[k.container_id], self._kill_grace(k), k.message, reason=k.reason)
                for k in kills.values()
                if k.container_id in by_id
            )
        )

    def _kill_grace(self, k: KillContainer) -> int:
        grace = podview.grace_period(self.pod)
        if k.reason in (REASON_LIVENESS, REASON_STARTUP):
            c = podview.find_container(self.pod, k.name)
            p = podview.probe(c, "liveness" if k.reason == REASON_LIVENESS else "startup") if c else None
            pg = p.get("terminationGracePeriodSeconds") if p else None
            if isinstance(pg, int) and not isinstance(pg, bool) and pg >= 0:
                grace = pg
        return grace

    async def _create_sandbox(self, attempt: int) -> str:
        try:
            cgroup_parent = self.ctx.cgroups.ensure_pod(self.view) if self.ctx.cgroups else ""
        except Exception as e:  # cgroup failures must fail the pod, never run it unlimited
            self._sandbox_failed(f"failed to create pod cgroup: {e}")
            return ""
        try:
            self._volume_paths = setup_volumes(self.pod, self.ctx.root_dir)
        except (VolumeError, OSError) as e:
            self.ctx.recorder.pod_event(self.pod, "Warning", ev.FAILED_MOUNT, f"MountVolume.SetUp failed: {e}")
            self._schedule(10.0)
            return ""
        resources = self.ctx.cgroups.sandbox_resources() if self.ctx.cgroups else None
        cfg = sandbox_config(self.view, attempt, self.ctx.pod_logs_dir, cgroup_parent, resources)
        try:
            sid = await self._timed("run_podsandbox", self.ctx.runtime.run_pod_sandbox(cfg))
        except RuntimeError_ as e:
            self._sandbox_failed(str(e))
            return ""
        return str(sid)

    def _sandbox_failed(self, message: str) -> None:
        self.ctx.recorder.pod_event(
            self.pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX, f"Failed to create pod sandbox: {message}"
        )
        self._schedule(10.0)

    async def _timed(self, op: str, coro: Any) -> Any:
        m = self.ctx.metrics
        t0 = time.monotonic()
        m.runtime_operations.labels(op).inc()
        try:
            return await coro
        except Exception:
            m.runtime_operations_errors.labels(op).inc()
            raise
        finally:
            m.runtime_operations_duration.labels(op).observe(time.monotonic() - t0)

    def _image_key(self, c: Container) -> str:
        return f"{self.uid}_{c.get('image')}"

    def _fail_start(self, c: Container, reason: str, message: str, event_message: str | None = None) -> bool:
        name = str(c.get("name"))
        self.st.reasons[name] = (reason, message)
        self.ctx.recorder.pod_event(self.pod, "Warning", ev.FAILED, event_message or f"Error: {reason}", name)
        self.ctx.metrics.started_containers_errors.labels(
            podview.container_kind(self.pod, name) or "container", reason
        ).inc()
        return False

    async def ensure_image(self, c: Container) -> tuple[bool, str]:
        """Pull per the pull policy. Returns (ok, stop signal of the image)."""
        name = str(c.get("name"))
        image = str(c.get("image"))
        policy = str(c.get("imagePullPolicy") or "IfNotPresent")
        rt = self.ctx.runtime
        present = await rt.image_status(image)
        if present is not None and policy != "Always":
            self.ctx.recorder.pod_event(
                self.pod, "Normal", ev.PULLED, f'Container image "{image}" already present on machine', name
            )
            return True, present.stop_signal
        if policy == "Never":
            msg = f'Container image "{image}" is not present with pull policy of Never'
            self.st.reasons[name] = ("ErrImageNeverPull", msg)
            self.ctx.recorder.pod_event(self.pod, "Warning", ev.ERR_IMAGE_NEVER_PULL, msg, name)
            return False, ""
        key = self._image_key(c)
        failure = self.st.image_errors.get(key)
        if failure is not None and self.ctx.image_backoff.in_backoff_since(key, failure.at):
            self.st.reasons[name] = (
                "ImagePullBackOff",
                f'Back-off pulling image "{image}": ErrImagePull: {failure.message}',
            )
            self.ctx.recorder.pod_event(self.pod, "Normal", ev.BACKOFF, f'Back-off pulling image "{image}"', name)
            return False, ""
        self.ctx.recorder.pod_event(self.pod, "Normal", ev.PULLING, f'Pulling image "{image}"', name)
        t0 = time.monotonic()
        try:
            await self._timed("pull_image", rt.pull_image(image))
        except ImagePullError as e:
            now = self.ctx.clock.now()
            self.ctx.image_backoff.next(key, now)
            self.st.image_errors[key] = _ImageFailure(str(e), now)
            self.ctx.recorder.pod_event(self.pod, "Warning", ev.FAILED, f'Failed to pull image "{image}": {e}', name)
            return self._fail_start(c, "ErrImagePull", str(e), "Error: ErrImagePull"), ""
        took = time.monotonic() - t0
        self.ctx.metrics.image_pull_duration.observe(took)
        self.st.image_errors.pop(key, None)
        info = await rt.image_status(image)
        size = f" Image size: {info.size} bytes." if info is not None and info.size else ""
        self.ctx.recorder.pod_event(
            self.pod, "Normal", ev.PULLED,
            f'Successfully pulled image "{image}" in {took:.3f}s ({took:.3f}s including waiting).{size}', name,
        )
        return True, info.stop_signal if info is not None else ""

    async def start_container(self, c: Container, state: PodRuntimeState) -> bool:
        name = str(c.get("name"))
        cv = self.view.container(name)
        latest = state.latest(name)
        # Upstream doBackOff: a container that exited recently waits out its backoff.
        if latest is not None and latest.state is ContainerState.EXITED and latest.finished_at:
            key = backoff_key(self.view, cv)
            if self.ctx.container_backoff.in_backoff_since(key, latest.finished_at):
                delay = self.ctx.container_backoff.get(key)
                self.st.reasons[name] = (
                    "CrashLoopBackOff",
                    f"back-off {go_duration(delay)} restarting failed container={name} pod={podview.format_pod(self.pod)}",
                )
                self.ctx.recorder.pod_event(
                    self.pod, "Warning", ev.BACKOFF,
                    f"Back-off restarting failed container {name} in pod {podview.format_pod(self.pod)}", name,
                )
                self._schedule(self.ctx.container_backoff.remaining(key, latest.finished_at) + 0.05)
                return False
            self.ctx.container_backoff.next(key, latest.finished_at)
            self.ctx.on_backoff_change()

        ok, image_stop_signal = await self.ensure_image(c)
        if not ok:
            return False

        restart_count = restart_count_of(latest) + 1 if latest is not None else 0
        if latest is None and self.st.status is not None:
            restart_count = self._reported_restart_count(name)
        sandbox = state.sandbox
        assert sandbox is not None
        try:
            if self._volume_paths is None:
                self._volume_paths = setup_volumes(self.pod, self.ctx.root_dir)
            mounts = container_mounts(c, self._volume_paths)
        except (VolumeError, OSError) as e:
            return self._fail_start(c, "CreateContainerConfigError", str(e), f"Error: {e}")
        tlog = termination_log_path(self.ctx.root_dir, self.uid, name, restart_count)
        try:
            _create_empty_file(tlog)
        except OSError as e:
            return self._fail_start(c, "CreateContainerConfigError", str(e), f"Error: {e}")
        resources = self.ctx.cgroups.container_resources(self.view, cv) if self.ctx.cgroups else None
        field_values = {
            "status.podIP": sandbox.ip or self.ctx.host_ip,
            "status.podIPs": sandbox.ip or self.ctx.host_ip,
            "status.hostIP": self.ctx.host_ip,
            "status.hostIPs": self.ctx.host_ip,
        }
        try:
            cfg = container_config(
                self.view, cv, restart_count=restart_count, mounts=mounts, field_values=field_values,
                resources=resources, termination_log_host_path=tlog, image_stop_signal=image_stop_signal,
            )
        except EnvSourceError as e:
            return self._fail_start(c, "CreateContainerConfigError", str(e), f"Error: {e}")
        cgroup_parent = self.ctx.cgroups.cgroup_parent(self.view) if self.ctx.cgroups else ""
        scfg = sandbox_config(self.view, sandbox.metadata.attempt, self.ctx.pod_logs_dir, cgroup_parent)
        try:
            cid = await self._timed("create_container", self.ctx.runtime.create_container(sandbox.id, cfg, scfg))
        except CreateContainerError as e:
            return self._fail_start(c, "CreateContainerError", str(e), f"Error: {e}")
        self.ctx.recorder.pod_event(self.pod, "Normal", ev.CREATED, f"Created container: {name}", name)
        try:
            await self._timed("start_container", self.ctx.runtime.start_container(cid))
        except (StartContainerError, NotFoundError) as e:
            return self._fail_start(c, "RunContainerError", str(e), f"Error: {e}")
        self.ctx.recorder.pod_event(self.pod, "Normal", ev.STARTED, f"Started container {name}", name)
        self.ctx.metrics.started_containers.labels(podview.container_kind(self.pod, name) or "container").inc()

        lifecycle = c.get("lifecycle") if isinstance(c.get("lifecycle"), dict) else {}
        post_start = lifecycle.get("postStart") if isinstance(lifecycle, dict) else None
        if isinstance(post_start, dict):
            try:
                await run_hook(
                    post_start, runtime=self.ctx.runtime, clock=self.ctx.clock, container_id=cid, container=c,
                    pod_ip=sandbox.ip or self.ctx.host_ip, timeout=float(podview.grace_period(self.pod)),
                )
            except HookError as e:
                self.ctx.recorder.pod_event(self.pod, "Warning", ev.FAILED_POST_START_HOOK, str(e), name)
                status = await self.ctx.runtime.container_status(cid)
                await self.kill_container(status, podview.grace_period(self.pod), "FailedPostStartHook",
                                          run_pre_stop=False)
                self.st.reasons[name] = ("PostStartHookError", str(e))
                return False
        self.st.reasons.pop(name, None)
        return True

    def _reported_restart_count(self, name: str) -> int:
        """Continue counting when the runtime lost every attempt of the container."""
        assert self.st.status is not None
        for key in ("initContainerStatuses", "containerStatuses"):
            for s in self.st.status.get(key) or []:
                if s.get("name") == name and s.get("containerID"):
                    return int(s.get("restartCount", 0)) + 1
        return 0

    # --- stopping -------------------------------------------------------------------------
    async def kill_container(
        self,
        status: ContainerStatus,
        grace: int,
        message: str = "",
        reason: str = "",
        run_pre_stop: bool = True,
        wait_turn: Callable[[], Any] | None = None,
        deadline: float | None = None,
    ) -> None:
        name = name_of(status)
        c = podview.find_container(self.pod, name)
        msg = message or f"Stopping container {name}"
        self.ctx.recorder.pod_event(self.pod, "Normal", ev.KILLING, msg, name)
        clock = self.ctx.clock
        start = clock.monotonic()
        end = deadline if deadline is not None else start + grace
        lifecycle = c.get("lifecycle") if c is not None and isinstance(c.get("lifecycle"), dict) else {}
        pre_stop = lifecycle.get("preStop") if isinstance(lifecycle, dict) else None
        if run_pre_stop and isinstance(pre_stop, dict) and grace > 0 and status.state is ContainerState.RUNNING:
            remaining = end - clock.monotonic()
            hook = asyncio.create_task(
                run_hook(
                    pre_stop, runtime=self.ctx.runtime, clock=clock, container_id=status.id, container=c or {},
                    pod_ip=self._pod_ip(), timeout=max(remaining, 0.0),
                )
            )
            done, _ = await asyncio.wait({hook}, timeout=max(remaining, 0.0))
            if not done:
                hook.cancel()
                self.ctx.recorder.pod_event(
                    self.pod, "Warning", ev.FAILED_PRE_STOP_HOOK,
                    f"PreStopHook failed: hook did not finish within the grace period of {grace}s", name,
                )
                end = clock.monotonic() + PRESTOP_EXTRA_GRACE
            elif hook.exception() is not None:
                self.ctx.recorder.pod_event(
                    self.pod, "Warning", ev.FAILED_PRE_STOP_HOOK, f"PreStopHook failed: {hook.exception()}", name
                )
        if wait_turn is not None:
            remaining = end - clock.monotonic()
            if remaining > 0:
                try:
                    await asyncio.wait_for(wait_turn(), timeout=remaining)
                except TimeoutError:
                    pass
        timeout = max(end - clock.monotonic(), MIN_GRACE)
        await self._timed("stop_container", self.ctx.runtime.stop_container(status.id, int(timeout + 0.999)))

    async def _fill_log_fallbacks(self, state: PodRuntimeState) -> None:
        """FallbackToLogsOnError: a failed container with an empty termination log reports its log tail."""
        for status in state.containers:
            if status.state is not ContainerState.EXITED or status.exit_code == 0 or status.id in self._log_fallbacks:
                continue
            c = podview.find_container(self.pod, name_of(status))
            if c is None or c.get("terminationMessagePolicy") != "FallbackToLogsOnError":
                continue
            try:
                data = await self.ctx.runtime.container_logs(status.id, tail=FALLBACK_LOG_LINES)
            except RuntimeError_:
                continue
            self._log_fallbacks[status.id] = data[-FALLBACK_LOG_BYTES:].decode(errors="replace")

    def _pod_ip(self) -> str:
        if self.st.status and self.st.status.get("podIP"):
            return str(self.st.status["podIP"])
        return self.ctx.host_ip

    async def kill_pod(self, state: PodRuntimeState, grace: int) -> None:
        """Stop every container (regular first, sidecars last in reverse order), then the sandbox."""
        clock = self.ctx.clock
        deadline = clock.monotonic() + grace
        live = [c for c in state.containers if c.state in (ContainerState.RUNNING, ContainerState.CREATED)]
        # only the newest attempt of each container can be alive, but be safe with duplicates
        sidecar_order = [str(c.get("name")) for c in podview.sidecars(self.pod)]
        regular = [c for c in live if name_of(c) not in sidecar_order]
        sidecars = sorted(
            (c for c in live if name_of(c) in sidecar_order), key=lambda c: sidecar_order.index(name_of(c))
        )
        done: dict[str, asyncio.Event] = {c.id: asyncio.Event() for c in live}

        async def stop(c: ContainerStatus, after: list[ContainerStatus]) -> None:
            async def turn() -> None:
                for other in after:
                    await done[other.id].wait()

            try:
                await self.kill_container(c, grace, wait_turn=turn if after else None, deadline=deadline)
            finally:
                done[c.id].set()

        tasks = [stop(c, []) for c in regular]
        for i, c in enumerate(sidecars):
            tasks.append(stop(c, regular + sidecars[i + 1 :]))
        if tasks:
            await asyncio.gather(*tasks)
        if live and clock.monotonic() > deadline + MIN_GRACE + EXCEEDED_GRACE_SLACK:
            # SIGKILL is sent at the deadline, so only a stuck runtime gets here.
            self.ctx.recorder.pod_event(self.pod, "Warning", ev.EXCEEDED_GRACE_PERIOD,
                                        "Container runtime did not kill the pod within specified grace period.")
        for sb in state.sandboxes:
            try:
                await self._timed("stop_podsandbox", self.ctx.runtime.stop_pod_sandbox(sb.id))
            except RuntimeError_ as e:
                log.warning("stop sandbox failed", extra={"kv": {"sandbox": sb.id, "err": str(e)}})
        if self.ctx.probes is not None:
            self.ctx.probes.remove_pod(self.uid)

    async def _terminate(self) -> None:
        grace = self._terminate_grace if self._terminate_grace is not None else podview.grace_period(self.pod)
        log.info("terminating pod", extra={"kv": {"pod": podview.format_pod(self.pod), "grace": grace}})
        if self.ctx.probes is not None:
            self.ctx.probes.stop_liveness_and_startup(self.uid)
        try:
            state = await self.observe()
            await self.kill_pod(state, grace)
            state = await self.observe()
            await self._publish(state)
            if self._terminate_remove:
                await self.cleanup(state)
        except RuntimeError_ as e:
            log.warning("terminate failed", extra={"kv": {"pod": podview.format_pod(self.pod), "err": str(e)}})
        self.ctx.publish(self.pod, None if self._terminate_remove else self.st.status)

    async def cleanup(self, state: PodRuntimeState) -> None:
        """After termination: remove containers, sandbox, volumes and the pod cgroup."""
        rt = self.ctx.runtime
        for c in state.containers:
            await self._timed("remove_container", rt.remove_container(c.id))
        for sb in state.sandboxes:
            await self._timed("remove_podsandbox", rt.remove_pod_sandbox(sb.id))
        teardown_pod_dir(self.ctx.root_dir, self.uid)
        if self.ctx.cgroups is not None:
            try:
                self.ctx.cgroups.remove_pod(self.uid)
            except Exception as e:  # a busy cgroup is retried by the orphan sweep
                log.warning("pod cgroup removal failed", extra={"kv": {"uid": self.uid, "err": str(e)}})
        self.ctx.container_backoff.forget_prefix(f"{podview.name(self.pod)}_{podview.namespace(self.pod)}_{self.uid}_")
        self.ctx.image_backoff.forget_prefix(f"{self.uid}_")


def _create_empty_file(path: str) -> None:
    """The host side of the container's terminationMessagePath bind mount."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o666)
    os.close(fd)
