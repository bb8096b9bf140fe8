"""The fake runtime's test controls: programs, exits, failures, hangs, exec answers, images, logs."""

from __future__ import annotations

import asyncio

import pytest

from cri.errors import ImagePullError, NotFoundError, RuntimeUnavailableError, StartContainerError
from cri.fake import Call, FakeRuntime, Program
from cri.types import (
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerMeta,
    ContainerState,
    ExecResult,
    PodMeta,
    PodSandboxConfig,
    SandboxState,
)
from minikubelet.base.clock import FakeClock

IMAGE = "busybox:1.36"
POD = PodSandboxConfig(PodMeta("web", "default", "uid-1"), log_directory="/var/log/pods/x")


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def start(rt: FakeRuntime, name: str = "app", **config: object) -> str:
    sandbox_id = await rt.run_pod_sandbox(POD)
    container_id = await rt.create_container(sandbox_id, ContainerConfig(ContainerMeta(name), IMAGE, **config), POD)  # type: ignore[arg-type]
    await rt.start_container(container_id)
    return container_id


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rt(clock: FakeClock) -> FakeRuntime:
    return FakeRuntime(clock, images=[IMAGE])


async def test_timestamps_come_from_the_clock(rt: FakeRuntime, clock: FakeClock) -> None:
    created = clock.now()
    app = await start(rt, log_path="app/0.log")
    clock.advance(7)
    rt.exit_container(app, 3)
    status = await rt.container_status(app)
    assert (status.created_at, status.started_at, status.finished_at) == (created, created, created + 7)
    assert (status.state, status.exit_code, status.reason) == (ContainerState.EXITED, 3, "Error")
    assert status.log_path == "/var/log/pods/x/app/0.log"


async def test_oom_kill_and_crash_on_start(rt: FakeRuntime) -> None:
    app = await start(rt)
    rt.exit_container(app, oom=True)
    status = await rt.container_status(app)
    assert (status.exit_code, status.reason) == (137, "OOMKilled")
    other = await start(rt, "other")
    rt.exit_container(other, 2, reason="DeadlineExceeded", message="too slow")
    status = await rt.container_status(other)
    assert (status.exit_code, status.reason, status.message) == (2, "DeadlineExceeded", "too slow")
    with pytest.raises(ValueError):
        rt.exit_container(other, 0)

    rt.program("crash", Program(exit_on_start=2, logs=b"boom\n"))
    crash = await start(rt, "crash")
    status = await rt.container_status(crash)
    assert (status.state, status.exit_code, status.reason) == (ContainerState.EXITED, 2, "Error")
    assert await rt.container_logs(crash) == b"boom\n"


async def test_start_error_leaves_a_container_that_cannot_run(rt: FakeRuntime) -> None:
    rt.program("bad", Program(start_error='exec: "nope": executable file not found'))
    with pytest.raises(StartContainerError, match="executable file not found"):
        await start(rt, "bad")
    status = (await rt.list_containers())[0]
    assert (status.state, status.exit_code, status.reason) == (ContainerState.EXITED, 128, "ContainerCannotRun")


async def test_stop_signal_from_config_and_custom_exit_code(rt: FakeRuntime, clock: FakeClock) -> None:
    usr1 = await start(rt, "usr1", stop_signal="SIGUSR1")
    await rt.stop_container(usr1, 30)
    assert (await rt.container_status(usr1)).exit_code == 128 + 10
    rt.program("graceful", Program(stop_exit_code=0))
    graceful = await start(rt, "graceful")
    await rt.stop_container(graceful, 30, signal="SIGTERM")
    assert (await rt.container_status(graceful)).reason == "Completed"


async def test_stop_returns_early_when_the_process_exits_during_the_grace(rt: FakeRuntime, clock: FakeClock) -> None:
    app = await start(rt)
    rt.reprogram(app, ignore_stop_signal=True)
    stop = asyncio.create_task(rt.stop_container(app, 30))
    await settle()
    clock.advance(10)
    await settle()
    assert not stop.done()
    rt.exit_container(app, 0)
    await stop
    status = await rt.container_status(app)
    assert (status.exit_code, status.finished_at - status.started_at) == (0, 10)


async def test_fail_raises_n_times_for_matching_calls(rt: FakeRuntime) -> None:
    rt.fail("list_summaries", RuntimeUnavailableError("docker down"), times=2)
    for _ in range(2):
        with pytest.raises(RuntimeUnavailableError):
            await rt.list_summaries()
    assert await rt.list_summaries() == []
    app = await start(rt)
    rt.fail("stop_container", NotFoundError("gone"), when=lambda cid, *_: cid == "other")
    await rt.stop_container(app, 1)  # not matched: works
    with pytest.raises(NotFoundError):
        await rt.stop_container("other", 1)


async def test_hang_holds_calls_until_released(rt: FakeRuntime) -> None:
    gate = rt.hang("pull_image")
    pull = asyncio.create_task(rt.pull_image("nginx"))
    await gate.entered.wait()
    await settle()
    assert not pull.done() and await rt.image_status("nginx") is None
    gate.release()
    assert (await pull).startswith("sha256:")
    assert await rt.pull_image("nginx:latest") == await pull  # the gate held one call only


