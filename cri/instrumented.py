"""InstrumentedRuntime: any Runtime, with every call counted and timed as the kubelet does.

Upstream wraps the CRI clients (pkg/kubelet/kuberuntime/instrumented_services.go): each call
increments `kubelet_runtime_operations{operation_type}`, observes
`kubelet_runtime_operations_duration_seconds{operation_type}` and, when it fails,
`kubelet_runtime_operations_errors{operation_type}`. Wrapping the runtime itself, rather than
the callers, is what makes the exec calls of probes and hooks count too.

The metric objects come in through the constructor (anything with the Prometheus metric types'
`labels(...).inc()` / `.observe()`), so `cri` stays below `minikubelet.metrics`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

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


class _Incrementable(Protocol):
    def inc(self) -> None: ...


class _Observable(Protocol):
    def observe(self, amount: float) -> None: ...


class LabeledCounter(Protocol):
    def labels(self, operation_type: str, /) -> _Incrementable: ...


class LabeledHistogram(Protocol):
    def labels(self, operation_type: str, /) -> _Observable: ...


class InstrumentedRuntime:
    def __init__(
        self,
        runtime: Runtime,
        operations: LabeledCounter,
        duration: LabeledHistogram,
        errors: LabeledCounter,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.runtime = runtime
        self._operations = operations
        self._duration = duration
        self._errors = errors
        self._timer = timer

    def _record(self, operation: str, start: float, failed: bool) -> None:
        self._operations.labels(operation).inc()
        self._duration.labels(operation).observe(max(0.0, self._timer() - start))
        if failed:
            self._errors.labels(operation).inc()

    async def _call(self, operation: str, call: Awaitable[T]) -> T:
        start = self._timer()
        failed = True
        try:
            result = await call
            failed = False
            return result
        except BaseException as exc:
            # A caller that gives up (cancellation) is not a runtime error.
            failed = isinstance(exc, Exception)
            raise
        finally:
            self._record(operation, start, failed)

    # -- RuntimeService -----------------------------------------------------------------------

    async def version(self) -> RuntimeVersion:
        return await self._call("version", self.runtime.version())

    async def runtime_config(self) -> RuntimeConfig:
        return await self._call("runtime_config", self.runtime.runtime_config())

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        return await self._call("run_podsandbox", self.runtime.run_pod_sandbox(config))

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        await self._call("stop_podsandbox", self.runtime.stop_pod_sandbox(sandbox_id))

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        await self._call("remove_podsandbox", self.runtime.remove_pod_sandbox(sandbox_id))

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        return await self._call("podsandbox_status", self.runtime.pod_sandbox_status(sandbox_id))

    async def list_pod_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[PodSandboxStatus]:
        return await self._call("list_podsandbox", self.runtime.list_pod_sandboxes(labels))

    async def list_summaries(self) -> list[ObjectSummary]:
        # Not a CRI call: upstream's relist is list_podsandbox + list_containers; ours is one listing.
        return await self._call("list_summaries", self.runtime.list_summaries())

    async def create_container(
        self, sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        return await self._call("create_container", self.runtime.create_container(sandbox_id, config, sandbox_config))

    async def start_container(self, container_id: str) -> None:
        await self._call("start_container", self.runtime.start_container(container_id))

    async def stop_container(self, container_id: str, timeout: float, signal: str = "") -> None:
        await self._call("stop_container", self.runtime.stop_container(container_id, timeout, signal))

    async def remove_container(self, container_id: str) -> None:
        await self._call("remove_container", self.runtime.remove_container(container_id))

    async def container_status(self, container_id: str) -> ContainerStatus:
        return await self._call("container_status", self.runtime.container_status(container_id))

    async def list_containers(self, labels: Mapping[str, str] | None = None) -> list[ContainerStatus]:
        return await self._call("list_containers", self.runtime.list_containers(labels))

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        start = self._timer()
        failed = True
        try:
            result = await self.runtime.exec_sync(container_id, cmd, timeout)
            # The CRI client reports a non-zero exit or a deadline as an error, and upstream counts it.
            failed = result.timed_out or result.exit_code != 0
            return result
        except BaseException as exc:
            failed = isinstance(exc, Exception)
            raise
        finally:
            self._record("exec_sync", start, failed)

    def events(self) -> AsyncIterator[ContainerEvent]:
        # Subscribe now, as the wrapped runtime may, not at the first read.
        return self._events(self.runtime.events(), self._timer())

    async def _events(self, stream: AsyncIterator[ContainerEvent], start: float) -> AsyncIterator[ContainerEvent]:
        # Upstream records get_container_events once the stream ends, with its lifetime as duration.
        failed = False
        try:
            async for event in stream:
                yield event
        except Exception:
            failed = True
            raise
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
            self._record("get_container_events", start, failed)

    async def container_stats(self, container_id: str) -> ContainerStats:
        return await self._call("container_stats", self.runtime.container_stats(container_id))

    async def container_logs(self, container_id: str, tail: int | None = None) -> bytes:
        # Not a CRI call (the kubelet reads log files); counted under its own name.
        return await self._call("container_logs", self.runtime.container_logs(container_id, tail))

    async def update_container_resources(self, container_id: str, resources: LinuxResources) -> None:
        await self._call("update_container", self.runtime.update_container_resources(container_id, resources))

    async def close(self) -> None:
        await self.runtime.close()

    # -- ImageService -------------------------------------------------------------------------

    async def pull_image(self, image: str, auth: AuthConfig | None = None) -> str:
        return await self._call("pull_image", self.runtime.pull_image(image, auth))

    async def image_status(self, image: str) -> Image | None:
        return await self._call("image_status", self.runtime.image_status(image))

    async def list_images(self) -> list[Image]:
        return await self._call("list_images", self.runtime.list_images())

    async def remove_image(self, image: str) -> None:
        await self._call("remove_image", self.runtime.remove_image(image))
