"""DockerRuntime: the CRI-shaped runtime on the Docker Engine API, modelled on cri-dockerd."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from cri.docker import archive, convert
from cri.docker.attach import DockerAttachSession, attach_stream
from cri.docker.client import DockerAPIError, DockerClient, label_filters
from cri.docker.container_files import container_file, json_log_name
from cri.docker.create_config import ConfigError, container_create_body, log_options, sandbox_create_body
from cri.docker.events import container_events
from cri.docker.exec import exec_sync
from cri.docker.exec_stream import DockerExecSession, exec_stream
from cri.docker.images import DockerImages
from cri.docker.listing import SummaryListing
from cri.docker.log_link import link_log, unlink_log
from cri.docker.naming import (
    CONTAINER_TYPE_CONTAINER,
    CONTAINER_TYPE_SANDBOX,
    LABEL_CONTAINER_TYPE,
    LABEL_LOG_PATH,
    LABEL_SANDBOX_ID,
    make_container_name,
    make_sandbox_name,
)
from cri.docker.pod_network import POD_NETWORK, ensure_pod_network
from cri.docker.port_forward import connect_in_netns
from cri.docker.resolv_conf import resolv_conf_content, rewrite_resolv_conf
from cri.errors import (
    CreateContainerError,
    NotFoundError,
    RuntimeError_,
    RuntimeUnavailableError,
    StartContainerError,
)
from cri.streaming import PortForwardError
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

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "unix:///var/run/docker.sock"
DEFAULT_PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# cri-dockerd's defaultSandboxGracePeriod; pause exits on SIGTERM at once.
SANDBOX_STOP_TIMEOUT = 10.0
# After SIGKILL a container should be gone promptly; past this something is stuck in the kernel.
KILL_WAIT_TIMEOUT = 60.0
_CONFLICT = 409
_NOT_MODIFIED = 304
_INSPECT_CONCURRENCY = 16
_NAME_RESERVATION_WAIT = 5.0


class DockerRuntime:
    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        pause_image: str = DEFAULT_PAUSE_IMAGE,
        sandbox_stop_timeout: float = SANDBOX_STOP_TIMEOUT,
        log_max_size: int = 0,
        log_max_files: int = 0,
    ) -> None:
        """`log_max_size` bytes x `log_max_files` bound each container's json log (the kubelet's
        containerLogMaxSize / containerLogMaxFiles); 0 leaves Docker's default (unbounded)."""
        self.endpoint = endpoint
        self.log_opts = log_options(log_max_size, log_max_files)
        self.pause_image = pause_image
        self.sandbox_stop_timeout = sandbox_stop_timeout
        self.pod_network = "default"  # the Docker network of new sandboxes; ours once update_pod_cidrs ran
        self._client_: DockerClient | None = None
        self._data_root = ""  # Docker's data root, known once runtime_config ran
        self._listing = SummaryListing()
        # The kubelet log path of each container created and not yet started: start links it without an inspect.
        self._log_links: dict[str, str] = {}

    # -- connection -------------------------------------------------------------------------

    @property
    def _client(self) -> DockerClient:
        if self._client_ is None:
            self._client_ = DockerClient(self.endpoint)
        return self._client_

    async def connect(self) -> None:
        """Open the API session and check the daemon answers (RuntimeUnavailableError if not)."""
        try:
            await self._client.get("version")
        except RuntimeUnavailableError:
            raise
        except RuntimeError_ as exc:
            raise RuntimeUnavailableError(str(exc)) from exc

    async def close(self) -> None:
        if self._client_ is not None:
            await self._client_.close()
            self._client_ = None

    async def version(self) -> RuntimeVersion:
        info = await self._client.get("version")
        return RuntimeVersion("docker", str(info.get("Version", "")), str(info.get("ApiVersion", "")))

    async def info(self) -> dict[str, Any]:
        """Docker's `GET /info` (CgroupDriver, CgroupVersion, Driver, ...)."""
        result: dict[str, Any] = await self._client.get("info")
        return result

    async def runtime_config(self) -> RuntimeConfig:
        info = await self.info()
        self._data_root = str(info.get("DockerRootDir", ""))
        return RuntimeConfig(cgroup_driver=str(info.get("CgroupDriver", "cgroupfs")), image_fs_path=self._data_root)

    # -- shared helpers -----------------------------------------------------------------------

    async def _inspect(self, container_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._client.get(f"containers/{container_id}/json")
        return result

    async def _inspect_or_none(self, container_id: str) -> dict[str, Any] | None:
        try:
            return await self._inspect(container_id)
        except NotFoundError:
            return None

    async def _list(self, container_type: str, labels: Mapping[str, str] | None) -> list[dict[str, Any]]:
        filters = label_filters(labels or {}, (f"{LABEL_CONTAINER_TYPE}={container_type}",))
        summaries: list[dict[str, Any]] = await self._client.get("containers/json", {"all": True, "filters": filters})
        return summaries

    async def _list_ids(self, container_type: str, labels: Mapping[str, str] | None) -> list[str]:
        return [str(summary["Id"]) for summary in await self._list(container_type, labels)]

    async def _inspect_many(self, ids: list[str]) -> list[dict[str, Any]]:
        limit = asyncio.Semaphore(_INSPECT_CONCURRENCY)

        async def one(container_id: str) -> dict[str, Any] | None:
            async with limit:
                return await self._inspect_or_none(container_id)

        found = await asyncio.gather(*(one(container_id) for container_id in ids))
        return [inspect for inspect in found if inspect is not None]

    async def _image_inspect(self, image_id: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self._client.get(f"images/{image_id}/json")
            return result
        except NotFoundError:
            return None

    async def _start(self, container_id: str) -> None:
        try:
            await self._client.post(f"containers/{container_id}/start", kind=StartContainerError)
        except DockerAPIError as exc:
            if exc.status != _NOT_MODIFIED:  # already running
                raise StartContainerError(exc.message) from exc

    async def _kill(self, container_id: str, signal: str) -> bool:
        """False if the container is gone or not running."""
        try:
            await self._client.post(f"containers/{container_id}/kill", params={"signal": signal})
        except NotFoundError:
            return False
        except DockerAPIError as exc:
            if exc.status == _CONFLICT:  # "is not running"
                return False
            raise
        return True

    async def _wait_exit(self, container_id: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self._client.post(f"containers/{container_id}/wait", params={"condition": "not-running"})

    # -- sandboxes ----------------------------------------------------------------------------

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        # Create first: a sandbox of that name already there (a retry, a restarted agent, a racing call) shows
        # as 409, so the usual start costs no inspect by name and no pause image check beforehand.
        name = make_sandbox_name(config.metadata)
        body = sandbox_create_body(config, self.pause_image, self.pod_network)
        sandbox_id = await self._create_sandbox(name, body)
        if sandbox_id is None:
            existing = await self._inspect_reserved(name)
            state = existing.get("State") or {}
            if state.get("Running"):
                return str(existing["Id"])
            if state.get("Status") != "created":
                # A dead sandbox's namespaces are gone; the only way forward is a fresh one.
                await self.remove_pod_sandbox(str(existing["Id"]))
                sandbox_id = await self._create_sandbox(name, body)
                if sandbox_id is None:  # a concurrent run_pod_sandbox created it first
                    return await self._id_of_reserved_name(name)
            else:
                sandbox_id = str(existing["Id"])
        await self._start(sandbox_id)
        await self._rewrite_resolv_conf(sandbox_id, config)
        return sandbox_id

    async def _create_sandbox(self, name: str, body: dict[str, Any], pull_missing: bool = True) -> str | None:
        """The new sandbox's id, or None when the name is taken (409). A missing pause image is pulled and
        the create retried once: what checking the image before every create did, at no cost when it is there."""
        try:
            created = await self._client.post("containers/create", body, params={"name": name})
        except NotFoundError as exc:
            if not pull_missing or await self.image_status(self.pause_image) is not None:
                raise CreateContainerError(str(exc)) from exc
            await self.pull_image(self.pause_image)
            return await self._create_sandbox(name, body, pull_missing=False)
        except DockerAPIError as exc:
            if exc.status == _CONFLICT:
                return None
            raise CreateContainerError(exc.message) from exc
        return str(created["Id"])

    async def _rewrite_resolv_conf(self, sandbox_id: str, config: PodSandboxConfig) -> None:
        """Replace the resolv.conf Docker wrote at start with exactly the sandbox's DNS config (cri-dockerd)."""
        content = resolv_conf_content(config.dns) if config.dns is not None else ""
        if not content:
            return
        path = container_file(self._data_root, sandbox_id, "resolv.conf")
        if not path:
            path = str((await self._inspect(sandbox_id)).get("ResolvConfPath") or "")
        if not path:
            log.error("ResolvConfPath is empty", extra={"kv": {"sandbox": sandbox_id}})
            return
        try:
            rewrite_resolv_conf(path, content)
        except OSError as exc:
            raise CreateContainerError(
                f'rewrite resolv.conf failed for pod "{config.metadata.name}": {exc}') from exc

    async def _inspect_reserved(self, name: str) -> dict[str, Any]:
        # Docker reserves a name before the container can be inspected.
        async with asyncio.timeout(_NAME_RESERVATION_WAIT):
            while True:
                existing = await self._inspect_or_none(name)
                if existing is not None:
                    return existing
                await asyncio.sleep(0.02)

    async def _id_of_reserved_name(self, name: str) -> str:
        return str((await self._inspect_reserved(name))["Id"])

    async def update_pod_cidrs(self, cidrs: tuple[str, ...]) -> None:
        await ensure_pod_network(self._client, cidrs)
        self.pod_network = POD_NETWORK

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        await self.stop_container(sandbox_id, self.sandbox_stop_timeout)

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        for container_id in await self._list_ids(CONTAINER_TYPE_CONTAINER, {LABEL_SANDBOX_ID: sandbox_id}):
            await self.remove_container(container_id)
        await self.remove_container(sandbox_id)

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        inspect = await self._inspect(sandbox_id)
        labels = (inspect.get("Config") or {}).get("Labels") or {}
        if labels.get(LABEL_CONTAINER_TYPE) != CONTAINER_TYPE_SANDBOX:
            raise NotFoundError(f"{sandbox_id} is not a pod sandbox")
        return convert.sandbox_status(inspect)

    async def list_pod_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[PodSandboxStatus]:
        ids = await self._list_ids(CONTAINER_TYPE_SANDBOX, labels)
        return [convert.sandbox_status(inspect) for inspect in await self._inspect_many(ids)]

    # -- containers ---------------------------------------------------------------------------

    async def create_container(self, sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig) -> str:
        name = make_container_name(sandbox_config.metadata, config.metadata)
        try:
            body = container_create_body(sandbox_id, config, sandbox_config, self.log_opts)
        except ConfigError as exc:
            raise CreateContainerError(str(exc)) from exc
        try:
            created = await self._client.post("containers/create", body, params={"name": name})
        except NotFoundError as exc:  # the image is missing
            raise CreateContainerError(str(exc)) from exc
        except DockerAPIError as exc:
            if exc.status == _CONFLICT:
                return await self._existing_container(name, body["Labels"], exc.message)
            raise CreateContainerError(exc.message) from exc
        container_id = str(created["Id"])
        self._log_links[container_id] = str(body["Labels"].get(LABEL_LOG_PATH, ""))
        return container_id

    async def _existing_container(self, name: str, labels: Mapping[str, str], conflict: str) -> str:
        """The id of a same-named container carrying the labels we asked for (idempotent create)."""
        with contextlib.suppress(TimeoutError):
            await self._id_of_reserved_name(name)
        existing = await self._inspect_or_none(name)
        if existing is not None:
            have = (existing.get("Config") or {}).get("Labels") or {}
            if all(have.get(key) == value for key, value in labels.items()):
                return str(existing["Id"])
        raise CreateContainerError(conflict)

    async def start_container(self, container_id: str) -> None:
        await self._start(container_id)
        try:
            await self._link_log(container_id)
        except (OSError, RuntimeError_) as exc:
            log.warning("cannot link the log of container %s: %s", container_id, exc)

    async def _link_log(self, container_id: str) -> None:
        """Point the kubelet's log path at Docker's json log, as cri-dockerd does."""
        link = self._log_links.pop(container_id, None)
        if link == "":
            return
        if link is not None:
            target = container_file(self._data_root, container_id, json_log_name(container_id))
            if target:
                await asyncio.to_thread(link_log, link, target)
                return
        inspect = await self._inspect(container_id)
        link = ((inspect.get("Config") or {}).get("Labels") or {}).get(LABEL_LOG_PATH, "")
        target = inspect.get("LogPath") or ""
        await asyncio.to_thread(link_log, link, target)

    async def stop_container(self, container_id: str, timeout: float, signal: str = "") -> None:
        inspect = await self._inspect_or_none(container_id)
        if inspect is None or not (inspect.get("State") or {}).get("Running"):
            return
        stop_signal = signal or (inspect.get("Config") or {}).get("StopSignal") or "SIGTERM"
        if timeout > 0 and stop_signal not in ("SIGKILL", "KILL", "9"):
            if not await self._kill(container_id, stop_signal):
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wait_exit(container_id)
                    return
        if not await self._kill(container_id, "SIGKILL"):
            return
        try:
            async with asyncio.timeout(KILL_WAIT_TIMEOUT):
                await self._wait_exit(container_id)
        except TimeoutError as exc:
            raise RuntimeError_(f"container {container_id} did not exit after SIGKILL") from exc

    async def remove_container(self, container_id: str) -> None:
        self._log_links.pop(container_id, None)
        inspect = await self._inspect_or_none(container_id)
        if inspect is None:
            return
        link = ((inspect.get("Config") or {}).get("Labels") or {}).get(LABEL_LOG_PATH, "")
        try:
            await self._client.delete(f"containers/{container_id}", {"force": True, "v": True})
        except NotFoundError:
            pass
        except DockerAPIError as exc:
            if exc.status != _CONFLICT or "already in progress" not in exc.message:
                raise
        await asyncio.to_thread(unlink_log, link)

    async def container_status(self, container_id: str) -> ContainerStatus:
        inspect = await self._inspect(container_id)
        return convert.container_status(inspect, await self._image_inspect(str(inspect.get("Image", ""))))

    async def update_container_resources(self, container_id: str, resources: LinuxResources) -> None:
        """`POST /containers/{id}/update` with the CPU and memory fields, as cri-dockerd's
        UpdateContainerResources; the Engine's refusal (a memory limit the kernel cannot reclaim down to, ...)
        raises RuntimeError_ with its message."""
        await self._client.post(f"containers/{container_id}/update", convert.update_body(resources))

    async def list_summaries(self) -> list[ObjectSummary]:
        body = await self._client.get_bytes(
            "containers/json", {"all": True, "filters": label_filters({}, (LABEL_CONTAINER_TYPE,))})
        return self._listing.summaries(body)

    async def list_containers(self, labels: Mapping[str, str] | None = None) -> list[ContainerStatus]:
        summaries = await self._list(CONTAINER_TYPE_CONTAINER, labels)
        # The listing names each container's image id: its image inspects run beside the container
        # inspects instead of after them (one Engine round trip less on every pod relist).
        listed_images = sorted({str(summary.get("ImageID", "")) for summary in summaries} - {""})
        inspects, found = await asyncio.gather(
            self._inspect_many([str(summary["Id"]) for summary in summaries]),
            asyncio.gather(*map(self._image_inspect, listed_images)))
        images = dict(zip(listed_images, found, strict=True))
        for image_id in {str(inspect.get("Image", "")) for inspect in inspects} - images.keys():
            images[image_id] = await self._image_inspect(image_id)
        return [convert.container_status(inspect, images[str(inspect.get("Image", ""))]) for inspect in inspects]

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        return await exec_sync(self._client, container_id, cmd, timeout)

    async def exec_stream(self, container_id: str, cmd: list[str], *, stdin: bool, stdout: bool, stderr: bool,
                          tty: bool) -> DockerExecSession:
        """cri.streaming.StreamingRuntime: an interactive exec for the kubelet API's /exec."""
        return await exec_stream(self._client, container_id, cmd, stdin=stdin, stdout=stdout, stderr=stderr,
                                 tty=tty)

    async def attach_stream(self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool,
                            tty: bool) -> DockerAttachSession:
        """cri.streaming.AttachingRuntime: the container's own stdio for the kubelet API's /attach."""
        return await attach_stream(self._client, container_id, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
    async def port_forward(self, sandbox_id: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """cri.streaming.PortForwardRuntime: localhost:port in the sandbox's network namespace."""
        try:
            status = await self.pod_sandbox_status(sandbox_id)
        except NotFoundError as exc:
            raise PortForwardError(f'failed to find sandbox "{sandbox_id}" in store: {exc}') from None
        if not status.network_namespace:
            raise PortForwardError(f"sandbox {sandbox_id} is not running")
        return await connect_in_netns(status.network_namespace, port, sandbox_id)

    def events(self) -> AsyncIterator[ContainerEvent]:
        return container_events(self._client)

    async def container_stats(self, container_id: str) -> ContainerStats:
        stats = await self._client.get(f"containers/{container_id}/stats", {"stream": False, "one-shot": True})
        return convert.container_stats(container_id, stats)

    async def list_container_stats(self) -> list[ContainerStats]:
        """cri.runtime.ContainerStatsRuntime: the running containers' writable layers (`SizeRw`) in one list call
        with size=1, where cri-dockerd inspects each container with size."""
        listed = await self._client.get("containers/json", {
            "size": True, "filters": label_filters({}, (f"{LABEL_CONTAINER_TYPE}={CONTAINER_TYPE_CONTAINER}",))})
        now = time.time()
        out = [convert.writable_layer(c, self._data_root, now) for c in listed or []]
        return [s for s in out if s is not None]

    async def read_file(self, container_id: str, path: str, limit: int) -> bytes | None:
        """Up to `limit` bytes of a file inside a (possibly exited) container; None if absent.

        Docker only (CRI has no such call): a debugging aid, not part of the Runtime protocol."""
        await self._inspect(container_id)  # NotFoundError for the container, None for the path
        wanted = max(0, limit) + archive.TAR_HEADER_ALLOWANCE
        data = bytearray()
        try:
            async with self._client.stream(f"containers/{container_id}/archive", params={"path": path}) as resp:
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    data.extend(chunk)
                    if len(data) >= wanted:
                        break
        except NotFoundError:
            return None
        return archive.first_file_from_tar(bytes(data), limit)

    async def container_logs(self, container_id: str, tail: int | None = None) -> bytes:
        inspect = await self._inspect(container_id)
        params: dict[str, str | int | bool] = {
            "stdout": True,
            "stderr": True,
            "tail": "all" if tail is None else str(tail),
        }
        async with self._client.stream(f"containers/{container_id}/logs", params=params) as response:
            body = await response.read()
        if (inspect.get("Config") or {}).get("Tty"):
            return body
        return convert.demux_stream(body)[2]

    # -- images -------------------------------------------------------------------------------

    @property
    def _images(self) -> DockerImages:
        return DockerImages(self._client)

    async def pull_image(self, image: str, auth: AuthConfig | None = None) -> str:
        return await self._images.pull_image(image, auth)

    async def image_status(self, image: str) -> Image | None:
        return await self._images.image_status(image)

    async def list_images(self) -> list[Image]:
        return await self._images.list_images()

    async def remove_image(self, image: str) -> None:
        await self._images.remove_image(image)
