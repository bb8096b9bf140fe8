"""The runtime boundary: an async interface shaped like the Kubernetes CRI services."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Protocol, runtime_checkable

from cri.types import (
    AuthConfig,
    ContainerConfig,
    ContainerEvent,
    ContainerStats,
    ContainerStatus,
    ExecResult,
    Image,
    LinuxResources,
    ObjectSummary,
    PodSandboxConfig,
    PodSandboxStatus,
    RuntimeConfig,
    RuntimeVersion,
)


class RuntimeService(Protocol):
    """Sandboxes, containers, exec and events (CRI RuntimeService)."""

    async def version(self) -> RuntimeVersion:
        """Name, version and API version, e.g. docker 20.10.24 API 1.41 (CRI Version)."""

    async def runtime_config(self) -> RuntimeConfig:
        """How the runtime is configured, e.g. its cgroup driver (CRI RuntimeConfig)."""

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Create and start the sandbox; idempotent on (pod uid, attempt). Returns its id."""

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        """Stop the sandbox (its containers must already be stopped). NotFound is not an error."""

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        """Remove the sandbox and any containers left in it. NotFound is not an error."""

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        """Raises NotFoundError."""

    async def list_pod_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[PodSandboxStatus]:
        """Sandboxes created by this agent, optionally filtered by label equality."""

    async def list_summaries(self) -> list[ObjectSummary]:
        """Every sandbox and container of this agent in one cheap call (the PLEG relist)."""

    async def create_container(
        self, sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        """Create (not start) a container joined to the sandbox's namespaces. Returns its id."""

    async def start_container(self, container_id: str) -> None: ...

    async def stop_container(self, container_id: str, timeout: float, signal: str = "") -> None:
        """Send `signal` (or the container's stop signal), SIGKILL after `timeout` seconds.

        Returns once the container has exited. NotFound is not an error."""

    async def remove_container(self, container_id: str) -> None:
        """NotFound is not an error."""

    async def container_status(self, container_id: str) -> ContainerStatus:
        """Raises NotFoundError."""

    async def list_containers(self, labels: Mapping[str, str] | None = None) -> list[ContainerStatus]:
        """Non-sandbox containers created by this agent, optionally filtered by label equality."""

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        """Run cmd in the container; on timeout return ExecResult(timed_out=True) without blocking."""

    def events(self) -> AsyncIterator[ContainerEvent]:
        """Container lifecycle events for this agent's containers, forever (reconnects inside)."""

    async def container_stats(self, container_id: str) -> ContainerStats: ...

    async def update_container_resources(self, container_id: str, resources: LinuxResources) -> None:
        """New CPU and memory limits for a running container (CRI UpdateContainerResources); the runtime refusing
        them raises RuntimeError_ with its reason."""

    async def container_logs(self, container_id: str, tail: int | None = None) -> bytes:
        """The container's combined stdout/stderr."""

    async def close(self) -> None: ...


class ImageService(Protocol):
    """Images (CRI ImageService)."""

    async def pull_image(self, image: str, auth: AuthConfig | None = None) -> str:
        """Pull and return the image reference (ID). Raises ImagePullError."""

    async def image_status(self, image: str) -> Image | None:
        """The local image, or None if not present."""

    async def list_images(self) -> list[Image]: ...

    async def remove_image(self, image: str) -> None: ...


@runtime_checkable
class ContainerStatsRuntime(Protocol):
    """Optional: CRI ListContainerStats, every container's stats in one call (Docker: the writable layers only)."""

    async def list_container_stats(self) -> list[ContainerStats]: ...


class Runtime(RuntimeService, ImageService, Protocol):
    """Both services behind one endpoint, as Docker and containerd provide."""
