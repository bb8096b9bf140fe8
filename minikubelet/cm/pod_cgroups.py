"""The agent's view of the cgroups package: QoS, pod cgroups and container limits."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from cgroups.container_resources import container_linux_resources, kernel_readback
from cgroups.detect import detect_cgroup_version
from cgroups.driver import CgroupBusyError, CgroupDriver, CgroupError, ResourceConfig
from cgroups.manager import CgroupManager
from cgroups.naming import Naming
from cgroups.oom import SANDBOX_OOM_SCORE_ADJ, clamp_oom_score_adj, detect_min_oom_score_adj
from cgroups.qos import qos_class
from cgroups.v1 import CgroupV1Driver
from cgroups.v2 import CgroupV2Driver
from cri.types import LinuxResources
from minikubelet.base import podview
from minikubelet.base.podview import ContainerView, Pod, PodView
from minikubelet.base.safepath import safe_component
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.metrics_node import NodeMetrics
from minikubelet.node.procfs import memory_total

log = logging.getLogger("minikubelet.cgroups")

# Processes of a stopped pod can take a moment to leave its cgroup; removal is retried this long
# (doubling the interval from the first value), then left to the orphan sweep.
REMOVE_RETRY_FIRST = 0.05
REMOVE_RETRY_FOR = 10.0
SWEEP_PERIOD = 60.0


class CgroupSetupError(Exception):
    """The host's cgroups cannot be used as configured (the agent refuses to start)."""


def node_capacity() -> dict[str, object]:
    return {"cpu": str(os.cpu_count() or 1), "memory": str(memory_total())}


