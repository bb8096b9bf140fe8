"""Static pod manifests from a directory: watched with inotify, re-listed every fileCheckFrequency.

A file is read again only when its version (device, inode, size, mtime, ctime) changed, and parsed again
only when its bytes changed, so a directory of rejected files costs a stat per file per re-list. Each
rejection, non-regular entry and duplicate is logged once per change. A directory that cannot be listed
publishes nothing (the last good set stays, as upstream); only a missing directory empties the set.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import hashlib
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from asyncinotify import Event, Inotify, Mask

from minikubelet.base import podview
from minikubelet.base.bounded_reader import (
    FileVersion,
    NotRegular,
    TooLarge,
    file_kind,
    read_regular_file,
    stat_regular,
)
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.metrics import Metrics
from minikubelet.sources.manifest_worker import Parser, ProcessParser
from minikubelet.sources.static_pod import ManifestError, should_read

log = logging.getLogger("minikubelet.static_pods")

SOURCE = "file"
# What changes the directory's set of manifests; the watch itself going away ends the watch (re-created once the
# directory exists again).
WATCH_MASK = (Mask.CREATE | Mask.DELETE | Mask.MODIFY | Mask.CLOSE_WRITE | Mask.MOVED_TO | Mask.MOVED_FROM
              | Mask.ATTRIB | Mask.DELETE_SELF | Mask.MOVE_SELF | Mask.ONLYDIR)
WATCH_GONE = Mask.DELETE_SELF | Mask.MOVE_SELF | Mask.IGNORED | Mask.UNMOUNT
# A file still being written (created or modified, not yet closed) waits this long, so that a burst of changes (a
# tool writing many manifests, one file written in pieces) becomes one re-list; complete writes are re-listed at once.
WATCH_SETTLE = 0.01
MAX_LOGGED_ERRORS = 10
MAX_LOGGED_CHARS = 240  # per error; a log line stays one line of a few KiB at most


@dataclass
class _Entry:
    version: FileVersion | tuple[object, ...]  # a tuple starting with "not-regular" for the rest
    digest: str = ""
    pod: Pod | None = None  # None: rejected or not a regular file


class StaticPodSource:
    def __init__(self, path: str, node_name: str, clock: Clock, metrics: Metrics,
                 publish: Callable[[str, list[Pod]], None], check_frequency: float = 20.0,
                 parser: Parser | None = None) -> None:
        self.path = path
        self.node_name = node_name
        self._clock = clock
        self._metrics = metrics
        self._publish = publish
        self.check_frequency = check_frequency
        self.parser: Parser = parser or ProcessParser()
        self._entries: dict[str, _Entry] = {}
        self._duplicates: dict[str, str] = {}  # file -> the file that already defines its pod
        self._read_errors: dict[str, str] = {}  # file -> last read error reported
        self._uid_from: dict[str, str] = {}  # uid -> the file whose pod was published with it
        self._list_error = ""
        self._lock = asyncio.Lock()

    async def list_once(self) -> list[Pod] | None:
        """The pods the path defines now, or None when it cannot be read (the caller keeps the last set)."""
        files = self._list_files()
        if files is None:
            return None
        pods: list[Pod] = []
        defined_by: dict[str, str] = {}
        named: list[tuple[str, Pod, str]] = []  # (file, pod, namespace/name) past the name check
        present: set[str] = set()
        big = False
        for fpath in files:
            present.add(fpath)
            pod, parsed_bytes = await self._pod_for(fpath)
            big = big or parsed_bytes > (1 << 20)
            if pod is None:
                continue
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            first = defined_by.setdefault(key, fpath)
            if first != fpath:
                self._duplicate(fpath, first, f"pod {key}")
                continue
            named.append((fpath, pod, key))
        # Two manifests that set one metadata.uid: the merge would keep one of them and log the pods, not the
        # files. Here the file whose pod holds the uid keeps it (else the first in name order), and the other is
        # refused as a duplicate is, naming both files.
        uid_from = {podview.uid(p): f for f, p, _ in named if self._uid_from.get(podview.uid(p)) == f}
        for fpath, pod, key in named:
            uid = podview.uid(pod)
            first = uid_from.setdefault(uid, fpath)
            if first != fpath:
                self._duplicate(fpath, first, f"uid {uid} of pod {key}", reason="duplicate_uid")
                continue
            self._duplicates.pop(fpath, None)
            pods.append(pod)
        self._uid_from = uid_from
        for gone in [p for p in self._entries if p not in present]:
            big = True
            del self._entries[gone]
        for table in (self._duplicates, self._read_errors):
            for gone in [p for p in table if p not in present]:
                del table[gone]
        if big:
            release_memory()
        return pods

    def _list_files(self) -> list[str] | None:
        try:
            st = os.stat(self.path)
            if stat.S_ISREG(st.st_mode):
                names = None  # the path is one manifest, as upstream allows
            elif stat.S_ISDIR(st.st_mode):
                names = sorted(os.listdir(self.path))
            else:
                raise OSError(errno.EINVAL, f"is a {file_kind(st.st_mode)}, not a directory or file")
        except FileNotFoundError:
            self._report_list_error("does not exist", logging.INFO)
            return []
        except OSError as e:
            self._report_list_error(e.strerror or str(e), logging.ERROR)
            return None
        self._list_error = ""
        if names is None:
            return [self.path]
        return [os.path.join(self.path, n) for n in names if should_read(n)]

    def _report_list_error(self, problem: str, level: int) -> None:
        if problem != self._list_error:
            self._list_error = problem
            log.log(level, "cannot read static pod path", extra={"kv": {"path": self.path, "problem": problem}})

    async def _pod_for(self, fpath: str) -> tuple[Pod | None, int]:
        """This file's pod (None when rejected), and how many bytes were parsed to get it."""
        entry = self._entries.get(fpath)
        try:
            version = FileVersion.of(stat_regular(fpath))
            if entry is not None and entry.version == version:
                return entry.pod, 0
            data, version, digest = await asyncio.to_thread(_read_and_digest, fpath)
        except FileNotFoundError:
            return None, 0  # gone since the listing
        except NotRegular as e:
            self._not_regular(fpath, str(e))
            return None, 0
        except TooLarge as e:
            self._reject(fpath, _version_or_blank(fpath), "", "too_large", f"manifest {e}")
            return None, 0
        except OSError as e:
            return self._read_failed(fpath, entry, e), 0
        self._read_errors.pop(fpath, None)
        if entry is not None and entry.digest == digest:
            entry.version = version  # same bytes (touched, or rewritten unchanged)
            return entry.pod, 0
        try:
            pod = await self.parser.parse(data, fpath, self.node_name, self._clock.now())
        except ManifestError as e:
            self._reject(fpath, version, digest, e.reason, _summary(e), e.errors[0].path if e.errors else "")
            return None, len(data)
        if entry is not None and entry.pod is None:
            log.info("static pod manifest accepted after a fix", extra={"kv": {"file": fpath}})
        for warning in pod.warnings:  # once per file version: an unchanged file is not parsed again
            log.warning("static pod manifest", extra={"kv": {"file": fpath, "warning": warning}})
        self._entries[fpath] = _Entry(version, digest, pod)
        return pod, len(data)

    def _reject(self, fpath: str, version: FileVersion | tuple[object, ...], digest: str, reason: str,
                message: str, field: str = "") -> None:
        self._entries[fpath] = _Entry(version, digest, None)
        self._metrics.static_pod_manifest_errors.labels(reason).inc()
        kv = {"file": fpath, "reason": reason, "error": message}
        if field:
            kv["field"] = field
        log.error("rejected static pod manifest", extra={"kv": kv})

    def _not_regular(self, fpath: str, what: str) -> None:
        try:
            lst = os.lstat(fpath)
            version: tuple[object, ...] = ("not-regular", what, lst.st_ino, lst.st_mode, lst.st_ctime_ns)
        except OSError:
            version = ("not-regular", what)
        entry = self._entries.get(fpath)
        if entry is not None and entry.version == version:
            return
        self._entries[fpath] = _Entry(version)
        self._metrics.static_pod_manifest_errors.labels("not_regular").inc()
        log.error("ignoring static pod path entry: not a regular file", extra={"kv": {"file": fpath, "problem": what}})

    def _read_failed(self, fpath: str, entry: _Entry | None, e: OSError) -> Pod | None:
        # A transient failure (EMFILE, EIO, ...) is not a new version of the file: a pod it defined stays.
        problem = e.strerror or str(e)
        if self._read_errors.get(fpath) != problem:
            self._read_errors[fpath] = problem
            self._metrics.static_pod_manifest_errors.labels("unreadable").inc()
            log.error("cannot read static pod manifest", extra={"kv": {
                "file": fpath, "problem": problem, "keeping": "last accepted version" if entry and entry.pod else "none"}})
        return entry.pod if entry is not None else None

    def _duplicate(self, fpath: str, first: str, what: str, reason: str = "duplicate") -> None:
        if self._duplicates.get(fpath) == first:
            return
        self._duplicates[fpath] = first
        self._metrics.static_pod_manifest_errors.labels(reason).inc()
        log.error("rejected static pod manifest", extra={"kv": {
            "file": fpath, "reason": reason, "error": f"{what} is already defined by {first}"}})

    async def sync(self) -> None:
        async with self._lock:
            pods = await self.list_once()
            if pods is not None:
                self._publish(SOURCE, pods)

    async def run(self) -> None:
        await self.sync()
        watcher = asyncio.create_task(self._watch())
        try:
            while True:
                await self._clock.sleep(self.check_frequency)
                await self.sync()
        finally:
            watcher.cancel()
            await self.parser.close()

    async def _watch(self) -> None:
        while True:
            if not os.path.isdir(self.path):
                await self._clock.sleep(self.check_frequency)
                continue
            try:
                await self._watch_directory()
            except (OSError, ValueError) as e:
                log.warning("watching static pod path failed", extra={"kv": {"path": self.path, "err": str(e)}})
                await self._clock.sleep(1.0)

    async def _watch_directory(self) -> None:
        """inotify on the event loop (no thread, no polling); returns when the directory itself goes away."""
        with Inotify(sync_timeout=0) as inotify:
            inotify.add_watch(self.path, WATCH_MASK)
            # Changes between the last re-list and the watch being in place.
            await self.sync()
            while True:
                writing: dict[str, bool] = {}
                gone = _queued(inotify, writing, await inotify.get())
                if any(writing.values()) and not gone:
                    await asyncio.sleep(WATCH_SETTLE)
                    gone = _queued(inotify, writing) or gone
                await self.sync()
                if gone:
                    return


