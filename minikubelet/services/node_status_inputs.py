"""What the node status setters need, read when the node status is built (upstream: cAdvisor, the runtime, the
PLEG, the eviction manager, the shutdown manager and the network plugin)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from fractions import Fraction

from cgroups.allocatable import hard_eviction_reservation, parse_resource_list
from cri.conditions import ConditionsRuntime, condition_errors
from cri.runtime import Runtime
from cri.types import Image
from minikubelet import KUBERNETES_VERSION
from minikubelet.base.clock import Clock
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.eviction.manager import EvictionManager
from minikubelet.node.capacity import node_capacity
from minikubelet.node.machine import hugepages_capacity, machine_info
from minikubelet.node.status import KUBELET_PORT, NodeStatusInputs, declared_features
from minikubelet.services.runtime_health import RuntimeHealth

log = logging.getLogger("minikubelet.agent")

IMAGE_LIST_PERIOD = 30.0  # upstream realImageGCManager refreshes its image cache every 30 s; the setter reads it


class ImageList:
    """The runtime's images for the node status, listed again once the last list is 30 s old (the status is built
    every 10 s); a failed list keeps the last one, as upstream's image cache does."""

    def __init__(self, runtime: Runtime, clock: Clock) -> None:
        self._runtime = runtime
        self._clock = clock
        self._images: list[Image] = []
        self._listed_at: float | None = None

    async def get(self) -> list[Image]:
        now = self._clock.monotonic()
        if self._listed_at is not None and now - self._listed_at < IMAGE_LIST_PERIOD:
            return self._images
        try:
            self._images = await asyncio.wait_for(self._runtime.list_images(), timeout=10.0)
        except Exception as e:
            log.info("Failed to update image list", extra={"kv": {"err": str(e) or type(e).__name__}})
        self._listed_at = now
        return self._images


class NodeStatusReader:
    """Called by the node status updater each time it builds the status."""

    def __init__(self, config: KubeletConfig, runtime: Runtime, conditions: ConditionsRuntime | None,
                 node_name: str, host_ip: str, health: RuntimeHealth, eviction: EvictionManager,
                 shutdown_errors: Callable[[], tuple[str, ...]], network_errors: Callable[[], tuple[str, ...]],
                 clock: Clock) -> None:
        self._config = config
        self._images = ImageList(runtime, clock)
        self._runtime = runtime
        self._conditions = conditions
        self._node_name = node_name
        self._host_ip = host_ip
        self._health = health
        self._eviction = eviction
        self._shutdown_errors = shutdown_errors
        self._network_errors = network_errors

    async def __call__(self) -> NodeStatusInputs:
        cfg = self._config
        runtime_type, runtime_version = "docker", ""
        condition_errs: tuple[str, ...] = ()
        condition_network_errs: tuple[str, ...] = ()
        try:
            version = await asyncio.wait_for(self._runtime.version(), timeout=5.0)
            runtime_type, runtime_version = version.runtime_name, version.runtime_version
            runtime_ready = True
            if self._conditions is not None:
                runtime_ready, condition_errs, condition_network_errs = condition_errors(
                    await asyncio.wait_for(self._conditions.status(), timeout=5.0))
            if runtime_ready:
                self._health.mark_ok()
        except Exception as e:
            log.warning("container runtime version failed", extra={"kv": {"err": str(e) or type(e).__name__}})
        images = await self._images.get()
        capacity = {**node_capacity(cfg.root_dir, cfg.max_pods), **hugepages_capacity()}
        reservation: dict[str, Fraction] = {}
        for part in (parse_resource_list(cfg.kube_reserved), parse_resource_list(cfg.system_reserved),
                     hard_eviction_reservation(cfg.eviction_hard, capacity)):
            for k, v in part.items():
                reservation[k] = reservation.get(k, Fraction(0)) + v
        eviction = self._eviction
        return NodeStatusInputs(
            hostname=self._node_name, node_ip=self._host_ip, machine=machine_info(), capacity=capacity,
            reservation=reservation, runtime_type=runtime_type, runtime_version=runtime_version,
            kubelet_version=KUBERNETES_VERSION, images=images,
            kubelet_port=cfg.port if cfg.port > 0 else KUBELET_PORT,
            declared_features=declared_features(cfg.feature_gates),
            runtime_errors=(*self._health.runtime_errors(), *condition_errs),
            network_errors=(*condition_network_errs, *self._network_errors()),
            shutdown_errors=self._shutdown_errors(),
            memory_pressure=eviction.memory_pressure, disk_pressure=eviction.disk_pressure,
            pid_pressure=eviction.pid_pressure,
        )
