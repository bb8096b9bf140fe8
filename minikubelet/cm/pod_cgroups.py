"""The agent's view of the cgroups package: QoS, pod cgroups and container limits."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

from cgroups.container_resources import container_linux_resources
from cgroups.detect import detect_cgroup_version
from cgroups.driver import CgroupBusyError, CgroupDriver
from cgroups.manager import CgroupManager
from cgroups.naming import Naming
from cgroups.oom import SANDBOX_OOM_SCORE_ADJ, clamp_oom_score_adj, detect_min_oom_score_adj
from cgroups.qos import qos_class
from cgroups.v1 import CgroupV1Driver
from cgroups.v2 import CgroupV2Driver
from cri.types import LinuxResources
from minikubelet.base import podview
from minikubelet.base.podview import ContainerView, Pod, PodView
from minikubelet.config.kubelet_config import KubeletConfig

log = logging.getLogger("minikubelet.cgroups")


class CgroupSetupError(Exception):
    """The host's cgroups cannot be used as configured (the agent refuses to start)."""


def node_capacity() -> dict[str, object]:
    return {"cpu": str(os.cpu_count() or 1), "memory": str(psutil.virtual_memory().total)}


class PodCgroups:
    """Implements the pod worker's CgroupSource over a CgroupManager."""

    def __init__(self, manager: CgroupManager | None, memory_capacity: int, min_oom_score_adj: int,
                 active_pods: Callable[[], Iterable[Pod]], cpu_cfs_quota: bool = True,
                 cpu_period_us: int = 100_000) -> None:
        self.manager = manager
        self.memory_capacity = memory_capacity
        self.min_oom_score_adj = min_oom_score_adj
        self._active_pods = active_pods
        self._cpu_cfs_quota = cpu_cfs_quota
        self._cpu_period_us = cpu_period_us
        self._views: dict[str, tuple[Pod, PodView]] = {}  # uid -> (pod version, its view)

    def qos_class(self, pod: PodView) -> str:
        return qos_class(pod)

    def ensure_pod(self, pod: PodView) -> str:
        if self.manager is None:
            return ""
        self.manager.update_qos(self._active_views())
        return self.manager.ensure_pod(pod)

    def _active_views(self) -> list[PodView]:
        # The source hands out pod dicts; build each version's view once, not on every pod start.
        views: dict[str, tuple[Pod, PodView]] = {}
        for p in self._active_pods():
            cached = self._views.get(podview.uid(p))
            view = cached[1] if cached is not None and cached[0] is p else PodView.of(p)
            views[view.uid] = (p, view)
        self._views = views
        return [v for _, v in views.values()]

    def cgroup_parent(self, pod: PodView) -> str:
        return self.manager.cgroup_parent(pod) if self.manager is not None else ""

    def container_resources(self, pod: PodView, container: ContainerView) -> LinuxResources | None:
        return container_linux_resources(
            pod, container, self.memory_capacity, self.min_oom_score_adj,
            cpu_cfs_quota=self._cpu_cfs_quota, period_us=self._cpu_period_us,
        )

    def sandbox_resources(self) -> LinuxResources:
        return LinuxResources(oom_score_adj=clamp_oom_score_adj(SANDBOX_OOM_SCORE_ADJ, self.min_oom_score_adj))

    def remove_pod(self, uid: str) -> None:
        if self.manager is None:
            return
        self.manager.remove_pod(uid)

    def cleanup_orphans(self, known_uids: Iterable[str]) -> None:
        """Remove pod cgroups a crashed run left behind (only empty ones; busy ones are retried later)."""
        if self.manager is None:
            return
        for uid in self.manager.orphans(known_uids):
            try:
                self.manager.remove_pod(uid)
                log.info("removed orphaned pod cgroup", extra={"kv": {"uid": uid}})
            except CgroupBusyError:
                log.info("orphaned pod cgroup still has processes", extra={"kv": {"uid": uid}})


def build_pod_cgroups(config: KubeletConfig, docker_cgroup_driver: str, active_pods: Callable[[], Iterable[Pod]],
                      root: Path = Path("/sys/fs/cgroup")) -> PodCgroups:
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
    if config.cgroups_per_qos:
        version = detect_cgroup_version(root)
        driver: CgroupDriver = CgroupV2Driver(root, config.cgroup_root) if version == 2 else CgroupV1Driver(
            root, config.cgroup_root)
        naming: Naming = "systemd" if config.cgroup_driver == "systemd" else "cgroupfs"
        reserved: dict[str, object] = {}
        for src in (config.kube_reserved, config.system_reserved):
            for k, v in src.items():
                reserved[k] = v if k not in reserved else _add(reserved[k], v)
        manager = CgroupManager(
            driver, naming, capacity, reserved, config.eviction_hard, config.enforce_node_allocatable,
            config.cgroup_root, pod_pids_limit=config.pod_pids_limit, cpu_cfs_quota=config.cpu_cfs_quota,
            cpu_cfs_quota_period_us=int(config.cpu_cfs_quota_period * 1_000_000),
        )
        manager.ensure_hierarchy([PodView.of(p) for p in active_pods()])
        log.info("cgroup hierarchy ready", extra={"kv": {"version": version, "driver": naming,
                                                         "root": config.cgroup_root}})
    return PodCgroups(manager, memory, min_oom, active_pods, config.cpu_cfs_quota,
                      int(config.cpu_cfs_quota_period * 1_000_000))


def _add(a: object, b: object) -> str:
    from minikubelet.base.quantity import parse_quantity

    total = parse_quantity(a) + parse_quantity(b)
    return str(float(total)) if total.denominator != 1 else str(total.numerator)
