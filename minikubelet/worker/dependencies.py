"""What the pod workers need from the prober and the container manager, as narrow protocols."""

from __future__ import annotations

from typing import Protocol

from cri.types import ContainerStatus, LinuxResources
from minikubelet.base.podview import Container, Pod


class ProbeSource(Protocol):
    """What the pod worker needs from the prober: results keyed by container id."""

    def update_pod(self, pod: Pod, pod_ip: str, running: dict[str, ContainerStatus]) -> None: ...

    def remove_pod(self, uid: str) -> None: ...

    def stop_liveness_and_startup(self, uid: str) -> None: ...

    def results(self, uid: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """(startup, liveness, readiness): container id -> success | failure | unknown."""


class CgroupSource(Protocol):
    def ensure_pod(self, pod: Pod) -> str:
        """Create the pod's cgroup; returns the runtime's cgroup parent for its containers."""

    def cgroup_parent(self, pod: Pod) -> str: ...

    def container_resources(self, pod: Pod, container: Container) -> LinuxResources | None: ...

    def sandbox_resources(self) -> LinuxResources | None: ...

    def remove_pod(self, uid: str) -> None: ...

    def qos_class(self, pod: Pod) -> str: ...
