"""The kubelet's rotation of CRI log files on the fake runtime and the fake clock."""

from __future__ import annotations

import asyncio
import gzip
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cri.errors import RuntimeError_
from cri.fake import FakeRuntime
from cri.types import ContainerConfig, ContainerMeta, PodMeta, PodSandboxConfig
from minikubelet.base.clock import Clock, FakeClock
from minikubelet.worker.container_log_manager import ContainerLogManager, LogRotatePolicy
from tests.unit.fake_node import IMAGE


class Reopener:
    """What containerd does on ReopenContainerLog: a new, empty file at the log path."""

    def __init__(self, rt: FakeRuntime) -> None:
        self.rt = rt
        self.calls: list[str] = []
        self.fail = False

    async def __call__(self, container_id: str) -> None:
        self.calls.append(container_id)
        if self.fail:
            raise RuntimeError_("failed to reopen: container is not running")
        path = (await self.rt.container_status(container_id)).log_path
        with open(path, "ab"):
            pass


async def running(rt: FakeRuntime, tmp_path: Path, name: str = "app") -> tuple[str, Path]:
    scfg = PodSandboxConfig(PodMeta("p", "default", "uid-1"), log_directory=str(tmp_path / "pod"))
    sid = await rt.run_pod_sandbox(scfg)
    (tmp_path / "pod" / name).mkdir(parents=True)
    cid = await rt.create_container(sid, ContainerConfig(ContainerMeta(name), IMAGE, log_path=f"{name}/0.log"),
                                    scfg)
    await rt.start_container(cid)
    return cid, tmp_path / "pod" / name / "0.log"


async def until(cond: Callable[[], bool]) -> None:
    """File work runs in a thread: wait (real time, bounded) for it to show."""
    for _ in range(200):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 2 s")


def stamp(clock: Clock) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(clock.now()))


def names(log: Path) -> list[str]:
    return sorted(p.name for p in log.parent.iterdir())


@pytest.fixture
def rt() -> FakeRuntime:
    return FakeRuntime(clock=FakeClock(), images=[IMAGE])


async def test_rotation_renames_compresses_and_keeps_max_files(rt: FakeRuntime, tmp_path: Path) -> None:
    cid, log = await running(rt, tmp_path)
    clock = rt.clock
    assert isinstance(clock, FakeClock)
    reopen = Reopener(rt)
    manager = ContainerLogManager(rt, reopen, clock, LogRotatePolicy(max_size=100, max_files=3))
    log.write_bytes(b"a" * 99)
    await manager.process(cid)
    assert names(log) == ["0.log"] and reopen.calls == []

    log.write_bytes(b"a" * 100)
    await manager.process(cid)
    first = stamp(clock)
    assert names(log) == ["0.log", f"0.log.{first}"] and reopen.calls == [cid]
    assert log.read_bytes() == b""

    clock.advance(10)
    log.write_bytes(b"b" * 150)
    await manager.process(cid)
    second = stamp(clock)
    # the older rotated file is gzipped before the live one is renamed
    assert names(log) == ["0.log", f"0.log.{first}.gz", f"0.log.{second}"]
    assert gzip.decompress((log.parent / f"0.log.{first}.gz").read_bytes()) == b"a" * 100

    clock.advance(10)
    log.write_bytes(b"c" * 100)
    await manager.process(cid)
    third = stamp(clock)
    # max 3 files: the live log, the newest rotated one, and one compressed one
    assert names(log) == ["0.log", f"0.log.{second}.gz", f"0.log.{third}"]
    assert (log.parent / f"0.log.{third}").read_bytes() == b"c" * 100


async def test_leftovers_of_a_failed_compression_are_removed(rt: FakeRuntime, tmp_path: Path) -> None:
    cid, log = await running(rt, tmp_path)
    reopen = Reopener(rt)
    manager = ContainerLogManager(rt, reopen, rt.clock, LogRotatePolicy(max_size=10, max_files=5))
    (log.parent / "0.log.20200101-000000.tmp").write_bytes(b"half")
    (log.parent / "0.log.20200101-000001").write_bytes(b"done")  # compressed, then its removal failed
    (log.parent / "0.log.20200101-000001.gz").write_bytes(gzip.compress(b"done"))
    log.write_bytes(b"x" * 10)
    await manager.process(cid)
    assert names(log) == ["0.log", "0.log.20200101-000001.gz", f"0.log.{stamp(rt.clock)}"]


