"""File locks that keep two agents off one node's state.

`--lock-file` is upstream's (pkg/util/flock Acquire, cmd/kubelet/app watchForLockfileContention): an exclusive
flock waited for at start-up and held for the process's life; with `--exit-on-lock-contention` the holder exits
as soon as anything opens the file (another kubelet about to wait for it). The rootDir lock is ours: upstream
has no guard, and two agents on one rootDir (and so, as usually configured, one cgroupRoot) remove each other's
pod cgroups and pod directories as orphans. It is taken without waiting, so a second agent stops at once.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os

from asyncinotify import Inotify, Mask

from minikubelet.base.goformat import go_quote

log = logging.getLogger("minikubelet.lockfile")

ROOT_DIR_LOCK = "minikubelet.lock"
_MAX_PID_BYTES = 32  # a pid is a few digits; anything longer is not one
_PID_MAX = 2**22  # the kernel's PID_MAX_LIMIT


class LockError(Exception):
    """A lock the agent needs at start-up cannot be taken (the agent does not start)."""


class RootDirInUse(LockError):
    """Another live process holds the rootDir lock."""

    def __init__(self, root_dir: str, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(f"rootDir {root_dir} is in use by another minikubelet ({holder}); "
                         "each agent needs its own rootDir and cgroupRoot")
        self.root_dir = root_dir
        self.pid = pid


def acquire(path: str) -> int:
    """upstream flock.Acquire: open (or create, 0600) `path` and wait for an exclusive flock on it.

    Returns the descriptor, to be held until the process exits (the lock goes with it). OSError (or ValueError
    for a path with a NUL byte) when the file cannot be opened or locked.
    """
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def lock_root_dir(root_dir: str) -> int | None:
    """Take `<rootDir>/minikubelet.lock` without waiting and write our pid into it; returns the descriptor.

    RootDirInUse (naming the holder's pid when the file has it) while another process holds it. A file left by
    a dead agent is no holder: its flock went with it. When no lock can be taken at all (the directory cannot
    be made or written, a filesystem without flock) the agent starts anyway, with a warning, and None.
    """
    path = os.path.join(root_dir, ROOT_DIR_LOCK)
    try:
        os.makedirs(root_dir, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
    except (OSError, ValueError) as e:
        log.warning("rootDir lock not taken: another agent on this rootDir would go unnoticed",
                    extra={"kv": {"path": path, "err": str(e)}})
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        contended = e.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
        pid = holder_pid(fd) if contended else None
        os.close(fd)
        if contended:
            raise RootDirInUse(root_dir, pid) from None
        log.warning("rootDir lock not taken: another agent on this rootDir would go unnoticed",
                    extra={"kv": {"path": path, "err": str(e)}})
        return None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as e:  # the lock holds; only the pid a second agent would name is missing
        log.warning("rootDir lock: pid not written", extra={"kv": {"path": path, "err": str(e)}})
    return fd


def holder_pid(fd: int) -> int | None:
    """The pid the holder wrote into the lock file, if it did (it may be between its lock and its write)."""
    try:
        text = os.pread(fd, _MAX_PID_BYTES, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() and 0 < int(text) <= _PID_MAX else None


class ContentionWatch:
    """upstream watchForLockfileContention: inotify on the lock file for IN_OPEN and IN_DELETE_SELF.

    The watch is placed at start-up (an OSError there is a start-up failure, as upstream's); `wait()` returns at
    the first event, and the agent then exits. Every open counts, as upstream's: another kubelet about to wait
    for the lock, or anyone reading the file. IN_DELETE_SELF comes only once no descriptor holds the file, so
    an unlinked lock file does not end its holder (upstream's does not either).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._inotify = Inotify()
        try:
            self._inotify.add_watch(path, Mask.OPEN | Mask.DELETE_SELF)
        except BaseException:
            self._inotify.close()
            raise

    async def wait(self) -> str:
        """The first event, described for the log; OSError when the watch itself fails."""
        mask = (await self._inotify.get()).mask
        return f"{go_quote(self.path)}: {mask.name or hex(mask)}"

    def close(self) -> None:
        self._inotify.close()


class AgentLocks:
    """The locks one agent process holds: the --lock-file (with its contention watch) and the rootDir lock."""

    def __init__(self, lock_file_fd: int | None, root_dir_fd: int | None, contention: ContentionWatch | None) -> None:
        self.lock_file_fd = lock_file_fd
        self.root_dir_fd = root_dir_fd
        self.contention = contention

    def release(self) -> None:
        """On the way out: the rootDir lock first, so that an agent waiting for the --lock-file (an exit on
        contention hands over to it) finds the rootDir free once it has the --lock-file."""
        if self.contention is not None:
            self.contention.close()
        for fd in (self.root_dir_fd, self.lock_file_fd):
            if fd is not None:
                os.close(fd)
        self.root_dir_fd = self.lock_file_fd = None
        self.contention = None


def take_locks(lock_file: str, exit_on_contention: bool, root_dir: str) -> AgentLocks:
    """Upstream run()'s lock-file steps, then the rootDir lock; LockError when the agent must not start."""
    lock_fd = root_fd = None
    contention = None
    try:
        if lock_file:
            log.info("Acquiring file lock", extra={"kv": {"path": lock_file}})
            try:
                lock_fd = acquire(lock_file)
            except (OSError, ValueError) as e:
                raise LockError(f"unable to acquire file lock on {go_quote(lock_file)}: {_reason(e)}") from None
            if exit_on_contention:
                log.info("Watching for inotify events", extra={"kv": {"path": lock_file}})
                try:
                    contention = ContentionWatch(lock_file)
                except OSError as e:
                    raise LockError(f"unable to watch lockfile {go_quote(lock_file)}: {_reason(e)}") from None
        if not (lock_fd is not None and _same_file(lock_fd, os.path.join(root_dir, ROOT_DIR_LOCK))):
            root_fd = lock_root_dir(root_dir)
    except BaseException:
        AgentLocks(lock_fd, root_fd, contention).release()
        raise
    return AgentLocks(lock_fd, root_fd, contention)


def _same_file(fd: int, path: str) -> bool:
    """--lock-file is the rootDir lock itself: held already (a second descriptor would contend with the first)."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except (OSError, ValueError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _reason(e: Exception) -> str:
    return e.strerror.lower() if isinstance(e, OSError) and e.strerror else str(e)