class PodCgroups:
    """Implements the pod worker's CgroupSource over a CgroupManager."""

    def __init__(self, manager: CgroupManager | None, memory_capacity: int, min_oom_score_adj: int,
                 active_pods: Callable[[], Iterable[Pod]], cpu_cfs_quota: bool = True,
                 cpu_period_us: int = 100_000, single_process_oom_kill: bool = False) -> None:
        self.manager = manager
        self.single_process_oom_kill = single_process_oom_kill
        self.memory_capacity = memory_capacity
        self.min_oom_score_adj = min_oom_score_adj
        self._active_pods = active_pods
        self._cpu_cfs_quota = cpu_cfs_quota
        self._cpu_period_us = cpu_period_us
        self._views: dict[str, tuple[Pod, PodView]] = {}  # uid -> (pod version, its view)
        self._retries: set[asyncio.Task[bool]] = set()

    def qos_class(self, pod: PodView) -> str:
        return qos_class(pod)

    def ensure_pod(self, pod: PodView) -> str:
        # Refused even without cgroups: the sandbox must not start for a uid no host path can hold.
        safe_component(pod.uid, "pod uid")
        if self.manager is None:
            return ""
        self.manager.update_qos(self._active_views())
        return self.manager.ensure_pod(pod)

    def update_qos(self) -> None:
        """Resize the Burstable cgroup's shares to the active pods' CPU requests (upstream's periodic
        UpdateQOSCgroups: an in-place resize changes them without creating a pod cgroup)."""
        if self.manager is None:
            return
        try:
            self.manager.update_qos(self._active_views())
        except (OSError, CgroupError) as e:
            log.warning("updating the QoS cgroups failed", extra={"kv": {"err": str(e)}})

    def _active_views(self) -> list[PodView]:
        # The source hands out pod dicts; build each version's view once, not on every pod start.
        views: dict[str, tuple[Pod, PodView]] = {}
        for p in self._active_pods():
            cached = self._views.get(podview.uid(p))
            view = cached[1] if cached is not None and cached[0] is p else PodView.of(p)
            views[view.uid] = (p, view)
        self._views = views
        return [v for _, v in views.values()]

    def _oom_group_driver(self) -> CgroupV2Driver | None:
        """On cgroup v2, unless singleProcessOOMKill is set, an OOM kill takes the whole container. Upstream asks
        the runtime for memory.oom.group=1 in the CRI request; Docker has no such option, so the agent writes it."""
        if self.manager is None or self.single_process_oom_kill:
            return None
        driver = self.manager.driver
        return driver if isinstance(driver, CgroupV2Driver) else None

    def container_created(self, pod: PodView, container_id: str) -> None:
        """Before the start: a write after it would race an allocation in the container's first instructions, and
        the OOM killer would take one process and leave the rest running. With the cgroupfs driver the runtime
        names the cgroup after the container, so it is made here; a systemd scope exists only once started."""
        driver = self._oom_group_driver()
        if driver is None or self.manager is None or self.manager.naming == "systemd":
            return
        try:
            driver.create_with_oom_group(self.manager.container_cgroup(pod, container_id))
        except (OSError, CgroupError) as e:
            log.warning("memory.oom.group not set before the start",
                        extra={"kv": {"container": container_id, "err": str(e)}})

    def container_started(self, pod: PodView, container_id: str) -> None:
        """The systemd driver's case (and a cgroup the runtime made anew): the setting holds from now on."""
        driver = self._oom_group_driver()
        if driver is None or self.manager is None:
            return
        try:
            driver.set_oom_group(self.manager.container_cgroup(pod, container_id))
        except OSError as e:
            log.warning("memory.oom.group not set", extra={"kv": {"container": container_id, "err": str(e)}})

    def cgroup_parent(self, pod: PodView) -> str:
        return self.manager.cgroup_parent(pod) if self.manager is not None else ""

    def container_resources(self, pod: PodView, container: ContainerView) -> LinuxResources | None:
        return container_linux_resources(
            pod, container, self.memory_capacity, self.min_oom_score_adj,
            cpu_cfs_quota=self._cpu_cfs_quota, period_us=self._cpu_period_us,
        )

    # in-place resize: the pod cgroup read and written by the pod worker (worker/resize.py)
    def pod_cgroup_config(self, pod: PodView) -> ResourceConfig | None:
        return self.manager.pod_config(pod) if self.manager is not None else None

    def _pod_literal(self, pod: PodView) -> str | None:
        if self.manager is None:
            return None
        literal = self.manager.literal(self.manager.pod_cgroup_name(pod))
        return literal if self.manager.driver.exists(literal) else None

    def read_pod_cgroup(self, pod: PodView) -> ResourceConfig | None:
        literal = self._pod_literal(pod)
        if literal is None or self.manager is None:
            return None
        try:
            return self.manager.driver.read_config(literal)
        except (OSError, ValueError) as e:
            log.warning("reading the pod cgroup failed", extra={"kv": {"pod": pod.format_pod, "err": str(e)}})
            return None

    def read_container_cgroup(self, pod: PodView, container_id: str,
                              resources: LinuxResources) -> tuple[ResourceConfig, ResourceConfig] | None:
        if self.manager is None:
            return None
        literal = self.manager.container_cgroup(pod, container_id)
        if not self.manager.driver.exists(literal):
            return None
        try:
            have = self.manager.driver.read_config(literal)
        except (OSError, ValueError) as e:
            log.warning("reading the container cgroup failed", extra={"kv": {"container": container_id, "err": str(e)}})
            return None
        return kernel_readback(resources, self.manager.driver.version), have

    def set_pod_cgroup(self, pod: PodView, config: ResourceConfig) -> None:
        literal = self._pod_literal(pod)
        if literal is None or self.manager is None:
            raise CgroupError(f"the cgroup of pod {pod.format_pod} does not exist")
        self.manager.driver.update(literal, config)

    def pod_memory_usage(self, pod: PodView) -> int | None:
        if self.manager is None:
            return None
        try:
            usage = self.manager.pod_usage(pod.uid)
        except (OSError, ValueError):
            return None
        return usage.memory_usage_bytes if usage is not None else None

    def sandbox_resources(self) -> LinuxResources:
        return LinuxResources(oom_score_adj=clamp_oom_score_adj(SANDBOX_OOM_SCORE_ADJ, self.min_oom_score_adj))

    def try_remove_pod(self, uid: str) -> bool:
        """One attempt to remove the pod's cgroup from every hierarchy (unified included).

        True when nothing of it is left anywhere; False when some part is still busy or failed,
        so the caller can try again later. Never raises.
        """
        if self.manager is None:
            return True
        try:
            self.manager.remove_pod(uid)
        except CgroupBusyError:
            return False
        except (CgroupError, ValueError) as e:
            log.warning("pod cgroup removal failed", extra={"kv": {"uid": uid, "err": str(e)}})
            return False
        return uid not in self.manager.pod_cgroups()

    async def remove_pod_eventually(self, uid: str, timeout: float = REMOVE_RETRY_FOR,
                                    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> bool:
        """try_remove_pod until it succeeds or `timeout` seconds of waiting have passed."""
        delay, waited = REMOVE_RETRY_FIRST, 0.0
        while not self.try_remove_pod(uid):
            if waited >= timeout:
                log.info("pod cgroup still busy; left to the orphan sweep", extra={"kv": {"uid": uid}})
                return False
            await sleep(delay)
            waited += delay
            delay = min(delay * 2, 1.0)
        return True

    def remove_pod(self, uid: str) -> None:
        """Remove the pod's cgroup; while it is busy, keep retrying in the background for a while."""
        self._views.pop(uid, None)  # else the removed pod's dict and view live on until the next pod starts
        if self.try_remove_pod(uid):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to retry on: the orphan sweep will
        task = loop.create_task(self.remove_pod_eventually(uid), name=f"remove-pod-cgroup-{uid}")
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    def cleanup_orphans(self, known_uids: Iterable[str]) -> list[str]:
        """Remove the pod cgroups of pods not in known_uids, on every hierarchy; returns those still left.

        known_uids must hold every pod the agent may still create a cgroup for (desired pods and pods
        the runtime still runs): the sweep cannot tell a pod about to start from a forgotten one, only
        a busy cgroup from an empty one, and busy ones are never touched.
        """
        if self.manager is None:
            return []
        known = set(known_uids)
        orphans = {uid: path for uid, path in sorted(self.manager.pod_cgroups().items()) if uid not in known}
        if not orphans:
            return []
        # Before touching anything: a cgroup removed by mistake (another agent's on the same cgroupRoot) must
        # be traceable to this line.
        log.info("removing orphaned pod cgroups", extra={"kv": {
            "count": len(orphans), "cgroups": " ".join(f"{uid}={path}" for uid, path in orphans.items())}})
        left = []
        for uid in orphans:
            if self.try_remove_pod(uid):
                log.info("removed orphaned pod cgroup", extra={"kv": {"uid": uid}})
            else:
                left.append(uid)
                log.info("orphaned pod cgroup not removed yet", extra={"kv": {"uid": uid}})
        return left

    async def run_orphan_sweep(self, known_uids: Callable[[], Iterable[str]], period: float = SWEEP_PERIOD,
                               sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        """Housekeeping loop: cleanup_orphans(known_uids()) every `period` seconds, forever."""
        while True:
            await sleep(period)
            self.cleanup_orphans(known_uids())


def systemd_cgroup_driver(files: CgroupDriver) -> CgroupDriver:
    """cgroupDriver systemd: the slices through systemd over D-Bus (cgroups/systemd_driver.py); SystemdError
    when the system bus or systemd does not answer."""
    from cgroups.systemd_dbus import DbusSystemd  # only a node on the systemd driver talks to systemd
    from cgroups.systemd_driver import SystemdCgroupDriver

    return SystemdCgroupDriver(files, DbusSystemd())


def build_pod_cgroups(config: KubeletConfig, docker_cgroup_driver: str, active_pods: Callable[[], Iterable[Pod]],
                      metrics: NodeMetrics | None = None, root: Path = Path("/sys/fs/cgroup")) -> PodCgroups:
    if docker_cgroup_driver and docker_cgroup_driver != config.cgroup_driver:
        raise CgroupSetupError(
            f'misconfiguration: kubelet cgroup driver: "{config.cgroup_driver}" is different from docker cgroup '
            f'driver: "{docker_cgroup_driver}"'
        )
    capacity = node_capacity()
    memory = int(str(capacity["memory"]))
    min_oom = detect_min_oom_score_adj()
    if min_oom > -1000:
        log.warning("cannot lower oom_score_adj (no CAP_SYS_RESOURCE); clamping container values",
                    extra={"kv": {"minimum": min_oom}})
    manager = None
    if metrics is not None:
        try:
            metrics.cgroup_version.set(detect_cgroup_version(root))
        except OSError as e:
            log.warning("cgroup version not detected", extra={"kv": {"err": str(e)}})
    if config.cgroups_per_qos:
        version = detect_cgroup_version(root)
        driver: CgroupDriver = CgroupV2Driver(root, config.cgroup_root) if version == 2 else CgroupV1Driver(
            root, config.cgroup_root)
        naming: Naming = "systemd" if config.cgroup_driver == "systemd" else "cgroupfs"
        if naming == "systemd":
            driver = systemd_cgroup_driver(driver)
        reserved: dict[str, object] = {}
        for src in (config.kube_reserved, config.system_reserved):
            for k, v in src.items():
                reserved[k] = v if k not in reserved else _add(reserved[k], v)
        manager = CgroupManager(
            driver, naming, capacity, reserved, config.eviction_hard, config.enforce_node_allocatable,
            config.cgroup_root, pod_pids_limit=config.pod_pids_limit, cpu_cfs_quota=config.cpu_cfs_quota,
            cpu_cfs_quota_period_us=int(config.cpu_cfs_quota_period * 1_000_000),
        )
        if metrics is not None:
            manager.observe = metrics.cgroup_operation
        manager.ensure_hierarchy([PodView.of(p) for p in active_pods()])
        log.info("cgroup hierarchy ready", extra={"kv": {"version": version, "driver": naming,
                                                         "root": config.cgroup_root}})
    return PodCgroups(manager, memory, min_oom, active_pods, config.cpu_cfs_quota,
                      int(config.cpu_cfs_quota_period * 1_000_000), config.single_process_oom_kill)


def _add(a: object, b: object) -> str:
    from minikubelet.base.quantity import parse_quantity

    total = parse_quantity(a) + parse_quantity(b)
    return str(float(total)) if total.denominator != 1 else str(total.numerator)
