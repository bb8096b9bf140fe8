"""Carrying out an in-place resize (upstream kuberuntime_manager.go doPodResizeAction, validateMemoryResizeAction,
updatePodContainerResources); what to do comes from `worker/resize_plan.py`.

The actuated record (`actuated_pods_state`: what the agent last gave the runtime for each container, set when it is
created and after each update the runtime accepted) follows only what the runtime accepted. Per resource, memory first and then CPU: the pod cgroup grows before the containers and shrinks after
them (limits before requests when growing, requests before limits when shrinking); decreases are applied to the
containers before increases; a memory limit is never set below what the container or the pod uses. A container
whose resizePolicy says RestartContainer for a changed resource is restarted with its new resources instead.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace

from cgroups.cpu import milli_cpu_to_quota, milli_cpu_to_shares
from cgroups.driver import ResourceConfig
from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.types import LinuxResources
from minikubelet.base.podview import PodView
from minikubelet.metrics import Metrics
from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint
from minikubelet.worker.dependencies import CgroupSource
from minikubelet.worker.resize_plan import (
    CPU,
    MEMORY,
    ContainerUpdate,
    ResizeActions,
    ResourceValues,
    requirements_of_values,
)

log = logging.getLogger("minikubelet.worker.resize")
ACTUATED_PODS_STATE = "actuated_pods_state"


class ResizeError(Exception):
    """The resize could not be (fully) actuated: the message goes to PodResizeInProgress with reason Error."""


@dataclass
class PodResize:
    """doPodResizeAction for one pod sync."""

    runtime: Runtime
    cgroups: CgroupSource | None
    actuated: PodResourceCheckpoint
    metrics: Metrics
    cpu_cfs_quota: bool = True
    cpu_period_us: int = 100_000

    async def run(self, pod: PodView, actions: ResizeActions) -> None:
        start = time.monotonic()
        success = False
        try:
            await self._run(pod, actions)
            success = True
        finally:
            self.metrics.pod_resize_duration.labels(str(success).lower()).observe((time.monotonic() - start) * 1000)

    async def _run(self, pod: PodView, actions: ResizeActions) -> None:
        cg = self.cgroups
        desired = cg.pod_cgroup_config(pod) if cg is not None else None
        if desired is None:
            # no pod cgroups (cgroupsPerQOS false): upstream's no-op pod container manager reads no pod cgroup
            # config and sets none; only the containers are resized
            cg = None
        current = cg.read_pod_cgroup(pod) if cg is not None else None
        if cg is not None and current is None:
            raise ResizeError(f"unable to get pod cgroup config for pod {pod.format_pod!r}")
        await self._validate_memory(pod, actions, desired, current)
        updates = actions.updates
        if updates[MEMORY] or actions.update_pod_resources:
            want = desired.memory_limit if desired is not None else None
            have = current.memory_limit if current is not None else None
            await self._resize(pod, MEMORY, updates[MEMORY], have, want, None, None)
        if updates[CPU] or actions.update_pod_resources:
            await self._resize(pod, CPU, updates[CPU], current.cpu_quota if current else None,
                               desired.cpu_quota if desired else None, current.cpu_shares if current else None,
                               desired.cpu_shares if desired else None)

    async def _validate_memory(self, pod: PodView, actions: ResizeActions, desired: ResourceConfig | None,
                               current: ResourceConfig | None) -> None:
        """validateMemoryResizeAction: no memory limit set below what is in use now (the kernel could only
        OOM-kill to get there)."""
        if not actions.updates[MEMORY] and not actions.update_pod_resources:
            return
        want_pod = desired.memory_limit if desired is not None else None
        have_pod = current.memory_limit if current is not None else None
        pod_decreasing = want_pod is not None and want_pod > 0 and (
            have_pod is None or have_pod < 0 or want_pod < have_pod)
        decreasing = {u.container_id: u for u in actions.updates[MEMORY] if u.desired.memory_limit and (
            not u.current.memory_limit or u.desired.memory_limit < u.current.memory_limit)}
        if not pod_decreasing and not decreasing:
            return
        errors: list[str] = []
        if pod_decreasing and self.cgroups is not None:
            usage = self.cgroups.pod_memory_usage(pod)
            if usage is None:
                errors.append("missing pod memory usage")
            elif want_pod is not None and usage >= want_pod:
                errors.append(f"attempting to set pod memory limit ({want_pod}) below current usage ({usage})")
        for cid, u in decreasing.items():
            try:
                used = (await self.runtime.container_stats(cid)).memory_usage_bytes
            except RuntimeError_:
                errors.append(f'missing container "{u.name}" memory usage')
                continue
            if used >= u.desired.memory_limit:
                errors.append(f'attempting to set container "{u.name}" memory limit ({u.desired.memory_limit}) '
                              f"below current usage ({used})")
        if errors:
            joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            raise ResizeError(f"cannot decrease memory limits: {joined}")

    async def _resize(self, pod: PodView, resource: str, updates: list[ContainerUpdate], have_limit: int | None,
                      want_limit: int | None, have_request: int | None, want_request: int | None) -> None:
        """resizeContainers: the pod cgroup's limit (then request) before the containers when it grows, after
        them (request, then limit) when it shrinks."""
        if want_limit is None:
            want_limit = have_limit  # upstream: a pod without that limit keeps the cgroup's
        grow_limit = have_limit is not None and want_limit is not None and _grows(want_limit, have_limit)
        shrink_limit = have_limit is not None and want_limit is not None and _grows(have_limit, want_limit)
        if grow_limit:
            self._set_pod(pod, resource, limit=True)
        if have_request is not None and want_request is not None and want_request > have_request:
            self._set_pod(pod, resource, limit=False)
        for u in updates:
            await self._update_container(pod, resource, u)
        if have_request is not None and want_request is not None and want_request < have_request:
            self._set_pod(pod, resource, limit=False)
        if shrink_limit:
            self._set_pod(pod, resource, limit=True)

    def _set_pod(self, pod: PodView, resource: str, *, limit: bool) -> None:
        cg = self.cgroups
        if cg is None:
            return
        desired = cg.pod_cgroup_config(pod)
        if desired is None:
            raise ResizeError(f"unable to get resource configuration processing resize for pod {pod.format_pod!r}")
        if resource == CPU:
            config = (ResourceConfig(cpu_quota=desired.cpu_quota, cpu_period=desired.cpu_period) if limit
                      else ResourceConfig(cpu_shares=desired.cpu_shares))
        elif limit and desired.memory_limit is not None:
            config = ResourceConfig(memory_limit=desired.memory_limit)
        else:
            return  # memory requests are not written to cgroups
        try:
            cg.set_pod_cgroup(pod, config)
        except OSError as e:
            raise ResizeError(f"failed to set the pod cgroup's {resource} for pod {pod.format_pod!r}: {e}") from e

    async def _update_container(self, pod: PodView, resource: str, u: ContainerUpdate) -> None:
        """updatePodContainerResources: the new value of this resource with the last actuated values of the
        other, to the runtime; the actuated record follows only what it accepted."""
        values = (replace(u.current, memory_limit=u.desired.memory_limit, memory_request=u.desired.memory_request)
                  if resource == MEMORY else
                  replace(u.current, cpu_limit=u.desired.cpu_limit, cpu_request=u.desired.cpu_request))
        linux = self._linux_resources(values)
        try:
            await self.runtime.update_container_resources(u.container_id, linux)
        except RuntimeError_ as e:
            raise ResizeError(f"container {u.name!r} updateContainerResources failed: {e}") from e
        u.actuated.values = values
        self.actuated.set_container(pod.uid, u.name, requirements_of_values(values))

    def _linux_resources(self, v: ResourceValues) -> LinuxResources:
        """generateLinuxContainerResources for the CPU and memory fields."""
        quota = milli_cpu_to_quota(v.cpu_limit, self.cpu_period_us) if self.cpu_cfs_quota else 0
        return LinuxResources(cpu_period=self.cpu_period_us if self.cpu_cfs_quota else 0, cpu_quota=quota,
                              cpu_shares=milli_cpu_to_shares(v.cpu_request), memory_limit_bytes=v.memory_limit)


def _grows(new: int, old: int) -> bool:
    """Compared as upstream compares the cgroup values: -1 (or 0 for a quota) is no limit, which is larger."""
    def size(v: int) -> float:
        return math.inf if v <= 0 else float(v)

    return size(new) > size(old)

