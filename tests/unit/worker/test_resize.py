"""Carrying out a resize against upstream's TestDoPodResizeAction and TestValidatePodResizeAction
(kuberuntime_manager_test.go): the pod cgroup before the containers when it grows and after them when it shrinks,
memory before CPU, limits before requests when growing; no memory limit below what is in use; a refusal stops the
resize with its reason and the actuated record keeps what the runtime really took."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from cgroups.driver import ResourceConfig
from cgroups.manager import pod_resource_config
from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.types import ContainerStats, LinuxResources
from minikubelet.base.podview import PodView
from minikubelet.cm.pod_cgroups import PodCgroups
from minikubelet.metrics import Metrics
from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint
from minikubelet.worker.dependencies import CgroupSource
from minikubelet.worker.resize import PodResize, ResizeError
from minikubelet.worker.resize_plan import ResizeActions, compute_container_resize
from tests.unit.factories import c, pod, running

Mi = 1 << 20
Log = list[tuple[str, Any]]


class Cgroups:
    """The pod cgroup as the resize sees it: what it holds now, and every write in `log`."""

    def __init__(self, log: Log, current: ResourceConfig, usage: int = 0) -> None:
        self.log, self.current, self.usage = log, current, usage

    def pod_cgroup_config(self, pod: PodView) -> ResourceConfig:
        return pod_resource_config(pod)

    def read_pod_cgroup(self, pod: PodView) -> ResourceConfig:
        return self.current

    def set_pod_cgroup(self, pod: PodView, config: ResourceConfig) -> None:
        self.log.append(("pod", {k: v for k, v in vars(config).items() if v is not None}))

    def pod_memory_usage(self, pod: PodView) -> int:
        return self.usage


class Runtime_:
    def __init__(self, log: Log, usage: int = 0, refuse: str = "") -> None:
        self.log, self.usage, self.refuse = log, usage, refuse

    async def update_container_resources(self, container_id: str, resources: LinuxResources) -> None:
        if self.refuse:
            raise RuntimeError_(self.refuse)
        self.log.append(("container", (resources.cpu_quota, resources.cpu_shares, resources.memory_limit_bytes)))

    async def container_stats(self, container_id: str) -> ContainerStats:
        return ContainerStats(container_id, 0.0, memory_usage_bytes=self.usage)


def guaranteed(cpu: str, memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}


def setup(tmp_path: Path, allocated: dict[str, Any], actuated: dict[str, Any], current: ResourceConfig,
          usage: int = 0, refuse: str = "") -> tuple[PodResize, PodView, ResizeActions, Log]:
    p = pod([c("app", resources=allocated)])
    p["status"] = {"qosClass": "Guaranteed"}
    view = PodView.of(p)
    record = PodResourceCheckpoint(str(tmp_path / "actuated_pods_state"))
    record.set_container("uid-1", "app", actuated)
    actions = ResizeActions()
    assert compute_container_resize(view, view.container("app"), running(p, "app"),
                                    lambda name: record.container("uid-1", name), actions)
    log: Log = []
    resizer = PodResize(cast(Runtime, Runtime_(log, usage, refuse)), cast(CgroupSource, Cgroups(log, current, usage)),
                        record, Metrics())
    return resizer, view, actions, log


async def test_growing_sets_the_pod_cgroup_first(tmp_path: Path) -> None:
    """'Increase CPU and memory requests and limits, with computed pod limits'."""
    resizer, view, actions, log = setup(
        tmp_path, guaranteed("200m", "200Mi"), guaranteed("100m", "100Mi"),
        ResourceConfig(cpu_shares=102, cpu_quota=10_000, cpu_period=100_000, memory_limit=100 * Mi))
    await resizer.run(view, actions)
    assert log == [("pod", {"memory_limit": 200 * Mi}),
                   ("container", (10_000, 102, 200 * Mi)),  # memory first, with the CPU it had
                   ("pod", {"cpu_quota": 20_000, "cpu_period": 100_000}),
                   ("pod", {"cpu_shares": 204}),
                   ("container", (20_000, 204, 200 * Mi))]
    assert resizer.actuated.container("uid-1", "app") == {"requests": {"cpu": "200m", "memory": "200Mi"},
                                                         "limits": {"cpu": "200m", "memory": "200Mi"}}


async def test_shrinking_sets_the_pod_cgroup_last(tmp_path: Path) -> None:
    """'Decrease CPU and memory requests and limits, with computed pod limits'."""
    resizer, view, actions, log = setup(
        tmp_path, guaranteed("100m", "100Mi"), guaranteed("200m", "200Mi"),
        ResourceConfig(cpu_shares=204, cpu_quota=20_000, cpu_period=100_000, memory_limit=200 * Mi), usage=10 * Mi)
    await resizer.run(view, actions)
    assert log == [("container", (20_000, 204, 100 * Mi)),
                   ("pod", {"memory_limit": 100 * Mi}),
                   ("container", (10_000, 102, 100 * Mi)),
                   ("pod", {"cpu_shares": 102}),
                   ("pod", {"cpu_quota": 10_000, "cpu_period": 100_000})]


async def test_without_pod_cgroups_only_the_containers_are_resized(tmp_path: Path) -> None:
    """cgroupsPerQOS false: upstream's no-op pod container manager has no pod cgroup config to read or set, and
    the containers are resized all the same (the agent refused every resize with "unable to get pod cgroup config":
    found by the simulator, seed 6)."""
    resizer, view, actions, log = setup(tmp_path, guaranteed("200m", "200Mi"), guaranteed("100m", "100Mi"),
                                        ResourceConfig())
    resizer.cgroups = cast(CgroupSource, PodCgroups(None, 4 << 30, -1000, lambda: []))
    await resizer.run(view, actions)
    assert log == [("container", (10_000, 102, 200 * Mi)), ("container", (20_000, 204, 200 * Mi))]
    assert resizer.actuated.container("uid-1", "app") == {"requests": {"cpu": "200m", "memory": "200Mi"},
                                                         "limits": {"cpu": "200m", "memory": "200Mi"}}


@pytest.mark.parametrize(("container_usage", "pod_usage", "message"), [
    (150 * Mi, 10 * Mi, f'attempting to set container "app" memory limit ({100 * Mi}) below current usage '
                        f"({150 * Mi})"),
    (10 * Mi, 150 * Mi, f"attempting to set pod memory limit ({100 * Mi}) below current usage ({150 * Mi})"),
])
async def test_no_memory_limit_below_usage(tmp_path: Path, container_usage: int, pod_usage: int, message: str) -> None:
    """TestValidatePodResizeAction: refused before anything changes."""
    resizer, view, actions, log = setup(
        tmp_path, guaranteed("200m", "100Mi"), guaranteed("200m", "200Mi"),
        ResourceConfig(cpu_shares=204, cpu_quota=20_000, cpu_period=100_000, memory_limit=200 * Mi))
    cast(Runtime_, resizer.runtime).usage = container_usage
    cast(Cgroups, resizer.cgroups).usage = pod_usage
    with pytest.raises(ResizeError) as err:
        await resizer.run(view, actions)
    assert str(err.value) == f"cannot decrease memory limits: {message}"
    assert log == []
    assert resizer.metrics.registry.get_sample_value("kubelet_pod_resize_duration_milliseconds_count",
                                                     {"success": "false"}) == 1


async def test_a_refusal_keeps_the_actuated_record(tmp_path: Path) -> None:
    resizer, view, actions, log = setup(
        tmp_path, guaranteed("100m", "200Mi"), guaranteed("100m", "100Mi"),
        ResourceConfig(cpu_shares=102, cpu_quota=10_000, cpu_period=100_000, memory_limit=100 * Mi),
        refuse="Cannot update container: device or resource busy")
    with pytest.raises(ResizeError) as err:
        await resizer.run(view, actions)
    assert str(err.value) == ("container 'app' updateContainerResources failed: Cannot update container: device or "
                              "resource busy")
    assert log == [("pod", {"memory_limit": 200 * Mi})]  # the pod grew first, as upstream; the next sync retries
    assert resizer.actuated.container("uid-1", "app") == guaranteed("100m", "100Mi")
