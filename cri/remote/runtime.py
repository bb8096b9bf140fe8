"""RemoteRuntime: `cri.runtime.Runtime` over CRI v1 gRPC (containerd, CRI-O), as the kubelet's remote
runtime and image services talk to a CRI endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from cri.conditions import RuntimeCondition
from cri.errors import (
    CreateContainerError,
    ImagePullError,
    NotFoundError,
    RuntimeError_,
    RuntimeUnavailableError,
    StartContainerError,
)
from cri.remote import convert
from cri.remote.client import Channel, call, details, rpc, translate
from cri.remote.events import DELETED, Listed, Note, TaskExited, container_events
from cri.remote.listing import SummaryListing
from cri.remote.log_file import read_log
from cri.remote.v1 import api_pb2 as pb
from cri.streaming import PortForwardError
from cri.types import (
    LABEL_CONTAINER_NAME,
    LABEL_POD_UID,
    AuthConfig,
    ContainerConfig,
    ContainerEvent,
    ContainerStats,
    ContainerStatus,
    ExecResult,
    Image,
    LinuxResources,
    ObjectSummary,
    PodMeta,
    PodSandboxConfig,
    PodSandboxStatus,
    RuntimeConfig,
    RuntimeVersion,
)

if TYPE_CHECKING:
    from cri.remote.streaming import SpdySession

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "unix:///run/containerd/containerd.sock"
CRI_API_VERSION = "v1"
# Slack on top of a CRI-side timeout for the gRPC deadline: the runtime answers first when it can.
_DEADLINE_SLACK = 5.0
# After SIGKILL a container should be gone promptly; past this something is stuck in the kernel.
KILL_WAIT_TIMEOUT = 60.0
_STATUS_CONCURRENCY = 16
T = TypeVar("T")


def cri_timeout(seconds: float) -> int:
    """CRI timeouts are whole seconds; a positive fraction rounds up so it is never 0 (= no timeout)."""
    return max(0, math.ceil(seconds))


class RemoteRuntime:
    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, sandbox_stop_timeout: float = 10.0,
                 events_relist_period: float | None = None) -> None:
        self.endpoint = endpoint
        self.sandbox_stop_timeout = sandbox_stop_timeout
        self._channel_: Channel | None = None
        self._locks: weakref.WeakValueDictionary[tuple[str, ...], asyncio.Lock] = weakref.WeakValueDictionary()
        self._events_relist_period = events_relist_period
        self._subscribers: set[asyncio.Queue[Note | Listed | TaskExited]] = set()
        self._listing = SummaryListing()

    @property
    def _channel(self) -> Channel:
        if self._channel_ is None:
            self._channel_ = Channel(self.endpoint)
        return self._channel_

    def _lock(self, *key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def connect(self) -> None:
        """Check the endpoint answers CRI v1 (RuntimeUnavailableError if not)."""
        try:
            await self.version()
        except RuntimeUnavailableError:
            raise
        except RuntimeError_ as exc:
            raise RuntimeUnavailableError(f"{self.endpoint} does not serve CRI v1: {exc}") from exc

    async def close(self) -> None:
        if self._channel_ is not None:
            await self._channel_.close()
            self._channel_ = None

    # -- runtime ------------------------------------------------------------------------------

    async def version(self) -> RuntimeVersion:
        resp = await call(self._channel.runtime.Version(pb.VersionRequest(version=CRI_API_VERSION)))
        return RuntimeVersion(resp.runtime_name, resp.runtime_version, resp.runtime_api_version)

    async def runtime_config(self) -> RuntimeConfig:
        try:
            resp = await rpc(self._channel.runtime.RuntimeConfig(pb.RuntimeConfigRequest()))
        except GRPCError as exc:
            if exc.status is not Status.UNIMPLEMENTED:
                raise translate(exc) from None
            # containerd < 1.7: read the runc options from the CRI plugin's config in the verbose status.
            return RuntimeConfig(cgroup_driver=cgroup_driver_from_status(await self._status_info()),
                                 **await self._filesystems())
        return RuntimeConfig("systemd" if resp.linux.cgroup_driver == pb.SYSTEMD else "cgroupfs",
                             **await self._filesystems())

    async def _filesystems(self) -> dict[str, str]:
        """ImageFsInfo's mountpoints: the image filesystem and, when the runtime keeps writable layers apart
        (KEP-4191 split image filesystem), the container filesystem."""
        try:
            resp = await call(self._channel.images.ImageFsInfo(pb.ImageFsInfoRequest()))
        except RuntimeError_ as exc:
            log.info("ImageFsInfo failed; the image filesystem counts as the node's", extra={"kv": {"err": str(exc)}})
            return {}
        out = {}
        if resp.image_filesystems:
            out["image_fs_path"] = resp.image_filesystems[0].fs_id.mountpoint
        if resp.container_filesystems:
            out["container_fs_path"] = resp.container_filesystems[0].fs_id.mountpoint
        return out

    async def _status_info(self) -> Mapping[str, str]:
        resp = await call(self._channel.runtime.Status(pb.StatusRequest(verbose=True)))
        return dict(resp.info)

    async def status(self) -> list[RuntimeCondition]:
        """CRI Status: the runtime's conditions (RuntimeReady, NetworkReady)."""
        resp = await call(self._channel.runtime.Status(pb.StatusRequest()))
        return [RuntimeCondition(c.type, c.status, c.reason, c.message) for c in resp.status.conditions]

    # -- sandboxes ----------------------------------------------------------------------------

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        meta = config.metadata
        try:
            request = pb.RunPodSandboxRequest(config=convert.sandbox_config(config))
        except convert.ConfigError as exc:
            raise CreateContainerError(str(exc)) from exc
        async with self._lock("sandbox", meta.uid, meta.name, meta.namespace, str(meta.attempt)):
            try:
                resp = await rpc(self._channel.runtime.RunPodSandbox(request))
            except GRPCError as exc:
                if not _answered(exc):
                    raise _create_error(exc) from None
                # The runtime refuses a name (pod, namespace, uid, attempt) that a sandbox holds: that one, when
                # READY, is the answer; a dead one is replaced. Listed only then, not before every start.
                ready, removed = await self._replace_same_sandboxes(meta)
                if ready is not None:
                    return ready
                if not removed:
                    raise _create_error(exc) from None
                resp = await self._create(self._channel.runtime.RunPodSandbox(request))
            self._note(resp.pod_sandbox_id, 2, meta.uid, is_sandbox=True)
            return resp.pod_sandbox_id

    async def _replace_same_sandboxes(self, meta: PodMeta) -> tuple[str | None, bool]:
        """The READY sandbox of this metadata if there is one; otherwise the dead ones of it are removed (and
        whether there were any)."""
        listed = await call(self._channel.runtime.ListPodSandbox(pb.ListPodSandboxRequest(
            filter=pb.PodSandboxFilter(label_selector={LABEL_POD_UID: meta.uid}))))
        same = [s for s in listed.items if convert.pod_meta(s.metadata) == meta]
        for sandbox in same:
            if sandbox.state == pb.SANDBOX_READY:
                return sandbox.id, False
        for sandbox in same:
            # A dead sandbox's namespaces are gone; the only way forward is a fresh one (its name is free then).
            await self.remove_pod_sandbox(sandbox.id)
        return None, bool(same)

    @staticmethod
    async def _create(request: Awaitable[T]) -> T:
        try:
            return await rpc(request)
        except GRPCError as exc:
            raise _create_error(exc) from None

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        try:
            await call(self._channel.runtime.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id)))
        except NotFoundError:
            return
        self._note(sandbox_id, 3, is_sandbox=True)

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        # containerd refuses to remove a sandbox that is not stopped; stopping a stopped one is a no-op.
        await self.stop_pod_sandbox(sandbox_id)
        try:
            await call(self._channel.runtime.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id)))
        except NotFoundError:
            pass
        self._note(sandbox_id, DELETED, is_sandbox=True)

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        resp = await call(self._channel.runtime.PodSandboxStatus(
            pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id, verbose=True)))
        return convert.sandbox_status(resp.status, resp.info)

    async def list_pod_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[PodSandboxStatus]:
        listed = await call(self._channel.runtime.ListPodSandbox(pb.ListPodSandboxRequest(
            filter=pb.PodSandboxFilter(label_selector=dict(labels or {})))))
        # The list has no addresses: each sandbox's status does (as the kubelet's GetPodStatus asks for it).
        return await _gather_present([s.id for s in listed.items], self.pod_sandbox_status)

    async def list_summaries(self) -> list[ObjectSummary]:
        started = asyncio.get_running_loop().time()
        sandboxes = await call(self._channel.runtime.ListPodSandbox(pb.ListPodSandboxRequest()))
        containers = await call(self._channel.runtime.ListContainers(pb.ListContainersRequest()))
        summaries = self._listing.summaries(sandboxes, containers)
        if self._subscribers:  # a relisting event stream takes this listing for its own relist
            listed = Listed(self._listing.seen(), started)
            for queue in self._subscribers:
                queue.put_nowait(listed)
        return summaries

    # -- containers ---------------------------------------------------------------------------

    async def create_container(self, sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig) -> str:
        try:
            request = pb.CreateContainerRequest(
                pod_sandbox_id=sandbox_id,
                config=convert.container_config(config, sandbox_config),
                sandbox_config=convert.sandbox_config(sandbox_config),
            )
        except convert.ConfigError as exc:
            raise CreateContainerError(str(exc)) from exc
        name = config.metadata.name
        async with self._lock("container", sandbox_id, name, str(config.metadata.attempt)):
            try:
                resp = await rpc(self._channel.runtime.CreateContainer(request))
            except GRPCError as exc:
                if not _answered(exc):
                    raise _create_error(exc) from None
                # As for sandboxes: the runtime refuses a name a container holds; listed only then.
                existing = await self._same_container(sandbox_id, name, config.metadata.attempt,
                                                      dict(request.config.labels))
                if existing is None:
                    raise _create_error(exc) from None
                return existing
            self._note(resp.container_id, 1, sandbox_config.metadata.uid)
            return resp.container_id

    async def _same_container(self, sandbox_id: str, name: str, attempt: int, labels: Mapping[str, str]) -> str | None:
        """The container holding this name and attempt in the sandbox when it is ours (its labels include ours);
        one that is not is an error."""
        listed = await call(self._channel.runtime.ListContainers(pb.ListContainersRequest(
            filter=pb.ContainerFilter(pod_sandbox_id=sandbox_id, label_selector={LABEL_CONTAINER_NAME: name}))))
        for existing in listed.containers:
            if existing.metadata.attempt != attempt:
                continue
            if labels.items() <= dict(existing.labels).items():
                return existing.id
            raise CreateContainerError(f'container name "{name}" attempt {attempt} is already in use by '
                                       f"{existing.id} in sandbox {sandbox_id} with other labels") from None
        return None

    async def start_container(self, container_id: str) -> None:
        await call(self._channel.runtime.StartContainer(pb.StartContainerRequest(container_id=container_id)),
                   StartContainerError)
        self._note(container_id, 2)

    async def stop_container(self, container_id: str, timeout: float, signal: str = "") -> None:
        # CRI has no per-call signal: the runtime sends the container's stop signal. SIGKILL means no grace.
        grace = 0 if signal in ("SIGKILL", "KILL", "9") else cri_timeout(timeout)
        try:
            await call(self._channel.runtime.StopContainer(
                pb.StopContainerRequest(container_id=container_id, timeout=grace),
                timeout=grace + KILL_WAIT_TIMEOUT))
        except NotFoundError:
            return
        self._note(container_id, 3)

    async def remove_container(self, container_id: str) -> None:
        try:
            await call(self._channel.runtime.RemoveContainer(pb.RemoveContainerRequest(container_id=container_id)))
        except NotFoundError:
            pass
        self._note(container_id, DELETED)

    async def _container_status(self, container_id: str) -> tuple[pb.ContainerStatus, dict[str, object]]:
        resp = await call(self._channel.runtime.ContainerStatus(
            pb.ContainerStatusRequest(container_id=container_id, verbose=True)))
        try:
            info = json.loads(resp.info.get("info") or "{}")
        except ValueError:
            info = {}
        return resp.status, info if isinstance(info, dict) else {}

    async def container_status(self, container_id: str) -> ContainerStatus:
        status, info = await self._container_status(container_id)
        return _with_pid(convert.container_status(status, str(info.get("sandboxID") or "")), info)

    async def list_containers(self, labels: Mapping[str, str] | None = None) -> list[ContainerStatus]:
        listed = await call(self._channel.runtime.ListContainers(pb.ListContainersRequest(
            filter=pb.ContainerFilter(label_selector=dict(labels or {})))))
        sandbox_of = {c.id: c.pod_sandbox_id for c in listed.containers}

        async def one(container_id: str) -> ContainerStatus:
            status, info = await self._container_status(container_id)
            return _with_pid(convert.container_status(status, sandbox_of[container_id]), info)

        return await _gather_present(list(sandbox_of), one)

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        seconds = cri_timeout(timeout)
        try:
            resp = await rpc(self._channel.runtime.ExecSync(
                pb.ExecSyncRequest(container_id=container_id, cmd=cmd, timeout=seconds),
                timeout=(seconds + _DEADLINE_SLACK) if seconds else None))
        except GRPCError as exc:
            if exc.status is Status.DEADLINE_EXCEEDED:
                return ExecResult(exit_code=-1, timed_out=True)
            raise translate(exc) from None
        return ExecResult(exit_code=resp.exit_code, stdout=resp.stdout, stderr=resp.stderr)

    def events(self) -> AsyncIterator[ContainerEvent]:
        if self._events_relist_period is None:
            return container_events(self._channel, self._subscribe)
        return container_events(self._channel, self._subscribe, relist_period=self._events_relist_period)

    @contextlib.contextmanager
    def _subscribe(self) -> Iterator[asyncio.Queue[Note | Listed | TaskExited]]:
        queue: asyncio.Queue[Note | Listed | TaskExited] = asyncio.Queue()
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)

    def _note(self, object_id: str, steps: int, pod_uid: str = "", is_sandbox: bool = False) -> None:
        """Tell relisting event streams what our own call just did (see cri.remote.events.Tracker)."""
        for queue in self._subscribers:
            queue.put_nowait(Note(object_id, steps, pod_uid, is_sandbox))

    async def exec_stream(self, container_id: str, cmd: list[str], *, stdin: bool, stdout: bool, stderr: bool,
                          tty: bool) -> SpdySession:
        """cri.streaming.StreamingRuntime: CRI Exec, then the runtime's streaming URL."""
        from cri.remote.streaming import open_stream  # SPDY: imported by the first stream, not by every agent

        resp = await call(self._channel.runtime.Exec(pb.ExecRequest(
            container_id=container_id, cmd=cmd, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr and not tty)))
        return await open_stream(resp.url, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)

    async def attach_stream(self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool,
                            tty: bool) -> SpdySession:
        """cri.streaming.AttachingRuntime: CRI Attach, then the runtime's streaming URL."""
        from cri.remote.streaming import open_stream

        resp = await call(self._channel.runtime.Attach(pb.AttachRequest(
            container_id=container_id, stdin=stdin, tty=tty, stdout=stdout, stderr=stderr and not tty)))
        return await open_stream(resp.url, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)

    async def port_forward(self, sandbox_id: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """cri.streaming.PortForwardRuntime: CRI PortForward, then one connection through the runtime's streaming
        URL (cri/remote/port_forward.py); the runtime's error text, if any, is on the returned ForwardReader."""
        from cri.remote.port_forward import forward  # SPDY: imported by the first forward

        try:
            resp = await call(self._channel.runtime.PortForward(
                pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=[port])))
        except NotFoundError as exc:
            raise PortForwardError(f'failed to find sandbox "{sandbox_id}" in store: {exc}') from None
        except RuntimeError_ as exc:
            raise PortForwardError(str(exc)) from None
        return await forward(resp.url, port)

    async def container_stats(self, container_id: str) -> ContainerStats:
        resp = await call(self._channel.runtime.ContainerStats(pb.ContainerStatsRequest(container_id=container_id)))
        return convert.container_stats(resp.stats)

    async def list_container_stats(self) -> list[ContainerStats]:
        """cri.runtime.ContainerStatsRuntime: CRI ListContainerStats, every container the runtime has."""
        resp = await call(self._channel.runtime.ListContainerStats(pb.ListContainerStatsRequest()))
        return [convert.container_stats(s) for s in resp.stats]

    async def container_logs(self, container_id: str, tail: int | None = None) -> bytes:
        """What the runtime wrote to the container's CRI log file (the current one; rotated ones are not read)."""
        status, _ = await self._container_status(container_id)
        return await asyncio.to_thread(read_log, status.log_path, tail)

    async def update_container_resources(self, container_id: str, resources: LinuxResources) -> None:
        """CRI UpdateContainerResources: new cgroup limits for a running container."""
        await call(self._channel.runtime.UpdateContainerResources(pb.UpdateContainerResourcesRequest(
            container_id=container_id, linux=convert.resources(resources))))

    async def reopen_container_log(self, container_id: str) -> None:
        """CRI ReopenContainerLog: the runtime starts a new log file (after the kubelet rotated the old one)."""
        await call(self._channel.runtime.ReopenContainerLog(pb.ReopenContainerLogRequest(container_id=container_id)))

    # -- images -------------------------------------------------------------------------------

    async def pull_image(self, image: str, auth: AuthConfig | None = None) -> str:
        request = pb.PullImageRequest(image=pb.ImageSpec(image=image))
        cri_auth = convert.auth_config(auth)
        if cri_auth is not None:
            request.auth.CopyFrom(cri_auth)
        try:
            resp = await rpc(self._channel.images.PullImage(request))
        except GRPCError as exc:
            if exc.status is Status.UNAVAILABLE:
                raise RuntimeUnavailableError(exc.message or "unavailable") from None
            raise ImagePullError(details(exc)) from None
        return resp.image_ref

    async def image_status(self, image: str) -> Image | None:
        resp = await call(self._channel.images.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=image))))
        if not resp.HasField("image") or not resp.image.id:
            return None
        return convert.image(resp.image)

    async def list_images(self) -> list[Image]:
        resp = await call(self._channel.images.ListImages(pb.ListImagesRequest()))
        return [convert.image(i) for i in resp.images]

    async def remove_image(self, image: str) -> None:
        try:
            await call(self._channel.images.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image=image))))
        except NotFoundError:
            pass

    async def image_fs_info(self) -> list[tuple[str, int, int]]:
        """CRI ImageFsInfo: (mountpoint, used bytes, inodes used) of each image filesystem."""
        resp = await call(self._channel.images.ImageFsInfo(pb.ImageFsInfoRequest()))
        return [(u.fs_id.mountpoint, u.used_bytes.value, u.inodes_used.value) for u in resp.image_filesystems]


