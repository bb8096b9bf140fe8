"""What every `cri.runtime.Runtime` must do alike, written once and run against each implementation.

`tests/unit/cri/test_fake_contract.py` runs these checks on `cri.fake.FakeRuntime` (fake clock),
`tests/integration/test_cri_contract.py` on `cri.docker.DockerRuntime` (real engine, real time):
the fake is only worth testing the kubelet on as long as both pass.

A `Backend` hides the one thing that cannot be shared: how a test makes a container whose process
exits with a given code, or handles / ignores the stop signal (a shell script for Docker, a
`Program` for the fake), and how time passes during a stop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol

import pytest

from cri.errors import CreateContainerError, NotFoundError, RuntimeError_, StartContainerError
from cri.runtime import Runtime
from cri.types import (
    LABEL_CONTAINER_NAME,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerMeta,
    ContainerState,
    ContainerStatus,
    LinuxResources,
    PodMeta,
    PodSandboxConfig,
    SandboxState,
)

MISSING_ID = "0" * 64


class Backend(Protocol):
    @property
    def runtime(self) -> Runtime: ...

    @property
    def run_labels(self) -> dict[str, str]:
        """Put on every sandbox, so the backend can clean up."""

    def sleeper(self, name: str, *, ignore_term: bool = False, **overrides: object) -> ContainerConfig:
        """Runs until stopped; exits 143 on SIGTERM unless ignore_term (then only SIGKILL: 137)."""

    def exits(self, name: str, code: int, **overrides: object) -> ContainerConfig:
        """Exits by itself at once with `code`."""

    async def settle(self) -> None:
        """Until started processes are ready for signals (shell traps installed)."""

    async def stop_timed(self, container_id: str, timeout: float) -> float:
        """stop_container, returning how many seconds of the backend's clock it took."""

    def pid_namespace(self, status: ContainerStatus) -> str:
        """The PID namespace the running container's process is in (the kernel's /proc/<pid>/ns/pid link)."""


def pod_config(backend: Backend, name: str = "web", **overrides: object) -> PodSandboxConfig:
    uid = str(uuid.uuid4())
    fields: dict[str, object] = {
        "metadata": PodMeta(name=name, namespace="default", uid=uid, attempt=0),
        "hostname": name,
        "labels": {**backend.run_labels, "app": name},
        "annotations": {"kubernetes.io/config.source": "file"},
    }
    fields.update(overrides)
    return PodSandboxConfig(**fields)  # type: ignore[arg-type]


async def run(backend: Backend, sandbox_id: str, pod: PodSandboxConfig, config: ContainerConfig) -> str:
    container_id = await backend.runtime.create_container(sandbox_id, config, pod)
    await backend.runtime.start_container(container_id)
    return container_id


async def poll_until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if await check():
                return
            await asyncio.sleep(0.02)


async def wait_exited(rt: Runtime, container_id: str) -> ContainerStatus:
    async def exited() -> bool:
        return (await rt.container_status(container_id)).state is ContainerState.EXITED

    await poll_until(exited, timeout=20.0)
    return await rt.container_status(container_id)


# -- the checks --------------------------------------------------------------------------------


async def labels_and_filters(b: Backend) -> None:
    rt = b.runtime
    web, db = pod_config(b, "web"), pod_config(b, "db")
    web_sandbox = await rt.run_pod_sandbox(web)
    db_sandbox = await rt.run_pod_sandbox(db)
    config = b.sleeper("app", labels={"tier": "front"}, annotations={"io.kubernetes.container.hash": "abc1"})
    app = await rt.create_container(web_sandbox, config, web)
    other = await rt.create_container(db_sandbox, b.sleeper("app"), db)

    # Docker adds the image's own labels, so the runtime's labels are a superset of these.
    status = await rt.pod_sandbox_status(web_sandbox)
    assert status.metadata == web.metadata
    pod_labels = {LABEL_POD_NAME: "web", LABEL_POD_NAMESPACE: "default", LABEL_POD_UID: web.metadata.uid}
    assert {**web.labels, **pod_labels}.items() <= status.labels.items()
    assert LABEL_CONTAINER_NAME not in status.labels
    assert status.annotations == web.annotations
    created = await rt.container_status(app)
    container_labels = {"tier": "front", **pod_labels, LABEL_CONTAINER_NAME: "app"}
    assert container_labels.items() <= created.labels.items()
    assert created.annotations == {"io.kubernetes.container.hash": "abc1"}
    assert (created.sandbox_id, created.metadata) == (web_sandbox, ContainerMeta("app", 0))

    assert [c.id for c in await rt.list_containers({LABEL_POD_UID: web.metadata.uid})] == [app]
    assert [c.id for c in await rt.list_containers({"tier": "front"})] == [app]
    assert {c.id for c in await rt.list_containers({LABEL_CONTAINER_NAME: "app", **b.run_labels})} == set()
    assert {c.id for c in await rt.list_containers({LABEL_POD_NAMESPACE: "default"})} >= {app, other}
    assert await rt.list_containers({LABEL_POD_UID: web.metadata.uid, "tier": "back"}) == []
    assert [s.id for s in await rt.list_pod_sandboxes({LABEL_POD_UID: db.metadata.uid})] == [db_sandbox]
    assert {s.id for s in await rt.list_pod_sandboxes(b.run_labels)} == {web_sandbox, db_sandbox}
    # Sandboxes are not containers and the other way round; containers do not inherit pod labels.
    assert await rt.list_containers({"app": "web"}) == []
    assert all(s.id not in (app, other) for s in await rt.list_pod_sandboxes({LABEL_POD_NAMESPACE: "default"}))