_WRITING = Mask.CREATE | Mask.MODIFY
_WRITTEN = Mask.CLOSE_WRITE | Mask.DELETE | Mask.MOVED_FROM


def _queued(inotify: Inotify, writing: dict[str, bool], first: Event | None = None) -> bool:
    """Take `first` and the events already queued; note in `writing` which names are open for writing (created or
    modified, not closed since). Whether the directory itself went away."""
    gone = False
    event = first if first is not None else inotify.sync_get()
    while event is not None:
        gone = gone or bool(event.mask & WATCH_GONE)
        name = str(event.name or "")
        if event.mask & _WRITTEN:
            writing[name] = False
        elif event.mask & _WRITING and not event.mask & Mask.ISDIR:
            writing[name] = True
        event = inotify.sync_get()
    return gone


def _read_and_digest(fpath: str) -> tuple[bytes, FileVersion, str]:
    data, version = read_regular_file(fpath)
    return data, version, hashlib.sha256(data).hexdigest()


def _version_or_blank(fpath: str) -> FileVersion | tuple[object, ...]:
    try:
        return FileVersion.of(os.stat(fpath))
    except OSError:
        return ()


def _cut(text: str, limit: int = MAX_LOGGED_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def _summary(e: ManifestError) -> str:
    """The rejection for a log line: a few errors, each cut to a bounded length."""
    if not e.errors:
        return _cut(e.message, 4 * MAX_LOGGED_CHARS)
    shown = ", ".join(_cut(f"{f.path}: {f.message}") for f in e.errors[:MAX_LOGGED_ERRORS])
    more = len(e.errors) - MAX_LOGGED_ERRORS
    return f"invalid pod: [{shown}]" + (f" and {more} more errors" if more > 0 else "")


_libc: ctypes.CDLL | None = None


def release_memory() -> None:
    """Give freed heap pages back to the system (glibc keeps them otherwise)."""
    global _libc
    try:
        _libc = _libc or ctypes.CDLL("libc.so.6")
        _libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass
