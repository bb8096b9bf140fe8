"""The pod cgroup hierarchy: kubepods (node allocatable) / burstable, besteffort (QoS) / pod<uid>.

Mirrors upstream cm/node_container_manager_linux.go, qos_container_manager_linux.go,
pod_container_manager_linux.go and helpers_linux.go ResourceConfigForPod. It keeps no state of
its own: which pods have cgroups is read back from the cgroup filesystem, so a restarted agent
finds (and can clean up) what an earlier run created.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction

from cgroups.allocatable import hard_eviction_reservation, parse_resource_list, subtract
from cgroups.cpu import MIN_SHARES, QUOTA_PERIOD_US, milli_cpu_to_quota, milli_cpu_to_shares
from cgroups.driver import CgroupDriver, ResourceConfig, Usage
from cgroups.naming import (
    CgroupName,
    Naming,
    docker_cgroup_parent,
    kubepods_name,
    parse_cgroupfs,
    parse_literal,
    pod_cgroup_name,
    pod_uid_from_component,
    qos_cgroup_name,
    to_literal,
)
from cgroups.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from cgroups.resources import has_pod_level_resources, pod_level_limits, pod_limits, pod_requests
from minikubelet.base.podview import PodView

ENFORCE_PODS = "pods"


def _millis(value: Fraction) -> int:
    return math.ceil(value * 1000)


def pod_resource_config(
    pod: PodView,
    enforce_cpu_limits: bool = True,
    cpu_period_us: int = QUOTA_PERIOD_US,
    memory_qos: bool = False,
    pids_limit: int = -1,
) -> ResourceConfig:
    """Settings of a pod's own cgroup (upstream ResourceConfigForPod)."""
    requests = pod_requests(pod)
    limits = pod_limits(pod)
    cpu_limit = limits.get("cpu")
    memory_limit = limits.get("memory")
    shares = milli_cpu_to_shares(_millis(requests.get("cpu", Fraction(0))))
    quota = milli_cpu_to_quota(_millis(cpu_limit or Fraction(0)), cpu_period_us) if enforce_cpu_limits else -1
    qos = qos_class(pod)
    memory_bytes = math.ceil(memory_limit or 0)
    cpu_declared = cpu_limit is not None
    memory_declared = memory_limit is not None
    if has_pod_level_resources(pod):
        cpu_declared = cpu_declared or pod_level_limits(pod).get("cpu", 0) > 0
        memory_declared = memory_declared or pod_level_limits(pod).get("memory", 0) > 0

    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory: int | None = None
    cpu_shares = shares
    if qos == GUARANTEED:
        cpu_quota, cpu_period, memory = quota, cpu_period_us, memory_bytes
    elif qos == BURSTABLE:
        if cpu_declared:
            cpu_quota, cpu_period = quota, cpu_period_us
        if memory_declared:
            memory = memory_bytes
    else:
        cpu_shares = MIN_SHARES
    memory_min = None
    if memory_qos and requests.get("memory", 0) > 0:
        memory_min = math.ceil(requests["memory"])
    return ResourceConfig(
        cpu_shares=cpu_shares,
        cpu_quota=cpu_quota,
        cpu_period=cpu_period,
        memory_limit=memory,
        pids_limit=pids_limit if pids_limit > 0 else None,
        memory_min=memory_min,
    )