async def idempotent_sandbox_and_create(b: Backend) -> None:
    rt = b.runtime
    pod = pod_config(b)
    sandbox_id = await rt.run_pod_sandbox(pod)
    assert await rt.run_pod_sandbox(pod) == sandbox_id
    racing = pod_config(b, "race")
    first, second = await asyncio.gather(rt.run_pod_sandbox(racing), rt.run_pod_sandbox(racing))
    assert first == second
    assert len(await rt.list_pod_sandboxes({LABEL_POD_UID: racing.metadata.uid})) == 1

    config = b.sleeper("app", labels={"k": "v"})
    container_id = await rt.create_container(sandbox_id, config, pod)
    assert await rt.create_container(sandbox_id, config, pod) == container_id
    assert len(await rt.list_containers({LABEL_POD_UID: pod.metadata.uid})) == 1
    retry = b.sleeper("app", labels={"k": "v"}, metadata=ContainerMeta("app", 1))
    assert await rt.create_container(sandbox_id, retry, pod) != container_id
    # Same name and attempt but other labels: a conflict, not someone else's container.
    with pytest.raises(CreateContainerError):
        await rt.create_container(sandbox_id, b.sleeper("app", labels={"k": "other"}), pod)

    # A new sandbox attempt is a new sandbox; a dead one of the same attempt is replaced.
    next_attempt = await rt.run_pod_sandbox(pod_config(b, metadata=PodMeta("web", "default", pod.metadata.uid, 1)))
    assert next_attempt != sandbox_id
    await rt.stop_pod_sandbox(sandbox_id)
    assert (await rt.pod_sandbox_status(sandbox_id)).state is SandboxState.NOTREADY
    replaced = await rt.run_pod_sandbox(pod)
    assert replaced != sandbox_id
    assert (await rt.pod_sandbox_status(replaced)).state is SandboxState.READY
    with pytest.raises(NotFoundError):
        await rt.pod_sandbox_status(sandbox_id)
    with pytest.raises(NotFoundError):  # its containers went with it
        await rt.container_status(container_id)


async def stop_timeout_exit_codes(b: Backend) -> None:
    rt = b.runtime
    pod = pod_config(b)
    sandbox_id = await rt.run_pod_sandbox(pod)
    polite = await run(b, sandbox_id, pod, b.sleeper("polite"))
    stubborn = await run(b, sandbox_id, pod, b.sleeper("stubborn", ignore_term=True))
    instant = await run(b, sandbox_id, pod, b.sleeper("instant", ignore_term=True))
    await b.settle()
    assert (await rt.container_status(polite)).state is ContainerState.RUNNING

    assert await b.stop_timed(polite, 10.0) < 2.0
    assert 1.9 <= await b.stop_timed(stubborn, 2.0) < 4.0
    assert await b.stop_timed(instant, 0) < 2.0  # no grace: SIGKILL at once
    for container_id, code in ((polite, 143), (stubborn, 137), (instant, 137)):
        status = await rt.container_status(container_id)
        assert (status.state, status.exit_code, status.reason) == (ContainerState.EXITED, code, "Error")
        assert status.started_at <= status.finished_at
    # Stopping again, or stopping something gone, is not an error.
    await rt.stop_container(polite, 1.0)
    await rt.stop_container(MISSING_ID, 1.0)


