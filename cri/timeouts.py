"""RequestTimeoutRuntime: any Runtime, with each call bounded by `runtimeRequestTimeout` as the kubelet's CRI
client bounds it (k8s.io/cri-client remote_runtime.go / remote_image.go).

Like upstream: sandbox creation gets twice the timeout (it may pull the pause image), a stop gets the
timeout plus the grace period, an exec the timeout plus its own; image pulls, log reads and the event
stream are long-running and unbounded. A call that runs out of time raises RuntimeError_, so callers
handle it as any other runtime failure (the sync is retried).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TypeVar

from cri.errors import RuntimeError_
from cri.runtime import Runtime
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

T = TypeVar("T")


class RuntimeRequestTimeoutError(RuntimeError_):
    """The runtime did not answer within runtimeRequestTimeout."""


class RequestTimeoutRuntime:
    def __init__(self, runtime: Runtime, timeout: float) -> None:
        self.runtime = runtime
        self.timeout = timeout

    async def _bounded(self, operation: str, call: Awaitable[T], timeout: float | None = None) -> T:
        limit = self.timeout if timeout is None else timeout
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:
                return await call
        except TimeoutError:
            if not deadline.expired():
                raise
            raise RuntimeRequestTimeoutError(f"{operation}: context deadline exceeded (after {limit:g}s)") from None

    async def version(self) -> RuntimeVersion:
        return await self._bounded("Version", self.runtime.version())

    async def runtime_config(self) -> RuntimeConfig:
        return await self._bounded("RuntimeConfig", self.runtime.runtime_config())

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        return await self._bounded("RunPodSandbox", self.runtime.run_pod_sandbox(config), 2 * self.timeout)

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        await self._bounded("StopPodSandbox", self.runtime.stop_pod_sandbox(sandbox_id))

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        await self._bounded("RemovePodSandbox", self.runtime.remove_pod_sandbox(sandbox_id))

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        return await self._bounded("PodSandboxStatus", self.runtime.pod_sandbox_status(sandbox_id))

    async def list_pod_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[PodSandboxStatus]:
        return await self._bounded("ListPodSandbox", self.runtime.list_pod_sandboxes(labels))

    async def list_summaries(self) -> list[ObjectSummary]:
        return await self._bounded("ListSummaries", self.runtime.list_summaries())

    async def create_container(self, sandbox_id: str, config: ContainerConfig,
                               sandbox_config: PodSandboxConfig) -> str:
        return await self._bounded("CreateContainer", self.runtime.create_container(sandbox_id, config, sandbox_config))

    async def start_container(self, container_id: str) -> None:
        await self._bounded("StartContainer", self.runtime.start_container(container_id))

    async def stop_container(self, container_id: str, timeout: float, signal: str = "") -> None:
        await self._bounded("StopContainer", self.runtime.stop_container(container_id, timeout, signal),
                            self.timeout + max(timeout, 0))

    async def remove_container(self, container_id: str) -> None:
        await self._bounded("RemoveContainer", self.runtime.remove_container(container_id))

    async def container_status(self, container_id: str) -> ContainerStatus:
        return await self._bounded("ContainerStatus", self.runtime.container_status(container_id))

    async def list_containers(self, labels: Mapping[str, str] | None = None) -> list[ContainerStatus]:
        return await self._bounded("ListContainers", self.runtime.list_containers(labels))

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        call = self.runtime.exec_sync(container_id, cmd, timeout)
        if timeout <= 0:
            return await call
        return await self._bounded("ExecSync", call, self.timeout + timeout)

    def events(self) -> AsyncIterator[ContainerEvent]:
        return self.runtime.events()

    async def container_stats(self, container_id: str) -> ContainerStats:
        return await self._bounded("ContainerStats", self.runtime.container_stats(container_id))

    async def container_logs(self, container_id: str, tail: int | None = None) -> bytes:
        return await self.runtime.container_logs(container_id, tail)

    async def update_container_resources(self, container_id: str, resources: LinuxResources) -> None:
        await self._bounded("UpdateContainerResources", self.runtime.update_container_resources(container_id,
                                                                                                  resources))

    async def close(self) -> None:
        await self.runtime.close()

    async def pull_image(self, image: str, auth: AuthConfig | None = None) -> str:
        return await self.runtime.pull_image(image, auth)

    async def image_status(self, image: str) -> Image | None:
        return await self._bounded("ImageStatus", self.runtime.image_status(image))

    async def list_images(self) -> list[Image]:
        return await self._bounded("ListImages", self.runtime.list_images())

    async def remove_image(self, image: str) -> None:
        await self._bounded("RemoveImage", self.runtime.remove_image(image))
