"""FakeRuntime: an in-memory `cri.runtime.Runtime` with DockerRuntime's contract, for unit tests.

It keeps sandboxes, containers and images in dicts and behaves as `cri.docker` does where the
kubelet can tell (labels and filters, idempotent sandboxes and creates, stop timeout exit codes,
events, not-found rules); `tests/cri_contract.py` runs the same checks against both (unit tests
on the fake, integration tests on Docker). Where Docker and CRI differ, the fake follows CRI.
Time comes from the injected clock, so a stop that waits out its timeout waits on
`FakeClock.advance`.

Test controls: `program()` how a container's process behaves, `exit_container()` / `vanish()`,
`fail()` / `hang()` on any call (and on `start_pod_sandbox`, the start inside `run_pod_sandbox`, which then
leaves the sandbox `created`), `set_exec()` for exec results, `calls` for the order of calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import os
import signal as signals
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cri.errors import (
    CreateContainerError,
    ImagePullError,
    NotFoundError,
    RuntimeError_,
    StartContainerError,
)
from cri.types import (
    LABEL_CONTAINER_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    AuthConfig,
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerMeta,
    ContainerState,
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
    SandboxState,
)
from minikubelet.base.clock import Clock, RealClock

DEFAULT_PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
SANDBOX_STOP_TIMEOUT = 10.0
FAKE_VERSION = RuntimeVersion("fake", "0.1.0", "v1")
EXIT_KILLED = 128 + signals.SIGKILL  # 137, what Docker reports after SIGKILL
_KILL_SIGNALS = frozenset({"SIGKILL", "KILL", "9"})
# Docker's short state words in `GET /containers/json`, which list_summaries reports.
_STATE_WORDS = {
    ContainerState.CREATED: "created",
    ContainerState.RUNNING: "running",
    ContainerState.EXITED: "exited",
    ContainerState.UNKNOWN: "unknown",
}

ExecHandler = Callable[[str, list[str]], ExecResult | Awaitable[ExecResult]]


@dataclass(frozen=True)
class Program:
    """How a fake container's process behaves; set by container name with `FakeRuntime.program`."""

    exit_on_start: int | None = None  # exits at once with this code (a crash, or `true`)
    start_error: str = ""  # start_container fails with StartContainerError(start_error)
    ignore_stop_signal: bool = False  # True: only SIGKILL ends it, after the stop timeout (137)
    stop_exit_code: int | None = None  # exit code on the stop signal; None = 128 + signal number
    logs: bytes = b""  # what the process writes when it starts


@dataclass
class _Object:
    """A sandbox or container, as Docker keeps both: one record with labels and a state."""

    id: str
    name: str
    is_sandbox: bool
    sandbox_id: str
    pod: PodMeta
    container: ContainerMeta
    image: str
    image_ref: str
    labels: dict[str, str]
    annotations: dict[str, str]
    created_at: float
    stop_signal: str = ""
    log_path: str = ""
    program: Program = field(default_factory=Program)
    state: ContainerState = ContainerState.CREATED
    started_at: float = 0.0
    finished_at: float = 0.0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    pid: int = 0
    pid_target_id: str = ""  # CRI NamespaceMode TARGET: shares this container's PID namespace
    ip: str = ""
    host_network: bool = False
    logs: bytearray = field(default_factory=bytearray)
    stats: ContainerStats | None = None
    resources: LinuxResources | None = None  # as created, then as update_container_resources set them
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    summary: ObjectSummary | None = field(default=None, compare=False, repr=False)  # list_summaries' last


@dataclass(frozen=True)
class Call:
    """One runtime call as the fake received it."""

    op: str
    args: tuple[Any, ...] = ()


@dataclass
class _Failure:
    exc: BaseException
    times: int
    when: Callable[..., bool] | None