async def test_a_failed_reopen_gives_the_log_its_name_back(rt: FakeRuntime, tmp_path: Path) -> None:
    cid, log = await running(rt, tmp_path)
    reopen = Reopener(rt)
    reopen.fail = True
    manager = ContainerLogManager(rt, reopen, rt.clock, LogRotatePolicy(max_size=10, max_files=5))
    log.write_bytes(b"x" * 20)
    with pytest.raises(RuntimeError_):
        await manager.process(cid)
    assert names(log) == ["0.log"] and log.read_bytes() == b"x" * 20


async def test_a_missing_log_is_reopened(rt: FakeRuntime, tmp_path: Path) -> None:
    cid, log = await running(rt, tmp_path)
    log.unlink(missing_ok=True)
    reopen = Reopener(rt)
    manager = ContainerLogManager(rt, reopen, rt.clock, LogRotatePolicy(max_size=10, max_files=5))
    await manager.process(cid)
    assert reopen.calls == [cid] and names(log) == ["0.log"]


async def test_the_monitor_rotates_running_containers_each_interval(rt: FakeRuntime, tmp_path: Path) -> None:
    cid, log = await running(rt, tmp_path)
    other, other_log = await running(rt, tmp_path, "done")
    rt.exit_container(other, 0)
    clock = rt.clock
    assert isinstance(clock, FakeClock)
    reopen = Reopener(rt)
    manager = ContainerLogManager(rt, reopen, clock, LogRotatePolicy(max_size=10, max_files=2), max_workers=2,
                                  monitor_interval=10)
    log.write_bytes(b"x" * 10)
    other_log.write_bytes(b"y" * 10)
    task = asyncio.create_task(manager.run())
    try:
        await until(lambda: reopen.calls == [cid])
        first = stamp(clock)
        log.write_bytes(b"z" * 10)
        clock.advance(5)
        await asyncio.sleep(0.2)
        assert reopen.calls == [cid]  # not before the interval, and never the exited container's
        clock.advance(5)
        await until(lambda: len(reopen.calls) == 2)
        assert reopen.calls == [cid, cid]
        # max 2 files: the previous rotated one goes
        assert names(log) == ["0.log", f"0.log.{stamp(clock)}"] and first != stamp(clock)
        assert os.path.getsize(other_log) == 10
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_max_files_below_two_is_refused(rt: FakeRuntime) -> None:
    with pytest.raises(ValueError, match="invalid MaxFiles 1, must be > 1"):
        ContainerLogManager(rt, Reopener(rt), rt.clock, LogRotatePolicy(max_size=10, max_files=1))


async def test_a_monitoring_pass_lists_cheaply_and_reads_each_running_status_once(rt: FakeRuntime,
                                                                                  tmp_path: Path) -> None:
    cid, _ = await running(rt, tmp_path)
    other, _ = await running(rt, tmp_path, "done")
    rt.exit_container(other, 0)
    manager = ContainerLogManager(rt, Reopener(rt), rt.clock, LogRotatePolicy(max_size=10, max_files=2))
    rt.calls.clear()
    await manager.queue_running()
    assert [c.op for c in rt.calls] == ["list_summaries"]  # no status of every container (list_containers)
    for _ in range(manager._queue.qsize()):
        await manager.process(manager._queue.get_nowait())
    assert [(c.op, c.args[0]) for c in rt.calls[1:]] == [("container_status", cid)]  # the running one, once
    # later passes know its log path: one listing each, no status while it runs
    rt.calls.clear()
    await manager.queue_running()
    for _ in range(manager._queue.qsize()):
        await manager.process(manager._queue.get_nowait())
    assert [c.op for c in rt.calls] == ["list_summaries"]
    rt.exit_container(cid, 0)  # an exited container is forgotten with its path
    await manager.queue_running()
    assert manager._queue.empty() and not manager._log_paths
