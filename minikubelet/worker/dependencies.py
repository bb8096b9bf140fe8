"""What the pod workers need from the prober and the container manager, as narrow protocols."""

from __future__ import annotations

from typing import Protocol

from cgroups.driver import ResourceConfig
from cri.types import ContainerStatus, LinuxResources
from minikubelet.base.podview import ContainerView, PodView
from probes.result import ProbeResults


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

    def container_created(self, pod: PodView, container_id: str) -> None:
        """Settings the runtime cannot take in its create request, made before the start (memory.oom.group)."""

    def container_started(self, pod: PodView, container_id: str) -> None:
        """The same settings, where they can only be written once the container runs."""

    def container_resources(self, pod: PodView, container: ContainerView) -> LinuxResources | None: ...

    def sandbox_resources(self) -> LinuxResources | None: ...

    def remove_pod(self, uid: str) -> None: ...

    def qos_class(self, pod: PodView) -> str: ...

    def pod_cgroup_config(self, pod: PodView) -> ResourceConfig | None:
        """What the pod's cgroup should hold for its (allocated) resources; None without pod cgroups."""

    def read_pod_cgroup(self, pod: PodView) -> ResourceConfig | None:
        """What the pod's cgroup holds now; None without pod cgroups (or before it exists)."""

    def read_container_cgroup(self, pod: PodView, container_id: str,
                              resources: LinuxResources) -> tuple[ResourceConfig, ResourceConfig] | None:
        """What the container's cgroup files should read back as for `resources`, and what they hold now; None
        without pod cgroups (or when the runtime put the container elsewhere)."""

    def set_pod_cgroup(self, pod: PodView, config: ResourceConfig) -> None:
        """Write these settings to the pod's cgroup (OSError when the kernel refuses)."""

    def pod_memory_usage(self, pod: PodView) -> int | None:
        """The pod cgroup's memory usage in bytes; None when it cannot be read."""