class Gate:
    """Holds calls of one operation until released (`FakeRuntime.hang`)."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.entered = asyncio.Event()  # set once a call is held
        self.held = 0
        self._released = asyncio.Event()

    def release(self) -> None:
        self._released.set()

    async def _hold(self) -> None:
        self.held += 1
        self.entered.set()
        await self._released.wait()


def _signal_number(name: str) -> int:
    if name.isdigit():
        return int(name)
    key = name.upper() if name.upper().startswith("SIG") else f"SIG{name.upper()}"
    return int(signals.Signals[key])


def _image_key(image: str) -> str:
    """`busybox` and `busybox:latest` are one image, as Docker resolves them."""
    if "@" in image:
        return image
    last = image.rsplit("/", 1)[-1]
    return image if ":" in last else f"{image}:latest"


def _image_id(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _append_log_file(obj: _Object, data: bytes) -> None:
    """Like containerd, the runtime writes the kubelet's log path itself, when the kubelet made its directory."""
    if obj.log_path and os.path.isdir(os.path.dirname(obj.log_path)):
        with open(obj.log_path, "ab") as f:
            f.write(data)


def _matches(labels: Mapping[str, str], wanted: Mapping[str, str] | None) -> bool:
    if wanted:
        for key, value in wanted.items():
            if labels.get(key) != value:
                return False
    return True


_Subscriber = asyncio.Queue[ContainerEvent | BaseException]


class _EventStream:
    """One subscriber's events; subscribed on creation, so nothing between events() and the first read is lost."""

    def __init__(self, subscribers: dict[_Subscriber, None]) -> None:
        self._subscribers = subscribers
        self._queue: _Subscriber = asyncio.Queue()
        subscribers[self._queue] = None

    def __aiter__(self) -> _EventStream:
        return self

    async def __anext__(self) -> ContainerEvent:
        item = await self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    async def aclose(self) -> None:
        self._subscribers.pop(self._queue, None)