async def test_calls_are_recorded_in_order(rt: FakeRuntime) -> None:
    app = await start(rt)
    await rt.stop_container(app, 5, "SIGINT")
    assert rt.ops() == ["run_pod_sandbox", "create_container", "start_container", "stop_container"]
    assert rt.calls[-1] == Call("stop_container", (app, 5, "SIGINT"))


async def test_exec_handlers_by_container_and_timeout_on_the_clock(rt: FakeRuntime, clock: FakeClock) -> None:
    app = await start(rt, "app")
    side = await start(rt, "side")
    assert await rt.exec_sync(app, ["true"], 1) == ExecResult(0)
    rt.set_exec(lambda cid, cmd: ExecResult(1, stderr=b" ".join(c.encode() for c in cmd)))
    rt.set_exec(lambda cid, cmd: ExecResult(0, stdout=b"side"), container="side")
    assert await rt.exec_sync(app, ["cat", "/ready"], 1) == ExecResult(1, stderr=b"cat /ready")
    assert (await rt.exec_sync(side, ["x"], 1)).stdout == b"side"

    released = asyncio.Event()

    async def slow(cid: str, cmd: list[str]) -> ExecResult:
        await released.wait()
        return ExecResult(0)

    rt.set_exec(slow, container=app)
    probe = asyncio.create_task(rt.exec_sync(app, ["slow"], 2))
    await settle()
    clock.advance(1)
    await settle()
    assert not probe.done()
    clock.advance(1)
    assert await probe == ExecResult(-1, timed_out=True)
    quick = asyncio.create_task(rt.exec_sync(app, ["slow"], 2))
    await settle()
    released.set()
    assert await quick == ExecResult(0)


async def test_images_pull_and_pause_image(clock: FakeClock) -> None:
    rt = FakeRuntime(clock)
    assert await rt.image_status("busybox") is None
    ref = await rt.pull_image("busybox")
    present = await rt.image_status("busybox:latest")
    assert present is not None and present.id == ref and await rt.image_status(ref) == present
    rt.fail_pull("private/app:1", "unauthorized: authentication required")
    with pytest.raises(ImagePullError, match="unauthorized"):
        await rt.pull_image("private/app:1")
    await rt.remove_image(rt.pause_image)
    rt.fail_pull(rt.pause_image)
    with pytest.raises(ImagePullError):
        await rt.run_pod_sandbox(POD)
    assert {i.id for i in await rt.list_images()} == {ref}


async def test_logs_tail(rt: FakeRuntime) -> None:
    app = await start(rt)
    rt.write_log(app, b"one\ntwo\nthree\n")
    assert await rt.container_logs(app, tail=2) == b"two\nthree\n"
    assert await rt.container_logs(app) == b"one\ntwo\nthree\n"


async def test_vanish_with_and_without_events(rt: FakeRuntime) -> None:
    events = rt.events()
    seen: list[ContainerEvent] = []
    loud = await start(rt, "loud")
    quiet = await start(rt, "quiet")
    rt.vanish(loud)
    rt.vanish(quiet, emit=False)
    for _ in range(8):
        seen.append(await anext(events))
    assert [(e.container_id, e.type) for e in seen[-2:]] == [
        (loud, ContainerEventType.STOPPED), (loud, ContainerEventType.DELETED),
    ]
    assert all(e.container_id != quiet for e in seen[-2:])
    assert {s.id for s in await rt.list_summaries()} == {(await rt.list_pod_sandboxes())[0].id}
    with pytest.raises(NotFoundError):
        await rt.container_status(quiet)


async def test_stop_all_kills_every_container_and_sandbox_without_events(rt: FakeRuntime) -> None:
    """An engine going down without live-restore: everything running is killed, nothing removed, no event."""
    events = rt.events()
    app = await start(rt, "app")
    rt.stop_all()
    status = await rt.container_status(app)
    assert status.state is ContainerState.EXITED and status.exit_code == 137
    assert [s.state for s in await rt.list_pod_sandboxes()] == [SandboxState.NOTREADY]
    rt.break_events()
    seen = [e async for e in events]
    assert seen and not [e for e in seen if e.type is ContainerEventType.STOPPED]


async def test_container_id_lookup_and_stats(rt: FakeRuntime) -> None:
    first = await start(rt, "app")
    rt.exit_container(first, 1)
    sandbox_id = (await rt.list_pod_sandboxes())[0].id
    second = await rt.create_container(sandbox_id, ContainerConfig(ContainerMeta("app", 1), IMAGE), POD)
    assert rt.container_id("app") == second
    assert rt.container_id("app", attempt=0) == first
    rt.set_stats(first, cpu_ns=5, working_set=10)
    stats = await rt.container_stats(first)
    assert (stats.cpu_usage_core_nanoseconds, stats.memory_working_set_bytes, stats.memory_usage_bytes) == (5, 10, 10)
