"""Starting and killing one container (upstream kuberuntime_container.go startContainer / killContainer)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from cri.errors import CreateContainerError, NotFoundError, RuntimeError_, StartContainerError
from cri.runtime import Runtime
from cri.types import ContainerState, ContainerStatus, DNSConfig, Mount, PodSandboxStatus
from minikubelet import events as ev
from minikubelet.api.expansion import EnvSourceError, container_env
from minikubelet.api.pod_objects import PodObjects, standalone
from minikubelet.base.clock import Clock
from minikubelet.base.durations import go_duration
from minikubelet.base.podview import ContainerView, Pod, PodView
from minikubelet.base.safepath import UnsafePathError
from minikubelet.events import EventRecorder
from minikubelet.metrics import Metrics
from minikubelet.metrics_node import VolumeCountCollector
from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint
from minikubelet.runtime.state import PodRuntimeState, name_of, restart_count_of
from minikubelet.volumes.manager import (
    VolumeError,
    container_mounts,
    create_termination_log,
    host_mounter,
    pod_dir,
    refresh_volumes,
    setup_volumes,
)
from minikubelet.volumes.mounter import Mounter
from minikubelet.volumes.operations import VolumeOperations
from minikubelet.worker.backoff import Backoff
from minikubelet.worker.container_config import container_config, sandbox_config
from minikubelet.worker.dependencies import CgroupSource
from minikubelet.worker.dns import DNSError, DNSSettings, pod_dns, read_host_dns
from minikubelet.worker.hooks import HookError, run_hook
from minikubelet.worker.hosts import (
    ETC_HOSTS,
    HostnameError,
    hosts_content,
    read_node_hosts,
    should_mount_hosts_file,
    write_hosts_file,
)
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.log_files import LogFiles
from minikubelet.worker.planner import backoff_key
from minikubelet.worker.pod_state import PodSyncState
from minikubelet.worker.resize_plan import effective_requirements
from minikubelet.worker.security_context import DEFAULT_OPTIONS, SecurityContextError, SecurityOptions

if TYPE_CHECKING:  # the API client is imported only by a node that joins a cluster
    from minikubelet.worker.pod_objects import PodObjectSource

log = logging.getLogger("minikubelet.worker.containers")

RUNTIME_HANDLER = ""  # the runtime's default handler: no RuntimeClass here
MIN_GRACE = 2  # upstream minimumGracePeriodInSeconds
PRESTOP_EXTRA_GRACE = 2  # upstream gives an overrunning preStop hook 2 s more, once
PRESTOP_SETTLE = 1.0  # how long an overrunning hook may take to notice its container is gone


class Containers:
    def __init__(self, runtime: Runtime, clock: Clock, recorder: EventRecorder, metrics: Metrics,
                 container_backoff: Backoff, images: ImagePuller, cgroups: CgroupSource | None,
                 root_dir: str, pod_logs_dir: str, host_ip: str,
                 allocatable: Mapping[str, Fraction] | None = None, legacy_log_dir: str = "",
                 security: SecurityOptions = DEFAULT_OPTIONS, dns: DNSSettings | None = None,
                 mounter: Mounter | None = None) -> None:
        self._runtime = runtime
        self._clock = clock
        self._recorder = recorder
        self._metrics = metrics
        self.volume_ops = VolumeOperations(metrics.node)
        metrics.registry.register(VolumeCountCollector(self.volume_ops.desired_plugins, self.volume_ops.actual_plugins))
        self._backoff = container_backoff
        self._images = images
        self.cgroups = cgroups
        self._root_dir = root_dir
        self._pod_logs_dir = pod_logs_dir
        self._host_ip = host_ip
        self.allocatable: Mapping[str, Fraction] = allocatable or {}  # for resourceFieldRef without a limit
        self.logs = LogFiles(pod_logs_dir, legacy_log_dir)
        self._security = security
        self._dns = dns  # None: the sandbox gets the runtime's default resolver config
        self._cluster_domain = dns.cluster_domain if dns is not None else ""
        self.mounter = mounter or host_mounter()  # tmpfs for memory-backed volumes
        self.objects: PodObjectSource | None = None  # joined: ConfigMaps, Secrets and Services from the API server
        self.actuated: PodResourceCheckpoint | None = None  # what each container was given (in-place resize)

    async def pod_objects(self, view: PodView) -> PodObjects:
        """The ConfigMaps, Secrets and Service env this sync of the pod uses (nothing on a standalone node)."""
        if self.objects is None:
            return standalone(view.raw)
        return await self.objects.snapshot(view)

    def _fail_start(self, view: PodView, c: ContainerView, st: PodSyncState, reason: str, message: str,
                    event_message: str | None = None) -> str:
        st.reasons[c.name] = (reason, message)
        self._recorder.pod_event(view.raw, "Warning", ev.FAILED, event_message or f"Error: {reason}", c.name)
        self._metrics.started_containers_errors.labels(container_type(c), reason).inc()
        return ""

    def _record_actuated(self, view: PodView, c: ContainerView) -> None:
        """upstream setActuatedContainerResources before the create: the container runs with its allocation. The
        record is written behind, while the create runs, and is on disk before the start."""
        if self.actuated is None:
            return
        try:
            self.actuated.set_container(view.uid, c.name, effective_requirements(view, c))
        except OSError as e:
            log.error("recording a container's resources failed",
                      extra={"kv": {"pod": view.format_pod, "container": c.name, "err": str(e)}})

    async def start(self, view: PodView, c: ContainerView, state: PodRuntimeState, st: PodSyncState,
                    reported: dict[str, Any] | None) -> str:
        """Start one container in the pod's sandbox: its id, or "" when it did not start (the reason is in `st`)."""
        name = c.name
        uid = view.uid
        pod = view.raw
        latest = state.latest(name)
        # Upstream doBackOff: a container that exited recently waits out its backoff. Its reference is the newest
        # *exited* instance: one killed in this pass (a failed liveness probe) still shows running in `state`, and
        # its restart is judged by the exit before it, not let through unchecked.
        exited = next((a for a in state.attempts(name) if a.state is ContainerState.EXITED), None)
        if exited is not None and exited.finished_at:
            key = backoff_key(view, c)
            if self._backoff.in_backoff_since(key, exited.finished_at):
                delay = self._backoff.get(key)
                st.reasons[name] = (
                    "CrashLoopBackOff",
                    f"back-off {go_duration(delay)} restarting failed container={name} pod={view.format_pod}",
                )
                self._recorder.pod_event(
                    pod, "Warning", ev.BACKOFF,
                    f"Back-off restarting failed container {name} in pod {view.format_pod}", name,
                )
                st.wake_no_later_than(self._clock.monotonic() + self._backoff.remaining(key, exited.finished_at) + 0.05)
                return ""
            self._backoff.next(key, exited.finished_at)

        # upstream counts the start once past the back-off, before the image and the create
        self._metrics.started_containers.labels(container_type(c)).inc()
        image = await self._images.ensure_image(view, c, st)
        if not image.ok:
            if image.failure is not None:
                reason, message = image.failure
                return self._fail_start(view, c, st, reason, message, f"Error: {reason}")
            if st.reasons.get(name, ("",))[0] == "ImagePullBackOff":
                self._metrics.started_containers_errors.labels(container_type(c), "ImagePullBackOff").inc()
            return ""

        restart_count = restart_count_of(latest) + 1 if latest is not None else 0
        if latest is None and reported is not None:
            restart_count = _reported_restart_count(reported, name)
        sandbox = state.sandbox
        assert sandbox is not None
        target_id = ""
        if c.target_container_name:
            # upstream getTargetID: the target's newest instance, whatever its state (the runtime refuses
            # to join the namespace of one that is not running)
            target = state.latest(c.target_container_name)
            if target is None:
                message = f"unable to find target container {c.target_container_name}"
                return self._fail_start(view, c, st, "CreateContainerConfigError", message, f"Error: {message}")
            target_id = target.id
        pod_ip = sandbox.ip or self._host_ip
        field_values = {
            "status.podIP": pod_ip,
            "status.podIPs": pod_ip,
            "status.hostIP": self._host_ip,
            "status.hostIPs": self._host_ip,
        }
        objects = await self.pod_objects(view)
        try:
            if st.volume_paths is None:
                st.volume_paths = setup_volumes(pod, self._root_dir, self.mounter, self.allocatable, objects,
                                                self.volume_ops)
            mounts = container_mounts(pod, dict(c.raw), st.volume_paths,
                                      env=lambda: dict(container_env(c.raw, pod, field_values, self.allocatable,
                                                                     objects)))
            mounts += self._hosts_mount(view, c, sandbox)
        except (VolumeError, OSError, HostnameError, EnvSourceError) as e:
            return self._fail_start(view, c, st, "CreateContainerConfigError", str(e), f"Error: {e}")
        try:
            tlog = create_termination_log(self._root_dir, uid, name, restart_count)
        except (OSError, UnsafePathError) as e:
            return self._fail_start(view, c, st, "CreateContainerConfigError", str(e), f"Error: {e}")
        resources = self.cgroups.container_resources(view, c) if self.cgroups else None
        try:
            cfg = container_config(
                view, c, restart_count=restart_count, mounts=mounts, field_values=field_values,
                resources=resources, termination_log_host_path=tlog, image_stop_signal=image.stop_signal,
                allocatable=self.allocatable, image_user=image.user, security_options=self._security,
                objects=objects,
            )
        except (EnvSourceError, SecurityContextError) as e:
            return self._fail_start(view, c, st, "CreateContainerConfigError", str(e), f"Error: {e}")
        if target_id:
            cfg = dataclasses.replace(cfg, pid_target_id=target_id)
        cgroup_parent = self.cgroups.cgroup_parent(view) if self.cgroups else ""
        try:
            scfg = sandbox_config(view, sandbox.metadata.attempt, self._pod_logs_dir, cgroup_parent,
                                  cluster_domain=self._cluster_domain)
        except HostnameError as e:
            return self._fail_start(view, c, st, "CreateContainerConfigError", str(e), f"Error: {e}")
        try:
            self.logs.ensure_container_dir(view.namespace, view.name, uid, name)
        except OSError as e:
            message = f"create container log directory for container {name} failed: {e}"
            return self._fail_start(view, c, st, "CreateContainerConfigError", message, f"Error: {message}")
        self._record_actuated(view, c)
        try:
            cid = await self._runtime.create_container(sandbox.id, cfg, scfg)
        except CreateContainerError as e:
            return self._fail_start(view, c, st, "CreateContainerError", str(e), f"Error: {e}")
        self._recorder.pod_event(pod, "Normal", ev.CREATED, "Container created", name)
        if self.cgroups is not None:
            self.cgroups.container_created(view, cid)
        if self.actuated is not None:
            await self.actuated.durable()
        try:
            await self._runtime.start_container(cid)
        except (StartContainerError, NotFoundError) as e:
            return self._fail_start(view, c, st, "RunContainerError", str(e), f"Error: {e}")
        self._recorder.pod_event(pod, "Normal", ev.STARTED, "Container started", name)
        if c.kind == "init":
            self._metrics.pod_startup.init_container_started(uid, self._clock.now())
        if self.cgroups is not None:
            self.cgroups.container_started(view, cid)
        self.logs.link_legacy(cid, name, view.name, view.namespace, os.path.join(scfg.log_directory, cfg.log_path))

        if c.post_start:
            try:
                await run_hook(dict(c.post_start), runtime=self._runtime, clock=self._clock, container_id=cid,
                               container=c, pod_ip=pod_ip, pod_desc=view.format_pod,
                               sleep_cut=self._metrics.sleep_action_terminated_early.inc,
                               http_fallback=self._http_fallback(pod))
            except HookError as e:
                # upstream startContainer: the event and the waiting reason carry the hook's message, and the
                # container is killed as any other (its preStop hook runs too)
                self._recorder.pod_event(pod, "Warning", ev.FAILED_POST_START_HOOK, str(e), name)
                status = await self._runtime.container_status(cid)
                await self.kill(view, status, view.grace_period, pod_ip, "FailedPostStartHook")
                st.reasons[name] = ("PostStartHookError", str(e))
                return ""
        st.reasons.pop(name, None)
        return cid

    def _http_fallback(self, pod: Pod) -> Callable[[str], None]:
        def fell_back(host: str) -> None:
            # upstream runHTTPHandler: counted, and a Warning on the pod (no container field path)
            self._metrics.lifecycle_handler_http_fallbacks.inc()
            self._recorder.pod_event(pod, "Warning", ev.LIFECYCLE_HTTP_FALLBACK, f"request to HTTPS lifecycle hook "
                                     f"{host} got HTTP response, retry with HTTP succeeded")
        return fell_back

    async def kill(
        self,
        view: PodView,
        status: ContainerStatus,
        grace: int,
        pod_ip: str,
        message: str = "",
        reason: str = "",
        wait_turn: Callable[[], Awaitable[None]] | None = None,
        deadline: float | None = None,
    ) -> None:
        """Run preStop (within the grace), wait for this container's turn, then stop it (SIGKILL at the deadline)."""
        name = name_of(status)
        pod = view.raw
        c = view.find(name)
        self._recorder.pod_event(pod, "Normal", ev.KILLING, message or f"Stopping container {name}", name)
        clock = self._clock
        start = clock.monotonic()
        end = deadline if deadline is not None else start + grace
        pre_stop = c.pre_stop if c is not None else None
        hook: asyncio.Task[None] | None = None
        if pre_stop and c is not None and grace > 0 and status.state is ContainerState.RUNNING:
            # upstream executePreStopHook: wait for the hook at most the grace period; the hook is not
            # stopped then, it ends with the container (and its failure is reported without details,
            # so that secrets do not leak into events)
            hook = asyncio.create_task(run_hook(dict(pre_stop), runtime=self._runtime, clock=clock,
                                                container_id=status.id, container=c, pod_ip=pod_ip,
                                                pod_desc=view.format_pod,
                                                sleep_cut=self._metrics.sleep_action_terminated_early.inc,
                                                http_fallback=self._http_fallback(pod)))
            remaining = max(end - clock.monotonic(), 0.0)
            sleeper = asyncio.create_task(clock.sleep(remaining))
            try:
                await asyncio.wait({hook, sleeper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                await asyncio.gather(sleeper, return_exceptions=True)
            if not hook.done():
                end = clock.monotonic() + PRESTOP_EXTRA_GRACE
        if wait_turn is not None:
            remaining = end - clock.monotonic()
            if remaining > 0:
                try:
                    await asyncio.wait_for(wait_turn(), timeout=remaining)
                except TimeoutError:
                    pass
        timeout = max(end - clock.monotonic(), MIN_GRACE)
        try:
            await self._runtime.stop_container(status.id, int(timeout + 0.999))
        finally:
            if hook is not None:
                await self._finish_pre_stop(pod, name, hook)

    async def _finish_pre_stop(self, pod: dict[str, Any], name: str, hook: asyncio.Task[None]) -> None:
        if not hook.done():
            # the container is gone, so an exec hook ends at once; anything else is not waited for
            done, _ = await asyncio.wait({hook}, timeout=PRESTOP_SETTLE)
            if not done:
                hook.cancel()
                await asyncio.gather(hook, return_exceptions=True)
                return
        if not hook.cancelled() and hook.exception() is not None:
            self._recorder.pod_event(pod, "Warning", ev.FAILED_PRE_STOP_HOOK, "PreStopHook failed", name)

    async def create_sandbox(self, view: PodView, attempt: int, st: PodSyncState) -> str:
        """Pod cgroup, volumes, then the sandbox; '' when any of them failed (an Event says why)."""
        pod = view.raw
        try:
            cgroup_parent = self.cgroups.ensure_pod(view) if self.cgroups else ""
        except Exception as e:  # cgroup failures must fail the pod, never run it unlimited
            self._sandbox_failed(pod, st, f"failed to create pod cgroup: {e}")
            return ""
        try:
            st.volume_paths = setup_volumes(pod, self._root_dir, self.mounter, self.allocatable,
                                            await self.pod_objects(view), self.volume_ops)
        except (VolumeError, OSError) as e:
            volume = e.volume if isinstance(e, VolumeError) else ""
            message = f'MountVolume.SetUp failed for volume "{volume}" : {e}'
            self._recorder.pod_event(pod, "Warning", ev.FAILED_MOUNT, message)
            # upstream leaves the containers ContainerCreating and says why only in the event; the status
            # says it too, so that a refused volume is visible on /pods
            for c in (*view.init_containers, *view.app_containers):
                st.reasons[c.name] = ("CreateContainerConfigError", message)
            st.sync_failed = True
            return ""
        for name, (reason, message) in list(st.reasons.items()):
            if reason == "CreateContainerConfigError" and message.startswith("MountVolume.SetUp failed"):
                del st.reasons[name]
        resources = self.cgroups.sandbox_resources() if self.cgroups else None
        # upstream counts a pod start where kuberuntime creates the sandbox (config, log dir, RunPodSandbox)
        user_ns = (view.raw.get("spec") or {}).get("hostUsers") is False
        self._metrics.started_pods.inc()
        if user_ns:
            self._metrics.started_user_namespaced_pods.inc()

        def start_failed() -> None:
            self._metrics.started_pods_errors.inc()
            if user_ns:
                self._metrics.started_user_namespaced_pods_errors.inc()
        try:
            cfg = sandbox_config(view, attempt, self._pod_logs_dir, cgroup_parent, resources,
                                 dns=self._pod_dns(view), cluster_domain=self._cluster_domain)
        except (DNSError, HostnameError) as e:
            start_failed()
            self._sandbox_failed(pod, st, str(e))
            return ""
        try:
            self.logs.ensure_pod_dir(view.namespace, view.name, view.uid)
        except OSError as e:
            start_failed()
            self._sandbox_failed(pod, st, f"failed to create log directory for pod {view.format_pod}: {e}")
            return ""
        t0 = time.monotonic()
        try:
            return str(await self._runtime.run_pod_sandbox(cfg))
        except RuntimeError_ as e:
            self._metrics.run_podsandbox_errors.labels(RUNTIME_HANDLER).inc()
            start_failed()
            self._sandbox_failed(pod, st, str(e))
            return ""
        finally:
            self._metrics.run_podsandbox_duration.labels(RUNTIME_HANDLER).observe(time.monotonic() - t0)

    async def refresh_volumes(self, view: PodView) -> None:
        """Rewrite downwardAPI, projected, configMap and secret volumes after a change of the pod (labels,
        annotations) or of an object they show; also those of a pod adopted after an agent restart, which are
        set up but not in `st`."""
        try:
            refresh_volumes(view.raw, self._root_dir, self.allocatable, await self.pod_objects(view), self.volume_ops)
        except VolumeError as e:
            self._recorder.pod_event(view.raw, "Warning", ev.FAILED_MOUNT,
                                     f'MountVolume.SetUp failed for volume "{e.volume}" : {e}')

    def _pod_dns(self, view: PodView) -> DNSConfig | None:
        """The sandbox's resolver config (upstream GetPodDNS), recording its Warning events on the pod."""
        if self._dns is None:
            return None
        result = pod_dns(view, self._dns, read_host_dns(self._dns.resolv_conf))
        for reason, message in result.events:
            self._recorder.pod_event(view.raw, "Warning", reason, message)
        return result.config

    def _hosts_mount(self, view: PodView, c: ContainerView, sandbox: PodSandboxStatus) -> list[Mount]:
        """The kubelet-managed /etc/hosts (upstream makeHostsMount), rewritten at each container start."""
        pod_ips = tuple(ip for ip in (sandbox.ip, *sandbox.additional_ips) if ip)
        if not should_mount_hosts_file(view, pod_ips, c):
            return []
        node_hosts = read_node_hosts() if view.host_network else ""
        content = hosts_content(view, pod_ips, self._cluster_domain, node_hosts)
        path = write_hosts_file(pod_dir(self._root_dir, view.uid), content)
        return [Mount(container_path=ETC_HOSTS, host_path=path)]

    def _sandbox_failed(self, pod: dict[str, Any], st: PodSyncState, message: str) -> None:
        self._recorder.pod_event(pod, "Warning", ev.FAILED_CREATE_POD_SANDBOX, f"Failed to create pod sandbox: {message}")
        st.sync_failed = True


def container_type(c: ContainerView) -> str:
    """The kubelet's container_type label: sidecars are init containers."""
    if c.kind == "ephemeral":
        return "ephemeral_container"
    return "container" if c.kind == "regular" else "init_container"


def _reported_restart_count(reported: dict[str, Any], name: str) -> int:
    """Continue counting when the runtime lost every attempt of the container."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for s in reported.get(key) or []:
            if s.get("name") == name and s.get("containerID"):
                return int(s.get("restartCount", 0)) + 1
    return 0