class FakeRuntime:
    def __init__(
        self,
        clock: Clock | None = None,
        *,
        images: Iterable[str] = (),
        pause_image: str = DEFAULT_PAUSE_IMAGE,
        sandbox_stop_timeout: float = SANDBOX_STOP_TIMEOUT,
        version: RuntimeVersion = FAKE_VERSION,
        cgroup_driver: str = "cgroupfs",
    ) -> None:
        self.clock: Clock = clock or RealClock()
        self.pause_image = pause_image
        self.sandbox_stop_timeout = sandbox_stop_timeout
        self.runtime_version = version
        self.cgroup_driver = cgroup_driver
        self.calls: list[Call] = []
        self.closed = False
        self._objects: dict[str, _Object] = {}
        self._by_name: dict[str, str] = {}
        self._images: dict[str, Image] = {}
        self._pull_failures: dict[str, str] = {}
        self._programs: dict[str, Program] = {}
        self._exec: dict[str, ExecHandler] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self._gates: dict[str, list[Gate]] = {}
        # in subscription order (a set would deliver in memory-address order, which varies from run to run)
        self._subscribers: dict[_Subscriber, None] = {}
        self._ids = itertools.count(1)
        for image in (pause_image, *images):
            self.add_image(image)

    # -- test controls ------------------------------------------------------------------------

    def add_image(self, image: str, *, stop_signal: str = "", user: str = "") -> Image:
        """Make an image present locally (as if pulled or built)."""
        key = _image_key(image)
        present = Image(id=_image_id(key), repo_tags=(key,), size=1024, stop_signal=stop_signal, user=user)
        self._images[key] = present
        return present

    def fail_pull(self, image: str, message: str = "") -> None:
        """Pulls of this image fail with ImagePullError (the registry refuses); others succeed."""
        self._pull_failures[_image_key(image)] = message or f"pull access denied for {image}"

    def program(self, container_name: str, program: Program) -> None:
        """How containers with this spec name behave from their next create on."""
        self._programs[container_name] = program

    def set_exec(self, handler: ExecHandler, container: str = "") -> None:
        """Answer exec_sync in this container (id or spec name; "" = any) with handler(id, cmd).

        A coroutine handler that outlives the exec timeout (on the clock) yields a timed-out result."""
        self._exec[container] = handler

    def set_stats(self, container_id: str, cpu_ns: int = 0, working_set: int = 0, usage: int = 0) -> None:
        self._get(container_id).stats = ContainerStats(
            container_id, self.clock.now(), cpu_ns, working_set, usage or working_set
        )

    def write_log(self, container_id: str, data: bytes) -> None:
        obj = self._get(container_id)
        obj.logs.extend(data)
        _append_log_file(obj, data)

    def exit_container(
        self, container_id: str, exit_code: int = 0, *, oom: bool = False, reason: str = "", message: str = ""
    ) -> None:
        """The process ends by itself (or is OOM-killed: exit 137, reason OOMKilled).

        The reason defaults to the runtime's own: Completed for 0, else Error."""
        obj = self._get(container_id)
        if obj.state is not ContainerState.RUNNING:
            raise ValueError(f"test error: container {container_id} is not running, it cannot exit")
        if oom:
            self._exit(obj, EXIT_KILLED, "OOMKilled", message)
        else:
            self._exit(obj, exit_code, reason, message)

    def vanish(self, container_id: str, *, emit: bool = True) -> None:
        """Someone else removed it; with emit=False the event is lost (only a relist notices)."""
        obj = self._get(container_id)
        if obj.state is ContainerState.RUNNING:
            self._exit(obj, EXIT_KILLED, "", "", emit=emit)
        self._delete(obj, emit=emit)

    def break_events(self, exc: BaseException | None = None) -> None:
        """Every open event stream raises `exc` (default: the stream just ends) at its next read."""
        for queue in self._subscribers:
            queue.put_nowait(exc or StopAsyncIteration())
        self._subscribers.clear()

    def fail(self, op: str, exc: BaseException, times: int = 1, when: Callable[..., bool] | None = None) -> None:
        """The next `times` calls of `op` (those whose arguments satisfy `when`) raise `exc`."""
        self._failures.setdefault(op, []).append(_Failure(exc, times, when))

    def hang(self, op: str, times: int = 1) -> Gate:
        """The next `times` calls of `op` wait until the returned gate is released."""
        gate = Gate(times)
        self._gates.setdefault(op, []).append(gate)
        return gate

    def ops(self) -> list[str]:
        return [call.op for call in self.calls]

    def pid_namespace(self, container_id: str) -> str:
        """The PID namespace a running container's process is in: its own, or its PID target's."""
        obj = self._get(container_id)
        if obj.state is not ContainerState.RUNNING:
            raise NotFoundError(f"container {container_id} has no process")
        owner = self._find(obj.pid_target_id) if obj.pid_target_id else None
        return f"pid:[{(owner or obj).id}]"

    def pid_target(self, container_id: str) -> str:
        """The container whose PID namespace this one was created to share ("" when none)."""
        return self._get(container_id).pid_target_id

    def container_id(self, name: str, pod_uid: str = "", attempt: int | None = None) -> str:
        """The newest container with this spec name (and pod uid / attempt when given)."""
        found = [
            obj for obj in self._objects.values()
            if not obj.is_sandbox and obj.container.name == name and (not pod_uid or obj.pod.uid == pod_uid)
            and (attempt is None or obj.container.attempt == attempt)
        ]
        if not found:
            raise NotFoundError(f"no container named {name}")
        return max(found, key=lambda obj: (obj.container.attempt, obj.created_at, int(obj.id, 16))).id

    def stop_all(self) -> None:
        """The engine went down without live-restore: every running container and sandbox is killed, with no
        event (the stream goes down with the engine; `break_events`)."""
        for obj in list(self._objects.values()):
            if obj.state is ContainerState.RUNNING:
                self._exit(obj, EXIT_KILLED, "", "", emit=False)

    # -- plumbing -----------------------------------------------------------------------------

    async def _enter(self, op: str, *args: Any) -> None:
        self.calls.append(Call(op, args))
        await self._step(op, *args)

    async def _step(self, op: str, *args: Any) -> None:
        """A step inside a call (not recorded in `calls`) where an injected failure or hang can strike."""
        for failure in self._failures.get(op, []):
            if failure.times > 0 and (failure.when is None or failure.when(*args)):
                failure.times -= 1
                raise failure.exc
        for gate in self._gates.get(op, []):
            if gate.times > 0:
                gate.times -= 1
                await gate._hold()
                break

    def _get(self, object_id: str) -> _Object:
        obj = self._objects.get(object_id) or self._objects.get(self._by_name.get(object_id, ""))
        if obj is None:
            raise NotFoundError(f"No such container: {object_id}")
        return obj

    def _find(self, object_id: str) -> _Object | None:
        try:
            return self._get(object_id)
        except NotFoundError:
            return None

    def _new_id(self) -> str:
        return hashlib.sha256(f"fake-{next(self._ids)}".encode()).hexdigest()

    def _emit(self, obj: _Object, kind: ContainerEventType) -> None:
        event = ContainerEvent(obj.id, kind, self.clock.now(), obj.pod.uid, obj.is_sandbox)
        for queue in self._subscribers:
            queue.put_nowait(event)

    def _start(self, obj: _Object) -> None:
        obj.state = ContainerState.RUNNING
        obj.started_at = self.clock.now()
        obj.pid = 1000 + next(self._ids)
        obj.exited.clear()
        obj.logs.extend(obj.program.logs)
        _append_log_file(obj, obj.program.logs)
        self._emit(obj, ContainerEventType.STARTED)
        if obj.program.exit_on_start is not None:
            self._exit(obj, obj.program.exit_on_start, "", "")

    def _exit(self, obj: _Object, exit_code: int, reason: str, message: str, emit: bool = True) -> None:
        obj.state = ContainerState.EXITED
        obj.finished_at = self.clock.now()
        obj.exit_code = exit_code
        obj.reason = reason or ("Completed" if exit_code == 0 else "Error")
        obj.message = message
        obj.pid = 0
        obj.exited.set()
        if emit:
            self._emit(obj, ContainerEventType.STOPPED)

    def _delete(self, obj: _Object, emit: bool = True) -> None:
        self._objects.pop(obj.id, None)
        if self._by_name.get(obj.name) == obj.id:
            del self._by_name[obj.name]
        if emit:
            self._emit(obj, ContainerEventType.DELETED)

    async def _wait_exit(self, obj: _Object, timeout: float) -> bool:
        """True if the object exited within `timeout` seconds of the clock."""
        exited = asyncio.ensure_future(obj.exited.wait())
        timer = asyncio.ensure_future(self.clock.sleep(timeout))
        try:
            await asyncio.wait({exited, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (exited, timer):
                task.cancel()
            await asyncio.gather(exited, timer, return_exceptions=True)
        return obj.exited.is_set()

    async def _stop(self, obj: _Object, timeout: float, signal: str) -> None:
        if obj.state is not ContainerState.RUNNING:
            return
        stop_signal = signal or obj.stop_signal or "SIGTERM"
        if timeout > 0 and stop_signal not in _KILL_SIGNALS:
            if not obj.program.ignore_stop_signal:
                code = obj.program.stop_exit_code
                self._exit(obj, 128 + _signal_number(stop_signal) if code is None else code, "", "")
                return
            if await self._wait_exit(obj, timeout):
                return
        if obj.state is ContainerState.RUNNING:
            self._exit(obj, EXIT_KILLED, "", "")

    # -- version, config ----------------------------------------------------------------------

    async def version(self) -> RuntimeVersion:
        await self._enter("version")
        return self.runtime_version

    async def runtime_config(self) -> RuntimeConfig:
        await self._enter("runtime_config")
        return RuntimeConfig(cgroup_driver=self.cgroup_driver)

    async def close(self) -> None:
        self.closed = True
        self._subscribers.clear()

    # -- sandboxes ----------------------------------------------------------------------------

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        await self._enter("run_pod_sandbox", config)
        meta = config.metadata
        name = f"k8s_POD_{meta.name}_{meta.namespace}_{meta.uid}_{meta.attempt}"
        existing = self._find(name)
        if existing is not None:
            if existing.state is ContainerState.RUNNING:
                return existing.id
            if existing.state is ContainerState.CREATED:
                self._start(existing)
                return existing.id
            # A dead sandbox's namespaces are gone; the only way forward is a fresh one.
            await self._remove_sandbox(existing)
        if _image_key(self.pause_image) not in self._images:
            await self.pull_image(self.pause_image)
        labels = {
            **config.labels,
            LABEL_POD_NAME: meta.name,
            LABEL_POD_NAMESPACE: meta.namespace,
            LABEL_POD_UID: meta.uid,
        }
        sandbox_id = self._new_id()
        n = next(self._ids)
        obj = _Object(
            id=sandbox_id, name=name, is_sandbox=True, sandbox_id="", pod=meta, container=ContainerMeta("POD"),
            image=self.pause_image, image_ref=self._images[_image_key(self.pause_image)].id, labels=labels,
            annotations=dict(config.annotations), created_at=self.clock.now(),
            ip="" if config.host_network else f"10.88.{n // 250 % 250}.{n % 250 + 2}",
            host_network=config.host_network,
        )
        self._objects[sandbox_id] = obj
        self._by_name[name] = sandbox_id
        self._emit(obj, ContainerEventType.CREATED)
        # as Docker: created, then started; a failure here (the agent killed in between) leaves it `created`
        await self._step("start_pod_sandbox", sandbox_id)
        self._start(obj)
        return sandbox_id

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        await self._enter("stop_pod_sandbox", sandbox_id)
        obj = self._find(sandbox_id)
        if obj is not None:
            await self._stop(obj, self.sandbox_stop_timeout, "")

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        await self._enter("remove_pod_sandbox", sandbox_id)
        obj = self._find(sandbox_id)
        if obj is not None:
            await self._remove_sandbox(obj)

    async def _remove_sandbox(self, sandbox: _Object) -> None:
        for obj in [o for o in self._objects.values() if o.sandbox_id == sandbox.id]:
            self._force_remove(obj)
        self._force_remove(sandbox)

    def _force_remove(self, obj: _Object) -> None:
        if obj.state is ContainerState.RUNNING:
            self._exit(obj, EXIT_KILLED, "", "")
        self._delete(obj)

    async def pod_sandbox_status(self, sandbox_id: str) -> PodSandboxStatus:
        await self._enter("pod_sandbox_status", sandbox_id)
        obj = self._get(sandbox_id)
        if not obj.is_sandbox:
            raise NotFoundError(f"{sandbox_id} is not a pod sandbox")
        return self._sandbox_status(obj)

    def _sandbox_status(self, obj: _Object) -> PodSandboxStatus:
        ready = obj.state is ContainerState.RUNNING
        return PodSandboxStatus(
            id=obj.id,
            metadata=obj.pod,
            state=SandboxState.READY if ready else SandboxState.NOTREADY,
            created_at=obj.created_at,
            ip=obj.ip if ready else "",
            labels=dict(obj.labels),
            annotations=dict(obj.annotations),
            network_namespace=f"/proc/{obj.pid}/ns/net" if ready else "",
        )

    async def list_pod_sandboxes(self, labels: Mapping[str, str] | None = None) -> list[PodSandboxStatus]:
        await self._enter("list_pod_sandboxes", labels)
        return [
            self._sandbox_status(obj) for obj in list(self._objects.values())
            if obj.is_sandbox and _matches(obj.labels, labels)
        ]

    async def list_summaries(self) -> list[ObjectSummary]:
        await self._enter("list_summaries")
        # as the real runtimes' listings: the same (frozen) summary again while nothing it holds changed
        out = []
        for obj in self._objects.values():
            word = _STATE_WORDS[obj.state]
            summary = obj.summary
            if summary is None or summary.state != word or summary.labels != obj.labels:
                summary = obj.summary = ObjectSummary(obj.id, obj.pod.uid, word, obj.is_sandbox, dict(obj.labels))
            out.append(summary)
        return out

    # -- containers ---------------------------------------------------------------------------

    async def create_container(
        self, sandbox_id: str, config: ContainerConfig, sandbox_config: PodSandboxConfig
    ) -> str:
        await self._enter("create_container", sandbox_id, config, sandbox_config)
        pod = sandbox_config.metadata
        name = f"k8s_{config.metadata.name}_{pod.name}_{pod.namespace}_{pod.uid}_{config.metadata.attempt}"
        labels = {
            **config.labels,
            LABEL_POD_NAME: pod.name,
            LABEL_POD_NAMESPACE: pod.namespace,
            LABEL_POD_UID: pod.uid,
            LABEL_CONTAINER_NAME: config.metadata.name,
        }
        existing = self._find(name)
        if existing is not None:
            if existing.sandbox_id == sandbox_id and _matches(existing.labels, labels):
                return existing.id
            raise CreateContainerError(f"Conflict. The container name {name!r} is already in use")
        sandbox = self._find(sandbox_id)
        if sandbox is None or not sandbox.is_sandbox:
            raise CreateContainerError(f"No such container: {sandbox_id}")
        image = self._images.get(_image_key(config.image))
        if image is None:
            raise CreateContainerError(f"No such image: {config.image}")
        target = self._find(config.pid_target_id) if config.pid_target_id else None
        if config.pid_target_id and (target is None or target.is_sandbox):
            raise CreateContainerError(f"No such container: {config.pid_target_id}")
        log_path = ""
        if sandbox_config.log_directory and config.log_path:
            log_path = f"{sandbox_config.log_directory.rstrip('/')}/{config.log_path}"
        container_id = self._new_id()
        obj = _Object(
            id=container_id, name=name, is_sandbox=False, sandbox_id=sandbox_id, pod=pod,
            container=config.metadata, image=config.image, image_ref=image.id, labels=labels,
            annotations=dict(config.annotations), created_at=self.clock.now(),
            stop_signal=config.stop_signal or image.stop_signal, log_path=log_path,
            program=self._programs.get(config.metadata.name, Program()),
            resources=config.resources,
            pid_target_id=config.pid_target_id,
        )
        self._objects[container_id] = obj
        self._by_name[name] = container_id
        self._emit(obj, ContainerEventType.CREATED)
        return container_id

    async def start_container(self, container_id: str) -> None:
        await self._enter("start_container", container_id)
        obj = self._get(container_id)
        if obj.state is ContainerState.RUNNING:
            return
        if obj.state is not ContainerState.CREATED:
            # Docker would restart an exited container; CRI (containerd) refuses, and so does the kubelet.
            raise StartContainerError(f"container {container_id} is in state {obj.state.value}, not created")
        sandbox = self._find(obj.sandbox_id)
        if sandbox is None or sandbox.state is not ContainerState.RUNNING:
            raise StartContainerError(f"cannot join network of a non running container: {obj.sandbox_id}")
        if obj.pid_target_id:
            target = self._find(obj.pid_target_id)
            if target is None or target.state is not ContainerState.RUNNING:
                raise StartContainerError(f"container {obj.pid_target_id} is not running")
        if obj.program.start_error:
            # Docker records a process that could not start as exited with 128 and the error.
            obj.state = ContainerState.EXITED
            obj.exit_code = 128
            obj.reason = "ContainerCannotRun"
            obj.message = obj.program.start_error
            obj.started_at = obj.finished_at = obj.created_at
            obj.exited.set()
            raise StartContainerError(obj.program.start_error)
        self._start(obj)

    async def stop_container(self, container_id: str, timeout: float, signal: str = "") -> None:
        await self._enter("stop_container", container_id, timeout, signal)
        obj = self._find(container_id)
        if obj is not None:
            await self._stop(obj, timeout, signal)

    async def remove_container(self, container_id: str) -> None:
        await self._enter("remove_container", container_id)
        obj = self._find(container_id)
        if obj is not None:
            self._force_remove(obj)

    async def container_status(self, container_id: str) -> ContainerStatus:
        await self._enter("container_status", container_id)
        return self._container_status(self._get(container_id))

    def _container_status(self, obj: _Object) -> ContainerStatus:
        return ContainerStatus(
            id=obj.id,
            sandbox_id=obj.sandbox_id,
            metadata=obj.container,
            state=obj.state,
            image=obj.image,
            image_ref=obj.image_ref,
            created_at=obj.created_at,
            started_at=obj.started_at,
            finished_at=obj.finished_at,
            exit_code=obj.exit_code,
            reason=obj.reason,
            message=obj.message,
            labels=dict(obj.labels),
            annotations=dict(obj.annotations),
            log_path=obj.log_path,
            pid=obj.pid,
            resources=obj.resources,
        )

    async def list_containers(self, labels: Mapping[str, str] | None = None) -> list[ContainerStatus]:
        await self._enter("list_containers", labels)
        return [
            self._container_status(obj) for obj in list(self._objects.values())
            if not obj.is_sandbox and _matches(obj.labels, labels)
        ]

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: float) -> ExecResult:
        await self._enter("exec_sync", container_id, list(cmd), timeout)
        obj = self._get(container_id)
        if obj.state is not ContainerState.RUNNING:
            raise RuntimeError_(f"Container {container_id} is not running")
        handler = self._exec.get(obj.id) or self._exec.get(obj.container.name) or self._exec.get("")
        if handler is None:
            return ExecResult(exit_code=0)
        answer = handler(obj.id, list(cmd))
        if not inspect.isawaitable(answer):
            return answer
        if timeout <= 0:
            return await answer
        work = asyncio.ensure_future(answer)
        timer = asyncio.ensure_future(self.clock.sleep(timeout))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                return work.result()
            return ExecResult(exit_code=-1, timed_out=True)
        finally:
            for task in (work, timer):
                task.cancel()
            await asyncio.gather(work, timer, return_exceptions=True)

    def events(self) -> AsyncIterator[ContainerEvent]:
        self.calls.append(Call("events"))
        return _EventStream(self._subscribers)

    async def update_container_resources(self, container_id: str, resources: LinuxResources) -> None:
        """The container's new limits (fail() makes the runtime refuse them)."""
        await self._enter("update_container_resources", container_id, resources)
        obj = self._get(container_id)
        keep = obj.resources or LinuxResources()
        obj.resources = replace(keep, cpu_period=resources.cpu_period, cpu_quota=resources.cpu_quota,
                                cpu_shares=resources.cpu_shares,
                                memory_limit_bytes=resources.memory_limit_bytes or keep.memory_limit_bytes)

    async def container_stats(self, container_id: str) -> ContainerStats:
        await self._enter("container_stats", container_id)
        obj = self._get(container_id)
        return obj.stats or ContainerStats(container_id, self.clock.now())

    async def container_logs(self, container_id: str, tail: int | None = None) -> bytes:
        await self._enter("container_logs", container_id, tail)
        data = bytes(self._get(container_id).logs)
        if tail is None:
            return data
        if tail <= 0:
            return b""
        lines = data.splitlines(keepends=True)
        return b"".join(lines[-tail:])

    # -- images -------------------------------------------------------------------------------

    async def pull_image(self, image: str, auth: AuthConfig | None = None) -> str:
        await self._enter("pull_image", image, auth)
        key = _image_key(image)
        failure = self._pull_failures.get(key)
        if failure is not None:
            raise ImagePullError(failure)
        present = self._images.get(key) or self.add_image(image)
        return present.id

    async def image_status(self, image: str) -> Image | None:
        await self._enter("image_status", image)
        key = _image_key(image)
        found = self._images.get(key)
        if found is None:
            found = next((i for i in self._images.values() if i.id == image), None)
        return found

    async def list_images(self) -> list[Image]:
        await self._enter("list_images")
        return list(self._images.values())

    async def remove_image(self, image: str) -> None:
        await self._enter("remove_image", image)
        key = _image_key(image)
        for name, present in list(self._images.items()):
            if name == key or present.id == image:
                del self._images[name]

    # -- views for assertions -----------------------------------------------------------------

    def running(self) -> list[str]:
        """Ids of running non-sandbox containers."""
        return [o.id for o in self._objects.values() if not o.is_sandbox and o.state is ContainerState.RUNNING]

    def statuses(self) -> list[ContainerStatus]:
        """Every non-sandbox container's status without recording a call."""
        return [self._container_status(o) for o in self._objects.values() if not o.is_sandbox]

    def reprogram(self, container_id: str, **changes: Any) -> None:
        """Change how an existing container behaves (e.g. ignore_stop_signal=True)."""
        obj = self._get(container_id)
        obj.program = replace(obj.program, **changes)


__all__ = ["Call", "FakeRuntime", "Gate", "Program"]