async def exit_codes_and_states(b: Backend) -> None:
    rt = b.runtime
    pod = pod_config(b)
    sandbox_id = await rt.run_pod_sandbox(pod)
    ok = await run(b, sandbox_id, pod, b.exits("ok", 0))
    failing = await run(b, sandbox_id, pod, b.exits("failing", 7))
    later = await rt.create_container(sandbox_id, b.exits("later", 0), pod)
    done, failed = await wait_exited(rt, ok), await wait_exited(rt, failing)
    assert (done.exit_code, done.reason) == (0, "Completed")
    assert (failed.exit_code, failed.reason) == (7, "Error")
    # Docker may record a process that exits at once as finished a hair before "started".
    assert 0 < failed.created_at <= min(failed.started_at, failed.finished_at)
    fresh = await rt.container_status(later)
    assert (fresh.state, fresh.started_at, fresh.finished_at) == (ContainerState.CREATED, 0.0, 0.0)
    listed = {c.id: c.state for c in await rt.list_containers({LABEL_POD_UID: pod.metadata.uid})}
    assert listed == {ok: ContainerState.EXITED, failing: ContainerState.EXITED, later: ContainerState.CREATED}
    image = await rt.image_status(done.image)
    assert image is not None and done.image_ref  # resolved to something the image store knows


async def events_emitted(b: Backend) -> None:
    rt = b.runtime
    pod = pod_config(b)
    seen: list[ContainerEvent] = []

    async def collect() -> None:
        async for event in rt.events():
            seen.append(event)

    collector = asyncio.create_task(collect())
    try:
        await b.settle()  # subscribed before anything happens
        sandbox_id = await rt.run_pod_sandbox(pod)
        app = await run(b, sandbox_id, pod, b.exits("app", 0))
        await wait_exited(rt, app)
        await rt.remove_container(app)

        async def deleted_seen() -> bool:
            return any(e.container_id == app and e.type is ContainerEventType.DELETED for e in seen)

        await poll_until(deleted_seen)
    finally:
        collector.cancel()
        await asyncio.gather(collector, return_exceptions=True)
    assert [e.type for e in seen if e.container_id == app] == [
        ContainerEventType.CREATED, ContainerEventType.STARTED, ContainerEventType.STOPPED, ContainerEventType.DELETED,
    ]
    assert all(e.pod_uid == pod.metadata.uid and not e.is_sandbox for e in seen if e.container_id == app)
    sandbox_events = [e for e in seen if e.container_id == sandbox_id]
    assert sandbox_events and all(e.is_sandbox and e.pod_uid == pod.metadata.uid for e in sandbox_events)


async def summaries(b: Backend) -> None:
    rt = b.runtime
    pod = pod_config(b)
    sandbox_id = await rt.run_pod_sandbox(pod)
    app = await run(b, sandbox_id, pod, b.sleeper("app"))
    created = await rt.create_container(sandbox_id, b.sleeper("later"), pod)

    async def mine() -> dict[str, tuple[str, bool]]:
        return {s.id: (s.state, s.is_sandbox) for s in await rt.list_summaries() if s.pod_uid == pod.metadata.uid}

    listed = await mine()
    assert listed == {sandbox_id: ("running", True), app: ("running", False), created: ("created", False)}
    assert all(s.labels[LABEL_POD_UID] == pod.metadata.uid for s in await rt.list_summaries() if s.id == app)
    await b.settle()
    await rt.stop_container(app, 5.0)
    assert (await mine())[app] == ("exited", False)
    await rt.remove_pod_sandbox(sandbox_id)
    assert await mine() == {}


