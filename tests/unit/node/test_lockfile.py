"""The agent's locks: upstream's --lock-file (flock.Acquire, watchForLockfileContention) and the rootDir lock."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from minikubelet.cli import exit_on_contention
from minikubelet.node.lockfile import (
    ROOT_DIR_LOCK,
    LockError,
    RootDirInUse,
    acquire,
    lock_root_dir,
    take_locks,
)


def held_elsewhere(path: Path) -> int:
    """Another open file description holding the flock: to flock, another process."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_root_dir_lock_refuses_a_second_agent_naming_the_holders_pid(tmp_path: Path) -> None:
    fd = lock_root_dir(str(tmp_path / "root"))
    assert fd is not None
    try:
        assert (tmp_path / "root" / ROOT_DIR_LOCK).read_text() == f"{os.getpid()}\n"
        with pytest.raises(RootDirInUse) as e:
            lock_root_dir(str(tmp_path / "root"))
        assert e.value.pid == os.getpid()
        assert str(e.value) == (f"rootDir {tmp_path / 'root'} is in use by another minikubelet (pid {os.getpid()}); "
                                "each agent needs its own rootDir and cgroupRoot")
    finally:
        os.close(fd)
    fd = lock_root_dir(str(tmp_path / "root"))  # released with its descriptor
    assert fd is not None
    os.close(fd)


def test_a_lock_file_left_by_a_dead_agent_is_no_holder(tmp_path: Path) -> None:
    (tmp_path / ROOT_DIR_LOCK).write_text("4194304\n")
    fd = lock_root_dir(str(tmp_path))
    assert fd is not None
    os.close(fd)
    assert (tmp_path / ROOT_DIR_LOCK).read_text() == f"{os.getpid()}\n"


@pytest.mark.parametrize("content", ["", "not a pid\n", "0\n", "99999999999\n", "\xff\xfe"])
def test_a_holder_without_a_readable_pid_is_still_a_holder(tmp_path: Path, content: str) -> None:
    (tmp_path / ROOT_DIR_LOCK).write_text(content, errors="surrogateescape")
    holder = held_elsewhere(tmp_path / ROOT_DIR_LOCK)
    try:
        with pytest.raises(RootDirInUse, match=r"\(pid unknown\)") as e:
            lock_root_dir(str(tmp_path))
        assert e.value.pid is None
    finally:
        os.close(holder)


def test_an_unusable_root_dir_warns_and_does_not_stop_the_agent(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "file").write_text("")
    with caplog.at_level(logging.WARNING, "minikubelet.lockfile"):
        assert lock_root_dir(str(tmp_path / "file")) is None
        assert lock_root_dir(str(tmp_path / "nul\x00")) is None
    assert caplog.text.count("rootDir lock not taken") == 2


def test_flock_acquire_waits_for_the_holder(tmp_path: Path) -> None:
    """upstream flock.Acquire: LOCK_EX without LOCK_NB, so a second kubelet waits for the first to go."""
    path = tmp_path / "kubelet.lock"
    holder = held_elsewhere(path)
    got: list[int] = []
    done = threading.Event()

    def take() -> None:
        got.append(acquire(str(path)))
        done.set()

    t = threading.Thread(target=take, daemon=True)
    t.start()
    assert not done.wait(0.2)  # still waiting while the holder has it
    os.close(holder)
    assert done.wait(10)
    with pytest.raises(BlockingIOError):
        held_elsewhere(path)
    os.close(got[0])
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_lock_file_that_cannot_be_opened_is_upstreams_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "kubelet.lock"
    with pytest.raises(LockError) as e:
        take_locks(str(missing), False, str(tmp_path / "root"))
    assert str(e.value) == f'unable to acquire file lock on "{missing}": no such file or directory'
    fd = lock_root_dir(str(tmp_path / "root"))  # nothing was left held
    assert fd is not None
    os.close(fd)


def test_take_locks_holds_both_and_release_frees_the_root_dir_first(tmp_path: Path) -> None:
    locks = take_locks(str(tmp_path / "kubelet.lock"), False, str(tmp_path / "root"))
    assert locks.lock_file_fd is not None and locks.root_dir_fd is not None and locks.contention is None
    with pytest.raises(RootDirInUse):
        lock_root_dir(str(tmp_path / "root"))
    with pytest.raises(BlockingIOError):
        held_elsewhere(tmp_path / "kubelet.lock")
    locks.release()
    fd = lock_root_dir(str(tmp_path / "root"))
    assert fd is not None
    os.close(fd)
    os.close(held_elsewhere(tmp_path / "kubelet.lock"))


def test_a_lock_file_that_is_the_root_dir_lock_is_taken_once(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    lock = tmp_path / "root" / ROOT_DIR_LOCK
    locks = take_locks(str(lock), True, str(tmp_path / "root"))
    try:
        assert locks.lock_file_fd is not None and locks.root_dir_fd is None
        with pytest.raises(RootDirInUse):
            lock_root_dir(str(tmp_path / "root"))
    finally:
        locks.release()


async def test_exit_on_lock_contention_stops_the_agent_when_another_process_opens_the_file(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """upstream watchForLockfileContention: IN_OPEN on the lock file ends the kubelet (run() returns nil)."""
    path = tmp_path / "kubelet.lock"
    locks = take_locks(str(path), True, str(tmp_path / "root"))
    try:
        assert locks.contention is not None
        # taking the locks (the rootDir one included) is no contention: nothing is queued
        assert select.select([locks.contention._inotify.fd], [], [], 0)[0] == []
        stopped: list[bool] = []
        watch = asyncio.create_task(exit_on_contention(locks.contention, lambda: stopped.append(True)))
        with caplog.at_level(logging.INFO, "minikubelet"):
            os.close(os.open(path, os.O_RDONLY))  # another kubelet about to wait for the lock
            await asyncio.wait_for(watch, 10)
        assert stopped == [True]
        [record] = [r for r in caplog.records if r.getMessage() == "Inotify event"]
        assert "OPEN" in record.kv["event"]  # type: ignore[attr-defined]
    finally:
        locks.release()


def test_a_second_agent_on_the_same_root_dir_exits_1_with_one_line_naming_the_holder(tmp_path: Path) -> None:
    """The CLI refuses to start before it connects to the runtime (the endpoint here does not exist)."""
    root = tmp_path / "root"
    holder = lock_root_dir(str(root))
    assert holder is not None
    try:
        cfg = tmp_path / "c.yaml"
        cfg.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                       f"rootDir: {root}\ncontainerRuntimeEndpoint: unix://{tmp_path}/no.sock\n"
                       f"staticPodPath: {tmp_path}/m\nreadOnlyPort: 0\nhealthzPort: 0\n")
        r = subprocess.run([sys.executable, "-m", "minikubelet", "run", "--config", str(cfg)],
                           capture_output=True, text=True, timeout=60)
    finally:
        os.close(holder)
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "Traceback" not in r.stderr
    assert f'err="rootDir {root} is in use by another minikubelet (pid {os.getpid()});' in errors[0]
