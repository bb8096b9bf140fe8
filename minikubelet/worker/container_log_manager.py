"""The kubelet's rotation of CRI container log files (upstream `pkg/kubelet/logs/container_log_manager.go`).

A CRI runtime (containerd, CRI-O) appends to `<podLogsDir>/.../<container>/<restart>.log` forever; rotating it
is the kubelet's job. Every `containerLogMonitorInterval` the running containers are queued; `containerLogMaxWorkers`
workers take them one at a time: a log at or over `containerLogMaxSize` is renamed to `<log>.<YYYYMMDD-hhmmss>`
and the runtime is told to `ReopenContainerLog`; beforehand the older rotated files are gzipped
(`<log>.<stamp>.gz`, through `<log>.<stamp>.tmp`), leftovers removed, and the oldest ones dropped so that at most
`containerLogMaxFiles` files exist with the new one. Docker rotates its own json-file log, so the agent runs this
only for a runtime that has `ReopenContainerLog`.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import gzip
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cri.errors import RuntimeError_
from cri.runtime import Runtime
from minikubelet.base.clock import Clock

log = logging.getLogger("minikubelet.worker.container_log_manager")

TIMESTAMP_FORMAT = "%Y%m%d-%H%M%S"  # Go's "20060102-150405"
COMPRESS_SUFFIX = ".gz"
TMP_SUFFIX = ".tmp"


@runtime_checkable
class LogReopener(Protocol):
    async def reopen_container_log(self, container_id: str) -> None:
        """CRI ReopenContainerLog: the runtime closes the container's log and opens a new file at its path."""


@dataclass(frozen=True)
class LogRotatePolicy:
    max_size: int  # bytes; a log this big or bigger is rotated
    max_files: int  # the live log plus rotated ones, >= 2


def _in_use(path: str, paths: set[str]) -> bool:
    """A `.tmp` is a compression that died half way; an uncompressed file with a `.gz` twin was compressed and
    its removal failed. Neither is a log any more."""
    if path.endswith(TMP_SUFFIX):
        return False
    if path.endswith(COMPRESS_SUFFIX):
        return True
    return path + COMPRESS_SUFFIX not in paths


def _compress(path: str) -> None:
    tmp = path + TMP_SUFFIX
    try:
        with open(path, "rb") as src, open(tmp, "wb") as raw:
            os.fchmod(raw.fileno(), os.stat(path).st_mode & 0o7777)
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        os.rename(tmp, path + COMPRESS_SUFFIX)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    os.remove(path)


def prepare_rotation(log_path: str, max_files: int) -> None:
    """Before renaming the live log: drop leftovers, keep at most `max_files - 2` rotated files (the one about to
    be made and the new live log make `max_files`), and gzip those kept."""
    found = glob.glob(glob.escape(log_path) + ".*")
    paths = set(found)
    for p in found:
        if not _in_use(p, paths):
            os.remove(p)
    kept = sorted(p for p in found if _in_use(p, paths))
    excess = max(0, len(kept) - max(0, max_files - 2))
    for p in kept[:excess]:
        os.remove(p)
    for p in kept[excess:]:
        if not p.endswith(COMPRESS_SUFFIX):
            _compress(p)


class ContainerLogManager:
    def __init__(self, runtime: Runtime, reopen: Callable[[str], Awaitable[None]], clock: Clock,
                 policy: LogRotatePolicy, max_workers: int = 1, monitor_interval: float = 10.0) -> None:
        if policy.max_files <= 1:
            raise ValueError(f"invalid MaxFiles {policy.max_files}, must be > 1")
        self._runtime = runtime
        self._reopen = reopen
        self._clock = clock
        self.policy = policy
        self.max_workers = max_workers
        self.monitor_interval = monitor_interval
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        # running container id -> its log path (fixed at its creation): its status is read once, not every pass
        self._log_paths: dict[str, str] = {}

    async def run(self) -> None:
        log.info("initializing container log rotate workers",
                 extra={"kv": {"workers": self.max_workers, "monitorPeriod": self.monitor_interval}})
        async with asyncio.TaskGroup() as tg:
            for _ in range(self.max_workers):
                tg.create_task(self._work())
            while True:
                try:
                    await self.queue_running()
                except Exception as e:  # a failed pass must not end the agent; the next one retries
                    log.warning("failed to rotate container logs", extra={"kv": {"err": str(e)}})
                await self._clock.sleep(self.monitor_interval)

    async def queue_running(self) -> None:
        """One monitoring pass: every running container, once (a container already waiting is not queued twice).
        The cheap listing, as upstream's ListContainers: each worker reads the status it needs itself, and
        `list_containers` would read every container's status a second time."""
        running = [c.id for c in await self._runtime.list_summaries() if not c.is_sandbox and c.running]
        for gone in self._log_paths.keys() - set(running):
            del self._log_paths[gone]
        for container_id in running:
            if container_id not in self._queued:
                self._queued.add(container_id)
                self._queue.put_nowait(container_id)

    async def _work(self) -> None:
        while True:
            container_id = await self._queue.get()
            self._queued.discard(container_id)
            try:
                await self.process(container_id)
            except Exception as e:  # one container's log must not stop the others' rotation
                log.warning("failed to rotate log for container", extra={"kv": {"containerID": container_id,
                                                                               "err": str(e)}})

    async def process(self, container_id: str) -> None:
        """Rotate the container's log if it reached the maximum size."""
        path = self._log_paths.get(container_id)
        if path is None:  # upstream reads ContainerStatus every pass; the path it reads never changes
            path = self._log_paths[container_id] = (await self._runtime.container_status(container_id)).log_path
        if not path:
            return
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            # Someone removed it (or an earlier reopen failed half way): let the runtime recreate it.
            await self._reopen(container_id)
            size = os.stat(path).st_size
        if size < self.policy.max_size:
            return
        await asyncio.to_thread(prepare_rotation, path, self.policy.max_files)
        await self._rotate_latest(container_id, path)

    async def _rotate_latest(self, container_id: str, path: str) -> None:
        rotated = f"{path}.{time.strftime(TIMESTAMP_FORMAT, time.localtime(self._clock.now()))}"
        os.rename(path, rotated)
        try:
            await self._reopen(container_id)
        except RuntimeError_:
            # The runtime still writes to the renamed file: give it its name back, as upstream does.
            try:
                os.rename(rotated, path)
            except OSError as e:
                log.warning("failed to rename rotated log", extra={"kv": {"rotatedLog": rotated, "newLog": path,
                                                                         "containerID": container_id,
                                                                         "err": str(e)}})
            raise
        log.debug("rotated container log", extra={"kv": {"containerID": container_id, "rotatedLog": rotated}})