async def not_found(b: Backend) -> None:
    rt = b.runtime
    for call in (rt.container_status, rt.pod_sandbox_status, rt.start_container, rt.container_logs):
        with pytest.raises(NotFoundError):
            await call(MISSING_ID)
    with pytest.raises(NotFoundError):
        await rt.exec_sync(MISSING_ID, ["true"], 1.0)
    # Stop and remove are idempotent: gone is done.
    await rt.stop_container(MISSING_ID, 1.0)
    await rt.remove_container(MISSING_ID)
    await rt.stop_pod_sandbox(MISSING_ID)
    await rt.remove_pod_sandbox(MISSING_ID)
    assert await rt.image_status("minikubelet.test/absent:0") is None

    pod = pod_config(b)
    sandbox_id = await rt.run_pod_sandbox(pod)
    app = await run(b, sandbox_id, pod, b.exits("app", 0))
    with pytest.raises(NotFoundError):  # a container is not a sandbox
        await rt.pod_sandbox_status(app)
    await wait_exited(rt, app)
    with pytest.raises(RuntimeError_):  # nothing to exec in
        await rt.exec_sync(app, ["true"], 1.0)
    with pytest.raises(CreateContainerError):
        await rt.create_container(sandbox_id, b.sleeper("x", image="minikubelet.test/absent:0"), pod)
    await rt.remove_pod_sandbox(sandbox_id)
    with pytest.raises(NotFoundError):
        await rt.container_status(app)
    await rt.remove_pod_sandbox(sandbox_id)


async def pid_namespace_target(b: Backend) -> None:
    """CRI NamespaceMode TARGET (an ephemeral container's targetContainerName): the container joins the target's
    PID namespace; without it each container has its own. A missing target is refused at create; one that is
    not running never runs the container (Docker refuses the start, containerd the create)."""
    rt = b.runtime
    pod = pod_config(b)
    sandbox = await rt.run_pod_sandbox(pod)
    target = await run(b, sandbox, pod, b.sleeper("app"))
    debug = await run(b, sandbox, pod, b.sleeper("dbg", pid_target_id=target))
    other = await run(b, sandbox, pod, b.sleeper("other"))
    target_s, debug_s, other_s = [await rt.container_status(c) for c in (target, debug, other)]
    assert debug_s.state is ContainerState.RUNNING
    assert b.pid_namespace(debug_s) == b.pid_namespace(target_s)
    assert b.pid_namespace(other_s) != b.pid_namespace(target_s)

    with pytest.raises(CreateContainerError):
        await rt.create_container(sandbox, b.sleeper("lost", pid_target_id=MISSING_ID), pod)

    done = await run(b, sandbox, pod, b.exits("done", 0))
    await wait_exited(rt, done)
    try:
        late = await rt.create_container(sandbox, b.sleeper("late", pid_target_id=done), pod)
    except CreateContainerError:
        return
    with pytest.raises(StartContainerError):
        await rt.start_container(late)
    assert (await rt.container_status(late)).state is not ContainerState.RUNNING


async def version_and_config(b: Backend) -> None:
    version = await b.runtime.version()
    assert version.runtime_name and version.runtime_version and version.runtime_api_version
    assert version.container_id_scheme == f"{version.runtime_name}://"
    assert (await b.runtime.runtime_config()).cgroup_driver in ("cgroupfs", "systemd")


async def resources_updated_and_read_back(b: Backend) -> None:
    """UpdateContainerResources on a running container, and its status says the new limits (the status of a
    resize reads them from here); an unknown container is refused."""
    rt = b.runtime
    pod = pod_config(b, "resized")
    sandbox_id = await rt.run_pod_sandbox(pod)
    given = LinuxResources(cpu_period=100_000, cpu_quota=10_000, cpu_shares=102, memory_limit_bytes=32 << 20)
    app = await run(b, sandbox_id, pod, b.sleeper("app", resources=given))
    before = (await rt.container_status(app)).resources
    wanted = LinuxResources(cpu_period=100_000, cpu_quota=20_000, cpu_shares=204, memory_limit_bytes=64 << 20)
    await rt.update_container_resources(app, wanted)
    after = (await rt.container_status(app)).resources
    assert before is not None and after is not None
    assert (before.cpu_quota, before.cpu_shares, before.memory_limit_bytes) == (10_000, 102, 32 << 20)
    assert (after.cpu_period, after.cpu_quota, after.cpu_shares, after.memory_limit_bytes) == (
        100_000, 20_000, 204, 64 << 20)
    with pytest.raises(RuntimeError_):
        await rt.update_container_resources(MISSING_ID, wanted)
    await rt.stop_container(app, 0)
    await rt.remove_pod_sandbox(sandbox_id)


CHECKS: dict[str, Callable[[Backend], Awaitable[None]]] = {
    check.__name__: check
    for check in (
        labels_and_filters,
        idempotent_sandbox_and_create,
        stop_timeout_exit_codes,
        exit_codes_and_states,
        events_emitted,
        summaries,
        not_found,
        pid_namespace_target,
        version_and_config,
        resources_updated_and_read_back,
    )
}
