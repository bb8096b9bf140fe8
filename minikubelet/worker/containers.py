"""Starting and killing one container (upstream kuberuntime_container.go startContainer / killContainer)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from cri.errors import CreateContainerError, NotFoundError, RuntimeError_, StartContainerError
from cri.runtime import Runtime
from cri.types import ContainerState, ContainerStatus
from minikubelet import events as ev
from minikubelet.api.expansion import EnvSourceError
from minikubelet.base import podview
from minikubelet.base.clock import Clock
from minikubelet.base.durations import go_duration
from minikubelet.base.podview import Container, Pod
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.runtime.state import PodRuntimeState, name_of, restart_count_of
from minikubelet.volumes.manager import VolumeError, container_mounts, setup_volumes, termination_log_path
from minikubelet.worker.backoff import Backoff
from minikubelet.worker.container_config import container_config, sandbox_config
from minikubelet.worker.dependencies import CgroupSource
from minikubelet.worker.hooks import HookError, run_hook
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.log_files import LogFiles
from minikubelet.worker.planner import backoff_key
from minikubelet.worker.pod_state import PodSyncState

log = logging.getLogger("minikubelet.worker.containers")

MIN_GRACE = 2  # upstream minimumGracePeriodInSeconds
PRESTOP_EXTRA_GRACE = 2  # upstream gives an overrunning preStop hook 2 s more, once


class Containers:
    def __init__(self, runtime: Runtime, clock: Clock, recorder: EventRecorder, metrics: Metrics,
                 container_backoff: Backoff, images: ImagePuller, cgroups: CgroupSource | None,
                 root_dir: str, pod_logs_dir: str, host_ip: str, legacy_log_dir: str = "") -> None:
        self._runtime = runtime
        self._clock = clock
        self._recorder = recorder
        self._metrics = metrics
        self._backoff = container_backoff
        self._images = images
        self.cgroups = cgroups
        self._root_dir = root_dir
        self._pod_logs_dir = pod_logs_dir
        self._host_ip = host_ip
        self.logs = LogFiles(pod_logs_dir, legacy_log_dir)

    def _fail_start(self, pod: Pod, c: Container, st: PodSyncState, reason: str, message: str,
                    event_message: str | None = None) -> bool:
        name = str(c.get("name"))
        st.reasons[name] = (reason, message)
        self._recorder.pod_event(pod, "Warning", ev.FAILED, event_message or f"Error: {reason}", name)
        self._metrics.started_containers_errors.labels(podview.container_kind(pod, name) or "container", reason).inc()
        return False

    async def start(self, pod: Pod, c: Container, state: PodRuntimeState, st: PodSyncState,
                    reported: dict[str, Any] | None) -> bool:
        """Start one container in the pod's sandbox; False when it did not start (the reason is in `st`)."""
        name = str(c.get("name"))
        uid = podview.uid(pod)
        latest = state.latest(name)
        # Upstream doBackOff: a container that exited recently waits out its backoff.
        if latest is not None and latest.state is ContainerState.EXITED and latest.finished_at:
            key = backoff_key(pod, c)
            if self._backoff.in_backoff_since(key, latest.finished_at):
                delay = self._backoff.get(key)
                st.reasons[name] = (
                    "CrashLoopBackOff",
                    f"back-off {go_duration(delay)} restarting failed container={name} pod={podview.format_pod(pod)}",
                )
                self._recorder.pod_event(
                    pod, "Warning", ev.BACKOFF,
                    f"Back-off restarting failed container {name} in pod {podview.format_pod(pod)}", name,
                )
                st.wake_no_later_than(self._clock.monotonic() + self._backoff.remaining(key, latest.finished_at) + 0.05)
                return False
            self._backoff.next(key, latest.finished_at)

        image = await self._images.ensure_image(pod, uid, c, st)
        if not image.ok:
            if image.failure is not None:
                reason, message = image.failure
                return self._fail_start(pod, c, st, reason, message, f"Error: {reason}")
            return False

        restart_count = restart_count_of(latest) + 1 if latest is not None else 0
        if latest is None and reported is not None:
            restart_count = _reported_restart_count(reported, name)
        sandbox = state.sandbox
        assert sandbox is not None
        try:
            if st.volume_paths is None:
                st.volume_paths = setup_volumes(pod, self._root_dir)
            mounts = container_mounts(c, st.volume_paths)
        except (VolumeError, OSError) as e:
            return self._fail_start(pod, c, st, "CreateContainerConfigError", str(e), f"Error: {e}")
        tlog = termination_log_path(self._root_dir, uid, name, restart_count)
        try:
            _create_empty_file(tlog)
        except OSError as e:
            return self._fail_start(pod, c, st, "CreateContainerConfigError", str(e), f"Error: {e}")
        resources = self.cgroups.container_resources(pod, c) if self.cgroups else None
        pod_ip = sandbox.ip or self._host_ip
        field_values = {
            "status.podIP": pod_ip,
            "status.podIPs": pod_ip,
            "status.hostIP": self._host_ip,
            "status.hostIPs": self._host_ip,
        }
        try:
            cfg = container_config(
                pod, c, restart_count=restart_count, mounts=mounts, field_values=field_values,
                resources=resources, termination_log_host_path=tlog, image_stop_signal=image.stop_signal,
            )
        except EnvSourceError as e:
            return self._fail_start(pod, c, st, "CreateContainerConfigError", str(e), f"Error: {e}")
        cgroup_parent = self.cgroups.cgroup_parent(pod) if self.cgroups else ""
        scfg = sandbox_config(pod, sandbox.metadata.attempt, self._pod_logs_dir, cgroup_parent)
        try:
            self.logs.ensure_container_dir(podview.namespace(pod), podview.name(pod), uid, name)
        except OSError as e:
            message = f"create container log directory for container {name} failed: {e}"
            return self._fail_start(pod, c, st, "CreateContainerConfigError", message, f"Error: {message}")
        try:
            cid = await self._runtime.create_container(sandbox.id, cfg, scfg)
        except CreateContainerError as e:
            return self._fail_start(pod, c, st, "CreateContainerError", str(e), f"Error: {e}")
        self._recorder.pod_event(pod, "Normal", ev.CREATED, f"Created container: {name}", name)
        try:
            await self._runtime.start_container(cid)
        except (StartContainerError, NotFoundError) as e:
            return self._fail_start(pod, c, st, "RunContainerError", str(e), f"Error: {e}")
        self._recorder.pod_event(pod, "Normal", ev.STARTED, f"Started container {name}", name)
        self.logs.link_legacy(cid, name, podview.name(pod), podview.namespace(pod),
                              os.path.join(scfg.log_directory, cfg.log_path))
        self._metrics.started_containers.labels(podview.container_kind(pod, name) or "container").inc()

        lifecycle = c.get("lifecycle") if isinstance(c.get("lifecycle"), dict) else {}
        post_start = lifecycle.get("postStart") if isinstance(lifecycle, dict) else None
        if isinstance(post_start, dict):
            try:
                await run_hook(
                    post_start, runtime=self._runtime, clock=self._clock, container_id=cid, container=c,
                    pod_ip=pod_ip, timeout=float(podview.grace_period(pod)),
                )
            except HookError as e:
                self._recorder.pod_event(pod, "Warning", ev.FAILED_POST_START_HOOK, str(e), name)
                status = await self._runtime.container_status(cid)
                await self.kill(pod, status, podview.grace_period(pod), pod_ip, "FailedPostStartHook",
                                run_pre_stop=False)
                st.reasons[name] = ("PostStartHookError", str(e))
                return False
        st.reasons.pop(name, None)
        return True

    async def kill(
        self,
        pod: Pod,
        status: ContainerStatus,
        grace: int,
        pod_ip: str,
        message: str = "",
        reason: str = "",
        run_pre_stop: bool = True,
        wait_turn: Callable[[], Awaitable[None]] | None = None,
        deadline: float | None = None,
    ) -> None:
        """Run preStop (within the grace), wait for this container's turn, then stop it (SIGKILL at the deadline)."""
        name = name_of(status)
        c = podview.find_container(pod, name)
        self._recorder.pod_event(pod, "Normal", ev.KILLING, message or f"Stopping container {name}", name)
        clock = self._clock
        start = clock.monotonic()
        end = deadline if deadline is not None else start + grace
        lifecycle = c.get("lifecycle") if c is not None and isinstance(c.get("lifecycle"), dict) else {}
        pre_stop = lifecycle.get("preStop") if isinstance(lifecycle, dict) else None
        if run_pre_stop and isinstance(pre_stop, dict) and grace > 0 and status.state is ContainerState.RUNNING:
            remaining = end - clock.monotonic()
            hook = asyncio.create_task(
                run_hook(
                    pre_stop, runtime=self._runtime, clock=clock, container_id=status.id, container=c or {},
                    pod_ip=pod_ip, timeout=max(remaining, 0.0),
                )
            )
            done, _ = await asyncio.wait({hook}, timeout=max(remaining, 0.0))
            if not done:
                hook.cancel()
                await asyncio.gather(hook, return_exceptions=True)
                self._recorder.pod_event(
                    pod, "Warning", ev.FAILED_PRE_STOP_HOOK,
                    f"PreStopHook failed: hook did not finish within the grace period of {grace}s", name,
                )
                end = clock.monotonic() + PRESTOP_EXTRA_GRACE
            elif hook.exception() is not None:
                self._recorder.pod_event(
                    pod, "Warning", ev.FAILED_PRE_STOP_HOOK, f"PreStopHook failed: {hook.exception()}", name
                )
        if wait_turn is not None:
            remaining = end - clock.monotonic()
            if remaining > 0:
                try:
                    await asyncio.wait_for(wait_turn(), timeout=remaining)
                except TimeoutError:
                    pass
        timeout = max(end - clock.monotonic(), MIN_GRACE)
        await self._runtime.stop_container(status.id, int(timeout + 0.999))

    async def create_sandbox(self, pod: Pod, attempt: int, st: PodSyncState) -> str:
        """Pod cgroup, volumes, then the sandbox; '' when any of them failed (an Event says why)."""
        try:
            cgroup_parent = self.cgroups.ensure_pod(pod) if self.cgroups else ""
        except Exception as e:  # cgroup failures must fail the pod, never run it unlimited
            self._sandbox_failed(pod, st, f"failed to create pod cgroup: {e}")
            return ""
        try:
            st.volume_paths = setup_volumes(pod, self._root_dir)
        except (VolumeError, OSError) as e:
            self._recorder.pod_event(pod, "Warning", ev.FAILED_MOUNT, f"MountVolume.SetUp failed: {e}")
            st.wake_no_later_than(self._clock.monotonic() + 10.0)
            return ""
        resources = self.cgroups.sandbox_resources() if self.cgroups else None
        cfg = sandbox_config(pod, attempt, self._pod_logs_dir, cgroup_parent, resources)
        try:
            self.logs.ensure_pod_dir(podview.namespace(pod), podview.name(pod), podview.uid(pod))
        except OSError as e:
            self._sandbox_failed(pod, st, f"failed to create log directory for pod {podview.format_pod(pod)}: {e}")
            return ""
        try:
            return str(await self._runtime.run_pod_sandbox(cfg))
        except RuntimeError_ as e:
            self._sandbox_failed(pod, st, str(e))
            return ""

    def _sandbox_failed(self, pod: Pod, st: PodSyncState, message: str) -> None:
        self._recorder.pod_event(pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX, f"Failed to create pod sandbox: {message}")
        st.wake_no_later_than(self._clock.monotonic() + 10.0)


def _reported_restart_count(reported: dict[str, Any], name: str) -> int:
    """Continue counting when the runtime lost every attempt of the container."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for s in reported.get(key) or []:
            if s.get("name") == name and s.get("containerID"):
                return int(s.get("restartCount", 0)) + 1
    return 0


def _create_empty_file(path: str) -> None:
    """The host side of the container's terminationMessagePath bind mount."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o666)
    os.close(fd)
