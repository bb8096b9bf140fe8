"""The allocated/actuated checkpoint (upstream state_checkpoint_test.go Test_stateCheckpoint_storeState): what one
agent writes the next one reads; a corrupt file is set aside, not trusted and not fatal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minikubelet.runtime.resource_checkpoint import PodResourceCheckpoint, PodResourceInfo


def test_written_state_is_read_by_the_next_agent(tmp_path: Path) -> None:
    path = tmp_path / "allocated_pods_state"
    first = PodResourceCheckpoint(str(path))
    first.restore()  # no file yet: empty
    first.set("uid-1", PodResourceInfo({"app": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
                                       {"limits": {"memory": "1Gi"}}))
    first.set_container("uid-2", "side", {"requests": {"memory": "32Mi"}})
    second = PodResourceCheckpoint(str(path))
    second.restore()
    assert second.container("uid-1", "app") == {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}
    assert second.pod_level("uid-1") == {"limits": {"memory": "1Gi"}}
    assert second.container("uid-2", "side") == {"requests": {"memory": "32Mi"}}
    assert sorted(second.uids()) == ["uid-1", "uid-2"]
    second.remove("uid-1")
    second.remove_orphans(["uid-3"])
    third = PodResourceCheckpoint(str(path))
    third.restore()
    assert third.uids() == []
    assert not list(tmp_path.glob("*.tmp"))


def test_unchanged_state_is_not_written_again(tmp_path: Path) -> None:
    path = tmp_path / "state"
    cp = PodResourceCheckpoint(str(path))
    cp.set_container("u", "c", {"requests": {"cpu": "1"}})
    inode = path.stat().st_ino
    cp.set_container("u", "c", {"requests": {"cpu": "1"}})  # the same again: no new file replaces it
    assert path.stat().st_ino == inode
    cp.set_container("u", "c", {"requests": {"cpu": "2"}})
    assert path.stat().st_ino != inode


@pytest.mark.parametrize("content", [
    "not json",
    json.dumps({"data": json.dumps({"u": {"containers": {}}}), "checksum": "0" * 64}),  # checksum mismatch
    json.dumps({"data": "[]", "checksum": __import__("hashlib").sha256(b"[]").hexdigest()}),  # wrong shape
])
def test_a_corrupt_checkpoint_is_set_aside(tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "allocated_pods_state"
    path.write_text(content)
    cp = PodResourceCheckpoint(str(path))
    cp.restore()
    assert cp.uids() == []
    assert (tmp_path / "allocated_pods_state.corrupt").read_text() == content and not path.exists()
    assert "the checkpoint is corrupt" in caplog.text


async def test_write_behind_changes_are_one_write_and_durable_when_awaited(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's checkpoints: changes made together (a batch of admitted pods) are one write off the event loop,
    and `durable()` returns once the file holds every change made before it."""
    import minikubelet.runtime.resource_checkpoint as rc

    writes: list[str] = []
    real_write = rc._write

    def counted(path: str, data: str) -> None:
        writes.append(data)
        real_write(path, data)

    monkeypatch.setattr(rc, "_write", counted)
    path = tmp_path / "allocated_pods_state"
    cp = PodResourceCheckpoint(str(path), write_behind=True)
    for i in range(10):
        cp.set_container(f"uid-{i}", "app", {"requests": {"cpu": f"{i + 1}00m"}})
    assert not path.exists()  # nothing written on the caller's turn of the loop
    await cp.durable()
    assert len(writes) == 1
    reread = PodResourceCheckpoint(str(path))
    reread.restore()
    assert sorted(reread.uids()) == sorted(f"uid-{i}" for i in range(10))
    cp.set_container("uid-0", "app", {"requests": {"cpu": "1"}})
    cp.remove("uid-9")
    await cp.durable()
    await cp.durable()  # nothing pending: returns at once
    reread.restore()
    assert reread.container("uid-0", "app") == {"requests": {"cpu": "1"}} and "uid-9" not in reread.uids()
    assert len(writes) == 2


async def test_a_failed_write_behind_is_logged_and_written_again_by_the_next_change(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    cp = PodResourceCheckpoint(str(blocker / "state"), write_behind=True)
    cp.set_container("u", "c", {"requests": {"cpu": "1"}})
    await cp.durable()  # the failure is the writer's to report; the caller goes on
    assert "writing the checkpoint failed" in caplog.text
    blocker.unlink()
    blocker.mkdir()
    cp.set_container("u", "d", {"requests": {"cpu": "2"}})
    await cp.durable()
    reread = PodResourceCheckpoint(str(blocker / "state"))
    reread.restore()
    assert reread.container("u", "c") == {"requests": {"cpu": "1"}}


async def test_durable_waits_for_the_changes_made_before_it_not_for_later_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pod's start waits for its own record, not for the records other pods made while it was written."""
    import asyncio
    import threading

    import minikubelet.runtime.resource_checkpoint as rc

    gates = [threading.Event(), threading.Event()]
    started: list[str] = []
    real_write = rc._write

    def gated(path: str, data: str) -> None:
        gates[len(started)].wait(10)
        started.append(data)
        real_write(path, data)

    monkeypatch.setattr(rc, "_write", gated)
    cp = PodResourceCheckpoint(str(tmp_path / "state"), write_behind=True)
    cp.set_container("a", "c", {"requests": {"cpu": "1"}})
    first = asyncio.create_task(cp.durable())
    await asyncio.sleep(0.01)  # the first write is under way
    cp.set_container("b", "c", {"requests": {"cpu": "2"}})  # waits for the next write
    gates[0].set()
    await asyncio.wait_for(first, 5)
    assert cp.writing and len(started) == 1  # the second write has not run
    gates[1].set()
    await asyncio.wait_for(cp.durable(), 5)
    assert not cp.writing and len(started) == 2
    reread = PodResourceCheckpoint(str(tmp_path / "state"))
    reread.restore()
    assert sorted(reread.uids()) == ["a", "b"]