class CgroupManager:
    def __init__(
        self,
        driver: CgroupDriver,
        naming: Naming,
        node_capacity: Mapping[str, object],
        reserved: Mapping[str, object],
        eviction_hard: Mapping[str, str],
        enforce_node_allocatable: Iterable[str],
        cgroup_root: str = "/",
        *,
        pod_pids_limit: int = -1,
        cpu_cfs_quota: bool = True,
        cpu_cfs_quota_period_us: int = QUOTA_PERIOD_US,
        memory_qos: bool = False,
    ) -> None:
        self.driver = driver
        self.naming: Naming = naming
        self.capacity = parse_resource_list(node_capacity)
        self.reserved = parse_resource_list(reserved)
        self.eviction_hard = dict(eviction_hard)
        self.enforce_node_allocatable = set(enforce_node_allocatable)
        self.root: CgroupName = parse_cgroupfs(cgroup_root)
        self.pod_pids_limit = pod_pids_limit
        self.cpu_cfs_quota = cpu_cfs_quota
        self.cpu_cfs_quota_period_us = cpu_cfs_quota_period_us
        self.memory_qos = memory_qos
        # (operation, seconds) of each create / update / destroy: kubelet_cgroup_manager_duration_seconds
        self.observe: Callable[[str, float], None] | None = None

    def _timed(self, operation: str, call: Callable[[], None]) -> None:
        t0 = time.monotonic()
        try:
            call()
        finally:
            if self.observe is not None:
                self.observe(operation, time.monotonic() - t0)

    # names -----------------------------------------------------------------
    def literal(self, name: CgroupName) -> str:
        return to_literal(name, self.naming)

    def pod_cgroup_name(self, pod: PodView) -> CgroupName:
        return pod_cgroup_name(pod, self.root)

    def cgroup_parent(self, pod: PodView) -> str:
        """The --cgroup-parent to give Docker for this pod's sandbox and containers."""
        return docker_cgroup_parent(self.pod_cgroup_name(pod), self.naming)

    def container_cgroup(self, pod: PodView, container_id: str) -> str:
        """Where the runtime puts a container of this pod: Docker's cgroupfs driver names it after its id,
        the systemd driver `docker-<id>.scope` in the pod's slice."""
        leaf = f"docker-{container_id}.scope" if self.naming == "systemd" else container_id
        return f"{self.literal(self.pod_cgroup_name(pod)).rstrip('/')}/{leaf}"

    # node allocatable -----------------------------------------------------------
    def node_allocatable(self) -> dict[str, Fraction]:
        """Allocatable as reported in node status: capacity − reserved − hard eviction thresholds."""
        return subtract(self.capacity, self.reserved, hard_eviction_reservation(self.eviction_hard, self.capacity))

    def kubepods_config(self) -> ResourceConfig:
        """kubepods gets capacity − reserved when "pods" is enforced, else the whole capacity.

        Eviction thresholds are not subtracted here (as upstream): the eviction manager acts
        before the cgroup limit is reached.
        """
        sizes = self.capacity
        if ENFORCE_PODS in self.enforce_node_allocatable:
            sizes = subtract(self.capacity, self.reserved)
        return ResourceConfig(
            cpu_shares=milli_cpu_to_shares(_millis(sizes["cpu"])) if "cpu" in sizes else None,
            memory_limit=math.ceil(sizes["memory"]) if "memory" in sizes else None,
            pids_limit=math.ceil(sizes["pid"]) if "pid" in sizes else None,
        )

    # hierarchy -----------------------------------------------------------------
    def _create_or_update(self, name: CgroupName, config: ResourceConfig) -> None:
        literal = self.literal(name)
        if self.driver.exists(literal):
            self._timed("update", lambda: self.driver.update(literal, config))
        else:
            self._timed("create", lambda: self.driver.create(literal, config))

    def ensure_hierarchy(self, pods: Iterable[PodView] = ()) -> None:
        """Create or resize kubepods, burstable and besteffort; size burstable from `pods`."""
        self._create_or_update(kubepods_name(self.root), self.kubepods_config())
        self.update_qos(pods)

    def update_qos(self, active_pods: Iterable[PodView]) -> None:
        """BestEffort gets the minimum shares; Burstable the shares of its pods' CPU requests.

        Call with all active pods before creating a new pod's cgroup, as upstream does.
        """
        burstable_millis = sum(
            _millis(pod_requests(pod).get("cpu", Fraction(0))) for pod in active_pods if qos_class(pod) == BURSTABLE
        )
        self._create_or_update(
            qos_cgroup_name(BURSTABLE, self.root), ResourceConfig(cpu_shares=milli_cpu_to_shares(burstable_millis))
        )
        self._create_or_update(qos_cgroup_name(BEST_EFFORT, self.root), ResourceConfig(cpu_shares=MIN_SHARES))

    def pod_config(self, pod: PodView) -> ResourceConfig:
        return pod_resource_config(
            pod, self.cpu_cfs_quota, self.cpu_cfs_quota_period_us, self.memory_qos, self.pod_pids_limit
        )

    def ensure_pod(self, pod: PodView) -> str:
        """Create (or resize) the pod's cgroup; returns the cgroup parent for Docker."""
        self._create_or_update(self.pod_cgroup_name(pod), self.pod_config(pod))
        return self.cgroup_parent(pod)

    def pod_cgroups(self) -> dict[str, str]:
        """pod UID -> literal cgroup path, for every pod cgroup found on disk."""
        found: dict[str, str] = {}
        for qos in (GUARANTEED, BURSTABLE, BEST_EFFORT):
            parent = self.literal(qos_cgroup_name(qos, self.root))
            for child in self.driver.children(parent):
                literal = parent.rstrip("/") + "/" + child
                name = parse_literal(literal, self.naming)
                uid = pod_uid_from_component(name[-1]) if name else None
                if uid is not None:
                    found[uid] = literal
        return found

    def remove_pod(self, pod_uid: str) -> None:
        """Remove the pod's cgroup (its processes must be gone); a missing cgroup is fine."""
        literal = self.pod_cgroups().get(pod_uid)
        if literal is not None:
            self._timed("destroy", lambda: self.driver.remove(literal))

    def orphans(self, known_uids: Iterable[str]) -> list[str]:
        """UIDs of pod cgroups that belong to no known pod (e.g. left behind by a crash)."""
        known = set(known_uids)
        return sorted(uid for uid in self.pod_cgroups() if uid not in known)

    def pod_usage(self, pod_uid: str) -> Usage | None:
        literal = self.pod_cgroups().get(pod_uid)
        return None if literal is None else self.driver.read_usage(literal)