def cgroup_driver_from_status(info: Mapping[str, str]) -> str:
    """containerd 1.6's verbose Status carries its CRI config: the default runc runtime's SystemdCgroup."""
    try:
        config = json.loads(info.get("config") or "{}")
    except ValueError:
        config = {}
    containerd = config.get("containerd") or {}
    runtime = (containerd.get("runtimes") or {}).get(containerd.get("defaultRuntimeName") or "runc") or {}
    options = runtime.get("options") or {}
    systemd = options.get("SystemdCgroup", config.get("systemdCgroup", False))
    return "systemd" if systemd else "cgroupfs"


# Failures of a call that the runtime did not answer: no connection, the client's own deadline or size cap.
_UNANSWERED = frozenset({Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.CANCELLED, Status.RESOURCE_EXHAUSTED})


def _answered(exc: GRPCError) -> bool:
    return exc.status not in _UNANSWERED


def _create_error(exc: GRPCError) -> RuntimeError_:
    if exc.status is Status.UNAVAILABLE:
        return RuntimeUnavailableError(exc.message or "unavailable")
    return CreateContainerError(details(exc))


def _with_pid(status: ContainerStatus, info: Mapping[str, object]) -> ContainerStatus:
    pid = info.get("pid")
    if isinstance(pid, int) and pid > 0:
        return replace(status, pid=pid)
    return status


async def _gather_present(ids: list[str], get: Callable[[str], Awaitable[T]]) -> list[T]:
    """get() for each id, at most a few at once; ones that vanished meanwhile are left out."""
    limit = asyncio.Semaphore(_STATUS_CONCURRENCY)

    async def one(object_id: str) -> T | None:
        async with limit:
            try:
                return await get(object_id)
            except NotFoundError:
                return None

    found = await asyncio.gather(*(one(i) for i in ids))
    return [f for f in found if f is not None]
