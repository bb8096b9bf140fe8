"""Container garbage collection on the fake runtime and the fake clock."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from cri.fake import FakeRuntime, Program
from cri.types import ContainerConfig, ContainerMeta, ContainerState, PodMeta, PodSandboxConfig
from minikubelet.base.clock import FakeClock
from minikubelet.worker.gc import ContainerGC, GCPolicy
from minikubelet.worker.log_files import LogFiles
from tests.unit.fake_node import IMAGE, FakeNode, make_pod


def attempts(node: FakeNode, name: str, uid: str = "uid-1") -> list[tuple[int, ContainerState]]:
    return sorted(
        (c.metadata.attempt, c.state) for c in node.runtime.statuses()
        if c.metadata.name == name and c.labels.get("io.kubernetes.pod.uid") == uid
    )


def status_id(node: FakeNode, name: str, key: str) -> str:
    return str(node.container_state(name)[key]["terminated"]["containerID"]).partition("://")[2]


async def test_crash_loop_keeps_only_the_newest_dead_instance(node: FakeNode) -> None:
    node.runtime.program("app", Program(exit_on_start=1))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    await node.advance(35)  # restarts at 0, 10 and 30 s of backoff
    assert [a for a, _ in attempts(node, "app")] == [0, 1, 2, 3]
    await node.gc.collect()
    assert attempts(node, "app") == [(3, ContainerState.EXITED)]
    # the instance kept is the one the status reports
    assert status_id(node, "app", "lastState") == node.runtime.container_id("app")
    # restart counting goes on from the kept instance
    await node.advance(41)
    assert node.container_state("app")["restartCount"] == 4


async def test_the_dead_instance_behind_a_running_one_is_kept(node: FakeNode) -> None:
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    for _ in range(3):
        node.runtime.exit_container(node.runtime.container_id("app"), 2)
        await node.settle()
        await node.advance(45)
    assert [s for _, s in attempts(node, "app")][-1] is ContainerState.RUNNING
    previous = status_id(node, "app", "lastState")
    await node.gc.collect()
    assert attempts(node, "app") == [(2, ContainerState.EXITED), (3, ContainerState.RUNNING)]
    assert node.runtime.container_id("app", attempt=2) == previous
    await node.advance(11)
    assert status_id(node, "app", "lastState") == previous


async def sandbox(rt: FakeRuntime, uid: str, attempt: int = 0) -> tuple[str, PodSandboxConfig]:
    cfg = PodSandboxConfig(PodMeta("p", "default", uid, attempt))
    return await rt.run_pod_sandbox(cfg), cfg


async def container(rt: FakeRuntime, sid: str, scfg: PodSandboxConfig, name: str, attempt: int,
                    exit_code: int | None = 0) -> str:
    """Created; started and exited with `exit_code` unless that is None."""
    cid = await rt.create_container(sid, ContainerConfig(ContainerMeta(name, attempt), IMAGE), scfg)
    if exit_code is not None:
        await rt.start_container(cid)
        rt.exit_container(cid, exit_code)
    return cid


def make_gc(tmp_path: Path, rt: FakeRuntime, uids: list[str], min_age: float = 0.0) -> ContainerGC:
    logs = LogFiles(str(tmp_path / "pods"), str(tmp_path / "containers"))
    return ContainerGC(rt, rt.clock, logs, lambda: uids, GCPolicy(min_age=min_age))


async def test_a_created_container_does_not_cost_the_newest_dead_one(tmp_path: Path) -> None:
    # upstream counts the created one as dead and would remove attempt 1 in the window before its start
    rt = FakeRuntime(FakeClock(), images=[IMAGE])
    sid, scfg = await sandbox(rt, "u")
    old = await container(rt, sid, scfg, "app", 0)
    newest_dead = await container(rt, sid, scfg, "app", 1)
    created = await container(rt, sid, scfg, "app", 2, exit_code=None)
    await make_gc(tmp_path, rt, ["u"]).collect()
    assert {c.id for c in rt.statuses()} == {newest_dead, created}
    assert old not in {c.id for c in rt.statuses()}


async def test_min_age_spares_young_containers(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock(), images=[IMAGE])
    assert isinstance(rt.clock, FakeClock)
    sid, scfg = await sandbox(rt, "u")
    for attempt in range(3):
        await container(rt, sid, scfg, "app", attempt)
    gc = make_gc(tmp_path, rt, ["u"], min_age=30.0)
    await gc.collect()
    assert len(rt.statuses()) == 3
    rt.clock.advance(30)
    await gc.collect()
    assert [c.metadata.attempt for c in rt.statuses()] == [2]


async def test_everything_dead_of_a_pod_the_node_no_longer_has_goes(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock(), images=[IMAGE])
    gone_old_sid, gone_old_cfg = await sandbox(rt, "gone", 0)
    await container(rt, gone_old_sid, gone_old_cfg, "app", 0)
    await rt.stop_pod_sandbox(gone_old_sid)
    gone_sid, gone_cfg = await sandbox(rt, "gone", 1)
    await container(rt, gone_sid, gone_cfg, "app", 1)
    running = await container(rt, gone_sid, gone_cfg, "side", 0, exit_code=None)
    await rt.start_container(running)
    await make_gc(tmp_path, rt, []).collect()
    # a running container is never collected, and its (ready) sandbox stays with it
    assert [c.id for c in rt.statuses()] == [running]
    assert [s.id for s in await rt.list_pod_sandboxes()] == [gone_sid]


async def test_sandboxes_of_a_live_pod_keep_the_newest_and_those_in_use(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock(), images=[IMAGE])
    first, first_cfg = await sandbox(rt, "u", 0)
    await rt.stop_pod_sandbox(first)
    second, second_cfg = await sandbox(rt, "u", 1)
    in_use = await container(rt, second, second_cfg, "app", 0)
    await rt.stop_pod_sandbox(second)
    newest, _ = await sandbox(rt, "u", 2)
    await rt.stop_pod_sandbox(newest)
    await make_gc(tmp_path, rt, ["u"]).collect()
    assert {s.id for s in await rt.list_pod_sandboxes()} == {second, newest}
    assert [c.id for c in rt.statuses()] == [in_use]
    assert first_cfg.metadata.attempt == 0


async def test_gc_removes_the_log_files_of_what_it_removes(node: FakeNode, tmp_path: Path) -> None:
    node.runtime.program("app", Program(exit_on_start=1, logs=b"boom\n"))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    app_dir = tmp_path / "logs" / "default_p_uid-1" / "app"
    first = node.runtime.container_id("app", attempt=0)
    assert (app_dir / "0.log").read_bytes() == b"boom\n"
    first_link = tmp_path / "containers" / f"p_default_app-{first}.log"
    assert os.readlink(first_link) == str(app_dir / "0.log")
    await node.gc.collect()
    assert sorted(p.name for p in app_dir.iterdir()) == ["1.log"]
    assert [p.name for p in (tmp_path / "containers").iterdir()] == [
        f"p_default_app-{node.runtime.container_id('app')}.log"]


async def test_stale_pod_log_dirs_and_dangling_links_are_swept(node: FakeNode, tmp_path: Path) -> None:
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    logs, legacy = tmp_path / "logs", tmp_path / "containers"
    (logs / "default_old_uid-gone" / "app").mkdir(parents=True)
    running = node.runtime.container_id("app")
    dangling = legacy / "old_default_app-0123456789ab.log"
    dangling.symlink_to(logs / "default_old_uid-gone" / "app" / "0.log")
    rotating = legacy / f"p_default_other-{running}.log"  # the target of a running container may be mid-rotation
    rotating.symlink_to(logs / "nowhere.log")
    await node.gc.collect()
    assert [p.name for p in logs.iterdir()] == ["default_p_uid-1"]
    assert not os.path.lexists(dangling)
    assert os.path.lexists(rotating)
    assert os.path.exists(legacy / f"p_default_app-{running}.log")


async def test_the_gc_runs_every_minute_on_the_clock(node: FakeNode) -> None:
    node.runtime.program("app", Program(exit_on_start=1))
    node.config.set_source_pods("file", [make_pod()])
    await node.settle()
    task = asyncio.get_running_loop().create_task(node.gc.run())
    try:
        await node.advance(35)
        assert len(attempts(node, "app")) == 4
        await node.advance(24)  # 59 s
        assert len(attempts(node, "app")) == 4
        await node.advance(2)
        assert [a for a, _ in attempts(node, "app")] == [3]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_init_container_instances_are_pruned_before_each_start(node: FakeNode) -> None:
    node.runtime.program("init", Program(exit_on_start=1))
    node.config.set_source_pods("file", [make_pod(inits=[{"name": "init", "image": IMAGE}])])
    await node.settle()
    await node.advance(35)
    # no GC ran: the pod syncs keep one dead instance besides the one being started
    assert [a for a, _ in attempts(node, "init")] == [3]
    assert node.container_state("init")["restartCount"] == 3
    assert status_id(node, "init", "lastState") == node.runtime.container_id("init")


async def test_an_idle_node_costs_one_cheap_listing_and_a_dead_object_the_full_pass(tmp_path: Path) -> None:
    rt = FakeRuntime(FakeClock(), images=[IMAGE])
    sid, scfg = await sandbox(rt, "u")
    running = await container(rt, sid, scfg, "app", 0, exit_code=None)
    await rt.start_container(running)
    gc = make_gc(tmp_path, rt, ["u"])
    rt.calls.clear()
    await gc.collect()
    assert [c.op for c in rt.calls] == ["list_summaries"]  # nothing to remove: no inspecting listing
    dead = await container(rt, sid, scfg, "app", 1)
    newest_dead = await container(rt, sid, scfg, "app", 2)
    rt.calls.clear()
    await gc.collect()
    ops = [c.op for c in rt.calls]
    assert "list_containers" in ops and "list_pod_sandboxes" not in ops  # every sandbox still ready
    assert {c.id for c in rt.statuses()} == {running, newest_dead} and dead not in {c.id for c in rt.statuses()}
    await rt.stop_pod_sandbox(sid)
    second, _ = await sandbox(rt, "u", 1)
    rt.calls.clear()
    await gc.collect()
    assert "list_pod_sandboxes" in [c.op for c in rt.calls]
    assert {s.id for s in await rt.list_pod_sandboxes()} == {sid, second}  # the stopped one has containers
